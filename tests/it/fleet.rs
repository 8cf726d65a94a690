//! Past one host, for real: the test makes its own hosts — network namespaces joined by veth
//! pairs (testkit::veth), each with its own db-branch root and pool and an `sshd` (Debian's
//! openssh-server) bound to its namespace address, with keys the test makes — and ships
//! baselines to them with `baseline push/pull`, and drives them with `--host`. Nothing
//! listens anywhere but on those addresses and loopback; all of it goes when a test ends.

use db_branch::testkit::fleet::{FarHost, Keys};
use db_branch::testkit::{assert_success, server, TestEnv};
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

/// CHECKSUM TABLE of the seed's tables on a branch here, through the namespace.
fn far_sums(far: &FarHost, near: &TestEnv, branch: &str) -> String {
    let out = far.via(near, &["--json", "env", branch]);
    assert_success(&out, "");
    let vars: Value = serde_json::from_slice(&out.stdout).unwrap();
    let var = |k: &str| vars[k].as_str().unwrap().to_string();
    let s = server();
    let args = vec![
        "--no-defaults".to_string(),
        "-h127.0.0.1".to_string(),
        format!("-P{}", var("MYSQL_PORT")),
        format!("-u{}", var("MYSQL_USER")),
        format!("-p{}", var("MYSQL_PWD")),
        "-N".into(),
        "-B".into(),
        "-e".into(),
        "CHECKSUM TABLE shop.customers, shop.orders".into(),
    ];
    let out = far.veth.run(&s.client, &args);
    assert_success(&out, "");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn near_host(keys: &Keys) -> TestEnv {
    TestEnv::new("", &keys.fleet_table()).seeded()
}

/// A new branch of `gen` here, and its CHECKSUM TABLE of the seed's tables.
fn local_sums(env: &TestEnv, branch: &str, gen: &str) -> String {
    let p = db_branch::testkit::port(&env.json(&["create", branch, "--baseline", gen]));
    db_branch::testkit::sql(p, "CHECKSUM TABLE shop.customers, shop.orders")
}

fn pushed(env: &TestEnv, dest: &str, gen: Option<&str>) -> Value {
    let mut args = vec!["baseline", "push", dest];
    args.extend(gen);
    let v = env.json(&args);
    v[0].clone()
}

fn generations(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|g| g["generation"].as_u64().unwrap())
        .collect()
}

/// A second generation from the first with about 1% of the orders changed, promoted from
/// a branch (no bake).
fn next_generation(env: &TestEnv, branch: &str, sql: &str) {
    let p = db_branch::testkit::port(&env.json(&["create", branch]));
    db_branch::testkit::sql(p, sql);
    env.run_ok(&["baseline", "create", "--from-branch", branch]);
}

#[test]
#[ignore = "needs root, btrfs, a server and sshd; run by scripts/test"]
fn full_and_incremental_pushes_to_two_hosts_and_pulls_from_a_stream_directory() {
    let keys = Keys::new();
    let near = near_host(&keys);
    // Some bulk, so an increment has something to be small against.
    next_generation(
        &near,
        "grow",
        &format!(
            "INSERT INTO shop.orders SELECT seq + 1000000, 1 + seq % 2000, seq % 997 FROM {}",
            db_branch::testkit::seq(200_000)
        ),
    );
    let far = [FarHost::new(&keys, false), FarHost::new(&keys, false)];

    // In full to both; a branch on each answers with the source's checksums.
    let want2 = local_sums(&near, "ref2", "2");
    let mut full = Vec::new();
    for h in &far {
        let p = pushed(&near, &h.url(), None);
        assert_eq!(p["generation"], 2, "{p}");
        assert_eq!(p["parent"], Value::Null, "nothing in common yet: {p}");
        assert!(p["sha256"].as_str().unwrap().len() == 64, "{p}");
        full.push(p);
        let list = h.via(&near, &["--json", "baseline", "list"]);
        let list: Value = serde_json::from_slice(&list.stdout).unwrap();
        assert_eq!(generations(&list), [2], "{list}");
        assert_eq!(
            list[0]["server"]["flavour"],
            near.json(&["baseline", "list"])[1]["server"]["flavour"]
        );
        assert!(h
            .via(&near, &["create", "b", "--baseline", "2"])
            .status
            .success());
        assert_eq!(
            far_sums(h, &near, "b"),
            want2,
            "the same data on {}",
            h.url()
        );
    }
    // The same again is a no-op.
    assert_eq!(pushed(&near, &far[0].url(), None)["already_there"], true);
    // The peer, side by side on the same data: a bare `btrfs send | ssh … btrfs receive`.
    let peer_seconds = far[1].bare_btrfs_push(&keys, &near.pool().join("baselines/gen-000002"));

    // ~1% of the rows changed: an increment on generation 2, a small part of the bytes.
    near.run_ok(&["delete", "--yes", "grow"]);
    next_generation(
        &near,
        "touch",
        "UPDATE shop.orders SET total = total + 1 WHERE id % 100 = 0",
    );
    let want3 = local_sums(&near, "ref3", "3");
    let inc = pushed(&near, &far[0].url(), None);
    assert_eq!(
        (inc["generation"].as_u64(), inc["parent"].as_u64()),
        (Some(3), Some(2)),
        "{inc}"
    );
    let (full_bytes, inc_bytes) = (
        full[0]["bytes"].as_u64().unwrap(),
        inc["bytes"].as_u64().unwrap(),
    );
    assert!(
        inc_bytes * 4 < full_bytes,
        "an increment of 1% of the rows sent {inc_bytes} of {full_bytes} bytes"
    );
    eprintln!(
        "fleet: full push {full_bytes} bytes in {:.2} s (bare btrfs send | ssh | btrfs receive \
         of the same generation {peer_seconds:.2} s), incremental {inc_bytes} bytes in {:.2} s",
        full[0]["seconds"].as_f64().unwrap(),
        inc["seconds"].as_f64().unwrap()
    );
    assert!(far[0]
        .via(&near, &["create", "c", "--baseline", "3"])
        .status
        .success());
    assert_eq!(far_sums(&far[0], &near, "c"), want3);

    // A stream directory: push 2 and 3 there, pull them on a host with nothing.
    let streams = tempfile::tempdir().unwrap();
    let dest = format!("file:{}", streams.path().display());
    assert_eq!(pushed(&near, &dest, Some("2"))["parent"], Value::Null);
    assert_eq!(pushed(&near, &dest, Some("3"))["parent"], 2);
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(streams.path().join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(
        manifest["streams"].as_array().unwrap().len(),
        2,
        "{manifest}"
    );
    let other = TestEnv::new("", &keys.fleet_table());
    other.run_ok(&["init"]);
    let got = other.json(&["baseline", "pull", &dest]);
    let steps: Vec<(u64, Option<u64>)> = got
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["generation"].as_u64().unwrap(), t["parent"].as_u64()))
        .collect();
    assert_eq!(steps, [(2, None), (3, Some(2))], "{got}");
    assert_eq!(local_sums(&other, "p", "3"), want3);

    // Pull over ssh: the far host's generation 3 to a host that holds 2 (an increment).
    let back = TestEnv::new("", &keys.fleet_table());
    back.run_ok(&["init"]);
    back.run_ok(&["baseline", "pull", &dest, "2"]);
    let got = back.json(&["baseline", "pull", &far[0].url()]);
    assert_eq!(
        (got[0]["generation"].as_u64(), got[0]["parent"].as_u64()),
        (Some(3), Some(2)),
        "{got}"
    );
}

/// The `ssh` a running `db-branch` started (its child), by PID.
fn ssh_child_of(pid: u32) -> Option<i32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .find(|c: &i32| {
            std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim() == "ssh")
        })
}

#[test]
#[ignore = "needs root, btrfs, a server and sshd; run by scripts/test"]
fn an_interrupted_push_leaves_nothing_and_a_retry_succeeds() {
    let keys = Keys::new();
    let near = near_host(&keys);
    let far = FarHost::new(&keys, false);
    // Slowed to 2 MB/s, so the ssh can be killed with the stream half-way.
    let mut push = near.command(&["--json", "baseline", "push", &far.url()]);
    push.env("DB_BRANCH_TEST_THROTTLE", "2000000")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = push.spawn().unwrap();
    // A receive under way is a writable gen-000001 there.
    let receiving = far.env.pool().join("baselines/gen-000001");
    let deadline = Instant::now() + Duration::from_secs(60);
    let ssh = loop {
        let started = receiving.is_dir();
        if let (true, Some(ssh)) = (started, ssh_child_of(child.id())) {
            break ssh;
        }
        assert!(Instant::now() < deadline, "the push never got going");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(300));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(ssh),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        !out.status.success(),
        "the push did not notice: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("push"), "{said}");
    // The far side kept nothing: no generation, and the partial receive is gone.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if !receiving.exists() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the partial receive {} was left behind",
            receiving.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let list = far.via(&near, &["--json", "baseline", "list"]);
    assert_eq!(
        serde_json::from_slice::<Value>(&list.stdout).unwrap(),
        serde_json::json!([])
    );
    // A retry goes through.
    let p = pushed(&near, &far.url(), None);
    assert_eq!(p["generation"], 1, "{p}");
    assert_success(&far.via(&near, &["create", "x"]), "create, x");
}

#[test]
#[ignore = "needs root, btrfs, a server and sshd; run by scripts/test"]
fn host_flag_runs_every_command_there_with_its_exit_code() {
    let keys = Keys::new();
    let near = near_host(&keys);
    // Branches there listen on the namespace's address, which it advertises.
    let far = FarHost::new(&keys, true);
    let far_addr = far.veth.peer_addr.clone();
    pushed(&near, &far.url(), None);

    let created = far.via(&near, &["--json", "create", "pr-1"]);
    assert_success(&created, "");
    let created: Value = serde_json::from_slice(&created.stdout).unwrap();
    let conn = &created["connection"];
    assert_eq!(conn["host"], far_addr.as_str(), "{conn}");
    // The DATABASE_URL works from this machine, over verified TLS.
    let url = conn["url"].as_str().unwrap();
    assert!(
        url.contains(&format!("@{far_addr}:")) && url.contains("ssl-mode=VERIFY_IDENTITY"),
        "{url}"
    );
    let s = server();
    let verify: Vec<String> = if s.mysql {
        vec![
            format!("--ssl-ca={}", conn["ssl_ca"].as_str().unwrap()),
            "--ssl-mode=VERIFY_IDENTITY".into(),
        ]
    } else {
        vec![
            format!("--ssl-ca={}", conn["ssl_ca"].as_str().unwrap()),
            "--ssl-verify-server-cert".into(),
        ]
    };
    let out = Command::new(&s.client)
        .args([
            "--no-defaults",
            &format!("-h{far_addr}"),
            &format!("-P{}", conn["port"]),
        ])
        .arg(format!("-u{}", conn["user"].as_str().unwrap()))
        .arg(format!("-p{}", conn["password"].as_str().unwrap()))
        .args(&verify)
        .args(["-N", "-B", "-e", "SELECT COUNT(*) FROM shop.customers"])
        .output()
        .unwrap();
    assert_success(&out, "");

    // env, reset, delete; the far side's exit codes come back as ours.
    let vars = far.via(&near, &["env", "pr-1"]);
    assert!(String::from_utf8_lossy(&vars.stdout).contains(&format!("MYSQL_HOST={far_addr}")));
    assert_success(&far.via(&near, &["reset", "pr-1"]), "reset, pr-1");
    assert_eq!(far.via(&near, &["reset", "nope"]).status.code(), Some(2));
    assert_eq!(
        far.via(&near, &["create", "Bad Name"]).status.code(),
        Some(2)
    );
    // DB_BRANCH_HOST does the same as --host.
    let out = near
        .command(&["--json", "list"])
        .env("DB_BRANCH_HOST", far.url())
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed[0]["name"], "pr-1", "{listed}");
    assert!(far
        .via(&near, &["delete", "--yes", "pr-1"])
        .status
        .success());
    assert_eq!(
        near.json(&["list"]),
        serde_json::json!([]),
        "nothing happened here"
    );
    // A host nobody answers on: exit 1, saying so.
    let url = format!("ssh://root@{far_addr}:2222");
    let out = near.run(&["--host", &url, "list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("could not reach"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "needs root, btrfs, a server and sshd; run by scripts/test"]
fn a_datadir_owned_by_another_uid_is_given_to_the_server_user_at_start() {
    // What a generation from a host where the server's user has another uid looks like: a
    // send stream carries numeric owners.
    let env = TestEnv::with_baseline();
    let p = db_branch::testkit::port(&env.json(&["create", "w"]));
    env.run_ok(&["stop", "w"]);
    let datadir = env.pool().join("branches/w");
    let out = Command::new("chown")
        .args(["-R", "54321:54321"])
        .arg(&datadir)
        .output()
        .unwrap();
    assert_success(&out, "");
    env.run_ok(&["start", "w"]);
    assert_eq!(
        db_branch::testkit::sql(p, "SELECT COUNT(*) FROM shop.customers"),
        "2000"
    );
    use std::os::unix::fs::MetadataExt;
    assert_ne!(std::fs::metadata(&datadir).unwrap().uid(), 54321);
}

#[test]
#[ignore = "needs root, btrfs, a server and sshd; run by scripts/test"]
fn file_level_copies_travel_where_send_streams_cannot() {
    let keys = Keys::new();
    let near = near_host(&keys);
    let want = local_sums(&near, "ref", "1");
    // To a stream directory as files (what hosts of the other backend pull), and back.
    let streams = tempfile::tempdir().unwrap();
    let dest = format!("file:{}", streams.path().display());
    let p = near.json(&["baseline", "push", &dest, "--as-files"]);
    assert_eq!(
        (p[0]["files"].as_bool(), p[0]["parent"].as_u64()),
        (Some(true), None),
        "{p}"
    );
    assert!(streams.path().join("gen-000001.files.stream").is_file());
    let other = TestEnv::new("", "");
    other.run_ok(&["init"]);
    let got = other.json(&["baseline", "pull", &dest]);
    assert_eq!(got[0]["files"], true, "{got}");
    assert_eq!(local_sums(&other, "p", "1"), want);
    let list = other.json(&["baseline", "list"]);
    let near_id = near.json(&["baseline", "list"])[0]["identity"].clone();
    assert_eq!(list[0]["origin_identity"], near_id, "{list}");
    assert_eq!(
        list[0]["server"],
        near.json(&["baseline", "list"])[0]["server"]
    );
    // Over ssh; a second push of it is a no-op (the copy knows its origin).
    let far = FarHost::new(&keys, false);
    let p = near.json(&["baseline", "push", &far.url(), "--as-files"]);
    assert_eq!(p[0]["files"], true, "{p}");
    assert_success(&far.via(&near, &["create", "f"]), "create, f");
    assert_eq!(far_sums(&far, &near, "f"), want);
    assert_eq!(
        near.json(&["baseline", "push", &far.url(), "--as-files"])[0]["already_there"],
        true
    );
}
