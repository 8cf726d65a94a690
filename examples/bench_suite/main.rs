//! The benchmark suite: every operation against its peers, side by side on the same data,
//! for each server (MariaDB 10.11, Oracle MySQL 9.7, MariaDB 11.8), scaling curves, the
//! memory guard on a fixed budget, start-up with many tables, and a chart. Writes
//! docs/benchmarks.md and docs/benchmarks-scaling.svg.
//!
//!   sudo scripts/bench suite                      (release build, installs what it needs)
//!   cargo run --release --features testing --example bench-suite -- [--size 360M]
//!       [--runs 10] [--servers mariadb-10.11,mysql-9.7,mariadb-11.8]
//!       [--tables 1000,10000,100000] [--out DIR] [--only fleet|startup|pools]
//!   --only startup: create/reset with and without mysqld.skip_fsync, idle memory and many
//!   tables per server, spliced into docs/benchmarks.md as a section of its own.
//!   --only pools: claims (command and Python helper) and pool fill per server, likewise.
//!   cargo run --features testing --example bench-suite -- --smoke --out DIR   (the tests')

use db_branch::testkit::bench::{dir_bytes, now_utc, stats, which};
use db_branch::testkit::{port, sql, TestEnv, TestServer};
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod fleet;
mod pools;
mod startup;
mod three_ways;

struct Opts {
    size_mb: u64,
    runs: usize,
    steps: Vec<usize>,
    servers: Vec<String>,
    tables: Vec<usize>,
    out: PathBuf,
    smoke: bool,
    /// Only the fleet section, spliced into the existing document.
    only_fleet: bool,
    /// Only the start-up section (`startup.rs`), likewise.
    only_startup: bool,
    /// Only the pools section (`pools.rs`), likewise.
    only_pools: bool,
}

fn opts() -> Opts {
    let mut o = Opts {
        size_mb: 360,
        runs: 10,
        steps: vec![1, 10, 50, 100],
        servers: vec![
            "mariadb-10.11".into(),
            "mysql-9.7".into(),
            "mariadb-11.8".into(),
        ],
        tables: vec![1000, 10000, 100000],
        out: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/docs")),
        smoke: false,
        only_fleet: false,
        only_startup: false,
        only_pools: false,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let val = || args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--size" => {
                let s: db_branch::values::ByteSize = val().parse().expect("--size like 360M or 2G");
                o.size_mb = (s.bytes() >> 20).max(1);
                i += 1;
            }
            "--runs" => {
                o.runs = val().parse().expect("--runs N");
                i += 1;
            }
            "--servers" => {
                o.servers = val().split(',').map(str::to_string).collect();
                i += 1;
            }
            "--tables" => {
                o.tables = val()
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse().expect("--tables 1000,10000"))
                    .collect();
                i += 1;
            }
            "--out" => {
                o.out = PathBuf::from(val());
                i += 1;
            }
            "--smoke" => {
                o.smoke = true;
                o.runs = 2;
                o.steps = vec![1, 3];
                o.size_mb = 1;
                o.servers = vec!["mariadb-10.11".into()];
                o.tables = vec![20];
            }
            "--only" => {
                match val().as_str() {
                    "fleet" => o.only_fleet = true,
                    "startup" => o.only_startup = true,
                    "pools" => o.only_pools = true,
                    other => panic!("--only fleet, startup or pools, not {other:?}"),
                }
                i += 1;
            }
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
        i += 1;
    }
    o
}

fn timed<T>(f: impl FnOnce() -> T) -> (f64, T) {
    let t = Instant::now();
    let r = f();
    (t.elapsed().as_secs_f64(), r)
}

fn meminfo(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    text.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// Resident memory of every server of `env`, summed per process (Rss) and as the host
/// sees it (Pss: shared pages counted once).
fn servers_memory(env: &TestEnv) -> (u64, u64) {
    env.server_pids()
        .iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok())
        .map(|text| {
            let field = |name: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|v| v.trim().trim_end_matches(" kB").parse::<u64>().ok())
                    .unwrap_or(0)
                    * 1024
            };
            (field("Rss:"), field("Pss:"))
        })
        .fold((0, 0), |(r, p), (r1, p1)| (r + r1, p + p1))
}

fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

/// Starts the server under test, plainly, on `datadir` (the cp/reflink peers) and waits
/// until it answers.
fn start_plain(server: &TestServer, datadir: &Path, port: u16) -> (f64, std::process::Child) {
    let cnf = datadir.with_extension("cnf");
    let files = datadir.with_extension("files");
    std::fs::create_dir_all(&files).unwrap();
    let mysql_only = if server.mysql {
        format!(
            "mysqlx=OFF\nsecure-file-priv={}\nplugin-load-add=auth_socket.so\n",
            files.display()
        )
    } else {
        String::new()
    };
    std::fs::write(
        &cnf,
        format!(
            "[mysqld]\ndatadir={}\nport={port}\nbind-address=127.0.0.1\nsocket={}\npid-file={}\nuser=mysql\n\
             skip-name-resolve\nskip-log-bin\ninnodb-buffer-pool-load-at-startup=0\n\
             innodb-buffer-pool-dump-at-shutdown=0\ninnodb-log-buffer-size=2M\n{mysql_only}",
            datadir.display(),
            files.join("peer.sock").display(),
            files.join("peer.pid").display()
        ),
    )
    .unwrap();
    let _ = Command::new("chown")
        .args(["-R", "mysql:mysql"])
        .arg(&files)
        .status();
    let t = Instant::now();
    let child = Command::new(&server.binary)
        .arg(format!("--defaults-file={}", cnf.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    loop {
        let ok = Command::new(&server.client)
            .args([
                "--no-defaults",
                "-h127.0.0.1",
                "-uroot",
                &format!("-P{port}"),
                "-e",
                "DO 1",
            ])
            .args(db_branch::testkit::password_arg(port))
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            break;
        }
        if t.elapsed() > Duration::from_secs(120) {
            let mut child = child;
            let _ = child.kill();
            panic!("peer server on {} did not start", datadir.display());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    (t.elapsed().as_secs_f64(), child)
}

fn sh(script: &str) -> f64 {
    let (t, ok) = timed(|| {
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .status()
            .unwrap()
            .success()
    });
    assert!(ok, "failed: {script}");
    t
}

type Stats = (f64, f64, f64);

/// Reads more than a buffer pool holds: every row of the big tables and two indexes.
const WARM: &str = "SELECT COUNT(*), SUM(LENGTH(sku)) FROM shop.order_items; \
    SELECT COUNT(*), SUM(LENGTH(body)) FROM shop.reviews; \
    SELECT COUNT(*) FROM shop.orders FORCE INDEX (status_placed) WHERE status <> 'x'; \
    SELECT COUNT(*) FROM shop.customers FORCE INDEX (email) WHERE email <> ''; \
    SELECT COUNT(*), SUM(LENGTH(payload)) FROM shop.audit_events";

struct Guard {
    budget: u64,
    admitted: usize,
    rss: u64,
    pss: u64,
    refusal: String,
}

/// Everything measured for one server.
struct Measured {
    server: TestServer,
    version: String,
    datadir_bytes: u64,
    t_baseline: f64,
    create: Stats,
    reset: Stats,
    delete: Stats,
    woken: Stats,
    graceful: Stats,
    bake: Stats,
    bake_path: String,
    dump_pipe: f64,
    copy_start: Stats,
    reflink_start: Stats,
    mydumper: Option<(f64, f64)>,
    fresh_disk: u64,
    deleted_disk: u64,
    idle_rss: u64,
    warm_rss: u64,
    avg_rss: u64,
    seq_curve: Vec<(usize, f64, u64)>,
    par_curve: Vec<(usize, f64, u64)>,
    guard: Guard,
    /// (tables, baseline seconds, create median, reset median, datadir bytes)
    tables: Vec<(usize, f64, f64, f64, u64)>,
    pools: pools::Pools,
    history: History,
    fleet: fleet::Fleet,
}

/// Branches from branches, checkpoints and promotion, on the same data as create/reset.
struct History {
    /// `create --from` a running branch (crash-consistent: includes InnoDB's recovery).
    from_running: Stats,
    /// `create --from --clean` and the source's downtime for it.
    from_clean: Stats,
    source_down: Stats,
    checkpoint: Stats,
    checkpoint_clean: Stats,
    /// `reset --to` a clean checkpoint, and a crash-consistent one.
    reset_to_clean: Stats,
    reset_to_crash: Stats,
    /// `baseline create --from-branch` (seconds).
    promote: f64,
}

/// Measures the history commands on running branch `b` of `env` (`runs` of each).
fn history(env: &TestEnv, b: &str, runs: usize) -> History {
    // (stop-idle above stopped it.)
    env.run_ok(&["start", b]);
    let p = env.port(b);
    let write = |i: usize| {
        sql(
            p,
            &format!(
                "UPDATE shop.orders SET total = total + 1 WHERE id <= {}",
                1000 * (i + 1)
            ),
        )
    };
    let from_running: Vec<f64> = (0..runs)
        .map(|i| {
            write(i);
            let t = timed(|| env.run_ok(&["create", &format!("fr{i}"), "--from", b])).0;
            env.run_ok(&["delete", "--yes", &format!("fr{i}")]);
            t
        })
        .collect();
    let mut source_down = Vec::new();
    let from_clean: Vec<f64> = (0..runs)
        .map(|i| {
            write(i);
            let (t, v) = timed(|| env.json(&["create", &format!("fc{i}"), "--from", b, "--clean"]));
            source_down.push(v["source_downtime_seconds"].as_f64().unwrap_or(0.0));
            env.run_ok(&["delete", "--yes", &format!("fc{i}")]);
            t
        })
        .collect();
    let checkpoint: Vec<f64> = (0..runs)
        .map(|i| {
            write(i);
            timed(|| env.run_ok(&["checkpoint", b, &format!("k{i}")])).0
        })
        .collect();
    let checkpoint_clean: Vec<f64> = (0..runs)
        .map(|i| {
            write(i);
            timed(|| env.run_ok(&["checkpoint", b, &format!("kc{i}"), "--clean"])).0
        })
        .collect();
    let reset_to_clean: Vec<f64> = (0..runs)
        .map(|i| {
            write(i);
            timed(|| env.run_ok(&["reset", b, "--to", "kc0"])).0
        })
        .collect();
    let reset_to_crash: Vec<f64> = (0..runs)
        .map(|i| {
            write(i);
            timed(|| env.run_ok(&["reset", b, "--to", "k0"])).0
        })
        .collect();
    let promote = timed(|| env.run_ok(&["baseline", "create", "--from-branch", b])).0;
    History {
        from_running: stats(from_running),
        from_clean: stats(from_clean),
        source_down: stats(source_down),
        checkpoint: stats(checkpoint),
        checkpoint_clean: stats(checkpoint_clean),
        reset_to_clean: stats(reset_to_clean),
        reset_to_crash: stats(reset_to_crash),
        promote,
    }
}

/// An environment for the suite: the built-in supervisor, a large pool, wide ports.
fn suite_env(image: &str, ports: &str) -> TestEnv {
    let env = TestEnv::with_service("process", image, "", "");
    let text = std::fs::read_to_string(&env.config).unwrap();
    let text = text
        .lines()
        .map(|l| {
            if l.starts_with("ports = ") {
                format!("ports = \"{ports}\"")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&env.config, text).unwrap();
    env.run_ok(&["init"]);
    env
}

fn set_memory(env: &TestEnv, settings: &str) {
    let text = std::fs::read_to_string(&env.config).unwrap();
    let kept: Vec<&str> = text.split("\n[memory]").collect();
    std::fs::write(&env.config, format!("{}\n[memory]\n{settings}\n", kept[0])).unwrap();
}

/// The server's own `--version` line.
fn version_line(server: &TestServer) -> String {
    String::from_utf8(
        Command::new(&server.binary)
            .arg("--version")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string()
}

/// "MySQL 9.7.4", or the whole line when it does not parse.
fn server_version(server: &TestServer) -> String {
    let line = version_line(server);
    db_branch::flavour::Flavour::from_version_output(&line)
        .map(|f| f.to_string())
        .unwrap_or(line)
}

fn measure(o: &Opts, server: &TestServer) -> Measured {
    let version = version_line(server);
    eprintln!("suite: {version}");
    let env = suite_env("40G", "31000-31799");

    // 1. The sample database (the shop schema plus many small tables); scale 1 ≈ 180 MB.
    let scale = (o.size_mb / 180).max(1);
    let t_baseline = env.sample_baseline(scale as u32);
    let datadir_bytes = dir_bytes(&env.pool().join("baselines/gen-000001"));
    eprintln!(
        "suite: baseline {:.0} MB in {t_baseline:.1} s",
        mb(datadir_bytes)
    );

    // 2. Our operations.
    let names: Vec<String> = (0..o.runs).map(|i| format!("b{i}")).collect();
    let create: Vec<f64> = names
        .iter()
        .map(|n| timed(|| env.run_ok(&["create", n])).0)
        .collect();
    let p0 = env.port("b0");
    let reset: Vec<f64> = (0..o.runs)
        .map(|i| {
            sql(
                p0,
                &format!(
                    "UPDATE shop.orders SET total = total + 1 WHERE id <= {}",
                    1000 * (i + 1)
                ),
            );
            timed(|| env.run_ok(&["reset", "b0"])).0
        })
        .collect();
    let woken: Vec<f64> = (0..o.runs)
        .map(|_| {
            env.run_ok(&["stop-idle", "--idle-for", "0s"]);
            timed(|| env.run_ok(&["start", "b1"])).0
        })
        .collect();
    let graceful: Vec<f64> = (0..o.runs.min(5))
        .map(|_| {
            timed(|| {
                env.run_ok(&["stop", "b1"]);
                env.run_ok(&["reset", "b1"]);
            })
            .0
        })
        .collect();
    let history = history(&env, "b0", o.runs.min(5));
    // Disk and memory of one branch.
    let probe = env.json(&["create", "probe"]);
    let fresh_disk = probe["disk_bytes"].as_u64().unwrap_or(0);
    let idle_rss = env.json(&["status", "probe"])["rss_bytes"]
        .as_u64()
        .unwrap_or(0);
    let p2 = port(&probe);
    sql(p2, WARM);
    let warm_rss = env.json(&["status", "probe"])["rss_bytes"]
        .as_u64()
        .unwrap_or(0);
    sql(p2, "DELETE FROM shop.order_items");
    env.run_ok(&["stop", "probe"]);
    let _ = Command::new("sync").status();
    let deleted_disk = env.json(&["status", "probe"])["disk_bytes"]
        .as_u64()
        .unwrap_or(0);
    env.run_ok(&["delete", "--yes", "probe"]);
    let delete: Vec<f64> = names
        .iter()
        .map(|n| timed(|| env.run_ok(&["delete", "--yes", n])).0)
        .collect();

    // 3. Peers on the same data: dump | load into a new database of a branch, a full copy
    // or a reflink copy of the datadir and a plain start.
    env.run_ok(&["create", "peer"]);
    let pp = env.port("peer");
    sql(pp, "CREATE DATABASE shop_copy");
    let conn = db_branch::testkit::login(pp);
    let dump_pipe = sh(&format!(
        "{} {conn} --single-transaction shop | {} {conn} shop_copy",
        server.dump.display(),
        server.client.display()
    ));
    let gen_dir = env.pool().join("baselines/gen-000001");
    let mut copy_start = Vec::new();
    let mut reflink_start = Vec::new();
    for (i, mode) in ["--reflink=never", "--reflink=always"].iter().enumerate() {
        for r in 0..o.runs.min(3) {
            let dir = env.pool().join(format!("peer-copy-{i}-{r}"));
            let (t_copy, _) = timed(|| {
                sh(&format!(
                    "cp -a {mode} {} {}",
                    gen_dir.display(),
                    dir.display()
                ))
            });
            let (t_start, mut child) = start_plain(server, &dir, 31790);
            if i == 0 {
                copy_start.push(t_copy + t_start)
            } else {
                reflink_start.push(t_copy + t_start)
            }
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&dir);
            let _ = std::fs::remove_dir_all(dir.with_extension("files"));
        }
    }
    // Bake against mydumper/myloader.
    env.run_ok(&["delete", "--yes", "peer"]);
    let src = port(&env.json(&["create", "source"]));
    let url = db_branch::testkit::source_url(src);
    let mut bake_path = String::new();
    let bake: Vec<f64> = (0..o.runs.min(3))
        .map(|_| {
            let (t, v) = timed(|| env.json(&["bake", "--from", &url]));
            bake_path = v["path"].as_str().unwrap_or("?").to_string();
            t
        })
        .collect();
    let mydumper = if which("mydumper") && which("myloader") && !o.smoke && !server.mysql {
        let dir = env.root.join("mydumper");
        let d = sh(&format!(
            "rm -rf {0} && mydumper -h 127.0.0.1 -P {src} -u root -p {1} -B shop -t 2 -r 200000 -o {0} 2>/dev/null",
            dir.display(),
            db_branch::testkit::password(src)
        ));
        let tgt = port(&env.json(&["create", "myloader", "--baseline", "1"]));
        let l = sh(&format!(
            "myloader -h 127.0.0.1 -P {tgt} -u root -p {} -t 2 -B shop_copy -d {} 2>/dev/null",
            db_branch::testkit::password(tgt),
            dir.display()
        ));
        env.run_ok(&["delete", "--yes", "myloader"]);
        Some((d, l))
    } else {
        None
    };
    env.run_ok(&["delete", "--yes", "source"]);

    // 4. Scaling: time until N branches are ready, sequential and 4 at a time; memory. The
    // guard would stop MySQL's larger servers before 100 on 24 GiB when every one may grow
    // to its ceiling: this run overcommits on purpose (owed_fraction = 0).
    set_memory(&env, "owed_fraction = 0.0");
    let mut seq_curve = Vec::new();
    let max_n = *o.steps.last().unwrap();
    let mut elapsed = 0.0;
    for i in 1..=max_n {
        elapsed += timed(|| env.run_ok(&["create", &format!("s{i}")])).0;
        if o.steps.contains(&i) {
            seq_curve.push((i, elapsed, servers_memory(&env).1));
        }
    }
    let rss_at_max: Vec<u64> = env
        .json(&["list"])
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["rss_bytes"].as_u64())
        .collect();
    let avg_rss = rss_at_max.iter().sum::<u64>() / rss_at_max.len().max(1) as u64;
    for i in 1..=max_n {
        env.run_ok(&["delete", "--yes", &format!("s{i}")]);
    }
    let par_curve_v = {
        let start = Instant::now();
        let next = std::sync::atomic::AtomicUsize::new(1);
        let done = std::sync::Mutex::new(0usize);
        let curve = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if i > max_n {
                        break;
                    }
                    env.run_ok(&["create", &format!("p{i}")]);
                    let mut d = done.lock().unwrap();
                    *d += 1;
                    if o.steps.contains(&d) {
                        curve
                            .lock()
                            .unwrap()
                            .push((*d, start.elapsed().as_secs_f64(), 0));
                    }
                });
            }
        });
        curve.into_inner().unwrap()
    };
    for i in 1..=max_n {
        env.run_ok(&["delete", "--yes", &format!("p{i}")]);
    }

    // 5. The guard on a fixed budget: headroom set so that B of the available memory is left
    // to branches, default branches created until refused, then every one warmed.
    let budget: u64 = if o.smoke { 400 << 20 } else { 3 << 30 };
    let headroom = meminfo("MemAvailable:").saturating_sub(budget);
    set_memory(&env, &format!("headroom = \"{headroom}\""));
    let mut admitted = 0;
    let mut refusal = String::new();
    let mut ports = Vec::new();
    for i in 1..=400 {
        let out = env.run(&["--json", "create", &format!("g{i}")]);
        if out.status.code() == Some(75) {
            refusal = String::from_utf8_lossy(&out.stderr).trim().to_string();
            break;
        }
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        db_branch::testkit::remember_passwords(&v);
        ports.push(port(&v));
        admitted += 1;
    }
    for p in &ports {
        sql(*p, WARM);
    }
    for p in &ports {
        sql(*p, WARM);
    }
    let (rss, pss) = servers_memory(&env);
    for i in 1..=admitted {
        env.run_ok(&["delete", "--yes", &format!("g{i}")]);
    }
    drop(env);

    // 6. Pools.
    let pools = pools::measure(o.smoke);

    // 7. Baselines between hosts.
    let fleet = fleet::measure(scale as u32);

    // 8. Start-up with many tables.
    let tables = o
        .tables
        .iter()
        .map(|n| many_tables(server, *n, o.runs.min(5)))
        .collect();

    Measured {
        server: server.clone(),
        version,
        datadir_bytes,
        t_baseline,
        create: stats(create),
        reset: stats(reset),
        delete: stats(delete),
        woken: stats(woken),
        graceful: stats(graceful),
        bake: stats(bake),
        bake_path,
        dump_pipe,
        copy_start: stats(copy_start),
        reflink_start: stats(reflink_start),
        mydumper,
        fresh_disk,
        deleted_disk,
        idle_rss,
        warm_rss,
        avg_rss,
        seq_curve,
        par_curve: par_curve_v,
        guard: Guard {
            budget,
            admitted,
            rss,
            pss,
            refusal,
        },
        tables,
        pools,
        history,
        fleet,
    }
}

/// A baseline of `n` small tables; then how long create and reset take.
fn many_tables(server: &TestServer, n: usize, runs: usize) -> (usize, f64, f64, f64, u64) {
    let env = suite_env("60G", "32000-32039");
    let file = env.root.join("tables.sql");
    let mut sql_text = String::from("CREATE DATABASE many;\nUSE many;\n");
    for i in 0..n {
        let _ = writeln!(
            sql_text,
            "CREATE TABLE t{i} (id INT PRIMARY KEY, v VARCHAR(20), KEY v (v)) ENGINE=InnoDB;"
        );
    }
    std::fs::write(&file, sql_text).unwrap();
    // Baked from the file, the product's fastest way to make a generation from SQL (its
    // DDL runs in a one-off server that skips fsync); `baseline create --sql` took ~16 ms a
    // table, half an hour for 100,000.
    let from = format!("file:{}", file.display());
    let (t_baseline, _) = timed(|| env.run_ok(&["bake", "--from", &from]));
    let bytes = dir_bytes(&env.pool().join("baselines/gen-000001"));
    let create: Vec<f64> = (0..runs)
        .map(|i| {
            let (t, _) = timed(|| env.run_ok(&["create", &format!("m{i}")]));
            env.run_ok(&["delete", "--yes", &format!("m{i}")]);
            t
        })
        .collect();
    env.run_ok(&["create", "r"]);
    let reset: Vec<f64> = (0..runs)
        .map(|_| timed(|| env.run_ok(&["reset", "r"])).0)
        .collect();
    eprintln!(
        "suite: {} with {n} tables: baseline {t_baseline:.1} s, create {:.2} s, reset {:.2} s",
        server.name,
        stats(create.clone()).1,
        stats(reset.clone()).1
    );
    (n, t_baseline, stats(create).1, stats(reset).1, bytes)
}

fn main() {
    let o = opts();
    if o.only_fleet {
        let mut rows = Vec::new();
        for name in &o.servers {
            // SAFETY: set before any thread of this program starts.
            unsafe { std::env::set_var("DB_BRANCH_TEST_SERVER", name) };
            rows.push((
                name.clone(),
                fleet::measure((o.size_mb / 180).max(1) as u32),
            ));
        }
        let path = o.out.join("benchmarks.md");
        let doc = std::fs::read_to_string(&path).unwrap_or_default();
        let when = now_utc();
        std::fs::write(
            &path,
            fleet::splice(
                &doc,
                (fleet::BEGIN, fleet::END),
                &fleet::section(&rows, Some(&when)),
            ),
        )
        .unwrap();
        eprintln!("suite: wrote the fleet section of {}", path.display());
        return;
    }
    if o.only_pools {
        let mut rows = Vec::new();
        for name in &o.servers {
            // SAFETY: set before any thread of this program starts.
            unsafe { std::env::set_var("DB_BRANCH_TEST_SERVER", name) };
            rows.push((name.clone(), pools::measure(o.smoke)));
        }
        std::fs::create_dir_all(&o.out).unwrap();
        let path = o.out.join("benchmarks.md");
        let doc = std::fs::read_to_string(&path).unwrap_or_default();
        let section = pools::section(&rows, Some(&now_utc()));
        std::fs::write(
            &path,
            fleet::splice(&doc, (pools::BEGIN, pools::END), &section),
        )
        .unwrap();
        eprintln!("suite: wrote the pools section of {}", path.display());
        return;
    }
    if o.only_startup {
        let mut rows = Vec::new();
        for name in &o.servers {
            // SAFETY: set before any thread of this program starts.
            unsafe { std::env::set_var("DB_BRANCH_TEST_SERVER", name) };
            let server = db_branch::testkit::server();
            let version = server_version(&server);
            rows.push((
                name.clone(),
                startup::measure(&server, version, o.runs, &o.tables),
            ));
        }
        let path = o.out.join("benchmarks.md");
        let doc = std::fs::read_to_string(&path).unwrap_or_default();
        let args: Vec<String> = std::env::args().skip(1).collect();
        let section = startup::section(&rows, &now_utc(), &args.join(" "));
        std::fs::write(
            &path,
            fleet::splice(&doc, (startup::BEGIN, startup::END), &section),
        )
        .unwrap();
        eprintln!("suite: wrote the start-up section of {}", path.display());
        return;
    }
    let mut results = Vec::new();
    for name in &o.servers {
        // SAFETY: set before any thread of this program starts.
        unsafe { std::env::set_var("DB_BRANCH_TEST_SERVER", name) };
        let server = db_branch::testkit::server();
        assert!(
            server.binary.exists(),
            "{name} is not installed here: run scripts/install-server {name}"
        );
        results.push(measure(&o, &server));
    }
    std::fs::create_dir_all(&o.out).unwrap();
    let svg = o.out.join("benchmarks-scaling.svg");
    chart(&svg, &results);
    // The start-up section is measured only by `--only startup` (a run of its own, which
    // says so): a whole run keeps it rather than dropping it.
    let path = o.out.join("benchmarks.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let mut doc = document(&o, &results);
    if let Some(kept) = fleet::section_of(&old, (startup::BEGIN, startup::END)) {
        doc = fleet::splice(&doc, (startup::BEGIN, startup::END), &format!("{kept}\n"));
    }
    std::fs::write(&path, doc).unwrap();
    eprintln!(
        "suite: wrote {} and {}",
        o.out.join("benchmarks.md").display(),
        svg.display()
    );
}

const COLORS: [RGBColor; 3] = [BLUE, RED, GREEN];

fn chart(path: &Path, results: &[Measured]) {
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let (left, right) = root.split_horizontally(450);
    let all = || {
        results
            .iter()
            .flat_map(|r| r.seq_curve.iter().chain(&r.par_curve))
    };
    let max_n = all().map(|p| p.0).max().unwrap_or(1) as f64;
    let max_t = all().map(|p| p.1).fold(0.1, f64::max) * 1.1;
    let max_m = all().map(|p| p.2 as f64 / 1e9).fold(0.1, f64::max) * 1.1;
    let mut c = ChartBuilder::on(&left)
        .caption("time until N branches are ready", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(45)
        .build_cartesian_2d(0f64..max_n, 0f64..max_t)
        .unwrap();
    c.configure_mesh()
        .x_desc("branches")
        .y_desc("seconds")
        .draw()
        .unwrap();
    for (r, color) in results.iter().zip(COLORS) {
        for (data, label, dashed) in [
            (&r.seq_curve, "one at a time", false),
            (&r.par_curve, "4 in parallel", true),
        ] {
            let pts: Vec<(f64, f64)> = std::iter::once((0.0, 0.0))
                .chain(data.iter().map(|p| (p.0 as f64, p.1)))
                .collect();
            let style = if dashed {
                color.mix(0.5).stroke_width(1)
            } else {
                color.stroke_width(2)
            };
            c.draw_series(LineSeries::new(pts.clone(), style))
                .unwrap()
                .label(format!("{}, {label}", r.server.name))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        }
    }
    c.configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .unwrap();
    let mut m = ChartBuilder::on(&right)
        .caption("memory of N idle servers (Pss)", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(45)
        .build_cartesian_2d(0f64..max_n, 0f64..max_m)
        .unwrap();
    m.configure_mesh()
        .x_desc("branches")
        .y_desc("GB")
        .draw()
        .unwrap();
    for (r, color) in results.iter().zip(COLORS) {
        let pts: Vec<(f64, f64)> = std::iter::once((0.0, 0.0))
            .chain(r.seq_curve.iter().map(|p| (p.0 as f64, p.2 as f64 / 1e9)))
            .collect();
        m.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .unwrap()
            .label(r.server.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
    }
    m.configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .unwrap();
    root.present().unwrap();
}

fn document(o: &Opts, results: &[Measured]) -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut d = String::new();
    let _ = writeln!(d, "# Benchmarks\n");
    let _ = writeln!(d, "Generated by `sudo scripts/bench suite` (examples/bench_suite/) — do not edit; run it again.\n");
    let _ = writeln!(
        d,
        "Machine: {cpus} CPUs, {:.0} GiB RAM; btrfs on a loop-mounted sparse image; built-in \
         process supervisor; the `test` profile. {}. Every figure below comes from this one run. {}",
        meminfo("MemTotal:") as f64 / (1u64 << 30) as f64,
        now_utc(),
        if o.smoke {
            "**Smoke run: tiny data, 2 runs — not figures to quote.**"
        } else {
            ""
        }
    );
    let _ = writeln!(d, "\nSample database: `scripts/sample-sql` (the `shop` schema: integer and string keys, secondary indexes, a wide text table, a table without a primary key, 24 small lookup tables). Runs per row are given in each row.\n");

    let _ = writeln!(d, "## The servers side by side\n");
    let mut header = String::from("| measure |");
    let mut rule = String::from("|---|");
    for r in results {
        let _ = write!(
            header,
            " {} |",
            r.version
                .split(" for ")
                .next()
                .unwrap_or(&r.version)
                .rsplit('/')
                .next()
                .unwrap_or("")
        );
        rule += "---|";
    }
    let _ = writeln!(d, "{header}\n{rule}");
    let row = |d: &mut String, what: &str, f: &dyn Fn(&Measured) -> String| {
        let _ = write!(d, "| {what} |");
        for r in results {
            let _ = write!(d, " {} |", f(r));
        }
        let _ = writeln!(d);
    };
    row(&mut d, "sample datadir", &|r| {
        format!("{:.0} MB", mb(r.datadir_bytes))
    });
    row(&mut d, &format!("create, median of {} (s)", o.runs), &|r| {
        format!("{:.3}", r.create.1)
    });
    row(&mut d, &format!("reset, median of {} (s)", o.runs), &|r| {
        format!("{:.3}", r.reset.1)
    });
    row(&mut d, &format!("delete, median of {} (s)", o.runs), &|r| {
        format!("{:.3}", r.delete.1)
    });
    row(
        &mut d,
        &format!("start after stop-idle, median of {} (s)", o.runs),
        &|r| format!("{:.3}", r.woken.1),
    );
    row(&mut d, "dump \\| load of the same data, once (s)", &|r| {
        format!("{:.1}", r.dump_pipe)
    });
    row(&mut d, "create is faster than dump \\| load by", &|r| {
        format!("{:.0}×", r.dump_pipe / r.create.1)
    });
    row(
        &mut d,
        &format!("bake from a live branch, median of {} (s)", o.runs.min(3)),
        &|r| format!("{:.2} ({})", r.bake.1, r.bake_path),
    );
    row(&mut d, "mydumper + myloader, 2 threads, once (s)", &|r| {
        r.mydumper
            .map_or("not run".into(), |(a, b)| format!("{:.1}", a + b))
    });
    row(&mut d, "idle RSS of one branch", &|r| {
        format!("{:.0} MB", mb(r.idle_rss))
    });
    row(
        &mut d,
        "warm RSS (128M pool, tables larger than it read)",
        &|r| format!("{:.0} MB", mb(r.warm_rss)),
    );
    row(&mut d, "own disk right after create", &|r| {
        format!("{:.1} MB", mb(r.fresh_disk))
    });
    row(
        &mut d,
        &format!(
            "{} branches ready, one at a time (s)",
            o.steps.last().unwrap()
        ),
        &|r| {
            r.seq_curve
                .last()
                .map_or("-".into(), |p| format!("{:.1}", p.1))
        },
    );
    row(
        &mut d,
        &format!(
            "{} branches ready, 4 in parallel (s)",
            o.steps.last().unwrap()
        ),
        &|r| {
            r.par_curve
                .last()
                .map_or("-".into(), |p| format!("{:.1}", p.1))
        },
    );
    row(
        &mut d,
        &format!("memory of {} idle servers (Pss)", o.steps.last().unwrap()),
        &|r| {
            r.seq_curve
                .last()
                .map_or("-".into(), |p| format!("{:.0} MB", mb(p.2)))
        },
    );
    row(
        &mut d,
        &format!("average RSS with {} running", o.steps.last().unwrap()),
        &|r| format!("{:.0} MB", mb(r.avg_rss)),
    );

    let _ = writeln!(d, "\n`dump | load` is the server's own `mariadb-dump | mariadb` or `mysqldump | mysql`, from one branch into a new database of another, on the same data in the same run. mydumper/myloader (Debian's, built for MariaDB's client library) was run against MariaDB only.\n");

    let _ = writeln!(
        d,
        "## History: branches from branches, checkpoints, promotion\n"
    );
    let _ = writeln!(d, "On the same data and in the same run as `create` and `reset` above: a running branch of it changed between runs (UPDATE of 1,000 more orders each time). `create --from` copies the running branch without stopping it (crash-consistent, after a redo-log flush), so its time includes the new server's InnoDB crash recovery; `--clean` stops the source for the copy (its downtime is the source's stop and start). `reset --to` a clean checkpoint needs no recovery; to a crash-consistent one it does. Promotion (`baseline create --from-branch`) is a clean stop, a snapshot and a one-off server's full purge — no copy — next to a `bake` of the same data from a live branch. Medians of 5 (promotion: once).\n");
    let _ = writeln!(d, "| server | create (s) | create --from (s) | create --from --clean (s) | source down (s) | checkpoint (s) | checkpoint --clean (s) | reset (s) | reset --to clean (s) | reset --to crash-consistent (s) | promote (s) | bake (s) |\n|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in results {
        let h = &r.history;
        let _ = writeln!(
            d,
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.2} | {:.2} |",
            r.server.name,
            r.create.1,
            h.from_running.1,
            h.from_clean.1,
            h.source_down.1,
            h.checkpoint.1,
            h.checkpoint_clean.1,
            r.reset.1,
            h.reset_to_clean.1,
            h.reset_to_crash.1,
            h.promote,
            r.bake.1
        );
    }
    let _ = writeln!(d);

    let _ = writeln!(d, "## The memory guard on a fixed budget\n");
    let _ = writeln!(d, "`memory.headroom` set so that B of the host's available memory is left to branches; default branches (128M buffer pool) created until the guard refused; then every admitted branch read tables larger than its pool, twice. Pss counts each page once, as the host spends it; the Rss of each server summed counts the pages every server shares (the binary, its libraries) once per server.\n");
    let _ = writeln!(d, "| server | budget B | admitted | warm: Pss of all servers | warm: Rss summed |\n|---|---|---|---|---|");
    for r in results {
        let g = &r.guard;
        let _ = writeln!(
            d,
            "| {} | {:.0} MB | {} | {:.0} MB | {:.0} MB |",
            r.server.name,
            mb(g.budget),
            g.admitted,
            mb(g.pss),
            mb(g.rss)
        );
    }
    for r in results {
        let _ = writeln!(
            d,
            "\n{} refused the next one with:\n\n```\n{}\n```",
            r.server.name, r.guard.refusal
        );
    }

    let rows: Vec<_> = results
        .iter()
        .map(|r| (r.server.name.clone(), &r.pools))
        .collect();
    d.push('\n');
    d.push_str(&pools::section(&rows, None));

    let _ = writeln!(d, "\n## Start-up with many tables\n");
    let _ = writeln!(d, "A baseline of N tables (`id INT PRIMARY KEY, v VARCHAR(20)` with a secondary index each), baked from a SQL file with `bake --from file:`; then create (median of {}) and reset (median of {}). MySQL branches start with `innodb_validate_tablespace_paths=OFF` (their files never move); MariaDB opens tablespaces lazily.\n", o.runs.min(5), o.runs.min(5));
    let _ = writeln!(d, "| server | tables | baseline made in (s) | datadir | create (s) | reset (s) |\n|---|---|---|---|---|---|");
    for r in results {
        for (n, tb, c, rs, bytes) in &r.tables {
            let _ = writeln!(
                d,
                "| {} | {n} | {tb:.1} | {:.0} MB | {c:.2} | {rs:.2} |",
                r.server.name,
                mb(*bytes)
            );
        }
    }

    let rows: Vec<(String, &fleet::Fleet)> = results
        .iter()
        .map(|r| (r.server.name.clone(), &r.fleet))
        .collect();
    d.push('\n');
    d.push_str(&fleet::section(&rows, None));
    let _ = writeln!(
        d,
        "\n## Scaling\n\n![time and memory for N branches](benchmarks-scaling.svg)\n"
    );
    let _ = writeln!(d, "This run overcommits on purpose (`memory.owed_fraction = 0`) so that every server reaches {} branches; the guard's own behaviour is the section above.\n", o.steps.last().unwrap());
    let _ = writeln!(d, "| server | branches | ready, one at a time (s) | ready, 4 in parallel (s) | memory of the servers (Pss, MB) |\n|---|---|---|---|---|");
    for r in results {
        for (i, s) in r.seq_curve.iter().enumerate() {
            let p = r
                .par_curve
                .get(i)
                .map_or("-".into(), |p| format!("{:.1}", p.1));
            let _ = writeln!(
                d,
                "| {} | {} | {:.1} | {p} | {:.0} |",
                r.server.name,
                s.0,
                s.1,
                mb(s.2)
            );
        }
    }

    for r in results {
        let _ = writeln!(d, "\n## {} in detail\n", r.server.name);
        let _ = writeln!(
            d,
            "`{}`. Sample baseline {:.0} MB, made in {:.1} s.\n",
            r.version,
            mb(r.datadir_bytes),
            r.t_baseline
        );
        let _ = writeln!(d, "| operation | runs | min s | median s | max s | dump \\| load ÷ median |\n|---|---|---|---|---|---|");
        for (what, v, n) in [
            ("create", r.create, o.runs),
            ("reset (SIGKILL, roll back, start)", r.reset, o.runs),
            ("delete", r.delete, o.runs),
            ("start after stop-idle", r.woken, o.runs),
            (
                "graceful-stop reset (stop + reset)",
                r.graceful,
                o.runs.min(5),
            ),
            ("bake from a live branch", r.bake, o.runs.min(3)),
            (
                "peer: `cp -a` of the datadir + start",
                r.copy_start,
                o.runs.min(3),
            ),
            ("peer: reflink copy + start", r.reflink_start, o.runs.min(3)),
        ] {
            let _ = writeln!(
                d,
                "| {what} | {n} | {:.3} | {:.3} | {:.3} | {:.0}× |",
                v.0,
                v.1,
                v.2,
                r.dump_pipe / v.1
            );
        }
        let _ = writeln!(
            d,
            "| peer: dump \\| load into a new database | 1 | | {:.1} | | 1× |",
            r.dump_pipe
        );
        if let Some((a, b)) = r.mydumper {
            let _ = writeln!(d, "| peer: mydumper ({a:.1} s) + myloader ({b:.1} s), 2 threads | 1 | | {:.1} | | {:.1}× |", a + b, r.dump_pipe / (a + b));
        }
        let _ = writeln!(
            d,
            "\nOwn disk after `DELETE FROM order_items` (the whole table), stopped: {:.1} MB.",
            mb(r.deleted_disk)
        );
    }
    d
}
