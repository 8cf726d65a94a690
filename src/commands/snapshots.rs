//! The output contract: every command's `--json` and its table or text, run through the
//! real command-line parser, command, operation and printer on the in-memory host, kept
//! as insta snapshots. Scripts depend on the JSON (docs/json.md): a snapshot that changes
//! is a contract that changed. Paths under the test's root become `[ROOT]`, durations
//! `[SECONDS]`; the clock is fixed.

use crate::cli::Cli;
use crate::ops::testing::{sim_host, SimHost};
use crate::printer::Printer;
use clap::Parser;

/// Runs `db-branch ARGS` on the sim host; returns what it printed on stdout.
fn run(sim: &mut SimHost, json: bool, args: &str) -> String {
    let mut argv = vec!["db-branch".to_string()];
    argv.extend(shlex::split(args).expect("test arguments"));
    let cli = Cli::try_parse_from(argv).expect("test arguments parse");
    let (printer, out) = Printer::capturing(json);
    sim.host.printer = printer;
    let grant = super::authorize(&sim.host, &cli.command).expect("root may do anything");
    let note = "/etc/db-branch/config.toml (valid)";
    match &cli.command {
        crate::cli::Command::Doctor(_) => {
            // Doctor fails (exit 1) when a check fails; its report is printed either way.
            let _ = super::dispatch(&sim.host, &grant, &cli.command, note);
        }
        command => super::dispatch(&sim.host, &grant, command, note).expect("command succeeds"),
    }
    let text = out.lock().unwrap().clone();
    text
}

fn settings(sim: &SimHost) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(
        &regex_escape(&sim.host.layout.root().display().to_string()),
        "[ROOT]",
    );
    // The root as it appears escaped in URLs (the CA's path in a query).
    s.add_filter(r"%2Ftmp%2F(%2E|\.)tmp[A-Za-z0-9]+", "[ROOT-ESCAPED]");
    s.add_filter(r#""seconds": [0-9.e-]+"#, r#""seconds": "[SECONDS]""#);
    s.add_filter(r"in [0-9]+\.[0-9] s by", "in [SECONDS] s by");
    // How long a cut held the follower's applier still.
    s.add_filter(
        r#""pause_seconds": [0-9.e-]+"#,
        r#""pause_seconds": "[SECONDS]""#,
    );
    s.add_filter(r"applier paused [0-9.]+ s", "applier paused [SECONDS] s");
    // migrate-check's line: how long the migration command (a real process) ran.
    s.add_filter(r"` in [0-9]+\.[0-9] s\.", "` in [SECONDS] s.");
    // Whether the tests run as root shows in doctor's first check.
    s.add_filter(
        r#"(?m)^(│ )?(ok|FAIL) +root +(running as root|db-branch must run as root \(sudo\)) +(│)?$"#,
        "[ROOT CHECK]",
    );
    s.add_filter(
        r#"\{\s*"name": "root",\s*"level": "(ok|fail)",\s*"detail": "[^"]*"\s*\}"#,
        "[ROOT CHECK]",
    );
    // Who runs the tests, and whether this host runs systemd.
    s.add_filter(r#""owner": "[^"]*""#, r#""owner": "[USER]""#);
    s.add_filter(r"(?m)^owner: +\S+$", "owner:    [USER]");
    s.add_filter(r"\(systemd (not )?running\)", "(systemd [RUNNING OR NOT])");
    // Which process holds a pool's claim.
    s.add_filter(r#""holder": [0-9]+"#, r#""holder": "[PID]""#);
    s.add_filter(r"pid [0-9]+", "pid [PID]");
    // Each branch's random password.
    s.add_filter(r"\b[A-Za-z0-9]{32}\b", "[PASSWORD]");
    s.set_prepend_module_to_snapshot(false);
    s
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if "\\.+*?()|[]{}^$".contains(c) {
                vec!['\\', c]
            } else {
                vec![c]
            }
        })
        .collect()
}

/// Snapshots both forms of one command: `NAME.json` and `NAME.txt`.
fn both(sim: &mut SimHost, name: &str, args: &str) {
    both_with(sim, name, args, |_| {});
}

/// `both`, with `between` run between the JSON and the text run (for a command that
/// cannot run twice in a row: `restore`).
fn both_with(sim: &mut SimHost, name: &str, args: &str, between: impl FnOnce(&mut SimHost)) {
    let json = run(sim, true, args);
    between(sim);
    serde_json::from_str::<serde_json::Value>(&json)
        .unwrap_or_else(|e| panic!("{args}: --json is not JSON ({e}):\n{json}"));
    let text = run(sim, false, args);
    let mut s = settings(sim);
    if name.starts_with("pool") {
        // A pool's slots are made in parallel: which gets which port varies.
        s.add_filter(r"\b34[0-9]{2}\b", "[PORT]");
    }
    s.bind(|| {
        insta::assert_snapshot!(format!("{name}.json"), json);
        insta::assert_snapshot!(format!("{name}.txt"), text);
    });
}

/// A host with branch `a` (labelled, expiring) and `b` (protected, stopped).
fn populated() -> SimHost {
    let mut sim = sim_host();
    // A fixed owner: the table shows it, whoever runs the tests.
    run(&mut sim, true, "create a --label pr=7 --ttl 7d --owner dev");
    run(
        &mut sim,
        true,
        "create b --profile durable --buffer-pool 256M --owner dev",
    );
    run(&mut sim, true, "protect b --for 2d");
    run(&mut sim, true, "stop b");
    sim
}

#[test]
fn branch_commands() {
    let mut sim = populated();
    both(&mut sim, "list", "list");
    both(&mut sim, "list-label", "list --label pr=7");
    both(&mut sim, "status", "status a");
    both(&mut sim, "create-existing", "create a");
    both(&mut sim, "start", "start b");
    both(&mut sim, "reset", "reset a");
    both(&mut sim, "extend", "extend a --ttl 30d");
    both(&mut sim, "protect", "protect a");
    both(&mut sim, "unprotect", "unprotect a");
    both(&mut sim, "stop", "stop a");
    both(&mut sim, "delete", "--yes delete a");
    both(&mut sim, "delete-missing", "--yes delete nope");
}

#[test]
fn create_new() {
    let mut sim = sim_host();
    let json = run(&mut sim, true, "create fresh --label repo=web");
    let text = {
        run(&mut sim, false, "--yes delete fresh");
        run(&mut sim, false, "create fresh --label repo=web")
    };
    settings(&sim).bind(|| {
        insta::assert_snapshot!("create.json", json);
        insta::assert_snapshot!("create.txt", text);
    });
}

#[test]
fn env_formats() {
    let mut sim = populated();
    let mut all = String::new();
    for format in FORMATS {
        all += &format!("--- env a --format {format}\n");
        all += &run(&mut sim, false, &format!("env a --format {format}"));
    }
    all += "--- --json env a\n";
    all += &run(&mut sim, true, "env a");
    settings(&sim).bind(|| insta::assert_snapshot!("env", all));
}

const FORMATS: [&str; 10] = [
    "shell",
    "dotenv",
    "json",
    "url",
    "jdbc",
    "go",
    "mycnf",
    "laravel",
    "rails",
    "sqlalchemy",
];

/// Off loopback every format carries TLS, in its client's own syntax.
#[test]
fn env_formats_with_tls() {
    let mut sim = populated();
    sim.host.config.bind_address = "192.0.2.10".parse().unwrap();
    let mut all = String::new();
    for format in FORMATS {
        all += &format!("--- env a --format {format}\n");
        all += &run(&mut sim, false, &format!("env a --format {format}"));
    }
    settings(&sim).bind(|| insta::assert_snapshot!("env-tls", all));
}

#[test]
fn lifecycle_commands() {
    let mut sim = populated();
    sim.advance(chrono::Duration::days(8));
    both(&mut sim, "stop-idle-dry-run", "stop-idle --dry-run");
    both(&mut sim, "gc-dry-run", "gc --dry-run --older-than 1d");
    both(&mut sim, "gc", "--yes gc");
}

#[test]
fn trash_commands() {
    let mut sim = populated();
    run(&mut sim, true, "--yes delete a");
    sim.advance(chrono::Duration::hours(1));
    both(&mut sim, "trash", "trash");
    both_with(&mut sim, "restore", "restore a", |sim| {
        run(sim, true, "--yes delete a");
    });
    both(&mut sim, "reset-keep", "reset a --keep");
    run(&mut sim, true, "--yes delete a");
    both_with(&mut sim, "trash-purge", "--yes trash purge a", |sim| {
        run(sim, true, "create a");
        run(sim, true, "--yes delete a");
    });
    both(&mut sim, "trash-empty", "trash");
}

#[test]
fn metrics_command() {
    let mut sim = populated();
    // What the operations measured of themselves differs from run to run: a fixed record of
    // one create, one claim and a gc run in its place.
    let kept = r#"{"operations": {
        "create": {"bounds": BOUNDS, "counts": [0,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,0], "count": 1, "sum_seconds": 0.125},
        "claim": {"bounds": BOUNDS, "counts": [0,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0], "count": 2, "sum_seconds": 0.0025}},
      "runs": {"gc": {"finished_at": "2026-12-03T10:00:00Z", "seconds": 0.5, "ok": true, "acted": 2}}}"#
        .replace(
            "BOUNDS",
            &serde_json::to_string(&crate::store::stats::BOUNDS.to_vec()).unwrap(),
        );
    std::fs::write(sim.host.layout.root().join("stats.json"), kept).unwrap();
    both(&mut sim, "metrics", "metrics");
}

#[test]
fn baseline_commands() {
    let mut sim = sim_host();
    both(&mut sim, "baseline-create", "baseline create --empty");
    run(&mut sim, true, "create a --baseline 1");
    both(&mut sim, "baseline-list", "baseline list");
    run(&mut sim, true, "baseline create --empty");
    both(&mut sim, "baseline-prune", "baseline prune");
    both(&mut sim, "bake", "bake --from mysql://u@127.0.0.1:1");
}

#[test]
fn follow_commands() {
    let mut sim = sim_host();
    let source = "mysql://repl:pw@127.0.0.1:3999";
    let follow = format!("baseline follow {source} --no-mask --every 6h");
    both_with(&mut sim, "baseline-follow", &follow, |sim| {
        run(sim, true, "--yes baseline unfollow");
    });
    both(&mut sim, "baseline-follower", "baseline follower");
    both(&mut sim, "baseline-cut", "baseline cut");
    both(&mut sim, "baseline-list-followed", "baseline list");
    both_with(
        &mut sim,
        "baseline-unfollow",
        "--yes baseline unfollow",
        |sim| {
            run(sim, true, &follow);
        },
    );
    both(&mut sim, "baseline-follower-none", "baseline follower");
}

#[test]
fn transfer_commands() {
    let mut sim = sim_host();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let mut s = settings(&sim);
    s.add_filter(&regex_escape(&d), "[DIR]");
    s.add_filter(
        r#""bytes_per_second": [0-9.e+-]+"#,
        r#""bytes_per_second": "[RATE]""#,
    );
    s.add_filter(r"[0-9.]+[KMGT]?B?/s", "[RATE]");
    s.add_filter(r"(?m)  [0-9]+\.[0-9]{2}  ", "  [SECONDS]  ");
    // The rate's width moves the table's right edge.
    s.add_filter(r"(?m) +│$", " │");
    s.add_filter(r"(?m)^([┌└╞])[─═]+([┐┘╡])$", "$1[BORDER]$2");
    let push = run(&mut sim, true, &format!("baseline push file:{d}"));
    s.bind(|| insta::assert_snapshot!("baseline-push.json", push));
    run(&mut sim, true, "baseline create --empty");
    let push = run(&mut sim, false, &format!("baseline push file:{d}"));
    s.bind(|| insta::assert_snapshot!("baseline-push.txt", push));
    let mut other = sim_host();
    other.storage.with_state(|st| st.generations.clear());
    let pull = run(&mut other, true, &format!("baseline pull file:{d}"));
    s.bind(|| insta::assert_snapshot!("baseline-pull.json", pull));
}

#[test]
fn host_commands() {
    let mut sim = sim_host();
    both(&mut sim, "init", "init");
    both(&mut sim, "doctor", "doctor");
}

#[test]
fn migrate_check() {
    let mut sim = sim_host();
    both(
        &mut sim,
        "migrate-check",
        "migrate-check --branch mc -- true",
    );
    let md = run(
        &mut sim,
        false,
        "migrate-check --branch mc --format markdown -- true",
    );
    settings(&sim).bind(|| insta::assert_snapshot!("migrate-check.md", md));
}

#[test]
fn pool_commands() {
    let mut sim = sim_host();
    both(&mut sim, "pool-create", "pool create ci --size 2");
    // The claimant is this test process (a slot's lease needs a live holder).
    let me = std::process::id();
    let claim = run(
        &mut sim,
        false,
        &format!("pool claim ci --pid {me} --format dotenv"),
    );
    let claimed_json = run(&mut sim, true, &format!("pool claim ci --pid {me}"));
    both(&mut sim, "pool-list", "pool list");
    let status = run(&mut sim, true, "pool status ci");
    both(&mut sim, "pool-release", "pool release ci 1");
    both(&mut sim, "pool-delete", "--yes pool delete ci");
    let mut s = settings(&sim);
    s.add_filter(&format!(r"\b{me}\b"), "[PID]");
    s.add_filter(r#""claimed_at": "[^"]*""#, r#""claimed_at": "[TIME]""#);
    s.add_filter(r"\b34[0-9]{2}\b", "[PORT]");
    s.bind(|| {
        insta::assert_snapshot!("pool-claim.dotenv", claim);
        insta::assert_snapshot!("pool-claim.json", claimed_json);
        insta::assert_snapshot!("pool-status.json", status);
    });
}

/// `pool resize`: grown by one slot, then back.
#[test]
fn pool_resize() {
    let mut sim = sim_host();
    run(&mut sim, true, "pool create ci --size 1");
    let mut s = settings(&sim);
    s.add_filter(r"\b34[0-9]{2}\b", "[PORT]");
    let grown = run(&mut sim, true, "pool resize ci --size 2");
    let text = run(&mut sim, false, "pool resize ci --size 1");
    s.bind(|| {
        insta::assert_snapshot!("pool-resize.json", grown);
        insta::assert_snapshot!("pool-resize.txt", text);
    });
}

/// Checkpoints, their list and deletion, and the lineage tree.
#[test]
fn history_commands() {
    let mut sim = populated();
    let mut s = settings(&sim);
    s.add_filter(r#""created": "[^"]*""#, r#""created": "[TIME]""#);
    s.add_filter(
        r"\b20[0-9]{2}-[0-9]{2}-[0-9]{2}[T ][0-9:.]+(Z|\+00:00)?",
        "[TIME]",
    );
    let checkpoint = run(&mut sim, true, "checkpoint a one");
    let checkpoint_text = run(&mut sim, false, "checkpoint a two --clean");
    let list = run(&mut sim, true, "checkpoints a");
    let list_text = run(&mut sim, false, "checkpoints a");
    run(&mut sim, true, "create c --from a@one --owner dev");
    let tree = run(&mut sim, true, "list --tree");
    let tree_text = run(&mut sim, false, "list --tree");
    let diff = run(&mut sim, true, "diff a c");
    let diff_text = run(&mut sim, false, "diff a@one c");
    let deleted = run(&mut sim, true, "checkpoint delete a two");
    let deleted_text = run(&mut sim, false, "checkpoint delete a one");
    s.bind(|| {
        insta::assert_snapshot!("checkpoint.json", checkpoint);
        insta::assert_snapshot!("checkpoint.txt", checkpoint_text);
        insta::assert_snapshot!("checkpoints.json", list);
        insta::assert_snapshot!("checkpoints.txt", list_text);
        insta::assert_snapshot!("list-tree.json", tree);
        insta::assert_snapshot!("list-tree.txt", tree_text);
        insta::assert_snapshot!("diff.json", diff);
        insta::assert_snapshot!("diff.txt", diff_text);
        insta::assert_snapshot!("checkpoint-delete.json", deleted);
        insta::assert_snapshot!("checkpoint-delete.txt", deleted_text);
    });
}

/// `db-branch ARGS` that must fail: the exit code and stderr as `main` ends with them
/// (`report::outcome`), with `--json` too (errors are text on stderr either way).
fn fails(sim: &mut SimHost, args: &str) -> String {
    let mut argv = vec!["db-branch".to_string()];
    argv.extend(shlex::split(args).expect("test arguments"));
    let cli = Cli::try_parse_from(argv).expect("test arguments parse");
    let (printer, out) = Printer::capturing(cli.json);
    sim.host.printer = printer;
    let result = super::authorize(&sim.host, &cli.command).and_then(|grant| {
        super::dispatch(
            &sim.host,
            &grant,
            &cli.command,
            "/etc/db-branch/config.toml (valid)",
        )
    });
    let err = result.expect_err("the command must fail");
    let (code, text) = crate::report::outcome(&err);
    let stdout = out.lock().unwrap().clone();
    format!("$ db-branch {args}\nexit {code}\nstdout: {stdout:?}\n{text}\n")
}

/// One failure of every kind a user meets, as they see it: what failed, the hint, the
/// exit code (2 usage and not-found, 75 refused, 77 permission, 1 failed).
#[test]
fn error_kinds() {
    let mut sim = populated();
    let mut all = String::new();
    all += &fails(&mut sim, "reset nope");
    all += &fails(&mut sim, "create c --from a@nope");
    all += &fails(&mut sim, "--json create c --baseline 9");
    all += &fails(&mut sim, "delete b --yes");
    sim.memory.set_available(64 << 20);
    all += &fails(&mut sim, "create big");
    sim.memory.set_available(64 << 30);
    sim.storage.fail_once("clone_branch");
    all += &fails(&mut sim, "create broken");
    sim.host.caller = crate::access::Caller {
        uid: 4242,
        gids: vec![4242],
        name: "mallory".into(),
        cwd: None,
        pid: None,
    };
    all += &fails(&mut sim, "create m --owner dev");
    settings(&sim).bind(|| insta::assert_snapshot!("error-kinds", all));
}
