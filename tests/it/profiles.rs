//! Root integration tests of server profiles and the RAM-backed pool, on real btrfs and
//! real mariadbd.

use db_branch::testkit::{checksum, sql, TestEnv, SEED_SQL};

fn var(port: u16, name: &str) -> String {
    sql(port, &format!("SELECT @@GLOBAL.{name}"))
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn test_profile_relaxes_durability_and_durable_keeps_it() {
    let env = TestEnv::with_baseline();
    let fast = env.json(&["create", "fast"]);
    assert_eq!(fast["profile"], "test");
    let fast = fast["port"].as_u64().unwrap() as u16;
    assert_eq!(var(fast, "innodb_flush_log_at_trx_commit"), "0");
    // MariaDB says 0/1; MySQL (8.0.30+, an enum) OFF/ON.
    assert!(["0", "OFF"].contains(&var(fast, "innodb_doublewrite").as_str()));
    assert_eq!(var(fast, "innodb_flush_method"), "nosync");
    assert_eq!(var(fast, "log_bin"), "0");
    // CI installs libeatmydata1 (scripts/install-deps): the test profile must preload it.
    let has_lib = db_branch::server::preload::fsync_free_library().is_some();
    assert_eq!(env.server_skips_fsync("fast"), has_lib);
    // MariaDB from 11.4 would make itself an RSA key at every start: it gets ours.
    let version = sql(fast, "SELECT VERSION()");
    let flavour = db_branch::flavour::Flavour::from_version_string(&version).unwrap();
    let cert = var(fast, "ssl_cert");
    if flavour.makes_certificate_at_start() {
        assert!(
            cert.ends_with("/server.pem"),
            "{version}: ssl_cert {cert:?}"
        );
    }

    let safe = env.json(&["create", "safe", "--profile", "durable"]);
    assert_eq!(safe["profile"], "durable");
    let safe = safe["port"].as_u64().unwrap() as u16;
    assert_eq!(var(safe, "innodb_flush_log_at_trx_commit"), "1");
    assert!(["1", "ON"].contains(&var(safe, "innodb_doublewrite").as_str()));
    assert_ne!(var(safe, "innodb_flush_method"), "nosync");
    assert_eq!(var(safe, "sync_binlog"), "1");
    assert!(!env.server_skips_fsync("safe"), "durable never skips fsync");
    // The timer shim changes no durability: MySQL's servers load it in every profile.
    let mysql =
        db_branch::testkit::server().mysql && db_branch::server::preload::ticks_shim_built();
    assert_eq!(env.server_skips_timer_calibration("fast"), mysql);
    assert_eq!(env.server_skips_timer_calibration("safe"), mysql);

    // Asking for another profile on an existing branch is refused, not ignored.
    let out = env.run(&["create", "safe", "--profile", "test"]);
    assert_eq!(out.status.code(), Some(2));

    // A test-profile server that died is flagged, and reset is the suggested way back.
    for pid in env.server_pids() {
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd).contains("/branches/fast/") {
            std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status()
                .unwrap();
        }
    }
    let status = env.wait_state("fast", "failed");
    assert_eq!(status["state"], "failed", "{status}");
    assert_eq!(status["unclean"], true);
    assert!(env
        .run_ok(&["status", "fast"])
        .contains("unclean: reset it"));
    let reset = env.json(&["reset", "fast"]);
    assert_eq!(reset["state"], "running");
    assert_eq!(reset["unclean"], false);
}

fn ram_env(image_size: &str) -> TestEnv {
    TestEnv::new("", "").with_ram_pool(image_size)
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn ram_pool_that_would_not_fit_is_refused() {
    let env = ram_env("64T");
    let err = env.run_err(&["init"], 75);
    assert!(err.contains("RAM") && err.contains("image_size"), "{err}");
    let layout = db_branch::layout::Layout::new(&env.root);
    assert!(!layout.image_file(std::path::Path::new("/dev/shm")).exists());
    assert!(!db_branch::testkit::is_mounted(&env.pool()));
}

#[test]
#[ignore = "needs root, btrfs and mariadb-server; run by scripts/test"]
fn ram_pool_survives_reset_and_delete_cycles_and_is_rebuilt_after_a_reboot() {
    let env = ram_env("1G");
    env.run_ok(&["init"]);
    env.run_ok(&["baseline", "create", "--empty", "--sql", SEED_SQL]);
    let status_pool = |name: &str| env.json(&["status", name])["pool"].clone();
    let ram_now = || {
        std::process::Command::new("sync").status().unwrap();
        env.json(&["init"])["pool"]["ram_bytes"].as_u64().unwrap()
    };
    for round in 0..3 {
        let port = env.json(&["create", "ram"])["port"].as_u64().unwrap() as u16;
        let clean = checksum(port);
        sql(port, "DELETE FROM shop.orders WHERE id % 2 = 0");
        assert_ne!(checksum(port), clean);
        env.run_ok(&["reset", "ram"]);
        assert_eq!(checksum(port), clean, "round {round}");
        let pool = status_pool("ram");
        assert_eq!(pool["ram_backed"], true, "{pool}");
        assert!(pool["ram_bytes"].as_u64().unwrap() > 0, "{pool}");
        env.run_ok(&["delete", "--yes", "ram"]);
    }

    // What a branch wrote goes back to RAM once it is deleted.
    let port = env.json(&["create", "writer"])["port"].as_u64().unwrap() as u16;
    sql(
        port,
        &format!(
            "USE shop; INSERT INTO orders SELECT seq + 100000, 1, 1 FROM {}",
            db_branch::testkit::seq(200000)
        ),
    );
    let written = ram_now();
    env.run_ok(&["delete", "--yes", "writer"]);
    let mut freed = written;
    for _ in 0..60 {
        freed = ram_now();
        if freed + (8 << 20) < written {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    assert!(
        freed + (8 << 20) < written,
        "RAM held {written} after writes, {freed} after delete"
    );

    // A reboot empties /dev/shm: simulate it (servers gone, pool unmounted, image gone).
    env.run_ok(&["create", "lost"]);
    env.run_ok(&["stop", "lost"]);
    assert!(std::process::Command::new("umount")
        .arg(env.pool())
        .status()
        .unwrap()
        .success());
    let layout = db_branch::layout::Layout::new(&env.root);
    std::fs::remove_file(layout.image_file(std::path::Path::new("/dev/shm"))).unwrap();
    let out = env.run(&["list"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("db-branch init"));
    let init = env.json(&["init"]);
    assert_eq!(init["lost_branches"], serde_json::json!(["lost"]));
    // The baseline came back from disk; new branches have its data.
    let port = env.json(&["create", "after"])["port"].as_u64().unwrap() as u16;
    assert_eq!(sql(port, "SELECT COUNT(*) FROM shop.orders"), "20000");

    // A pruned generation's copy on disk goes with it: it must not come back at the next
    // boot, and streams must not pile up.
    let streams = layout.baseline_streams();
    let stream = |g: &str| streams.join(format!("gen-{g:0>6}.btrfs"));
    env.run_ok(&["delete", "--yes", "after"]);
    env.run_ok(&["baseline", "create", "--empty"]);
    assert!(stream("1").exists() && stream("2").exists());
    env.run_ok(&["baseline", "prune"]);
    assert!(
        !stream("1").exists(),
        "the pruned generation's stream is gone"
    );
    assert!(stream("2").exists(), "the newest one's stays");
}
