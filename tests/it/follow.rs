//! Root integration tests of `baseline follow` and `baseline cut` against a real source: a
//! branch of another root on this host, its binary log and GTIDs on, while a writer keeps
//! changing it. Every writer statement is its own transaction and is determined by its
//! number, so the data a generation must hold follows from the GTID position it records.

use crate::bake::files_containing;
use db_branch::testkit::{server, source_url, sql, wait_for, TestEnv};
use serde_json::Value;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The source's options: binary log, a server id of its own, and on MySQL the GTID mode
/// (MariaDB always writes GTIDs).
fn source_env() -> TestEnv {
    let mut args = vec!["--log-bin=binlog", "--server-id=1", "--binlog-format=ROW"];
    if server().mysql {
        args.extend(["--gtid-mode=ON", "--enforce-gtid-consistency=ON"]);
    }
    let list = args
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let env = TestEnv::new("", &format!("[mysqld]\nextra_args = [{list}]\n"));
    env.run_ok(&["init"]);
    env.baseline_from_sql(
        "schema.sql",
        "CREATE DATABASE f; \
         CREATE TABLE f.w (id INT PRIMARY KEY, v INT NOT NULL); \
         CREATE TABLE f.people (id INT PRIMARY KEY, email VARCHAR(80) NOT NULL);",
    );
    env
}

const PEOPLE_AT_START: u64 = 20;

/// The last transaction number of a GTID position: MariaDB's `0-1-57` or MySQL's
/// `uuid:1-57` (one source, one writer: one domain, one range).
fn seq_of(gtid: &str) -> u64 {
    let last = gtid.trim().rsplit([',', '\n']).next().unwrap_or("");
    last.rsplit(['-', ':'])
        .next()
        .unwrap_or("")
        .parse()
        .unwrap_or(0)
}

fn source_position(port: u16) -> String {
    let var = if server().mysql {
        "@@GLOBAL.gtid_executed"
    } else {
        "@@GLOBAL.gtid_binlog_pos"
    };
    sql(port, &format!("SELECT {var}"))
}

/// Writer statement `i` (from 1): insert a row, bump it, insert a person with a real
/// address; one transaction each.
fn statement(i: u64) -> String {
    match i % 3 {
        1 => format!("INSERT INTO f.w VALUES ({i}, {i});"),
        2 => format!("UPDATE f.w SET v = v + 1000 WHERE id = {};", i - 1),
        _ => format!("INSERT INTO f.people VALUES ({i}, 'real{i}@corp.example');"),
    }
}

/// What the tables hold after the first `k` writer statements: f.w's count, SUM(v) and
/// SUM(id * v); f.people's count.
fn expected(k: u64) -> (u64, u64, u64, u64) {
    let (mut n, mut sum, mut weighted) = (0, 0, 0);
    for i in (1..=k).filter(|i| i % 3 == 1) {
        let v = if i < k { i + 1000 } else { i };
        n += 1;
        sum += v;
        weighted += i * v;
    }
    (n, sum, weighted, PEOPLE_AT_START + k / 3)
}

fn held(port: u16) -> (u64, u64, u64, u64) {
    let row = sql(
        port,
        "SELECT COUNT(*), COALESCE(SUM(v), 0), COALESCE(SUM(id * v), 0), \
         (SELECT COUNT(*) FROM f.people) FROM f.w",
    );
    let n: Vec<u64> = row.split('\t').map(|x| x.parse().unwrap()).collect();
    (n[0], n[1], n[2], n[3])
}

/// One client session on the source fed a statement every few milliseconds until stopped.
struct Writer {
    child: Child,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
}

impl Writer {
    fn start(port: u16) -> Writer {
        let mut child = Command::new(server().client)
            .args(["--no-defaults", "-h127.0.0.1", "-uroot", "-B"])
            .args(db_branch::testkit::password_arg(port))
            .arg(format!("-P{port}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start the writer's client");
        let mut stdin = child.stdin.take().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut i = 0;
            while !flag.load(Ordering::SeqCst) {
                i += 1;
                if writeln!(stdin, "{}", statement(i)).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(4));
            }
            i
        });
        Writer {
            child,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops writing; how many statements were sent (the client's stdin closes, so it
    /// runs the rest and exits).
    fn finish(&mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        let sent = self.thread.take().map_or(0, |t| t.join().unwrap());
        let status = self.child.wait().expect("wait for the writer's client");
        assert!(status.success(), "the writer's client failed: {status}");
        sent
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The follower's line in `doctor` (which exits 1 when any check fails, and reports
/// either way).
fn doctor_follower(env: &TestEnv) -> Value {
    let out = env.run(&["--json", "doctor"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("doctor's JSON");
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "follower")
        .cloned()
        .unwrap_or_else(|| panic!("doctor shows the follower: {v}"))
}

fn follower(env: &TestEnv) -> Value {
    env.json(&["baseline", "follower"])
}

/// Waits until the follower's two threads run; panics with what it shows if they do not.
fn wait_replicating(env: &TestEnv, what: &str) {
    let started = std::time::Instant::now();
    loop {
        let v = follower(env);
        if v["status"]["receiving"] == true && v["status"]["applying"] == true {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{what}: {v:#}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn a_follower_cuts_masked_generations_at_the_positions_it_records_while_the_source_writes() {
    follow_while_writing(false);
}

#[test]
#[ignore = "needs root, btrfs and MySQL; run by scripts/test on the MySQL tier"]
fn a_mysql_follower_seeded_by_clone_does_the_same() {
    // CLONE is MySQL's: scripts/test runs this on the MySQL tier only (`--skip` elsewhere),
    // so it never passes without having checked anything.
    assert!(
        server().mysql,
        "this test is of MySQL's CLONE: run it with DB_BRANCH_TEST_SERVER=mysql-9.7"
    );
    follow_while_writing(true);
}

/// Follows a source while a writer changes it, cuts, restarts the follower, cuts, checks
/// every generation against the writer's statements up to its GTID position, then kills
/// the source. `clone`: the source has the clone plugin, so the seed is a CLONE.
fn follow_while_writing(clone: bool) {
    let src = source_env();
    let source = src.json(&["create", "source"])["port"].as_u64().unwrap() as u16;
    // People whose ids are below the writer's (which start at 1): -999..-980.
    sql(
        source,
        &format!(
            "INSERT INTO f.people SELECT seq - 1000, CONCAT('real', seq, '@corp.example') FROM {}",
            db_branch::testkit::seq(PEOPLE_AT_START)
        ),
    );
    // The follower connects as an account with only the grants docs/follow.md lists, and
    // a password nothing else contains.
    let canary = format!("Repl{}x{}", std::process::id(), source);
    sql(
        source,
        &format!(
            "CREATE USER 'repl'@'127.0.0.1' IDENTIFIED BY '{canary}'; \
             GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT, RELOAD, LOCK TABLES, \
             SHOW VIEW ON *.* TO 'repl'@'127.0.0.1'"
        ),
    );
    if clone {
        sql(
            source,
            "INSTALL PLUGIN clone SONAME 'mysql_clone.so'; \
             GRANT BACKUP_ADMIN ON *.* TO 'repl'@'127.0.0.1'",
        );
    }
    let start = seq_of(&source_position(source));
    let mut writer = Writer::start(source);

    let env = TestEnv::new("", "");
    env.run_ok(&["init"]);
    let mask = env.root.join("mask.sql");
    std::fs::write(
        &mask,
        "UPDATE f.people SET email = CONCAT('user', id, '@example.invalid');",
    )
    .unwrap();
    let url = format!("mysql://repl:{canary}@127.0.0.1:{source}");
    let followed = env.json(&[
        "baseline",
        "follow",
        &url,
        "--mask-sql",
        mask.to_str().unwrap(),
    ]);
    assert_eq!(followed["existed"], false, "{followed}");
    let seeded_by = followed["following"]["seed_path"].as_str().unwrap();
    if clone {
        assert_eq!(seeded_by, "clone", "{followed}");
    } else {
        assert_eq!(seeded_by, "tablespace", "{followed}");
    }
    assert!(
        !followed.to_string().contains(&canary),
        "the source's password is not shown"
    );
    // Idempotent: the same source again seeds nothing.
    let again = env.json(&[
        "baseline",
        "follow",
        &url,
        "--mask-sql",
        mask.to_str().unwrap(),
    ]);
    assert_eq!(again["existed"], true);
    wait_replicating(&env, "the follower replicates");

    assert_eq!(doctor_follower(&env)["level"], "ok");
    let listed = env.run(&["baseline", "list"]);
    let said = String::from_utf8_lossy(&listed.stderr);
    assert!(
        said.contains("follower follower of mysql://repl:***@"),
        "{said}"
    );
    assert!(said.contains("replicating"), "{said}");
    let metrics = env.run_ok(&["metrics"]);
    assert!(
        metrics.contains("db_branch_follower_replicating{source=\"mysql://repl:***@127.0.0.1:"),
        "{metrics}"
    );
    let mut cuts = Vec::new();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(1500));
        cuts.push(env.json(&["baseline", "cut"]));
    }
    // It survives its own restart and resumes from where it was.
    env.run_ok(&["stop", "follower"]);
    env.run_ok(&["start", "follower"]);
    wait_replicating(&env, "the restarted follower replicates");
    let before = seq_of(cuts[2]["gtid"].as_str().unwrap());
    wait_for("the restarted follower to move on", || {
        seq_of(follower(&env)["status"]["position"].as_str().unwrap_or("")) > before
    });
    cuts.push(env.json(&["baseline", "cut"]));
    let sent = writer.finish();

    let listed = env.json(&["baseline", "list"]);
    let mut last = start;
    for cut in &cuts {
        let generation = cut["generation"].as_u64().unwrap();
        let gtid = cut["gtid"].as_str().unwrap();
        let at = seq_of(gtid);
        let k = at - start;
        assert!(at >= last, "cuts move forward: {cuts:?}");
        assert!(k > 0 && k <= sent, "{k} of {sent} writes at {gtid}");
        last = at;
        let pause = cut["pause_seconds"].as_f64().unwrap();
        assert!(pause <= 1.0, "the applier was paused {pause} s for a cut");
        assert_eq!(cut["masked"], true);
        let row = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["generation"].as_u64() == Some(generation))
            .unwrap_or_else(|| panic!("generation {generation} listed: {listed}"));
        assert_eq!(row["followed"]["gtid"], gtid, "{row}");

        let name = format!("g{generation}");
        let port = env.json(&["create", &name, "--baseline", &generation.to_string()])["port"]
            .as_u64()
            .unwrap() as u16;
        assert_eq!(
            held(port),
            expected(k),
            "generation {generation} at {gtid} holds the source's data after its first \
             {k} writes"
        );
        assert_eq!(
            sql(
                port,
                "SELECT COUNT(*) FROM f.people WHERE email NOT LIKE '%@example.invalid'"
            ),
            "0",
            "generation {generation} is masked"
        );
        env.run_ok(&["delete", &name, "--yes"]);
    }
    eprintln!(
        "follow: seeded by {seeded_by} in {:.2} s; {sent} writes; cuts took {:?} s, lag {:?} s",
        followed["seconds"].as_f64().unwrap(),
        cuts.iter()
            .map(|c| c["seconds"].as_f64().unwrap())
            .collect::<Vec<_>>(),
        cuts.iter()
            .map(|c| c["lag_seconds"].clone())
            .collect::<Vec<_>>(),
    );
    eprintln!(
        "follow: cuts at {:?}, pauses {:?} s",
        cuts.iter()
            .map(|c| seq_of(c["gtid"].as_str().unwrap()) - start)
            .collect::<Vec<_>>(),
        cuts.iter()
            .map(|c| c["pause_seconds"].as_f64().unwrap())
            .collect::<Vec<_>>()
    );

    // The password the follower replicates with stays in the follower: no generation cut
    // from it holds it (nor its relay logs), nor db-branch's own files.
    let leaked = files_containing(&env.pool().join("baselines"), canary.as_bytes());
    assert!(
        leaked.is_empty(),
        "generations hold the source's password: {leaked:?}"
    );
    if server().mysql {
        // MySQL is given it only by START REPLICA, which stores none of it: not even the
        // follower holds it (MariaDB's master.info does, and goes before a generation).
        let held = files_containing(&env.pool().join("branches"), canary.as_bytes());
        assert!(
            held.is_empty(),
            "the follower stores the password: {held:?}"
        );
    }
    let state = std::fs::read_to_string(env.root.join("follow.json")).unwrap();
    assert!(!state.contains(&canary), "{state}");

    // The source gone: the follower says so, and a cut makes nothing.
    let pid = src
        .server_pid_of("source")
        .expect("the source's server runs");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_for("the follower to notice its source is gone", || {
        follower(&env)["status"]["receiving"] == false
    });
    assert_eq!(doctor_follower(&env)["level"], "warn");
    let metrics = env.run_ok(&["metrics"]);
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("db_branch_follower_replicating{") && l.ends_with("} 0")),
        "{metrics}"
    );
    let generations = env.json(&["baseline", "list"]).as_array().unwrap().len();
    let out = env.run(&["baseline", "cut"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a cut without a source failed");
    assert!(stderr.contains("no generation was made"), "{stderr}");
    assert!(
        stderr.contains("re-seed") || stderr.contains("seed it anew"),
        "{stderr}"
    );
    assert_eq!(
        env.json(&["baseline", "list"]).as_array().unwrap().len(),
        generations
    );
    env.run_ok(&["baseline", "unfollow", "--yes"]);
    assert_eq!(follower(&env), Value::Null);
}

#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn every_cuts_on_a_systemd_timer_and_unfollow_removes_it() {
    let src = source_env();
    let source = src.json(&["create", "source"])["port"].as_u64().unwrap() as u16;
    sql(source, "INSERT INTO f.w VALUES (1, 1)");
    let env = TestEnv::new("", "");
    env.run_ok(&["init"]);
    let url = source_url(source);
    if env.service != "systemd" {
        // The built-in supervisor has no timers: refused before anything is seeded.
        let out = env.run(&["baseline", "follow", &url, "--no-mask", "--every", "6h"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("cron"));
        assert_eq!(follower(&env), Value::Null);
        assert_eq!(env.json(&["list"]), serde_json::json!([]));
        return;
    }
    let followed = env.json(&["baseline", "follow", &url, "--no-mask", "--every", "3s"]);
    let timer = followed["following"]["timer"].as_str().unwrap().to_string();
    assert_eq!(followed["following"]["every"], "3s");
    let systemctl = |args: &[&str]| {
        let out = Command::new("systemctl")
            .args(args)
            .output()
            .expect("systemctl");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(systemctl(&["is-active", &timer]), "active");
    // Two cuts by the timer, one after the other.
    wait_for("two generations cut by the timer", || {
        env.json(&["baseline", "list"]).as_array().unwrap().len() >= 2
    });
    let listed = env.json(&["baseline", "list"]);
    for g in listed.as_array().unwrap() {
        assert_eq!(g["followed"]["source"], followed["following"]["source"]);
    }
    env.run_ok(&["baseline", "unfollow", "--yes"]);
    assert_ne!(systemctl(&["is-active", &timer]), "active");
    let unit_dir = std::path::Path::new("/run/systemd/system");
    assert!(!unit_dir.join(&timer).exists(), "{timer} is removed");
}
