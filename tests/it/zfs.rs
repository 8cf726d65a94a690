//! ZFS integration tests, run as root inside the OpenZFS guest (tests/harness/zfs-guest) with
//! DB_BRANCH_TEST_BACKEND=zfs and a pool on a file: the lifecycle of tests/lifecycle.rs on
//! `zfs clone` / `zfs rollback` / `zfs destroy`, plus what only ZFS has (generations held by
//! clones, space figures, metadata in user properties, and history where clones depend on
//! their origin snapshots).

use db_branch::testkit::{assert_success, checksum, port, sql, TestEnv};
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

/// `db-branch ARGS` against `env` with `input` on stdin; its output.
fn with_stdin(env: &TestEnv, args: &[&str], input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = env
        .command(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(input);
    drop(stdin);
    child.wait_with_output().unwrap()
}

#[test]
#[ignore = "needs root and OpenZFS: run inside tests/harness/zfs-guest by scripts/test"]
fn zfs_streams_between_two_pools_in_full_and_as_increments() {
    let a = TestEnv::with_baseline();
    // The receiving host's dataset is on the guest's second pool.
    let b = TestEnv::new("", "");
    let text = std::fs::read_to_string(&b.config).unwrap();
    let second = std::env::var("DB_BRANCH_TEST_ZPOOL2").unwrap_or_else(|_| "dbbpool2".into());
    std::fs::write(
        &b.config,
        text.replacen("dataset = \"dbbpool/", &format!("dataset = \"{second}/"), 1),
    )
    .unwrap();
    b.run_ok(&["init"]);
    assert!(b.dataset().unwrap().starts_with(&second));

    // In full through a stream directory.
    let streams = tempfile::tempdir().unwrap();
    let dir = format!("file:{}", streams.path().display());
    let full = a.json(&["baseline", "push", &dir]);
    assert_eq!(full[0]["parent"], serde_json::Value::Null, "{full}");
    let got = b.json(&["baseline", "pull", &dir]);
    assert_eq!(got[0]["generation"], 1, "{got}");
    let ids = |e: &TestEnv| {
        e.json(&["baseline", "list"])
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["identity"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&a), ids(&b), "the same snapshot (guid) on both pools");

    // A second generation with some rows changed, as an increment straight from `send` to
    // `receive` (what push and pull run on each side of ssh).
    let p = port(&a.json(&["create", "w"]));
    sql(
        p,
        "UPDATE shop.orders SET total = total + 1 WHERE id % 100 = 0",
    );
    a.run_ok(&["baseline", "create", "--from-branch", "w"]);
    let want = checksum(port(&a.json(&["create", "ref", "--baseline", "2"])));
    let stream = a
        .command(&["baseline", "send", "2", "--parent", "1"])
        .output()
        .unwrap();
    assert_success(&stream, "");
    let full_bytes = full[0]["bytes"].as_u64().unwrap();
    assert!(
        (stream.stdout.len() as u64) * 4 < full_bytes,
        "increment {} bytes, full {full_bytes}",
        stream.stdout.len()
    );
    // Cut short, it leaves nothing there; whole, it is generation 2.
    let cut = with_stdin(
        &b,
        &["baseline", "receive"],
        &stream.stdout[..stream.stdout.len() / 2],
    );
    assert!(!cut.status.success());
    let incoming = zfs(&[
        "list",
        "-H",
        "-o",
        "name",
        "-r",
        &format!("{}/incoming", b.dataset().unwrap()),
    ]);
    assert_eq!(incoming.lines().count(), 1, "only the parent: {incoming}");
    assert_eq!(b.json(&["baseline", "list"]).as_array().unwrap().len(), 1);
    let whole = with_stdin(&b, &["--json", "baseline", "receive"], &stream.stdout);
    assert_success(&whole, "");
    assert_eq!(ids(&a), ids(&b));
    let there = port(&b.json(&["create", "x", "--baseline", "2"]));
    assert_eq!(checksum(there), want, "the same data on the other pool");
    // And the next push through the directory is an increment on what both hold.
    let inc = a.json(&["baseline", "push", &dir]);
    assert_eq!(inc[0]["parent"], 1, "{inc}");
}

#[test]
#[ignore = "needs root and OpenZFS: run inside tests/harness/zfs-guest by scripts/test"]
fn zfs_and_btrfs_exchange_generations_as_file_level_copies() {
    let zfs_host = TestEnv::with_baseline();
    let btrfs_host = TestEnv::on_btrfs("", "");
    btrfs_host.run_ok(&["init"]);
    btrfs_host.run_ok(&[
        "baseline",
        "create",
        "--empty",
        "--sql",
        &db_branch::testkit::seed_sql(),
    ]);
    let want = checksum(port(&btrfs_host.json(&["create", "ref"])));
    // A btrfs send stream in a directory is no use to a ZFS pool: it says so.
    let streams = tempfile::tempdir().unwrap();
    let dir = format!("file:{}", streams.path().display());
    btrfs_host.run_ok(&["baseline", "push", &dir]);
    // (into a ZFS host with no baselines: the other already has a generation 1 of its own)
    let fresh = TestEnv::new("", "");
    fresh.run_ok(&["init"]);
    let no = fresh.run(&["baseline", "pull", &dir]);
    assert_eq!(
        no.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&no.stderr)
    );
    assert!(
        String::from_utf8_lossy(&no.stderr).contains("zfs pool"),
        "{}",
        String::from_utf8_lossy(&no.stderr)
    );
    // As files it goes: btrfs → ZFS through the directory.
    btrfs_host.run_ok(&["baseline", "push", &dir, "--as-files"]);
    let got = fresh.json(&["baseline", "pull", &dir]);
    assert_eq!(got[0]["files"], true, "{got}");
    assert_eq!(checksum(port(&fresh.json(&["create", "x"]))), want);
    // And ZFS → btrfs straight from `send --as-files` to `receive`.
    let out = zfs_host
        .command(&["baseline", "send", "1", "--as-files"])
        .output()
        .unwrap();
    assert_success(&out, "");
    let other = TestEnv::on_btrfs("", "");
    other.run_ok(&["init"]);
    let r = with_stdin(&other, &["--json", "baseline", "receive"], &out.stdout);
    assert_success(&r, "");
    let zfs_sums = checksum(port(&zfs_host.json(&["create", "z"])));
    assert_eq!(checksum(port(&other.json(&["create", "y"]))), zfs_sums);
}
