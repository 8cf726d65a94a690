//! Root integration tests of the branch lifecycle on real btrfs (a loop-mounted embedded
//! pool), real mariadbd and a real service manager: the built-in supervisor, or systemd over
//! D-Bus when run inside tests/harness/systemd-ns. scripts/test runs them both ways.

use db_branch::testkit::{assert_success, checksum, sql, TestEnv};
use std::collections::BTreeSet;

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn create_write_reset_delete() {
    let env = TestEnv::with_baseline();
    let created = env.json(&["create", "feature-a"]);
    assert_eq!(created["existed"], false);
    assert_eq!(created["state"], "running");
    let port = created["port"].as_u64().unwrap() as u16;
    assert!(port >= env.first_port);
    let baseline_sum = checksum(port);
    assert_eq!(sql(port, "SELECT COUNT(*) FROM shop.orders"), "20000");
    // Under either manager (systemd reads it from server.env) the test profile's server
    // runs without fsync where the library is installed (CI installs it).
    assert_eq!(
        env.server_skips_fsync("feature-a"),
        db_branch::server::preload::fsync_free_library().is_some()
    );
    // Oracle MySQL's servers skip their timer calibration (the shim db-branch writes to
    // ROOT/lib); MariaDB's have nothing to skip.
    assert_eq!(
        env.server_skips_timer_calibration("feature-a"),
        db_branch::testkit::server().mysql && db_branch::server::preload::ticks_shim_built()
    );

    // Its own password: nobody logs in over TCP without it, and the server reads no file
    // outside the branch's own directory.
    let password = db_branch::testkit::password(port);
    assert_eq!(password.len(), 32, "{created}");
    for without in [vec![], vec!["-pwrong".to_string()]] {
        let out = std::process::Command::new(db_branch::testkit::server().client)
            .args([
                "--no-defaults",
                "-h127.0.0.1",
                "-uroot",
                &format!("-P{port}"),
            ])
            .args(&without)
            .args(["-e", "SELECT 1"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "logged in with {without:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Access denied"), "{err}");
    }
    assert_eq!(sql(port, "SELECT LOAD_FILE('/etc/passwd') IS NULL"), "1");

    // Write: change rows, drop a table, add a database.
    sql(
        port,
        "UPDATE shop.orders SET total = total + 1; DELETE FROM shop.customers WHERE id < 500; \
         CREATE DATABASE scratch; CREATE TABLE scratch.t (i INT PRIMARY KEY); \
         INSERT INTO scratch.t VALUES (1)",
    );
    assert_ne!(checksum(port), baseline_sum);

    // Root's files in a directory only root writes; the server's in run/, its own.
    use std::os::unix::fs::MetadataExt;
    let dir = env.root.join("branches/feature-a");
    let owner = |p: &std::path::Path| std::fs::metadata(p).unwrap().uid();
    let mysql_uid = nix::unistd::User::from_name("mysql")
        .unwrap()
        .unwrap()
        .uid
        .as_raw();
    assert_eq!(owner(&dir), 0);
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o755);
    assert_eq!(owner(&dir.join("run")), mysql_uid);
    // A directory an older db-branch gave the server is given back to root at the next start.
    nix::unistd::chown(&dir, Some(nix::unistd::Uid::from_raw(mysql_uid)), None).unwrap();

    let log_before = std::fs::read_to_string(env.error_log("feature-a"))
        .unwrap()
        .len();
    let reset = env.json(&["reset", "feature-a"]);
    assert_eq!(
        reset["port"].as_u64().unwrap() as u16,
        port,
        "same port after reset"
    );
    assert_eq!(reset["state"], "running");
    assert_eq!(
        reset["connection"]["password"], password,
        "a reset keeps the password"
    );
    assert_eq!(checksum(port), baseline_sum, "data back to the baseline");
    assert_eq!(
        owner(&dir),
        0,
        "reset gave the branch directory back to root"
    );
    assert_eq!(sql(port, "SHOW DATABASES LIKE 'scratch'"), "");
    let log = std::fs::read_to_string(env.error_log("feature-a")).unwrap();
    let since_reset = &log[log_before..];
    assert!(
        since_reset.contains("ready for connections"),
        "restarted server logged its start:\n{since_reset}"
    );
    assert!(
        db_branch::server::crash_recovery_line(since_reset).is_none(),
        "no crash recovery after reset:\n{since_reset}"
    );

    let deleted = env.json(&["delete", "--yes", "feature-a"]);
    assert_eq!(deleted["deleted"], true);
    // Nothing left: no server, no snapshots, no record, no unit.
    assert!(env.server_pids().is_empty(), "server gone");
    let left: Vec<_> = std::fs::read_dir(env.pool().join("branches"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "snapshots left: {left:?}");
    assert!(!env.root.join("branches/feature-a").exists());
    assert_eq!(env.json(&["list"]), serde_json::json!([]));
    // The port answers nobody.
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    // Deleting again is fine (CI hooks re-run).
    assert_eq!(
        env.json(&["delete", "--yes", "feature-a"])["deleted"],
        false
    );
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn branches_are_isolated() {
    let env = TestEnv::with_baseline();
    let a = env.json(&["create", "a"])["port"].as_u64().unwrap() as u16;
    let b = env.json(&["create", "b"])["port"].as_u64().unwrap() as u16;
    assert_ne!(a, b);
    use db_branch::testkit::password;
    assert_ne!(password(a), password(b), "each branch its own password");
    sql(a, "DELETE FROM shop.orders");
    assert_eq!(sql(a, "SELECT COUNT(*) FROM shop.orders"), "0");
    assert_eq!(sql(b, "SELECT COUNT(*) FROM shop.orders"), "20000");
    // a also writes ~10 MB of new rows. A clean stop writes its pages out; then a's own disk
    // use shows them, while b (stopped the same way) holds next to nothing of its own.
    sql(
        a,
        &format!(
            "USE shop; INSERT INTO orders SELECT seq + 100000, 1, 1 FROM {}",
            db_branch::testkit::seq(200000)
        ),
    );
    env.run_ok(&["stop", "a"]);
    env.run_ok(&["stop", "b"]);
    std::process::Command::new("sync").status().unwrap();
    let list = env.json(&["list"]);
    let names: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["a", "b"]);
    // The writer holds its own blocks; the untouched branch holds nearly none.
    let disk = |n: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == n)
            .unwrap()["disk_bytes"]
            .as_u64()
            .unwrap()
    };
    assert!(
        disk("a") > disk("b") + (4 << 20),
        "a {} b {}",
        disk("a"),
        disk("b")
    );
    // On btrfs, counted from the files written since the snapshot: the same as a walk of
    // every file of the branch.
    for n in ["a", "b"] {
        let datadir = env.root.join("pool/branches").join(n);
        if !datadir.is_dir() {
            continue; // not the btrfs backend
        }
        let out = db_branch::testkit::run_success(
            std::process::Command::new("btrfs")
                .args(["filesystem", "du", "-s", "--raw"])
                .arg(&datadir),
        );
        let walked: u64 = String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap();
        assert_eq!(disk(n), walked, "branch {n}: own disk against a full walk");
    }
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn create_is_idempotent_and_wakes_a_stopped_branch() {
    let env = TestEnv::with_baseline();
    let first = env.json(&["create", "pr-1"]);
    let again = env.json(&["create", "pr-1"]);
    assert_eq!(again["existed"], true);
    assert_eq!(again["port"], first["port"]);
    let port = first["port"].as_u64().unwrap() as u16;
    sql(port, "CREATE DATABASE kept");

    let stopped = env.json(&["stop", "pr-1"]);
    assert_eq!(stopped["state"], "stopped");
    assert!(env.server_pids().is_empty());
    let woken = env.json(&["create", "pr-1"]);
    assert_eq!(woken["existed"], true);
    assert_eq!(woken["state"], "running");
    assert_eq!(woken["port"], first["port"]);
    assert_eq!(
        sql(port, "SHOW DATABASES LIKE 'kept'"),
        "kept",
        "data kept across stop"
    );

    // With -q a stop prints nothing at all.
    let quiet = env.run(&["stop", "-q", "pr-1"]);
    assert_success(&quiet, "");
    assert!(
        quiet.stdout.is_empty() && quiet.stderr.is_empty(),
        "stop -q said: {}{}",
        String::from_utf8_lossy(&quiet.stdout),
        String::from_utf8_lossy(&quiet.stderr)
    );
    assert_eq!(env.json(&["start", "pr-1"])["state"], "running");
    // A reader that goes away (`db-branch list | head -1`) is no error.
    let closed = env.run_into_closed_pipe(&["list"]);
    assert_eq!(closed.status.code(), Some(0));
    assert!(
        closed.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&closed.stderr)
    );
    // env prints the same connection details in each format.
    let dotenv = env.run_ok(&["env", "pr-1"]);
    assert!(dotenv.contains(&format!("MYSQL_PORT={port}")), "{dotenv}");
    let url = env.run_ok(&["env", "pr-1", "--format", "url"]);
    assert_eq!(
        url.trim(),
        format!(
            "mysql://root:{}@127.0.0.1:{port}/shop",
            db_branch::testkit::password(port)
        )
    );
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn memory_guard_refuses_and_leaves_nothing() {
    let env = TestEnv::new("", "[memory]\nheadroom = \"64T\"\n");
    env.run_ok(&["init"]);
    env.run_ok(&["baseline", "create", "--empty"]);
    let out = env.run(&["create", "hungry"]);
    assert_eq!(out.status.code(), Some(75), "exit 75 for lack of memory");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not enough memory") && err.contains("memory.headroom"),
        "says what is short and what to change: {err}"
    );
    assert_eq!(env.json(&["list"]), serde_json::json!([]));
    assert!(!env.root.join("branches/hungry").exists());
    assert_eq!(
        std::fs::read_dir(env.pool().join("branches"))
            .unwrap()
            .count(),
        0,
        "no snapshots"
    );
    assert!(env.server_pids().is_empty());
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn parallel_creates_get_distinct_ports() {
    let env = TestEnv::with_baseline();
    let names: Vec<String> = (0..8).map(|i| format!("par-{i}")).collect();
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = names
            .iter()
            .map(|n| s.spawn(|| env.run(&["--json", "create", n])))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut ports = BTreeSet::new();
    for (name, out) in names.iter().zip(&results) {
        assert!(
            out.status.success(),
            "create {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        db_branch::testkit::remember_passwords(&v);
        let port = v["port"].as_u64().unwrap() as u16;
        assert!(ports.insert(port), "port {port} handed out twice");
        assert_eq!(sql(port, "SELECT COUNT(*) FROM shop.customers"), "2000");
    }
    assert_eq!(env.server_pids().len(), 8);
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn bad_names_and_flags_are_refused_and_change_nothing() {
    let env = TestEnv::with_baseline();
    for bad in [
        "Upper", "-x", "a/b", "a b", "a..b", "x@init", "$(id)", "ü", "",
    ] {
        let out = env.run(&["create", "--", bad]);
        assert_eq!(out.status.code(), Some(2), "name {bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("branch name") || err.contains("empty"),
            "{bad:?}: {err}"
        );
    }
    for args in [
        vec!["create", "ok", "--buffer-pool", "lots"],
        vec!["create", "ok", "--baseline", "latest"],
        vec!["create", "ok", "--baseline", "9"],
        vec!["delete", "ok"],
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    assert_eq!(env.json(&["list"]), serde_json::json!([]));
    assert!(env.server_pids().is_empty());
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn baseline_from_datadir_refuses_unclean_and_takes_clean() {
    let env = TestEnv::with_baseline();
    let port = env.json(&["create", "src"])["port"].as_u64().unwrap() as u16;
    sql(
        port,
        &format!("CREATE DATABASE extra; USE extra; CREATE TABLE t (i INT PRIMARY KEY) SELECT seq AS i FROM {}", db_branch::testkit::seq(5000)),
    );
    let datadir = env.pool().join("branches/src");
    let dir = datadir.to_str().unwrap();

    // A crashed server's datadir: refused, and no generation appears.
    sql(
        port,
        "SET GLOBAL innodb_flush_log_at_trx_commit = 1; INSERT INTO extra.t VALUES (9999999)",
    );
    for pid in env.server_pids() {
        std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
    }
    let out = env.run(&["baseline", "create", "--from-datadir", dir]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("not shut down cleanly"), "{err}");
    let gens = env.json(&["baseline", "list"]);
    assert_eq!(gens.as_array().unwrap().len(), 1, "{gens}");

    // After a clean stop the same datadir becomes generation 2, and branches of it have the data.
    env.run_ok(&["start", "src"]);
    env.run_ok(&["stop", "src"]);
    let made = env.json(&["baseline", "create", "--from-datadir", dir]);
    assert_eq!(made["generation"], 2);
    let p2 = env.json(&["create", "from-two"])["port"].as_u64().unwrap() as u16;
    assert_eq!(sql(p2, "SELECT COUNT(*) FROM extra.t"), "5001");
    // Branches of generation 1 keep theirs.
    let p1 = env.json(&["create", "from-one", "--baseline", "1"])["port"]
        .as_u64()
        .unwrap() as u16;
    assert_eq!(sql(p1, "SHOW DATABASES LIKE 'extra'"), "");
    let gens = env.json(&["baseline", "list"]);
    assert_eq!(gens[0]["branches"], 2, "{gens}");
    assert_eq!(gens[1]["branches"], 1, "{gens}");
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn sql_files_show_progress_and_start_timeout_bounds_a_server_that_never_gets_ready() {
    let env = TestEnv::new("", "[mysqld]\nstart_timeout = \"3s\"\n");
    env.run_ok(&["init"]);
    let out = env.run(&[
        "baseline",
        "create",
        "--empty",
        "--sql",
        &db_branch::testkit::seed_sql(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("baseline: run seed.sql") && err.contains("100%"),
        "a long SQL file shows progress: {err}"
    );

    // A "server" that answers --version like the real one, then never gets ready (under
    // systemd: never sends READY=1, so the start job would wait for TimeoutStartSec).
    let real = db_branch::testkit::server().binary;
    let version = std::process::Command::new(&real)
        .arg("--version")
        .output()
        .unwrap();
    let fake = env.root.join("stuck-server");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\ncase \"$1\" in --version) echo '{}'; exit 0 ;; esac\nwhile :; do sleep 1; done\n",
            String::from_utf8_lossy(&version.stdout).trim()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = std::fs::read_to_string(&env.config).unwrap().replace(
        &format!("binary = \"{}\"", real.display()),
        &format!("binary = \"{}\"", fake.display()),
    );
    std::fs::write(&env.config, config).unwrap();
    env.run_ok(&["init"]); // the unit template names the new binary
    let started = std::time::Instant::now();
    let err = env.run_err(&["create", "stuck"], 1);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "gave up after {:?}: {err}",
        started.elapsed()
    );
    assert!(err.contains("within 3s"), "{err}");
    // Nothing is left of the attempt.
    assert_eq!(env.json(&["list"]), serde_json::json!([]));
    assert!(env.server_pids().is_empty());
}
