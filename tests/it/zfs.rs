//! ZFS integration tests, run as root inside the OpenZFS guest (tests/harness/zfs-guest) with
//! DB_BRANCH_TEST_BACKEND=zfs and a pool on a file: the lifecycle of tests/lifecycle.rs on
//! `zfs clone` / `zfs rollback` / `zfs destroy`, plus what only ZFS has (generations held by
//! clones, space figures, metadata in user properties, and history where clones depend on
//! their origin snapshots).

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
    let dataset = env.dataset().expect("a ZFS dataset in the config");
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

fn rows(p: u16) -> String {
    sql(
        p,
        "SELECT IFNULL(GROUP_CONCAT(i ORDER BY i), '') FROM shop.h",
    )
}

/// Datasets and snapshots under `dataset/sub`, without the parent itself.
fn under(dataset: &str, sub: &str) -> Vec<String> {
    let root = format!("{dataset}/{sub}");
    zfs(&["list", "-H", "-o", "name", "-t", "all", "-r", &root])
        .lines()
        .filter(|l| *l != root)
        .map(|l| l.strip_prefix(&format!("{dataset}/")).unwrap().to_string())
        .collect()
}

#[test]
#[ignore = "needs root and OpenZFS: run inside tests/harness/zfs-guest by scripts/test"]
fn zfs_history_keeps_what_others_need_and_leaves_nothing() {
    let env = TestEnv::with_baseline();
    let dataset = env.dataset().expect("a ZFS dataset in the config");
    let a = port(&env.json(&["create", "a"]));
    sql(
        a,
        "CREATE TABLE shop.h (i INT PRIMARY KEY); INSERT INTO shop.h VALUES (1)",
    );
    env.json(&["checkpoint", "a", "one"]);
    sql(a, "INSERT INTO shop.h VALUES (2)");
    env.json(&["checkpoint", "a", "two", "--clean"]);
    sql(a, "INSERT INTO shop.h VALUES (3)");

    // Back to an older checkpoint keeps the newer one (`zfs rollback -r` would not).
    env.json(&["reset", "a", "--to", "one"]);
    assert_eq!(rows(a), "1");
    env.json(&["reset", "a", "--to", "two"]);
    assert_eq!(rows(a), "1,2");
    sql(a, "INSERT INTO shop.h VALUES (4)");
    env.json(&["reset", "a"]);
    assert_eq!(
        sql(
            a,
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = 'shop' AND TABLE_NAME = 'h'"
        ),
        "0",
        "a plain reset is back at the baseline"
    );
    env.json(&["reset", "a", "--to", "one"]);
    assert_eq!(rows(a), "1", "and the checkpoints are all still there");
    let tags: Vec<String> = env
        .json(&["checkpoints", "a"])
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["tag"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(tags, ["one", "two"]);
    // Earlier datadirs that hold snapshots are kept aside, never mounted.
    let mounted = zfs(&[
        "list",
        "-H",
        "-o",
        "name,mounted",
        "-r",
        &format!("{dataset}/held"),
    ]);
    assert!(mounted.contains("/held/a:"), "{mounted}");
    assert!(!mounted.contains("\tyes"), "{mounted}");

    // Branches from a checkpoint and from the running branch; then the checkpoint one came
    // from is deleted, and the source itself: both keep their data and reset to it.
    let b = port(&env.json(&["create", "b", "--from", "a@two"]));
    assert_eq!(rows(b), "1,2");
    sql(a, "INSERT INTO shop.h VALUES (5)");
    let c = port(&env.json(&["create", "c", "--from", "a"]));
    assert_eq!(rows(c), "1,5");
    env.run_ok(&["checkpoint", "delete", "a", "two"]);
    assert_eq!(env.json(&["checkpoints", "a"]).as_array().unwrap().len(), 1);
    env.run_ok(&["delete", "--yes", "a"]);
    for (p, want, name) in [(b, "1,2", "b"), (c, "1,5", "c")] {
        sql(p, "DELETE FROM shop.h");
        env.json(&["reset", name]);
        assert_eq!(rows(p), want, "{name} after its source was deleted");
    }
    let kept = under(&dataset, "held");
    assert!(
        kept.iter().any(|d| d.starts_with("held/gone:"))
            && !kept.iter().any(|d| d.contains("held/a:")),
        "{kept:?}"
    );

    // Promote c (no copy), serve a new branch from it, delete c: the generation stays whole.
    let promoted = env.json(&["baseline", "create", "--from-branch", "c"]);
    assert_eq!(promoted["generation"], 2, "{promoted}");
    let d = port(&env.json(&["create", "d", "--baseline", "2"]));
    assert_eq!(rows(d), "1,5");
    env.run_ok(&["delete", "--yes", "c"]);
    env.run_ok(&["reset", "d"]);
    assert_eq!(rows(d), "1,5");
    let pruned = env.json(&["baseline", "prune"]);
    assert!(
        pruned[0]["action"].as_str().unwrap().contains("used by b"),
        "{pruned}"
    );

    // The last branches gone: generation 2 still holds the chain it came from (c's
    // datadir, which came from a's); once it goes, everything goes.
    env.run_ok(&["delete", "--yes", "b"]);
    env.run_ok(&["delete", "--yes", "d"]);
    assert_eq!(under(&dataset, "branches"), Vec::<String>::new());
    let kept = under(&dataset, "held");
    assert!(
        kept.iter().any(|d| d.ends_with("@promote:gen-000002")),
        "{kept:?}"
    );
    env.run_ok(&["baseline", "create", "--empty"]);
    let pruned = env.json(&["baseline", "prune"]);
    assert_eq!(pruned[0]["action"], "removed", "{pruned}");
    assert_eq!(pruned[1]["action"], "removed", "{pruned}");
    assert_eq!(under(&dataset, "held"), Vec::<String>::new());
    assert_eq!(under(&dataset, "generations"), Vec::<String>::new());
}
