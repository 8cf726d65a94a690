//! Root integration tests of the baker against real MariaDB servers: the source is a live
//! branch of the sample schema (a real server on this host, so its files can be reached).

use db_branch::testkit::{checksum, port, sql, TestEnv};
use serde_json::Value;

/// A source branch on a tenth of the sample: these tests check what comes along, not how
/// fast (the benchmarks measure the baker on the full size).
fn source_env() -> (TestEnv, u16) {
    source_on(TestEnv::with_sample_tenth(TestEnv::new("", "")))
}

/// The same on the full sample: long enough a copy to be interrupted half-way.
fn full_source_env() -> (TestEnv, u16) {
    source_on(TestEnv::with_sample(TestEnv::new("", ""), 1))
}

fn source_on(env: TestEnv) -> (TestEnv, u16) {
    let port = env.json(&["create", "source"])["port"].as_u64().unwrap() as u16;
    // Everything that must come along besides tables.
    sql(
        port,
        "USE shop; \
         CREATE VIEW big_orders AS SELECT id, total FROM orders WHERE total > 900; \
         CREATE VIEW top_big AS SELECT * FROM big_orders WHERE total > 990; \
         CREATE PROCEDURE order_count(OUT n INT) SELECT COUNT(*) INTO n FROM orders; \
         CREATE TRIGGER stamp BEFORE INSERT ON audit_events FOR EACH ROW SET NEW.kind = LOWER(NEW.kind); \
         CREATE USER 'app'@'%' IDENTIFIED BY 'app-pass'; \
         GRANT SELECT, INSERT ON shop.* TO 'app'@'%'; \
         CREATE DATABASE crm; CREATE TABLE crm.notes (id INT PRIMARY KEY, body TEXT); \
         INSERT INTO crm.notes VALUES (1, 'hello')",
    );
    (env, port)
}

/// The port of a new branch `name` of baseline generation `generation`.
fn branch_of(env: &TestEnv, name: &str, generation: &str) -> u16 {
    port(&env.json(&["create", name, "--baseline", generation]))
}

fn generations(env: &TestEnv) -> usize {
    env.json(&["baseline", "list"]).as_array().unwrap().len()
}

fn bake(env: &TestEnv, args: &[&str]) -> Value {
    let mut a = vec!["bake"];
    a.extend_from_slice(args);
    env.json(&a)
}

/// Views, routines, triggers, other databases and indexes came along; the source's
/// accounts only when asked (`with_users`).
fn assert_carried(port: u16, with_users: bool) {
    assert_eq!(
        sql(port, "SELECT COUNT(*) FROM shop.top_big"),
        sql(port, "SELECT COUNT(*) FROM shop.orders WHERE total > 990")
    );
    sql(port, "CALL shop.order_count(@n)");
    assert_eq!(
        sql(
            port,
            "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_NAME = 'stamp'"
        ),
        "1"
    );
    if with_users {
        assert_eq!(
            sql(port, "SELECT COUNT(*) FROM mysql.user WHERE User = 'app'"),
            "1"
        );
        assert!(sql(port, "SHOW GRANTS FOR 'app'@'%'").contains("SELECT, INSERT"));
    } else {
        assert_eq!(
            sql(port, "SELECT COUNT(*) FROM mysql.user WHERE User = 'app'"),
            "0",
            "no source account without --with-users"
        );
    }
    assert_eq!(sql(port, "SELECT body FROM crm.notes"), "hello");
    // Secondary indexes are there after a logical load too.
    assert!(sql(port, "SHOW INDEX FROM shop.orders").contains("status_placed"));
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn live_source_by_tablespace_and_by_logical_copy_with_verify() {
    let (env, source) = source_env();
    let url = db_branch::testkit::source_url(source);
    let old = branch_of(&env, "old", "1");
    let old_sum = checksum(old);
    sql(
        source,
        "UPDATE shop.orders SET total = total + 1 WHERE id <= 10",
    );
    let want = checksum(source);

    let t = bake(&env, &["--from", &url, "--verify", "--with-users"]);
    assert_eq!(t["path"], "tablespace", "{t}");
    assert_eq!(t["generation"], 2);
    assert_eq!(t["statistics"], "source", "{t}");
    // 30 shop tables and crm.notes.
    assert_eq!(t["verified_tables"], 31, "{t}");
    let l = bake(
        &env,
        &["--from", &url, "--verify", "--logical", "--jobs", "2"],
    );
    assert_eq!(l["path"], "logical", "{l}");
    assert_eq!(l["generation"], 3);
    assert_eq!(l["statistics"], "source", "{l}");
    assert!(l["rows"].as_u64().unwrap() > 40_000, "{l}");
    let phases: Vec<&str> = l["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(phases.contains(&"add secondary indexes"), "{phases:?}");

    for (gen, with_users) in [("2", true), ("3", false)] {
        let name = format!("from-{gen}");
        let p = branch_of(&env, &name, gen);
        assert_eq!(checksum(p), want, "generation {gen}");
        assert_carried(p, with_users);
    }
    // Branches of the old generation are untouched.
    assert_eq!(checksum(old), old_sum);
    assert_eq!(env.json(&["status", "old"])["baseline"], 1);

    // More tables than the source keeps open: no single FLUSH TABLES … FOR EXPORT of all
    // of them (it would hold every one open at once), but batches of 5 under a global read
    // lock, all from one moment (--verify compares with a transaction opened under it).
    //
    // And as a user who may read the baked databases and their routines but not the
    // source's own statistics (mysql.innodb_table_stats): the one-off server computes the
    // baseline's.
    sql(
        source,
        &format!(
            "CREATE USER 'narrow'@'127.0.0.1' IDENTIFIED BY 'narrow-pass'; \
             GRANT SELECT, LOCK TABLES, SHOW VIEW, TRIGGER, EXECUTE ON shop.* TO 'narrow'@'127.0.0.1'; \
             GRANT SELECT, LOCK TABLES ON crm.* TO 'narrow'@'127.0.0.1'; \
             GRANT RELOAD ON *.* TO 'narrow'@'127.0.0.1'; {}",
            if db_branch::testkit::server().mysql {
                // MySQL shows it to its definer or to holders of SHOW_ROUTINE.
                "GRANT SHOW_ROUTINE ON *.* TO 'narrow'@'127.0.0.1'"
            } else {
                // MariaDB, to its owner or to readers of mysql.proc.
                "GRANT SELECT ON mysql.proc TO 'narrow'@'127.0.0.1'"
            }
        ),
    );
    let narrow = format!("mysql://narrow:narrow-pass@127.0.0.1:{source}");
    sql(source, "SET GLOBAL table_open_cache = 10");
    let b = bake(
        &env,
        &["--from", &narrow, "--via", "tablespace", "--verify"],
    );
    sql(source, "SET GLOBAL table_open_cache = DEFAULT");
    assert_eq!(b["statistics"], "analyzed", "{b}");
    assert_eq!(b["path"], "tablespace", "{b}");
    // On MySQL the small tables go as rows (tablespace::SMALL_AS_ROWS_BYTES): the rest are
    // exported, 5 a batch, under the same global lock.
    let small = b["small_as_rows"].as_u64().unwrap_or(0);
    assert_eq!(small > 0, db_branch::testkit::server().mysql, "{b}");
    assert_eq!(
        b["export_batches"].as_u64().unwrap_or(0),
        (31 - small).div_ceil(5),
        "31 tables, {small} as rows, 5 a batch: {b}"
    );
    assert_eq!(b["verified_tables"], 31, "{b}");
    assert_eq!(generations(&env), 4);
    let p = branch_of(&env, "from-4", "4");
    assert_carried(p, false);
    assert_eq!(
        sql(
            p,
            "SELECT COUNT(*) FROM mysql.innodb_table_stats WHERE database_name IN ('shop', 'crm')"
        ),
        "31",
        "every table has the statistics ANALYZE wrote"
    );

    // A statistics row edited by hand under a permissive sql_mode (last_update set to
    // zero, which a strict server refuses) does not stop the copy: the bake writes under its
    // own lenient session. (What the time becomes differs: zero on MariaDB 10.11 and MySQL,
    // the time of the write on MariaDB 11.8, whose FROM_UNIXTIME(0) is NULL.)
    sql(
        source,
        "SET SESSION sql_mode = ''; \
         UPDATE mysql.innodb_table_stats SET last_update = 0, n_rows = 4242 \
         WHERE database_name = 'crm' AND table_name = 'notes'",
    );
    let z = bake(&env, &["--from", &url]);
    assert_eq!(z["statistics"], "source", "{z}");
    let p = branch_of(&env, "from-5", "5");
    assert_eq!(
        sql(
            p,
            "SELECT n_rows FROM mysql.innodb_table_stats \
             WHERE database_name = 'crm' AND table_name = 'notes'"
        ),
        "4242"
    );

    // The one-off server refusing the source's rows (a failpoint: no server a test can set
    // up refuses them, their tables are defined alike on every supported series): the bake
    // goes on with the one-off server's own figures for every table, says why, and leaves
    // nothing of the copy it started.
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let out = env
        .command(&["--json", "bake", "--from", &url])
        .env(db_branch::failpoint::ENV, "bake:statistics-refused")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["statistics"], "analyzed", "{r}");
    assert!(
        stderr.contains("index statistics were computed here, not copied")
            && stderr.contains("writing the source's statistics into mysql.innodb_"),
        "the note says what was refused: {stderr}"
    );
    let p = branch_of(&env, "from-6", "6");
    assert_eq!(
        sql(
            p,
            &format!(
                "SELECT COUNT(*) FROM mysql.innodb_table_stats \
                 WHERE database_name IN ('shop', 'crm') AND UNIX_TIMESTAMP(last_update) >= {before}"
            )
        ),
        "31",
        "every table's statistics written by ANALYZE"
    );
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn dump_files_plain_and_compressed_with_masking() {
    let (env, source) = source_env();
    let dump = env.root.join("shop.sql");
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} {2} --databases shop crm --routines --triggers > {1} && gzip -k {1}",
            db_branch::testkit::server().dump.display(),
            dump.display(),
            db_branch::testkit::login(source)
        ))
        .status()
        .unwrap();
    assert!(status.success());
    let mask = env.root.join("mask.sql");
    std::fs::write(&mask, "UPDATE shop.customers SET email = CONCAT('user', id, '@masked.invalid'), name = 'Masked';\n").unwrap();

    let plain = bake(&env, &["--from", &format!("file:{}", dump.display())]);
    assert_eq!(plain["path"], "dump");
    let gz = bake(
        &env,
        &[
            "--from",
            &format!("file:{}.gz", dump.display()),
            "--mask-sql",
            mask.to_str().unwrap(),
        ],
    );
    assert_eq!(gz["masked"], true);

    let p = branch_of(&env, "plain", "2");
    assert_eq!(checksum(p), checksum(source));
    assert!(sql(p, "SHOW INDEX FROM shop.customers").contains("country_created"));
    let m = branch_of(&env, "masked", "3");
    assert_eq!(
        sql(
            m,
            "SELECT COUNT(*) FROM shop.customers WHERE email NOT LIKE '%@masked.invalid'"
        ),
        "0"
    );
    assert_eq!(sql(m, "SELECT COUNT(*) FROM shop.orders"), "10000");
    // The source keeps its real data.
    assert_eq!(
        sql(source, "SELECT email FROM shop.customers WHERE id = 1"),
        "user1@example.com"
    );
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn bad_sources_fail_clearly_and_an_interrupted_bake_leaves_nothing() {
    let (env, source) = full_source_env();
    let url = db_branch::testkit::source_url(source);
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--from".into(), "mysql://root@127.0.0.1:1".into()],
            "cannot reach the source",
        ),
        (
            vec![
                "--from".into(),
                format!("mysql://nobody:wrong@127.0.0.1:{source}"),
            ],
            // MariaDB refuses them; MySQL asks for a plugin nobody can satisfy.
            "check the user and password",
        ),
        (
            vec![
                "--from".into(),
                url.clone(),
                "--databases".into(),
                "nope".into(),
            ],
            "database nope does not exist",
        ),
    ];
    for (args, says) in cases {
        let mut a = vec!["bake"];
        a.extend(args.iter().map(String::as_str));
        let out = env.run(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{a:?}: {err}");
        assert_eq!(generations(&env), 1, "{a:?}");
    }
    sql(
        source,
        "CREATE TABLE shop.legacy (id INT PRIMARY KEY) ENGINE=MyISAM",
    );
    let out = env.run(&["bake", "--from", &url]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("shop.legacy") && err.contains("MyISAM"),
        "{err}"
    );
    sql(source, "DROP TABLE shop.legacy");

    // Interrupted by SIGTERM part-way through a logical copy.
    let child = std::process::Command::new(db_branch::testkit::bin())
        .args(["bake", "--from", &url, "--logical", "--jobs", "1"])
        .env("DB_BRANCH_CONFIG", &env.config)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until it is copying rows.
    let work = env.root.join("work");
    for _ in 0..400 {
        if work.exists() && env.server_pids().len() > 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "the bake should have stopped");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("interrupted"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        generations(&env),
        1,
        "no generation from an interrupted bake"
    );
    assert_eq!(env.server_pids().len(), 1, "only the source runs");
    let doctor = env.json(&["doctor"]);
    assert_eq!(doctor["findings"], serde_json::json!([]), "{doctor}");
}

#[test]
#[ignore = "needs root, btrfs and MySQL 9.7; run by scripts/test on its MySQL tier only"]
fn mysql_clone_path_copies_the_whole_instance() {
    // CLONE is MySQL's: scripts/test runs this on the MySQL tier and leaves it out of the
    // MariaDB ones (`--skip`), so it never passes without having checked anything.
    assert!(
        db_branch::testkit::server().mysql,
        "this test is of MySQL's CLONE: run it with DB_BRANCH_TEST_SERVER=mysql-9.7"
    );
    let (env, source) = source_env();
    let url = db_branch::testkit::source_url(source);
    // Without the plugin on the source, --via clone says why; the automatic choice falls
    // back to the tablespace path (the source's files are on this host).
    let err = env.run_err(&["bake", "--from", &url, "--via", "clone"], 2);
    assert!(err.contains("clone plugin"), "{err}");
    sql(source, "INSTALL PLUGIN clone SONAME 'mysql_clone.so'");
    let want = checksum(source);
    let c = bake(&env, &["--from", &url, "--via", "clone"]);
    assert_eq!(c["path"], "clone", "{c}");
    let p = env.json(&[
        "create",
        "cloned",
        "--baseline",
        &c["generation"].to_string(),
    ])["port"]
        .as_u64()
        .unwrap() as u16;
    assert_eq!(checksum(p), want);
    assert_carried(p, false);
    // The branch's server is db-branch's: its logs show no crash recovery on later starts.
    let err = env.run_err(
        &[
            "bake",
            "--from",
            &url,
            "--via",
            "clone",
            "--databases",
            "nope",
        ],
        2,
    );
    assert!(err.contains("nope"), "{err}");
}

/// Every file under `dir` (recursively, as bytes) that contains `needle`.
pub(crate) fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<String> {
    let finder = memchr::memmem::Finder::new(needle);
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(meta) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(p);
            } else if meta.is_file() && p.extension().is_none_or(|e| e != "img") {
                // (The pool's image is read through its mount instead.)
                if let Ok(bytes) = std::fs::read(&p) {
                    if finder.find(&bytes).is_some() {
                        hits.push(p.display().to_string());
                    }
                }
            }
        }
    }
    hits
}

#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn the_source_password_never_shows_in_argv_files_logs_or_errors() {
    // The small seed schema: this test is about where the password goes, not rows.
    let env = TestEnv::with_baseline();
    let source = env.json(&["create", "source"])["port"].as_u64().unwrap() as u16;
    // An account of the source's own, with a password nothing else contains.
    let canary = format!("Canary{}x{}", std::process::id(), rand_suffix());
    sql(
        source,
        &format!(
            "CREATE USER 'baker'@'127.0.0.1' IDENTIFIED BY '{canary}'; \
             GRANT ALL PRIVILEGES ON *.* TO 'baker'@'127.0.0.1'"
        ),
    );
    let url = format!("mysql://baker@127.0.0.1:{source}");
    let pw_file = env.root.with_extension("pw");
    std::fs::write(&pw_file, format!("{canary}\n")).unwrap();
    let mut stderr_all = String::new();
    for (how, args) in [
        ("MYSQL_PWD", vec!["bake", "--from", &url, "--verify"]),
        (
            "--password-file",
            vec![
                "bake",
                "--from",
                &url,
                "--via",
                "logical",
                "--password-file",
                pw_file.to_str().unwrap(),
            ],
        ),
    ] {
        let mut cmd = env.command(&args);
        if how == "MYSQL_PWD" {
            cmd.env("MYSQL_PWD", &canary);
        }
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The process list, while the bake runs (every process's full argv).
        let mut looked = 0;
        while child.try_wait().unwrap().is_none() && looked < 3000 {
            for p in std::fs::read_dir("/proc").unwrap().flatten() {
                if let Ok(argv) = std::fs::read(p.path().join("cmdline")) {
                    assert!(
                        !argv.windows(canary.len()).any(|w| w == canary.as_bytes()),
                        "{how}: the password is in the argv of {}: {}",
                        p.path().display(),
                        String::from_utf8_lossy(&argv).replace('\0', " ")
                    );
                }
            }
            looked += 1;
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{how}: {err}");
        assert!(
            looked > 0,
            "{how}: the bake ended before the process list was read"
        );
        stderr_all.push_str(&err);
        stderr_all.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    // An error about a source with the password in its URL does not repeat it.
    let out = env.run(&[
        "bake",
        "--from",
        &format!("mysql://baker:{canary}@127.0.0.1:1"),
    ]);
    assert!(!out.status.success());
    stderr_all.push_str(&String::from_utf8_lossy(&out.stderr));
    assert!(
        !stderr_all.contains(&canary),
        "the password is in the output:\n{stderr_all}"
    );
    let _ = std::fs::remove_file(&pw_file);
    // Nothing db-branch wrote under its root holds it: records, lock notes, logs, option
    // files, baselines (the source's datadir keeps only the account's hash).
    let hits = files_containing(&env.root, canary.as_bytes());
    assert!(hits.is_empty(), "the password is in {hits:?}");
    // Nor the journal, under systemd.
    if db_branch::testkit::service() == "systemd" {
        let journal = std::process::Command::new("journalctl")
            .args(["--no-pager", "-o", "cat", "--since", "-10min"])
            .output()
            .unwrap();
        assert!(
            !String::from_utf8_lossy(&journal.stdout).contains(&canary),
            "the password is in the journal"
        );
    }
}

fn rand_suffix() -> String {
    db_branch::store::secrets::generate_password().unwrap()[..12].to_string()
}

#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn big_tables_keyed_by_uuid_or_tenant_and_id_are_read_by_every_job() {
    let env = TestEnv::new("", "");
    env.run_ok(&["init"]);
    env.baseline_from_sql("wide.sql", "CREATE DATABASE w;\n");
    let source = env.json(&["create", "source"])["port"].as_u64().unwrap() as u16;
    let rows = db_branch::testkit::seq(80_000);
    sql(
        source,
        &format!(
            "CREATE TABLE w.events (id CHAR(36) NOT NULL PRIMARY KEY, body VARCHAR(40), \
               KEY by_body (body)) CHARSET utf8mb4; \
             INSERT INTO w.events SELECT UUID(), CONCAT('Événement ', seq) FROM {rows}; \
             CREATE TABLE w.tenant_rows (tenant_id INT NOT NULL, id INT NOT NULL, v INT, \
               PRIMARY KEY (tenant_id, id), KEY by_v (v)); \
             INSERT INTO w.tenant_rows SELECT seq % 7, seq, seq * 3 FROM {rows}; \
             CREATE TABLE w.keyless (a INT, b VARCHAR(10)); \
             INSERT INTO w.keyless SELECT seq, 'x' FROM {rows}; \
             ANALYZE TABLE w.events, w.tenant_rows, w.keyless"
        ),
    );
    let url = db_branch::testkit::source_url(source);
    let l = bake(
        &env,
        &["--from", &url, "--verify", "--logical", "--jobs", "2"],
    );
    assert_eq!(l["verified_tables"], 3, "{l}");
    eprintln!("splits: {}", l["splits"]);
    let split = |table: &str| {
        l["splits"]
            .as_array()
            .unwrap_or_else(|| panic!("no splits in {l}"))
            .iter()
            .find(|s| s["table"] == table)
            .unwrap_or_else(|| panic!("{table} not in {l}"))
            .clone()
    };
    for (table, by) in [
        ("w.events", "PRIMARY (id)"),
        ("w.tenant_rows", "PRIMARY (tenant_id, id)"),
    ] {
        let s = split(table);
        assert_eq!(s["by"], by, "{s}");
        assert!(
            s["ranges"].as_u64().unwrap() >= 2,
            "every job gets a range: {s}"
        );
    }
    let keyless = split("w.keyless");
    assert_eq!(keyless["ranges"], 1);
    assert!(
        keyless["whole_because"]
            .as_str()
            .unwrap()
            .contains("no primary key"),
        "{keyless}"
    );
    let copy = branch_of(&env, "copy", "2");
    let sums = "CHECKSUM TABLE w.events, w.tenant_rows, w.keyless";
    assert_eq!(sql(copy, sums), sql(source, sums));
    // The big tables' secondary indexes came after their rows, and came.
    assert!(sql(copy, "SHOW CREATE TABLE w.events").contains("KEY `by_body`"));
    assert!(sql(copy, "SHOW CREATE TABLE w.tenant_rows").contains("KEY `by_v`"));
}

mod ranges;
