//! The committed completions (completions/) and man pages (docs/man/) must be what the
//! binary's clap definition generates. Regenerate with:
//!   DB_BRANCH_BLESS=1 cargo test --features testing --test it generated

use clap_complete::Shell;
use std::path::{Path, PathBuf};

fn check(path: PathBuf, want: &[u8], stale: &mut Vec<String>) {
    if std::env::var_os("DB_BRANCH_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, want).unwrap();
        return;
    }
    if std::fs::read(&path).ok().as_deref() != Some(want) {
        stale.push(path.display().to_string());
    }
}

#[test]
fn completions_and_man_pages_are_fresh() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut stale = Vec::new();
    for (shell, file) in [
        (Shell::Bash, "db-branch.bash"),
        (Shell::Zsh, "_db-branch"),
        (Shell::Fish, "db-branch.fish"),
    ] {
        check(
            root.join("completions").join(file),
            &db_branch::completions(shell),
            &mut stale,
        );
    }
    let pages = db_branch::man_pages();
    assert!(pages.iter().any(|(n, _)| n == "db-branch-create.1"));
    assert!(pages
        .iter()
        .any(|(n, _)| n == "db-branch-baseline-create.1"));
    for (name, text) in &pages {
        check(root.join("docs/man").join(name), text, &mut stale);
    }
    // No page left behind for a command that no longer exists.
    if let Ok(dir) = std::fs::read_dir(root.join("docs/man")) {
        for e in dir.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if !pages.iter().any(|(p, _)| *p == n) {
                stale.push(format!("docs/man/{n} (no such command)"));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "generated files are stale: {stale:?}; run DB_BRANCH_BLESS=1 cargo test --features testing --test it generated"
    );
}

/// docs/configuration.md carries the defaults exactly as the config struct serialises them,
/// and documents every key.
#[test]
fn configuration_reference_matches_the_config_struct() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("docs/configuration.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let defaults = toml::to_string(&db_branch::config::Config::default()).unwrap();
    let begin = "<!-- generated: defaults -->\n```toml\n";
    let end = "```\n<!-- end generated -->";
    let block = format!("{begin}{defaults}{end}");
    if std::env::var_os("DB_BRANCH_BLESS").is_some() {
        let start = doc.find(begin).expect("marker in docs/configuration.md");
        let stop = doc.find(end).expect("end marker") + end.len();
        let mut new = doc.clone();
        new.replace_range(start..stop, &block);
        std::fs::write(&path, new).unwrap();
        return;
    }
    assert!(
        doc.contains(&block),
        "docs/configuration.md defaults are stale; run DB_BRANCH_BLESS=1 cargo test --features testing --test it generated"
    );
    // Every key (table.key) is explained in the annotated example.
    let value: toml::Value = toml::from_str(&defaults).unwrap();
    for (k, v) in value.as_table().unwrap() {
        match v.as_table() {
            Some(t) => {
                assert!(doc.contains(&format!("[{k}]")), "table [{k}] undocumented");
                for key in t.keys() {
                    assert!(
                        doc.contains(&format!("\n{key} =")),
                        "{k}.{key} undocumented"
                    );
                }
            }
            None => assert!(doc.contains(&format!("\n{k} =")), "{k} undocumented"),
        }
    }
}
