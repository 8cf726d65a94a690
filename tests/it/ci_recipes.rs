//! The CI recipes in docs/ci/ parse as YAML, and every `db-branch` command they run exists
//! with the flags they give it (parsed by the real command-line definition).

use clap::Parser;
use std::path::Path;

/// CI variables replaced by sample values so names and flags can be checked.
const SAMPLES: [(&str, &str); 5] = [
    ("${{ github.event.pull_request.number }}", "123"),
    ("${{ github.event.repository.name }}", "web"),
    ("$CI_MERGE_REQUEST_IID", "45"),
    ("$CI_PROJECT_NAME", "web"),
    ("\\\n", " "),
];

fn db_branch_commands(text: &str) -> Vec<String> {
    // Comment lines talk about db-branch; only commands count.
    let mut text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    for (var, value) in SAMPLES {
        text = text.replace(var, value);
    }
    let mut found = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("db-branch ") {
        // Only where a shell would run it: at the start of a script line, after `sudo`,
        // `run:`, a list dash or `$(`; not in names and descriptions.
        let line_start = rest[..i].rfind('\n').map_or(0, |n| n + 1);
        let before = rest[line_start..i].trim_end();
        let runs = ["", "sudo", "run:", "-", "$(", "- sudo", "run: sudo"]
            .iter()
            .any(|p| before.trim_start() == *p || before.ends_with(" sudo"));
        if !runs {
            rest = &rest[i + "db-branch ".len()..];
            continue;
        }
        let after = &rest[i..];
        let end = after
            .find(['\n', '|', '>', ';', ')', '&', '#'])
            .unwrap_or(after.len());
        found.push(after[..end].trim().to_string());
        rest = &after[end..];
    }
    found
}

#[test]
fn recipes_parse_and_call_real_commands() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ci");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let docs = yaml_rust2::YamlLoader::load_from_str(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!docs.is_empty(), "{} is empty", path.display());
        let commands = db_branch_commands(&text);
        assert!(
            !commands.is_empty(),
            "{} runs no db-branch command",
            path.display()
        );
        for cmd in commands {
            let words = shlex::split(&cmd).unwrap_or_else(|| panic!("cannot split {cmd:?}"));
            if let Err(e) = db_branch::cli::Cli::try_parse_from(&words) {
                panic!("{}: `{cmd}` is not a valid command:\n{e}", path.display());
            }
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} commands checked");
}

#[test]
fn a_wrong_flag_would_be_caught() {
    let words = shlex::split("db-branch create pr-1 --time-to-live 7d").unwrap();
    assert!(db_branch::cli::Cli::try_parse_from(&words).is_err());
    let found =
        db_branch_commands("run: sudo db-branch env pr-1 --format dotenv >> \"$GITHUB_ENV\"");
    assert_eq!(found, ["db-branch env pr-1 --format dotenv"]);
}
