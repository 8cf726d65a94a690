//! Root integration tests of failure handling on real btrfs and real mariadbd: a crash at
//! every failpoint, 50 concurrent operations, a reboot, a full pool, a runaway branch, the
//! unit's sandbox and file permissions.

use db_branch::testkit::{checksum, port, sql, TestEnv};
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Output;

/// `db-branch ARGS` stopped at `failpoint`. Through `TestEnv::command`, like every other
/// command of the sweep: with the run's empty-datadir templates, so the baseline steps copy
/// one instead of running the server's initialiser in this root's own cache first (a minute
/// in the ZFS guest); what the failpoints cut short is the same either way.
fn with_failpoint(env: &TestEnv, failpoint: &str, args: &[&str]) -> Output {
    let out = env
        .command(args)
        .env("DB_BRANCH_FAILPOINT", failpoint)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(db_branch::failpoint::EXIT_CODE),
        "{failpoint} {args:?} did not stop at its failpoint: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// (kind, subject) of what `doctor` finds left behind, and whether it passed (no finding
/// left, no failed check).
fn doctor(env: &TestEnv) -> (Vec<(String, String)>, Output) {
    let out = env.run(&["--json", "doctor"]);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    let found = v["findings"]
        .as_array()
        .expect("doctor's JSON has findings")
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().into(),
                f["subject"].as_str().unwrap().into(),
            )
        })
        .collect();
    (found, out)
}

fn findings(env: &TestEnv) -> Vec<(String, String)> {
    doctor(env).0
}

/// Nothing left behind, and doctor passes: one run (each costs seconds in the ZFS guest).
fn assert_clean(env: &TestEnv, after: &str) {
    let (f, out) = doctor(env);
    assert!(f.is_empty(), "after {after}, doctor finds {f:?}");
    assert!(
        out.status.success(),
        "after {after}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn every_failpoint_is_put_right_by_the_next_command_or_doctor_repair() {
    let env = TestEnv::with_baseline();
    let reference = port(&env.json(&["create", "reference"]));
    let clean = checksum(reference);
    let mut covered = BTreeSet::new();
    // DB_BRANCH_SWEEP=storage: only the steps where the backends differ (the ZFS guest's
    // lean sweep in CI); every step otherwise.
    let lean = std::env::var("DB_BRANCH_SWEEP").is_ok_and(|s| s == "storage");
    let sweep = if lean {
        db_branch::failpoint::STORAGE
    } else {
        db_branch::failpoint::ALL
    };

    for (i, fp) in sweep.iter().enumerate() {
        covered.insert(*fp);
        let (command, _) = fp.split_once(':').unwrap();
        match command {
            "create" => {
                // Alternately finished and repaired; the lean sweep has one create step,
                // so it takes both ways there.
                let ways: &[usize] = if lean { &[0, 1] } else { &[i % 2] };
                for way in ways {
                    with_failpoint(&env, fp, &["create", "victim"]);
                    let f = findings(&env);
                    assert!(
                        f.contains(&("half-made branch".into(), "victim".into())),
                        "{fp}: {f:?}"
                    );
                    if *way == 0 {
                        // The next ordinary command finishes the job.
                        let v = env.json(&["create", "victim"]);
                        assert_eq!(v["state"], "running", "{fp}");
                        assert_eq!(checksum(port(&v)), clean, "{fp}");
                        env.run_ok(&["delete", "--yes", "victim"]);
                    } else {
                        // Or the repair takes it all away.
                        env.run_ok(&["doctor", "--repair"]);
                        assert!(!env.names().contains(&"victim".to_string()), "{fp}");
                    }
                }
            }
            "reset" => {
                let p = port(&env.json(&["create", "victim"]));
                sql(p, "DELETE FROM shop.orders");
                with_failpoint(&env, fp, &["reset", "victim"]);
                let v = env.json(&["reset", "victim"]);
                assert_eq!(v["state"], "running", "{fp}");
                assert_eq!(port(&v), p, "{fp}: same port");
                assert_eq!(checksum(p), clean, "{fp}");
                env.run_ok(&["delete", "--yes", "victim"]);
            }
            "delete" => {
                env.run_ok(&["create", "victim"]);
                with_failpoint(&env, fp, &["delete", "--yes", "victim"]);
                env.run_ok(&["delete", "--yes", "victim"]);
                assert!(!env.names().contains(&"victim".to_string()), "{fp}");
                assert!(!env.pool().join("branches/victim").exists(), "{fp}");
            }
            "baseline" => {
                let before = env.json(&["baseline", "list"]).as_array().unwrap().len();
                with_failpoint(&env, fp, &["baseline", "create", "--empty"]);
                if fp != &"baseline:after-seal" {
                    let f = findings(&env);
                    // ZFS builds in one dataset whose snapshots are the generations: a
                    // workspace just emptied on a host with none of its own (they were all
                    // received, as these tests' are) holds nothing to find, and nothing is
                    // left. Anything written into it is found.
                    let nothing_left = db_branch::testkit::backend() == "zfs"
                        && fp == &"baseline:after-workspace"
                        && f.is_empty();
                    assert!(
                        nothing_left || f.iter().any(|(k, _)| k == "unfinished baseline"),
                        "{fp}: {f:?}"
                    );
                    assert_eq!(
                        env.json(&["baseline", "list"]).as_array().unwrap().len(),
                        before,
                        "{fp}: no half-made generation is visible"
                    );
                }
                env.run_ok(&["baseline", "create", "--empty"]);
                let gens: Vec<u64> = env
                    .json(&["baseline", "list"])
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|g| g["generation"].as_u64().unwrap())
                    .collect();
                assert_eq!(gens, (1..=gens.len() as u64).collect::<Vec<_>>(), "{fp}");
            }
            "bake" => {
                let dump = env.root.join("reference.sql");
                let out = std::process::Command::new("sh")
                    .arg("-c")
                    .arg(format!(
                        "{} {} --databases shop > {}",
                        db_branch::testkit::server().dump.display(),
                        db_branch::testkit::login(reference),
                        dump.display()
                    ))
                    .status()
                    .unwrap();
                assert!(out.success());
                let from = format!("file:{}", dump.display());
                let before = env.json(&["baseline", "list"]).as_array().unwrap().len();
                with_failpoint(&env, fp, &["bake", "--from", &from]);
                if fp != &"bake:after-seal" {
                    assert_eq!(
                        env.json(&["baseline", "list"]).as_array().unwrap().len(),
                        before,
                        "{fp}: no half-made generation is visible"
                    );
                    let f = findings(&env);
                    assert!(
                        f.iter().any(|(k, _)| k == "unfinished baseline"),
                        "{fp}: {f:?}"
                    );
                }
                assert!(
                    env.server_pids().iter().all(|p| {
                        !String::from_utf8_lossy(
                            &std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default(),
                        )
                        .contains("/work/")
                    }),
                    "{fp}: the one-off server died with the baker"
                );
                env.run_ok(&["bake", "--from", &from]);
            }
            "gc" => {
                for n in ["old-1", "old-2"] {
                    env.run_ok(&[
                        "create",
                        n,
                        "--baseline",
                        "1",
                        "--expires-at",
                        "2020-01-01T00:00:00Z",
                    ]);
                }
                with_failpoint(&env, fp, &["--yes", "gc"]);
                assert_eq!(env.names().len(), 2, "{fp}: one deleted before the crash");
                env.run_ok(&["--yes", "gc"]);
                assert_eq!(env.names(), ["reference"], "{fp}");
            }
            "trash" => {
                // The suite's roots destroy at once; this step keeps deletes in the trash.
                // Inside the root, so it goes with it.
                let keeping = env.root.join("keeping.toml");
                std::fs::write(
                    &keeping,
                    std::fs::read_to_string(&env.config)
                        .unwrap()
                        .replace("keep_deleted = \"0s\"", "keep_deleted = \"24h\""),
                )
                .unwrap();
                let delete = |failpoint: Option<&str>| {
                    let mut cmd = std::process::Command::new(db_branch::testkit::bin());
                    cmd.args(["delete", "--yes", "victim"])
                        .env("DB_BRANCH_CONFIG", &keeping)
                        .stdin(std::process::Stdio::null());
                    if let Some(f) = failpoint {
                        cmd.env("DB_BRANCH_FAILPOINT", f);
                    }
                    cmd.output().unwrap()
                };
                // Generation 1 has the seed's `shop` (the baseline steps add empty ones).
                let p = port(&env.json(&["create", "victim", "--baseline", "1"]));
                sql(p, "CREATE TABLE shop.kept (id INT PRIMARY KEY)");
                let out = delete(Some(fp));
                assert_eq!(
                    out.status.code(),
                    Some(db_branch::failpoint::EXIT_CODE),
                    "{fp}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                if fp == &"trash:after-entry" {
                    // The next delete finishes what the crashed one began.
                    let out = delete(None);
                    assert!(
                        out.status.success(),
                        "{fp}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                // After the storage moved: the next command that reads the trash finishes it.
                let trash = env.json(&["trash"]);
                let entries = trash.as_array().unwrap();
                assert_eq!(entries.len(), 1, "{fp}: {trash}");
                assert_eq!(entries[0]["name"], "victim", "{fp}");
                assert_eq!(entries[0]["complete"], true, "{fp}");
                assert!(!env.names().contains(&"victim".to_string()), "{fp}");
                let restored = env.json(&["restore", "victim"]);
                assert_eq!(port(&restored), p, "{fp}: same port");
                assert_eq!(sql(p, "SELECT COUNT(*) FROM shop.kept"), "0", "{fp}");
                env.run_ok(&["delete", "--yes", "victim"]);
            }
            other => panic!("failpoint of unknown command {other}"),
        }
        assert_clean(&env, fp);
    }
    assert_eq!(covered.len(), sweep.len());
    assert!(
        sweep.iter().all(|f| db_branch::failpoint::ALL.contains(f)),
        "a failpoint of the sweep is not listed in ALL"
    );
    // The bystander never noticed.
    assert_eq!(checksum(reference), clean);
    assert_eq!(env.names(), ["reference"]);
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn fifty_mixed_operations_in_parallel_leave_everything_consistent() {
    let env = TestEnv::with_baseline();
    let ops = ["create", "reset", "delete", "stop", "start", "list"];
    let mut seed: u64 = 0x5eed;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    let plan: Vec<(&str, String)> = (0..50)
        .map(|_| (ops[next() % ops.len()], format!("c{}", next() % 4)))
        .collect();
    let cursor = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| loop {
                let i = cursor.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some((op, name)) = plan.get(i) else { break };
                let out = match *op {
                    "list" => env.run(&["list"]),
                    "delete" => env.run(&["delete", "--yes", name]),
                    _ => env.run(&[op, name]),
                };
                results
                    .lock()
                    .unwrap()
                    .push((op.to_string(), name.clone(), out));
            });
        }
    });
    for (op, name, out) in results.into_inner().unwrap() {
        let code = out.status.code();
        let err = String::from_utf8_lossy(&out.stderr);
        // 2 = the branch did not exist at that moment (reset/start/stop); never a hang,
        // a lock time-out (75) or a failure.
        assert!(
            code == Some(0) || (code == Some(2) && err.contains("there is no branch")),
            "{op} {name}: {code:?} {err}"
        );
    }
    assert_clean(&env, "the concurrent run");
    let list = env.json(&["list"]);
    let ports: Vec<u64> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["port"].as_u64().unwrap())
        .collect();
    let unique: BTreeSet<u64> = ports.iter().copied().collect();
    assert_eq!(unique.len(), ports.len(), "ports unique: {ports:?}");
    let running = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["state"] == "running")
        .count();
    assert_eq!(env.server_pids().len(), running, "{list}");
    for b in list.as_array().unwrap() {
        if b["state"] == "running" {
            assert_eq!(sql(port(b), "SELECT COUNT(*) FROM shop.customers"), "2000");
        }
    }
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn after_a_reboot_the_next_command_remounts_and_start_brings_branches_back() {
    let env = TestEnv::with_baseline();
    let a = port(&env.json(&["create", "a"]));
    sql(a, "CREATE DATABASE kept");
    env.run_ok(&["stop", "a"]);
    env.run_ok(&["start", "a"]);
    env.run_ok(&["create", "b"]);
    env.run_ok(&["stop", "b"]);
    // Power loss: every server gone at once, the pool unmounted.
    for pid in env.server_pids() {
        std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
    }
    for _ in 0..200 {
        if env.server_pids().is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let mut unmounted = false;
    for _ in 0..100 {
        if std::process::Command::new("umount")
            .arg(env.pool())
            .status()
            .unwrap()
            .success()
        {
            unmounted = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(unmounted && !db_branch::testkit::is_mounted(&env.pool()));

    let list = env.json(&["list"]);
    assert!(
        db_branch::testkit::is_mounted(&env.pool()),
        "list re-mounted the pool"
    );
    assert_eq!(list.as_array().unwrap().len(), 2);
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .all(|b| b["state"] != "running"),
        "{list}"
    );
    assert_eq!(env.json(&["start", "a"])["state"], "running");
    assert_eq!(sql(a, "SHOW DATABASES LIKE 'kept'"), "kept");
    assert_eq!(env.json(&["start", "b"])["state"], "running");
    assert_clean(&env, "the reboot");
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn a_full_pool_gives_a_clear_error_keeps_the_others_and_recovers_after_delete() {
    let env = TestEnv::new("", "");
    std::fs::write(
        &env.config,
        std::fs::read_to_string(&env.config)
            .unwrap()
            .replace("image_size = \"3G\"", "image_size = \"768M\""),
    )
    .unwrap();
    env.run_ok(&["init"]);
    env.run_ok(&[
        "baseline",
        "create",
        "--empty",
        "--sql",
        db_branch::testkit::SEED_SQL,
    ]);
    let other = port(&env.json(&["create", "other"]));
    let clean = checksum(other);
    let filler = port(&env.json(&["create", "filler"]));
    sql(
        filler,
        "CREATE TABLE shop.big (id INT AUTO_INCREMENT PRIMARY KEY, b LONGBLOB)",
    );
    let mut full = false;
    for _ in 0..40 {
        let out = std::process::Command::new(db_branch::testkit::server().client)
            .args([
                "--no-defaults",
                "-h127.0.0.1",
                "-uroot",
                &format!("-P{filler}"),
                &db_branch::testkit::password_arg(filler).unwrap_or_default(),
                "shop",
                "-e",
            ])
            .arg(format!(
                "INSERT INTO big (b) SELECT REPEAT('x', 1048576) FROM {}",
                db_branch::testkit::seq(32)
            ))
            .output()
            .unwrap();
        if !out.status.success() {
            // InnoDB answers "table is full", or (no doublewrite, no fsync: test profile) the
            // server stops on the failed write; either way only this branch is hit.
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("full") || err.contains("space") || err.contains("Lost connection"),
                "{err}"
            );
            full = true;
            break;
        }
    }
    assert!(full, "the pool never filled");
    std::process::Command::new("sync").status().unwrap();

    let err = env.run_err(&["create", "newbie"], 75);
    assert!(
        err.contains("full") && err.contains("btrfs.min_free"),
        "{err}"
    );
    assert_eq!(env.names(), ["filler", "other"], "nothing half-made");
    assert_eq!(checksum(other), clean, "the other branch is intact");

    env.run_ok(&["delete", "--yes", "filler"]);
    let mut made = None;
    for _ in 0..120 {
        let out = env.run(&["--json", "create", "newbie"]);
        if out.status.success() {
            let v = serde_json::from_slice::<Value>(&out.stdout).unwrap();
            db_branch::testkit::remember_passwords(&v);
            made = Some(v);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let newbie = made.expect("space came back after the delete");
    assert_eq!(checksum(port(&newbie)), clean, "the baseline is intact");
    assert_clean(&env, "the full pool");
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn servers_are_confined_and_state_files_private() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let env = TestEnv::with_baseline();
    let v = env.json(&["create", "sec"]);
    let p = port(&v);
    assert_eq!(sql(p, "SELECT @@bind_address"), "127.0.0.1");
    for pid in env.server_pids() {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        let mysql = nix::unistd::User::from_name("mysql")
            .unwrap()
            .unwrap()
            .uid
            .as_raw();
        assert!(
            uid.split_whitespace().nth(1) == Some(&mysql.to_string()),
            "{uid}"
        );
    }
    let record = env.root.join("branches/sec/branch.json");
    let meta = std::fs::metadata(&record).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.uid(), 0);

    // The unit as installed, reviewed by systemd itself.
    let dir = env.root.join("security-check");
    std::fs::create_dir_all(&dir).unwrap();
    let units = env.rendered_units();
    let unit = dir.join("mysqld@check.service");
    std::fs::write(&unit, &units[0].1).unwrap();
    let out = std::process::Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(&unit)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or_else(|| panic!("no exposure in {text}"));
    let exposure: f64 = line
        .split(':')
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    println!("systemd-analyze security exposure of the branch unit: {exposure}");
    assert!(exposure <= 4.0, "{line}");
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn links_planted_where_others_write_are_not_followed() {
    use std::os::unix::fs::MetadataExt;
    let env = TestEnv::with_baseline();
    // A stream directory anyone may write: a link planted as the next push's partial file
    // (it pointed root's write at any file it liked).
    let streams = env.root.join("streams");
    std::fs::create_dir_all(&streams).unwrap();
    let victim = env.root.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    std::os::unix::fs::symlink(&victim, streams.join("gen-000001.full.stream.partial")).unwrap();
    env.run_ok(&["baseline", "push", &format!("file:{}", streams.display())]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(streams.join("gen-000001.full.stream").is_file());

    // The server's user owns run/: a link it plants as run/tmp (it made root give any
    // directory to the server's user).
    env.run_ok(&["create", "b"]);
    env.run_ok(&["stop", "b"]);
    let tmp = env.root.join("branches/b/run/tmp");
    std::fs::remove_dir_all(&tmp).unwrap();
    let victim_dir = env.root.join("victim-dir");
    std::fs::create_dir_all(&victim_dir).unwrap();
    std::os::unix::fs::symlink(&victim_dir, &tmp).unwrap();
    env.run_ok(&["start", "b"]);
    assert_eq!(
        std::fs::metadata(&victim_dir).unwrap().uid(),
        0,
        "still root's"
    );
    assert!(
        std::fs::symlink_metadata(&tmp).unwrap().is_dir(),
        "run/tmp is a directory of its own again"
    );
    assert_eq!(
        checksum(port(&env.json(&["status", "b"]))),
        checksum(port(&env.json(&["create", "c"])))
    );
}
