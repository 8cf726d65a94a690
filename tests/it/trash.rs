//! Root integration tests of the trash on real btrfs and real mariadbd: delete → restore,
//! gc of an expired branch → restore, retention, a pool short of space, `reset --keep`.
//! (Another user restoring your branch is refused: `shared_host`, and `ops::trash`'s unit
//! tests for the policy.)

use db_branch::testkit::{checksum, port, sql, TestEnv};
use serde_json::Value;
use std::path::Path;

/// Deletes keep for a day, as a host left at the defaults does.
const KEEPING: &str = "[lifecycle]\nkeep_deleted = \"24h\"\n";

fn keeping() -> TestEnv {
    TestEnv::new("", KEEPING).seeded()
}

fn trash(env: &TestEnv) -> Vec<Value> {
    env.json(&["trash"]).as_array().unwrap().clone()
}

fn url(env: &TestEnv, name: &str) -> String {
    env.run_ok(&["env", name, "--format", "url"])
}

/// Bytes free in the pool, once btrfs has freed what was deleted and committed that.
fn pool_free(env: &TestEnv) -> u64 {
    db_branch::testkit::run_success(
        std::process::Command::new("btrfs")
            .args(["subvolume", "sync"])
            .arg(env.pool()),
    );
    db_branch::testkit::run_success(
        std::process::Command::new("btrfs")
            .args(["filesystem", "sync"])
            .arg(env.pool()),
    );
    let out = db_branch::testkit::run_success(
        std::process::Command::new("df")
            .args(["-B1", "--output=avail"])
            .arg(env.pool()),
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Writes `mib` MiB of the branch's own into its datadir (the server ignores a file there).
fn fill(env: &TestEnv, name: &str, mib: u64) {
    let file = env.pool().join("branches").join(name).join("filler.bin");
    db_branch::testkit::run_success(
        std::process::Command::new("dd")
            .arg("if=/dev/urandom")
            .arg(format!("of={}", file.display()))
            .args([
                "bs=1M",
                &format!("count={mib}"),
                "conv=fsync",
                "status=none",
            ]),
    );
}

fn entries_in(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn delete_then_restore_gives_back_the_rows_password_url_and_checkpoints() {
    let env = keeping();
    let p = port(&env.json(&["create", "a"]));
    sql(p, "CREATE TABLE shop.mine (id INT PRIMARY KEY)");
    sql(p, "INSERT INTO shop.mine VALUES (1), (2), (3)");
    env.run_ok(&["checkpoint", "a", "three"]);
    sql(p, "INSERT INTO shop.mine VALUES (4)");
    let before = checksum(p);
    let before_url = url(&env, "a");

    let deleted = env.json(&["--yes", "delete", "a"]);
    assert_eq!(deleted["deleted"], true);
    assert!(deleted["trash_id"].as_str().unwrap().ends_with("-a"));
    assert!(!env.names().contains(&"a".to_string()));
    assert!(env.server_pids().is_empty(), "its server is stopped");
    assert!(!env.pool().join("branches/a").exists());
    let t = trash(&env);
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!(t[0]["name"], "a");
    assert_eq!(t[0]["reason"], "delete");
    assert_eq!(t[0]["checkpoints"], serde_json::json!(["three"]));
    assert!(
        t[0]["own_bytes"].as_u64().is_some(),
        "btrfs tells what it holds: {t:?}"
    );
    // The kept datadir cannot be written while it waits.
    let kept = env
        .pool()
        .join("trash")
        .join(t[0]["id"].as_str().unwrap())
        .join("data");
    assert!(std::fs::write(kept.join("x"), b"x").is_err());

    let restored = env.json(&["restore", "a"]);
    assert_eq!(restored["state"], "running");
    assert_eq!(restored["port_changed"], false);
    assert_eq!(port(&restored), p, "same port");
    assert_eq!(checksum(p), before, "same rows");
    assert_eq!(url(&env, "a"), before_url, "same password and URL");
    assert!(trash(&env).is_empty());
    // Its checkpoint came back with it, and works.
    env.run_ok(&["reset", "a", "--to", "three"]);
    assert_eq!(sql(p, "SELECT COUNT(*) FROM shop.mine"), "3");
    // Its own disk is counted again.
    assert!(env.json(&["status", "a"])["disk_bytes"].as_u64().unwrap() > 0);
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn an_expired_branch_gc_took_comes_back_and_past_retention_its_space_is_freed() {
    let env = keeping();
    let p = port(&env.json(&["create", "pr-1", "--expires-at", "2020-01-01T00:00:00Z"]));
    sql(p, "CREATE TABLE shop.work (id INT PRIMARY KEY)");
    sql(p, "INSERT INTO shop.work VALUES (7)");
    let rows = env.json(&["--yes", "gc"]);
    assert_eq!(rows[0]["name"], "pr-1", "{rows}");
    assert_eq!(rows[0]["action"], "deleted");
    assert_eq!(trash(&env)[0]["reason"], "expiry");

    let restored = env.json(&["restore", "pr-1"]);
    assert_eq!(port(&restored), p);
    assert_eq!(sql(p, "SELECT id FROM shop.work"), "7");
    assert!(
        restored["expires_at"].is_null(),
        "brought back on purpose: the next gc leaves it ({restored})"
    );
    assert!(env.json(&["--yes", "gc"]).as_array().unwrap().is_empty());

    // Past retention: purged, and its blocks are free again.
    env.run_ok(&["stop", "pr-1"]);
    fill(&env, "pr-1", 256);
    env.run_ok(&["--yes", "delete", "pr-1"]);
    let with_trash = pool_free(&env);
    let later = chrono::Utc::now() + chrono::Duration::hours(25);
    let rows = env.json_at(later, &["--yes", "gc"]);
    assert_eq!(rows[0]["action"], "purged", "{rows}");
    assert!(trash(&env).is_empty());
    assert_eq!(entries_in(&env.pool().join("trash")), 0);
    let freed = pool_free(&env).saturating_sub(with_trash);
    assert!(freed >= 200 << 20, "{freed} bytes freed by the purge");
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn a_pool_short_of_space_empties_the_trash_before_it_refuses() {
    let env = keeping();
    env.run_ok(&["create", "big"]);
    env.run_ok(&["stop", "big"]);
    fill(&env, "big", 512);
    env.run_ok(&["--yes", "delete", "big"]);
    assert_eq!(trash(&env).len(), 1);
    // Room for the next branch only once the trash is emptied.
    let min_free = pool_free(&env) + (256 << 20);
    let config = std::fs::read_to_string(&env.config).unwrap();
    std::fs::write(
        &env.config,
        config.replacen(
            "[btrfs]\n",
            &format!("[btrfs]\nmin_free = \"{min_free}\"\n"),
            1,
        ),
    )
    .unwrap();
    let out = env.run(&["--json", "create", "next"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("purged branch big"), "{err}");
    assert!(trash(&env).is_empty());
    db_branch::testkit::remember_passwords(&serde_json::from_slice(&out.stdout).unwrap());

    // With nothing left to purge, the refusal says why and changes nothing.
    env.run_ok(&["--yes", "delete", "next"]);
    let config = std::fs::read_to_string(&env.config).unwrap().replacen(
        &format!("min_free = \"{min_free}\""),
        "min_free = \"1T\"",
        1,
    );
    std::fs::write(&env.config, config).unwrap();
    let err = env.run_err(&["create", "last"], 75);
    assert!(
        err.contains("full") && err.contains("btrfs.min_free"),
        "{err}"
    );
    assert!(trash(&env).is_empty(), "the entry of next went first");
    assert!(env.names().is_empty());
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn reset_keep_then_reset_to_brings_back_the_state_before_the_reset() {
    let env = keeping();
    let p = port(&env.json(&["create", "a"]));
    let clean = checksum(p);
    sql(p, "CREATE TABLE shop.handmade (id INT PRIMARY KEY)");
    sql(p, "INSERT INTO shop.handmade VALUES (1), (2)");
    let out = env.run(&["reset", "a", "--keep"]);
    assert!(out.status.success());
    let note = String::from_utf8_lossy(&out.stderr);
    assert!(note.contains("before-reset-1"), "{note}");
    assert_eq!(checksum(p), clean, "reset as ever");
    env.run_ok(&["reset", "a", "--to", "before-reset-1"]);
    assert_eq!(sql(p, "SELECT COUNT(*) FROM shop.handmade"), "2");
    // Kept as long as deleted branches are, then gc ends it.
    let later = chrono::Utc::now() + chrono::Duration::hours(25);
    let rows = env.json_at(later, &["--yes", "gc"]);
    assert_eq!(rows[0]["name"], "a@before-reset-1", "{rows}");
    assert_eq!(rows[0]["action"], "purged");
    assert!(env
        .json(&["checkpoints", "a"])
        .as_array()
        .unwrap()
        .is_empty());
}
