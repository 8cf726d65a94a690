//! Black-box tests of the command line that need no root and touch nothing: parsing,
//! config validation, exit codes, help and completions.

use db_branch::testkit::assert_success;
use std::process::{Command, Output};

fn run(args: &[&str], config: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_db-branch"));
    cmd.args(args).env_remove("DB_BRANCH_CONFIG");
    let dir = tempfile::tempdir().unwrap();
    if let Some(text) = config {
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        cmd.env("DB_BRANCH_CONFIG", &path);
    }
    cmd.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bad_names_exit_2_before_anything() {
    for name in ["Bad", "a/b", "x@init", "has space", "a..b"] {
        let o = run(
            &["create", "--", name],
            Some("root = \"/nonexistent/dbb\"\n"),
        );
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains("branch name"), "{name}: {}", stderr(&o));
    }
}

#[test]
fn unknown_config_key_is_named() {
    let o = run(&["list"], Some("[mysqld]\nbufferpool = \"1G\"\n"));
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("bufferpool") && e.contains("config.toml"), "{e}");
}

#[test]
fn missing_explicit_config_is_an_error() {
    let o = run(&["--config", "/nonexistent/db-branch.toml", "list"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent/db-branch.toml"));
}

#[test]
fn bad_sizes_and_generations_are_usage_errors() {
    for args in [
        ["create", "a", "--buffer-pool", "lots"],
        ["create", "a", "--baseline", "newest"],
    ] {
        let o = run(&args, Some(""));
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
    let o = run(&["env", "a", "--format", "yaml"], Some(""));
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn help_fits_80_columns() {
    use clap::CommandFactory;
    fn paths(cmd: &clap::Command, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        out.push(prefix.clone());
        for sub in cmd.get_subcommands() {
            let mut p = prefix.clone();
            p.push(sub.get_name().to_string());
            paths(sub, p, out);
        }
    }
    let mut all = Vec::new();
    paths(&db_branch::cli::Cli::command(), Vec::new(), &mut all);
    assert!(all.len() > 15, "{all:?}");
    for path in all {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let o = run(&args, None);
        assert!(o.status.success(), "{args:?}");
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            assert!(line.chars().count() <= 80, "{args:?}: {line:?}");
        }
    }
}

#[test]
fn completions_survive_a_closed_pipe() {
    for shell in ["bash", "zsh", "fish"] {
        let o = run(&["completions", shell], None);
        assert_success(&o, "");
        assert!(String::from_utf8_lossy(&o.stdout).contains("db-branch"));
    }
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} completions bash | head -c 10 >/dev/null",
            env!("CARGO_BIN_EXE_db-branch")
        ))
        .status()
        .unwrap();
    assert!(status.success());
}
