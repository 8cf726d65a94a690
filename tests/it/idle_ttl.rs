//! Root integration tests of idle stopping, expiry, gc, protection and the timers, on real
//! btrfs and real mariadbd, with time moved forward through DB_BRANCH_FAKE_NOW.

use chrono::{Duration, Utc};
use db_branch::testkit::{assert_success, sql, TestEnv};
use serde_json::Value;

fn action(report: &Value, name: &str) -> String {
    report
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("{name} missing from {report}"))["action"]
        .as_str()
        .unwrap()
        .to_string()
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn idle_branch_is_stopped_busy_one_is_not_and_both_wake_with_their_data() {
    let env = TestEnv::with_baseline();
    let t0 = Utc::now();
    let busy = env.json(&["create", "busy"])["port"].as_u64().unwrap() as u16;
    let quiet = env.json(&["create", "quiet"])["port"].as_u64().unwrap() as u16;
    sql(quiet, "CREATE DATABASE kept");
    sql(busy, "CREATE DATABASE kept_too");

    // First sample: both have been used since their start.
    let first = env.json_at(
        t0 + Duration::minutes(1),
        &["stop-idle", "--idle-for", "1h"],
    );
    assert_eq!(action(&first, "busy"), "active");
    assert_eq!(action(&first, "quiet"), "active");

    // Only `busy` sees clients afterwards; db-branch's own probes must not count for `quiet`.
    sql(busy, "SELECT COUNT(*) FROM shop.orders");
    let later = t0 + Duration::hours(2);
    let dry = env.json_at(later, &["stop-idle", "--idle-for", "1h", "--dry-run"]);
    assert_eq!(action(&dry, "quiet"), "would stop");
    assert_eq!(env.server_pids().len(), 2, "dry run stops nothing");
    let second = env.json_at(later, &["stop-idle", "--idle-for", "1h"]);
    assert_eq!(action(&second, "busy"), "active");
    assert_eq!(action(&second, "quiet"), "stopped");
    assert_eq!(env.server_pids().len(), 1);

    let status = env.json(&["status", "quiet"]);
    assert_eq!(status["state"], "stopped");
    assert_eq!(status["stopped_idle"], true);
    // The table may wrap the cell ("stopped" / "(idle)") when other columns are wide.
    let table = env.run_ok(&["list"]);
    let row: String = table
        .lines()
        .skip_while(|l| !l.contains("quiet"))
        .take(2)
        .collect();
    assert!(row.contains("stopped") && row.contains("(idle)"), "{table}");

    // `start` wakes it with its data.
    assert_eq!(env.json(&["start", "quiet"])["state"], "running");
    assert_eq!(sql(quiet, "SHOW DATABASES LIKE 'kept'"), "kept");
    assert_eq!(env.json(&["status", "quiet"])["stopped_idle"], false);

    // Much later `busy` is idle too; an idempotent `create` wakes it, same port, data kept.
    let third = env.json_at(t0 + Duration::hours(5), &["stop-idle", "--idle-for", "1h"]);
    assert_eq!(action(&third, "busy"), "stopped");
    let woken = env.json(&["create", "busy"]);
    assert_eq!(woken["existed"], true);
    assert_eq!(woken["state"], "running");
    assert_eq!(woken["port"].as_u64().unwrap() as u16, busy);
    assert_eq!(sql(busy, "SHOW DATABASES LIKE 'kept_too'"), "kept_too");
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn gc_deletes_exactly_the_expired_unprotected_matching_branches() {
    let env = TestEnv::with_baseline();
    let now = Utc::now();
    env.run_ok(&["create", "expired", "--ttl", "1h"]);
    env.run_ok(&[
        "create",
        "expired-pr",
        "--ttl",
        "1h",
        "--label",
        "pr=1",
        "--label",
        "repo=web",
    ]);
    env.run_ok(&["create", "guarded", "--ttl", "1h"]);
    env.run_ok(&["protect", "guarded"]);
    env.run_ok(&["create", "fresh", "--ttl", "3h"]);
    env.run_ok(&["create", "forever"]);
    let later = now + Duration::hours(2);

    let dry = env.json_at(later, &["gc", "--dry-run"]);
    assert_eq!(dry.as_array().unwrap().len(), 3, "{dry}");
    assert_eq!(action(&dry, "expired"), "would delete");
    assert_eq!(action(&dry, "guarded"), "kept (protected)");
    assert_eq!(
        env.json(&["list"]).as_array().unwrap().len(),
        5,
        "dry run deletes nothing"
    );

    let by_label = env.json_at(later, &["gc", "--label", "pr=1"]);
    assert_eq!(names(&by_label), ["expired-pr"]);
    assert_eq!(action(&by_label, "expired-pr"), "deleted");
    assert_eq!(
        names(&env.json(&["list", "--label", "repo=web"])),
        Vec::<String>::new()
    );

    let all = env.json_at(later, &["gc"]);
    assert_eq!(action(&all, "expired"), "deleted");
    assert_eq!(action(&all, "guarded"), "kept (protected)");
    assert_eq!(names(&env.json(&["list"])), ["forever", "fresh", "guarded"]);
    // Deleted means gone: no server, no snapshot.
    assert_eq!(env.server_pids().len(), 3);
    assert!(!env.pool().join("branches/expired").exists());

    // Age selects too, protection still wins.
    let old = env.json_at(now + Duration::days(2), &["gc", "--older-than", "1d"]);
    assert_eq!(action(&old, "forever"), "deleted");
    assert_eq!(action(&old, "fresh"), "deleted");
    assert_eq!(names(&env.json(&["list"])), ["guarded"]);
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn protection_blocks_delete_until_lifted_or_lapsed_and_expiry_can_be_moved() {
    let env = TestEnv::with_baseline();
    let now = Utc::now();
    env.run_ok(&["create", "keep", "--label", "owner=qa"]);
    let p = env.json(&["protect", "keep"]);
    assert_eq!(p["protected"], true);
    let out = env.run(&["delete", "--yes", "keep"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("protected") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(env.server_pids().len(), 1, "nothing touched");

    env.run_ok(&["unprotect", "keep"]);
    env.run_ok(&["protect", "keep", "--for", "1h"]);
    let out = env.run_at(
        Some(now + Duration::minutes(30)),
        &["delete", "--yes", "keep"],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "still protected after 30 minutes"
    );
    // Protection lapses after its time; extend and reset --ttl move the expiry.
    let e = env.json(&["extend", "keep", "--ttl", "2d"]);
    let expires = chrono::DateTime::parse_from_rfc3339(e["expires_at"].as_str().unwrap()).unwrap();
    assert!(expires > now + Duration::hours(47));
    let r = env.json(&["reset", "keep", "--ttl", "3d"]);
    let expires = chrono::DateTime::parse_from_rfc3339(r["expires_at"].as_str().unwrap()).unwrap();
    assert!(expires > now + Duration::hours(71));
    let gone = env.run_at(
        Some(now + Duration::hours(2)),
        &["--json", "delete", "--yes", "keep"],
    );
    assert_success(&gone, "");
    // A protected branch goes with --force.
    env.run_ok(&["create", "forced"]);
    env.run_ok(&["protect", "forced"]);
    env.run_ok(&["delete", "--yes", "--force", "forced"]);
    assert!(env.server_pids().is_empty());
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn timer_units_are_valid_and_run_under_systemd() {
    let env = TestEnv::with_baseline();
    // The units as init renders them pass systemd-analyze verify, warnings included.
    let dir = env.root.join("units-check");
    std::fs::create_dir_all(&dir).unwrap();
    let units = env.rendered_units();
    let mut paths = Vec::new();
    for (file, text) in &units {
        // A template is verified as one of its instances.
        let file = file.replace("@.service", "@check.service");
        std::fs::write(dir.join(&file), text).unwrap();
        paths.push(dir.join(file));
    }
    let out = std::process::Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&paths)
        .output()
        .expect("systemd-analyze");
    let complaints = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && complaints.trim().is_empty(),
        "{complaints}"
    );

    if env.service != "systemd" {
        let out = env.run(&["init", "--enable-timers"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("cron"));
        return;
    }
    let init = env.json(&["init", "--enable-timers"]);
    let prefix = format!("db-branch-{}", env.unit_prefix);
    assert_eq!(
        init["timers"],
        serde_json::json!([
            format!("{prefix}-stop-idle.timer"),
            format!("{prefix}-gc.timer")
        ])
    );
    let systemctl = |args: &[&str]| {
        std::process::Command::new("systemctl")
            .args(args)
            .output()
            .expect("systemctl")
    };
    for t in ["stop-idle", "gc"] {
        let out = systemctl(&["is-active", &format!("{prefix}-{t}.timer")]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "active",
            "{t} timer"
        );
    }
    // The gc service, run by systemd, deletes an already expired branch.
    env.run_ok(&["create", "stale", "--expires-at", "2020-01-01T00:00:00Z"]);
    env.run_ok(&["create", "live"]);
    let out = systemctl(&["start", &format!("{prefix}-gc.service")]);
    assert_success(&out, "");
    assert_eq!(names(&env.json(&["list"])), ["live"]);
    let out = systemctl(&["start", &format!("{prefix}-stop-idle.service")]);
    assert_success(&out, "");
    for t in ["stop-idle", "gc"] {
        let _ = systemctl(&[
            "disable",
            "--runtime",
            "--now",
            &format!("{prefix}-{t}.timer"),
        ]);
    }
}
