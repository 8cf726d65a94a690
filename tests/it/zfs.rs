//! ZFS integration tests, run as root inside the OpenZFS guest (tests/harness/zfs-guest) with
//! DB_BRANCH_TEST_BACKEND=zfs and a pool on a file: the lifecycle of tests/lifecycle.rs on
//! `zfs clone` / `zfs rollback` / `zfs destroy`, plus what only ZFS has (generations held by
//! clones, space figures, metadata in user properties).

use db_branch::testkit::{checksum, port, sql, TestEnv};
use std::process::Command;

fn zfs(args: &[&str]) -> String {
    let out = Command::new("zfs").args(args).output().expect("zfs");
    assert!(
        out.status.success(),
        "zfs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
#[ignore = "needs root and OpenZFS: run inside tests/harness/zfs-guest by scripts/test"]
fn zfs_lifecycle() {
    assert_eq!(
        db_branch::testkit::backend(),
        "zfs",
        "run with DB_BRANCH_TEST_BACKEND=zfs"
    );
    let env = TestEnv::with_baseline();
    let dataset = std::fs::read_to_string(&env.config)
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("dataset = \"")
                .map(|d| d.trim_end_matches('"').to_string())
        })
        .unwrap();
    // Datasets suit InnoDB.
    let props = zfs(&[
        "get",
        "-H",
        "-o",
        "value",
        "recordsize,compression,atime",
        &dataset,
    ]);
    assert_eq!(
        props.split_whitespace().collect::<Vec<_>>(),
        ["16K", "lz4", "off"]
    );

    // create → write → reset gives the baseline back, same port, no crash recovery.
    let a = env.json(&["create", "a"]);
    let pa = port(&a);
    let clean = checksum(pa);
    sql(
        pa,
        "DELETE FROM shop.orders WHERE id % 3 = 0; CREATE DATABASE scratch",
    );
    assert_ne!(checksum(pa), clean);
    let log_before = std::fs::read_to_string(env.error_log("a")).unwrap().len();
    let r = env.json(&["reset", "a"]);
    assert_eq!(port(&r), pa);
    assert_eq!(checksum(pa), clean);
    let log = std::fs::read_to_string(env.error_log("a")).unwrap();
    assert!(
        db_branch::server::crash_recovery_line(&log[log_before..]).is_none(),
        "{}",
        &log[log_before..]
    );

    // Isolation, and space: the writer holds its own blocks.
    let b = port(&env.json(&["create", "b"]));
    sql(
        b,
        &format!(
            "USE shop; INSERT INTO orders SELECT seq + 100000, 1, 1 FROM {}",
            db_branch::testkit::seq(100000)
        ),
    );
    assert_eq!(
        sql(pa, "SELECT COUNT(*) FROM shop.orders WHERE id > 100000"),
        "0"
    );
    let status = env.json(&["status", "b"]);
    for k in ["used", "referenced", "written"] {
        assert!(status["space"][k].as_u64().is_some(), "{k}: {status}");
    }
    assert!(env.json(&["list"])[1]["disk_bytes"].as_u64().unwrap() > 0);

    // Idempotent create.
    let again = env.json(&["create", "a"]);
    assert_eq!(again["existed"], true);
    assert_eq!(port(&again), pa);

    // Metadata lives on the dataset too: a lost record comes back from the pool alone.
    let meta = zfs(&[
        "get",
        "-H",
        "-o",
        "value",
        "db-branch:port",
        &format!("{dataset}/branches/b"),
    ]);
    assert_eq!(meta.trim(), b.to_string());
    std::fs::remove_file(env.root.join("branches/b/branch.json")).unwrap();
    env.run_ok(&["doctor", "--repair"]);
    assert_eq!(port(&env.json(&["status", "b"])), b);

    // A generation is held by its clones: prune keeps it, and says why.
    env.run_ok(&["baseline", "create", "--empty"]);
    let list = env.json(&["baseline", "list"]);
    assert_eq!(list[0]["branches"], 2, "{list}");
    let pruned = env.json(&["baseline", "prune"]);
    assert!(
        pruned[0]["action"]
            .as_str()
            .unwrap()
            .contains("used by a, b"),
        "{pruned}"
    );
    env.run_ok(&["delete", "--yes", "a"]);
    env.run_ok(&["delete", "--yes", "b"]);
    let pruned = env.json(&["baseline", "prune"]);
    assert_eq!(pruned[0]["action"], "removed", "{pruned}");

    // Delete leaves nothing: no dataset, no record, no server.
    let children = zfs(&[
        "list",
        "-H",
        "-o",
        "name",
        "-r",
        &format!("{dataset}/branches"),
    ]);
    assert_eq!(children.trim(), format!("{dataset}/branches"));
    assert_eq!(env.json(&["list"]), serde_json::json!([]));
    assert!(env.server_pids().is_empty());
}
