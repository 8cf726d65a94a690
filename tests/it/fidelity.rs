//! The baker's fidelity (root tiers, every server): a source with what real applications
//! have (tests/fixtures/fidelity*.sql: FULLTEXT and SPATIAL indexes, every byte value in
//! BLOBs, partitions, generated and invisible columns, CHECKs, foreign keys, views on
//! views, routines, triggers, events, MariaDB's sequences and system versioning) goes
//! through every bake path — tablespace, logical, clone, datadir, and dumps written by the
//! stock dump tools in their common option styles — and the branch is equal to the source
//! by that same stock tool's account of it, and every object works there.

use db_branch::testkit::{assert_success, server, sql, TestEnv};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn client(port: u16) -> Command {
    let mut c = Command::new(server().client);
    c.args(["--no-defaults", "-h127.0.0.1", "-uroot"])
        .args(db_branch::testkit::password_arg(port))
        .arg(format!("-P{port}"));
    c
}

/// Runs an SQL file with the stock client, as a user would load it.
fn load(port: u16, file: &Path) {
    run_script(port, &std::fs::read(file).unwrap());
}

/// Runs SQL (DELIMITER blocks and all) with the stock client.
fn run_script(port: u16, script: &[u8]) {
    let mut child = client(port)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(script).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_success(&out, "");
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn source() -> (TestEnv, u16) {
    let env = TestEnv::with_baseline();
    let port = env.json(&["create", "source"])["port"].as_u64().unwrap() as u16;
    load(port, &fixture("fidelity.sql"));
    if !server().mysql {
        load(port, &fixture("fidelity-mariadb.sql"));
    }
    (env, port)
}

/// The stock dump tool's output for the `fidelity` database: definitions of every object
/// and every row (binary as hex, in primary-key order, history too when `history`).
fn fingerprint(port: u16, history: bool) -> String {
    let s = server();
    let mut cmd = Command::new(&s.dump);
    cmd.args(["--no-defaults", "-h127.0.0.1", "-uroot"])
        .args(db_branch::testkit::password_arg(port))
        .arg(format!("-P{port}"))
        .args([
            "--skip-dump-date",
            "--skip-comments",
            "--hex-blob",
            "--order-by-primary",
            "--skip-extended-insert",
            "--routines",
            "--events",
            "--triggers",
            "--databases",
            "fidelity",
        ]);
    if s.mysql {
        cmd.arg("--set-gtid-purged=OFF");
    } else if history {
        cmd.arg("--dump-history");
    }
    let out = cmd.output().unwrap();
    assert_success(&out, "");
    let text = String::from_utf8(out.stdout).expect("hex dump is text");
    // MySQL shows a column's character set once its definition names the collation: a
    // table made from a dump or a SHOW CREATE shows it where the original did not (`mysql
    // < dump` does the same). The same column either way.
    text.lines()
        .map(db_branch::bake::verify::without_redundant_charset)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every kind of object does its job on the branch (after `fingerprint`: this writes).
/// `history`: the versioned table's past came along (dumps carry it when asked to).
fn works(port: u16, history: bool) {
    let q = |s: &str| sql(port, s);
    assert_eq!(
        q("SELECT id FROM fidelity.articles WHERE MATCH (title, body) AGAINST ('server')"),
        "2",
        "FULLTEXT search"
    );
    assert_eq!(
        q(
            "SELECT GROUP_CONCAT(id ORDER BY id) FROM fidelity.places WHERE \
           MBRContains(ST_GeomFromText('POLYGON((0 0, 0 10, 10 10, 10 0, 0 0))'), location)"
        ),
        "1,2",
        "spatial search"
    );
    assert_eq!(
        q("SELECT LENGTH(data), HEX(var) LIKE 'FFFE%' FROM fidelity.blobs WHERE id = 1"),
        "256\t1"
    );
    assert_eq!(
        q("SELECT LENGTH(data) FROM fidelity.blobs WHERE id = 2"),
        "2097152"
    );
    assert_eq!(
        q("SELECT COUNT(*) FROM fidelity.visits PARTITION (p2025)"),
        "1"
    );
    assert_eq!(
        q("SELECT full_name, name_len, note FROM fidelity.people WHERE id = 3"),
        "Émile Zoë\t8\tseen"
    );
    assert_eq!(
        q("SELECT COUNT(*) FROM fidelity.staff_names"),
        "2",
        "view on a view"
    );
    assert_eq!(q("SELECT fidelity.initials('Ada', 'Lovelace')"), "AL");
    assert_eq!(q("CALL fidelity.staff_count(@n); SELECT @n"), "2");
    assert_eq!(
        q("SELECT STATUS FROM information_schema.EVENTS WHERE EVENT_NAME = 'purge_audit'"),
        "DISABLED"
    );
    q("INSERT INTO fidelity.people (id, first, last) VALUES (10, 'New', 'Person')");
    assert_eq!(
        q("SELECT COUNT(*) FROM fidelity.audit WHERE what = 'added 10'"),
        "1",
        "the trigger fired"
    );
    for (bad, why) in [
        (
            "INSERT INTO fidelity.orders (person_id, total) VALUES (1, -1)",
            "CHECK",
        ),
        (
            "INSERT INTO fidelity.orders (person_id, total) VALUES (999, 1)",
            "foreign key",
        ),
        (
            "INSERT INTO fidelity.people (id, first, last) VALUES (11, 'Ann', 'Smith')",
            "binary-collation unique key",
        ),
    ] {
        let out = client(port).arg("-e").arg(bad).output().unwrap();
        assert!(!out.status.success(), "{why} did not hold: {bad}");
    }
    if !server().mysql {
        assert_eq!(
            q("SELECT COUNT(*) FROM fidelity.prices FOR SYSTEM_TIME ALL"),
            if history { "3" } else { "1" },
            "history"
        );
        q("INSERT INTO fidelity.invoices (amount) VALUES (1)");
        assert_eq!(
            q("SELECT MAX(id) > 1002 FROM fidelity.invoices"),
            "1",
            "the sequence goes on"
        );
    }
}

/// Fails at the first line where two fingerprints part, showing that line of each (short).
fn assert_same(got: &str, want: &str, what: &str) {
    if got == want {
        return;
    }
    let clip = |l: &str| l.chars().take(300).collect::<String>();
    let (g, w): (Vec<&str>, Vec<&str>) = (got.lines().collect(), want.lines().collect());
    let at = g
        .iter()
        .zip(&w)
        .position(|(a, b)| a != b)
        .unwrap_or(g.len().min(w.len()));
    panic!(
        "{what}: the branch differs from the source at line {}:\n  branch: {}\n  source: {}",
        at + 1,
        g.get(at).map_or("(end)".into(), |l| clip(l)),
        w.get(at).map_or("(end)".into(), |l| clip(l)),
    );
}

/// The persistent index statistics a server keeps for `fidelity` (without their times).
fn statistics(port: u16) -> String {
    sql(
        port,
        "SELECT table_name, n_rows, clustered_index_size, sum_of_other_index_sizes \
         FROM mysql.innodb_table_stats WHERE database_name = 'fidelity' ORDER BY table_name",
    ) + "\n"
        + &sql(
            port,
            "SELECT table_name, index_name, stat_name, stat_value, sample_size \
             FROM mysql.innodb_index_stats WHERE database_name = 'fidelity' \
             ORDER BY table_name, index_name, stat_name",
        )
}

/// Every table of `fidelity` analysed: statistics that stay as they are while no row
/// changes (the background recalculation after the fixture's load is then done with; a
/// branch that found none would compute the same for these small tables).
fn settle_statistics(port: u16) {
    let tables = sql(
        port,
        "SELECT GROUP_CONCAT(CONCAT('fidelity.`', TABLE_NAME, '`')) FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA = 'fidelity' AND ENGINE = 'InnoDB' \
         AND TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED')",
    );
    sql(port, &format!("ANALYZE TABLE {tables}"));
}

fn bake(env: &TestEnv, args: &[&str]) -> Value {
    let mut a = vec!["bake"];
    a.extend_from_slice(args);
    env.json(&a)
}

fn branch_of(env: &TestEnv, name: &str, baked: &Value) -> u16 {
    env.json(&[
        "create",
        name,
        "--baseline",
        &baked["generation"].to_string(),
    ])["port"]
        .as_u64()
        .unwrap() as u16
}

fn generations(env: &TestEnv) -> usize {
    env.json(&["baseline", "list"]).as_array().unwrap().len()
}

#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn live_paths_carry_everything_and_verify_checks_definitions_and_rows() {
    let (env, source) = source();
    let url = db_branch::testkit::source_url(source);
    let want = fingerprint(source, true);
    settle_statistics(source);
    // A figure no recalculation on the copy would arrive at: only carried, it is there.
    sql(
        source,
        "UPDATE mysql.innodb_table_stats SET n_rows = 4242 \
         WHERE database_name = 'fidelity' AND table_name = 'people'",
    );
    let want_statistics = statistics(source);
    assert!(
        want_statistics.contains("people\t4242\t"),
        "{want_statistics}"
    );

    // Tablespace: FULLTEXT and partitioned tables are copied as rows, and say so.
    let t = bake(
        &env,
        &["--from", &url, "--databases", "fidelity", "--verify"],
    );
    assert_eq!(t["path"], "tablespace", "{t}");
    assert_eq!(
        t["copied_as_rows"],
        serde_json::json!([
            "fidelity.articles (FULLTEXT index)",
            "fidelity.visits (partitioned)"
        ]),
        "{t}"
    );
    // On MySQL the small tables go as rows too, counted; MariaDB imports them.
    assert_eq!(t["small_as_rows"].is_u64(), server().mysql, "{t}");
    assert_eq!(t["verified_by"], "definitions and checksums", "{t}");
    let tables = if server().mysql { 8 } else { 10 };
    assert_eq!(t["verified_tables"], tables, "{t}");
    let l = bake(
        &env,
        &[
            "--from",
            &url,
            "--databases",
            "fidelity",
            "--via",
            "logical",
            "--jobs",
            "2",
            "--verify",
        ],
    );
    assert_eq!(l["path"], "logical", "{l}");
    let mut baked = vec![("tablespace", t), ("logical", l)];
    if server().mysql {
        sql(source, "INSTALL PLUGIN clone SONAME 'mysql_clone.so'");
        let c = bake(
            &env,
            &[
                "--from",
                &url,
                "--databases",
                "fidelity",
                "--via",
                "clone",
                "--verify",
            ],
        );
        assert_eq!(c["path"], "clone", "{c}");
        baked.push(("clone", c));
    }
    for (path, b) in &baked {
        let p = branch_of(&env, path, b);
        assert_same(&fingerprint(p, true), &want, path);
        // The branch plans with the source's statistics, whichever path made it.
        assert_same(
            &statistics(p),
            &want_statistics,
            &format!("{path}: index statistics"),
        );
        works(p, true);
    }

    // --verify is not a formality: a baked copy that lost a row is refused, naming it.
    let before = generations(&env);
    let out = env
        .command(&[
            "bake",
            "--from",
            &url,
            "--databases",
            "fidelity",
            "--verify",
        ])
        .env(
            "DB_BRANCH_TEST_BEFORE_VERIFY",
            "DELETE FROM fidelity.audit LIMIT 1",
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("fidelity.audit has 2 rows, the source 3"),
        "{err}"
    );
    assert_eq!(generations(&env), before, "nothing made");

    // A source written all through the bake: the copy and --verify see the same moment.
    run_script(
        source,
        b"CREATE DATABASE churn;
          DELIMITER ;;
          CREATE PROCEDURE churn.write(secs INT) BEGIN
            DECLARE until_t DATETIME DEFAULT SYSDATE() + INTERVAL secs SECOND;
            WHILE SYSDATE() < until_t DO
              INSERT INTO fidelity.audit VALUES (NOW(6), 'churn', 'write');
              UPDATE fidelity.people SET tags = IF(tags = 'vip', '', 'vip') WHERE id = 5;
            END WHILE;
          END;;
          DELIMITER ;",
    );
    for via in ["tablespace", "logical"] {
        let mut writer = client(source)
            .args(["-e", "CALL churn.write(6)"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        let b = bake(
            &env,
            &[
                "--from",
                &url,
                "--databases",
                "fidelity",
                "--via",
                via,
                "--verify",
            ],
        );
        assert_eq!(b["verified_by"], "definitions and checksums", "{via}: {b}");
        assert!(writer.wait().unwrap().success());
    }
    assert!(
        sql(
            source,
            "SELECT COUNT(*) FROM fidelity.audit WHERE who = 'churn'"
        )
        .parse::<u64>()
        .unwrap()
            > 100
    );
}

#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn a_clean_datadir_carries_everything() {
    let (env, source) = source();
    let want = fingerprint(source, true);
    env.run_ok(&["stop", "source"]);
    let dir = env.pool().join("branches/source");
    let d = bake(&env, &["--from", &format!("datadir:{}", dir.display())]);
    assert_eq!(d["path"], "datadir", "{d}");
    let p = branch_of(&env, "from-datadir", &d);
    assert_same(&fingerprint(p, true), &want, "datadir");
    works(p, true);
}

/// `tool` run against the source with `args`, its output written to `file` (compressed
/// by the extension).
fn dump(port: u16, tool: &Path, args: &[&str], file: &Path) {
    let out = Command::new(tool)
        .args(["--no-defaults", "-h127.0.0.1", "-uroot"])
        .args(db_branch::testkit::password_arg(port))
        .arg(format!("-P{port}"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} {args:?}: {}",
        tool.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = out.stdout;
    let name = file.to_string_lossy();
    let mut f = std::fs::File::create(file).unwrap();
    if name.ends_with(".gz") {
        let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        gz.write_all(&bytes).unwrap();
        gz.finish().unwrap();
    } else if name.ends_with(".zst") {
        f.write_all(&zstd::encode_all(&bytes[..], 3).unwrap())
            .unwrap();
    } else {
        f.write_all(&bytes).unwrap();
    }
}

#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn dumps_of_the_stock_tools_in_their_common_styles_load_whole() {
    let (env, source) = source();
    let s = server();
    let dir = env.root.join("dumps");
    std::fs::create_dir_all(&dir).unwrap();
    let objects = ["--routines", "--events", "--triggers"];
    let file = |name: &str| dir.join(name);

    // The defaults: CREATE DATABASE and USE, extended inserts, BLOBs written raw.
    let plain = file("plain.sql");
    let mut args = vec!["--databases", "fidelity"];
    args.extend(objects);
    dump(source, &s.dump, &args, &plain);
    assert!(
        std::str::from_utf8(&std::fs::read(&plain).unwrap()).is_err(),
        "the dump has raw binary bytes (not UTF-8)"
    );
    // One row per INSERT, hex BLOBs, one transaction, history; gzip.
    let styled = file("styled.sql.gz");
    let mut args = vec![
        "--databases",
        "fidelity",
        "--hex-blob",
        "--skip-extended-insert",
        "--single-transaction",
    ];
    args.extend(objects);
    if !s.mysql {
        args.push("--dump-history");
    }
    dump(source, &s.dump, &args, &styled);
    // One database, named without --databases: no CREATE DATABASE, no USE; zstd.
    let single = file("single.sql.zst");
    let mut args = vec!["fidelity"];
    args.extend(objects);
    dump(source, &s.dump, &args, &single);

    let from = |f: &Path| format!("file:{}", f.display());
    let before = generations(&env);
    let err = env.run_err(&["bake", "--from", &from(&single)], 2);
    assert!(
        err.contains("selects no database") && err.contains("--into"),
        "{err}"
    );
    assert!(!err.contains("MySqlError"), "{err}");
    let err = env.run_err(&["bake", "--from", &from(&plain), "--into", "other"], 2);
    assert!(err.contains("chooses its own databases"), "{err}");
    assert_eq!(generations(&env), before, "refused dumps make nothing");

    for (name, f, extra, history) in [
        ("plain", &plain, None, false),
        ("styled", &styled, None, !s.mysql),
        ("single", &single, Some("fidelity"), false),
    ] {
        let mut args = vec!["--from".to_string(), from(f)];
        if let Some(db) = extra {
            args.extend(["--into".to_string(), db.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let b = bake(&env, &args);
        assert_eq!(b["path"], "dump", "{b}");
        let p = branch_of(&env, name, &b);
        // A single-database dump does not say the database's own default character set.
        let without_create_database = |f: String| -> String {
            f.lines()
                .filter(|l| extra.is_none() || !l.starts_with("CREATE DATABASE"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_same(
            &without_create_database(fingerprint(p, history)),
            &without_create_database(fingerprint(source, history)),
            name,
        );
        works(p, history);
    }
}

#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn a_dump_the_server_refuses_fails_naming_the_statement() {
    let (env, source) = source();
    let bad = env.root.join("bad.sql");
    // A hand-made dump: the error is on statement 4, line 5.
    std::fs::write(
        &bad,
        "CREATE DATABASE d;\nUSE d;\n-- a comment\nCREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB;\n\
         INSERT INTO t VALUES (1, NULL);\n",
    )
    .unwrap();
    let before = generations(&env);
    let err = env.run_err(&["bake", "--from", &format!("file:{}", bad.display())], 1);
    assert!(err.contains("statement 4 (line 5)"), "{err}");
    assert!(
        err.contains("the statement: INSERT INTO t VALUES (1, NULL)"),
        "{err}"
    );
    assert!(err.contains("ERROR 1048"), "{err}");
    assert!(!err.contains("MySqlError"), "{err}");
    assert_eq!(generations(&env), before);

    // The other family's dump tool, where it can reach this server: MariaDB's dumps write
    // generated columns' values, which MySQL refuses, as it does under `mysql < dump`.
    if server().mysql {
        let f = env.root.join("mariadb-dump.sql");
        dump(
            source,
            Path::new("/usr/bin/mariadb-dump"),
            &["--databases", "fidelity"],
            &f,
        );
        let err = env.run_err(&["bake", "--from", &format!("file:{}", f.display())], 1);
        assert!(
            err.contains("generated column") && err.contains("the statement: INSERT INTO `people`"),
            "{err}"
        );
        assert_eq!(generations(&env), before);
    }
}
