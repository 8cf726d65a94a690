//! Root integration tests of `migrate-check` on a baseline with a 300,000-row table, real
//! mariadbd with performance_schema statement history.

use db_branch::testkit::{assert_success, checksum, TestEnv};
use serde_json::Value;

/// A migration command: one SQL statement through the mariadb client, using the
/// connection details migrate-check puts in the environment.
fn migration(sql: &str) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "mariadb --no-defaults -h \"$MYSQL_HOST\" -P \"$MYSQL_PORT\" -u \"$MYSQL_USER\" shop -e \"{sql}\""
        ),
    ]
}

fn check(env: &TestEnv, flags: &[&str], command: &[String]) -> std::process::Output {
    let mut args: Vec<&str> = vec!["--json", "migrate-check"];
    args.extend_from_slice(flags);
    args.push("--");
    args.extend(command.iter().map(String::as_str));
    env.run(&args)
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn instant_change_is_in_place_and_a_type_change_is_a_copy_that_fails_a_tight_limit() {
    let env = TestEnv::with_sample(TestEnv::new("", ""), 1);
    let other = env.json(&["create", "other"])["port"].as_u64().unwrap() as u16;
    let other_sum = checksum(other);

    let out = check(
        &env,
        &["--max-statement", "30s"],
        &migration("ALTER TABLE order_items ADD COLUMN note VARCHAR(20), ALGORITHM=INSTANT"),
    );
    assert_success(&out, "");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &report["statements"][0];
    assert_eq!(
        report["statements"].as_array().unwrap().len(),
        1,
        "{report}"
    );
    assert_eq!(s["table"], "shop.order_items");
    assert_eq!(s["change"], "instant", "{report}");
    assert!(s["duration_ms"].as_f64().unwrap() < 2000.0, "{s}");
    assert!(s["table_rows"].as_u64().unwrap() > 200_000, "{s}");
    assert_eq!(report["rebuilt_tables"], serde_json::json!([]));
    assert_eq!(report["kept"], false);

    let out = check(
        &env,
        &["--max-statement", "1ms"],
        &migration("ALTER TABLE order_items MODIFY quantity BIGINT UNSIGNED NOT NULL"),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("MODIFY quantity") && err.contains("ALGORITHM"),
        "{err}"
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &report["statements"][0];
    assert!(
        s["change"] == "copy" || s["change"] == "rebuild",
        "{report}"
    );
    assert!(s["duration_ms"].as_f64().unwrap() > 1.0, "{s}");
    assert_eq!(s["violations"].as_array().unwrap().len(), 1, "{s}");
    assert_eq!(
        report["rebuilt_tables"],
        serde_json::json!(["shop.order_items"])
    );

    // Markdown for a pull-request comment.
    let md = env.run(&[
        "migrate-check",
        "--format",
        "markdown",
        "--",
        "sh",
        "-c",
        "mariadb --no-defaults -h \"$MYSQL_HOST\" -P \"$MYSQL_PORT\" -u root shop -e 'ALTER TABLE orders ADD INDEX by_total (total)'",
    ]);
    assert_success(&md, "");
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(
        md.contains("| # | STATEMENT") && md.contains("in place (index build)"),
        "{md}"
    );

    // The baseline and other branches are untouched; the throw-away branches are gone.
    assert_eq!(env.names(), ["other"]);
    assert_eq!(checksum(other), other_sum);
    let gens = env.json(&["baseline", "list"]);
    assert_eq!(gens.as_array().unwrap().len(), 1);
    assert_eq!(gens[0]["branches"], 1);
    assert_eq!(env.server_pids().len(), 1);
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn a_failing_migration_fails_with_its_output_shown_and_leaves_nothing() {
    let env = TestEnv::with_sample(TestEnv::new("", ""), 1);
    let out = check(
        &env,
        &[],
        &[
            "sh".into(),
            "-c".into(),
            "echo boom-from-migration >&2; exit 3".into(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("boom-from-migration"), "{err}");
    assert!(err.contains("exit 3"), "{err}");
    assert!(env.names().is_empty());
    assert!(env.server_pids().is_empty());
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn a_named_existing_branch_is_reset_checked_and_kept() {
    let env = TestEnv::with_sample(TestEnv::new("", ""), 1);
    let port = env.json(&["create", "pr-9"])["port"].as_u64().unwrap() as u16;
    db_branch::testkit::sql(port, "DROP TABLE shop.reviews");
    let out = check(
        &env,
        &["--branch", "pr-9"],
        &migration("UPDATE orders SET total = total + 1 WHERE id <= 5000"),
    );
    assert_success(&out, "");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["kept"], true);
    assert_eq!(report["statements"][0]["rows_affected"], 5000);
    assert_eq!(env.names(), ["pr-9"]);
    // It was reset first: the dropped table is back.
    assert_eq!(
        db_branch::testkit::sql(port, "SHOW TABLES FROM shop LIKE 'reviews'"),
        "reviews"
    );
}
