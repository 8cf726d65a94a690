//! Git-style history on real storage and servers: branches made from running branches
//! (crash-consistent and clean), checkpoints and `reset --to`, a branch promoted to a
//! baseline, lineage, deleting a source, and `diff`.

use db_branch::testkit::{sql, TestEnv};
use serde_json::Value;

fn port(v: &Value) -> u16 {
    v["port"].as_u64().unwrap() as u16
}

fn sums(p: u16) -> String {
    sql(p, "CHECKSUM TABLE shop.customers, shop.orders, shop.t")
}

/// Whether the branch's server ran crash recovery. Its error log must be there to say: a
/// log that cannot be read fails the test, never reads as "no recovery".
fn recovered(env: &TestEnv, branch: &str) -> bool {
    let path = env.error_log(branch);
    let log = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    assert!(
        !log.trim().is_empty(),
        "{} is empty: the server under test logs its start there",
        path.display()
    );
    db_branch::server::crash_recovery_line(&log).is_some()
}

#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn branches_from_branches_checkpoints_promote_and_lineage() {
    let env = TestEnv::with_baseline();
    let src = port(&env.json(&["create", "src"]));
    sql(
        src,
        &format!(
            "CREATE TABLE shop.t (i INT PRIMARY KEY, v VARCHAR(20)); \
             INSERT INTO shop.t SELECT seq, 'x' FROM {}",
            db_branch::testkit::seq(1000)
        ),
    );
    let src_sums = sums(src);

    // From the running source, without stopping it: every committed row, crash recovery.
    let copy = env.json(&["create", "copy", "--from", "src"]);
    assert_eq!(copy["parent"]["name"], "src", "{copy}");
    assert_eq!(copy["parent"]["clean"], false);
    let cp = port(&copy);
    assert_eq!(sums(cp), src_sums);
    assert!(
        recovered(&env, "copy"),
        "a crash-consistent copy runs recovery"
    );
    assert_eq!(env.json(&["status", "src"])["state"], "running");
    // --clean: the source is stopped for the copy and serves again; no recovery.
    let clean = env.json(&["create", "clean", "--from", "src", "--clean"]);
    assert_eq!(clean["parent"]["clean"], true);
    assert_eq!(sums(port(&clean)), src_sums);
    assert!(
        !recovered(&env, "clean"),
        "a clean copy starts without recovery"
    );
    assert_eq!(sql(src, "SELECT COUNT(*) FROM shop.t"), "1000");
    // Re-running the same create is a no-op; another source for the same name is refused.
    assert_eq!(
        env.json(&["create", "copy", "--from", "src"])["existed"],
        true
    );
    env.run_err(&["create", "copy", "--from", "clean"], 2);

    // reset goes back to the moment it was made from.
    sql(cp, "DELETE FROM shop.t WHERE i <= 500");
    env.run_ok(&["reset", "copy"]);
    assert_eq!(sums(cp), src_sums);

    // Checkpoints: clean and crash-consistent; reset --to returns exactly to each.
    sql(cp, "INSERT INTO shop.t VALUES (5000, 'seeded')");
    let seeded_sums = sums(cp);
    let made = env.json(&["checkpoint", "copy", "seeded", "--clean"]);
    assert_eq!(made["tag"], "seeded");
    assert_eq!(made["clean"], true);
    sql(
        cp,
        "UPDATE shop.t SET v = 'later'; INSERT INTO shop.t VALUES (6000, 'c1')",
    );
    let c1_sums = sums(cp);
    assert_eq!(env.json(&["checkpoint", "copy"])["tag"], "c1");
    sql(cp, "DELETE FROM shop.t");
    env.json(&["reset", "copy", "--to", "seeded"]);
    assert_eq!(sums(cp), seeded_sums, "back to the clean checkpoint");
    env.json(&["reset", "copy", "--to", "c1"]);
    assert_eq!(sums(cp), c1_sums, "back to the crash-consistent checkpoint");
    let listed = env.json(&["checkpoints", "copy"]);
    let tags: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["tag"].as_str().unwrap())
        .collect();
    assert_eq!(tags, ["seeded", "c1"]);
    env.run_err(&["reset", "copy", "--to", "nope"], 2);
    env.run_err(&["checkpoint", "copy", "seeded"], 2);
    // A branch from a checkpoint.
    let from_cp = port(&env.json(&["create", "from-seeded", "--from", "copy@seeded"]));
    assert_eq!(sums(from_cp), seeded_sums);

    // Promote: the branch's data as the next generation, served by new branches.
    let promoted = env.json(&["baseline", "create", "--from-branch", "copy"]);
    assert_eq!(promoted["generation"], 2, "{promoted}");
    let p = port(&env.json(&["create", "promoted", "--baseline", "2"]));
    assert_eq!(sums(p), c1_sums);
    assert!(!recovered(&env, "promoted"), "a promoted baseline is clean");

    // Lineage, and deleting a source: its children keep their data.
    let tree = env.json(&["list", "--tree"]);
    let gen1 = &tree["generations"][0];
    let src_node = gen1["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "src")
        .expect("src under gen-000001");
    let kids: Vec<&str> = src_node["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(kids, ["clean", "copy"], "{tree}");
    env.run_ok(&["delete", "src", "--yes"]);
    env.run_ok(&["delete", "copy", "--yes"]);
    assert_eq!(sums(port(&clean)), src_sums);
    assert_eq!(sums(from_cp), seeded_sums);
    env.run_ok(&["reset", "clean"]);
    assert_eq!(sums(port(&clean)), src_sums);
    match env.dataset() {
        // On ZFS the checkpoint from-seeded came from is kept (renamed aside) for it.
        Some(ds) => {
            let out = std::process::Command::new("zfs")
                .args(["list", "-H", "-o", "name", "-t", "all", "-r", &ds])
                .output()
                .unwrap();
            let list = String::from_utf8_lossy(&out.stdout);
            assert!(
                !list.contains("/branches/copy") && !list.contains("/held/copy:"),
                "checkpoints go with their branch: {list}"
            );
        }
        None => assert!(
            !env.root.join("pool/branches/copy@cp-seeded").exists(),
            "checkpoints go with their branch"
        ),
    }
}

#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn diff_finds_schema_and_row_changes_and_passes_on_identical_branches() {
    let env = TestEnv::with_baseline();
    env.json(&["create", "a"]);
    let b = port(&env.json(&["create", "b", "--from", "a"]));
    let same = env.run(&["--json", "diff", "a", "b", "--data"]);
    assert_eq!(
        same.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&same.stderr)
    );
    let v: Value = serde_json::from_slice(&same.stdout).unwrap();
    assert_eq!(v["same"], true, "{v}");
    assert!(v["tables_compared"].as_u64().unwrap() >= 2);

    // A migration on b: a column added, an index dropped, rows deleted.
    let index = sql(
        b,
        "SELECT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'shop' \
         AND TABLE_NAME = 'orders' AND INDEX_NAME <> 'PRIMARY' LIMIT 1",
    );
    assert!(!index.is_empty(), "the seed has a secondary index");
    sql(
        b,
        &format!(
            "ALTER TABLE shop.orders ADD COLUMN note VARCHAR(40) NULL, DROP INDEX `{index}`; \
             DELETE FROM shop.customers WHERE id <= 10"
        ),
    );
    let out = env.run(&["--json", "diff", "a", "b", "--data"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let changes: Vec<(String, String, String)> = v["schema"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap().to_string(),
                d["object"].as_str().unwrap().to_string(),
                d["change"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        changes.contains(&("column".into(), "shop.orders.note".into(), "added".into())),
        "{changes:?}"
    );
    assert!(
        changes.contains(&(
            "index".into(),
            format!("shop.orders.{index}"),
            "removed".into()
        )),
        "{changes:?}"
    );
    let rows = v["data"].as_array().unwrap();
    let customers = rows
        .iter()
        .find(|t| t["table"] == "shop.customers")
        .expect("customers differ");
    assert_eq!(
        customers["a"]["rows"].as_u64().unwrap() - customers["b"]["rows"].as_u64().unwrap(),
        10
    );
    // The human report says the same, and a checkpoint or a generation can be a side.
    let text = env.run(&["diff", "a", "b"]);
    let report = String::from_utf8_lossy(&text.stdout);
    assert!(report.contains("+ column shop.orders.note"), "{report}");
    env.run_ok(&["checkpoint", "b", "migrated"]);
    let out = env.run(&["diff", "b@migrated", "b"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = env.run(&["diff", "gen-000001", "a"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The temporary branches that served them are gone.
    let names = env.names();
    assert_eq!(names, ["a", "b"], "{names:?}");
}
