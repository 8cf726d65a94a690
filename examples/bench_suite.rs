//! The benchmark suite: every operation against its peers, side by side on the same data,
//! scaling curves and a chart. Writes docs/benchmarks.md and docs/benchmarks-scaling.svg.
//!
//!   sudo scripts/bench suite                      (release build, installs mydumper)
//!   cargo run --release --example bench-suite -- [--size 360M] [--runs 10] [--out DIR]
//!   cargo run --example bench-suite -- --smoke --out DIR     (the test suite's quick run)

use db_branch::testkit::bench::{dir_bytes, now_utc, stats, which};
use db_branch::testkit::{port, sql, TestEnv};
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Opts {
    size_mb: u64,
    runs: usize,
    steps: Vec<usize>,
    out: PathBuf,
    smoke: bool,
}

fn opts() -> Opts {
    let mut o = Opts {
        size_mb: 360,
        runs: 10,
        steps: vec![1, 10, 50, 100],
        out: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/docs")),
        smoke: false,
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
            "--out" => {
                o.out = PathBuf::from(val());
                i += 1;
            }
            "--smoke" => {
                o.smoke = true;
                o.runs = 2;
                o.steps = vec![1, 3];
                o.size_mb = 1;
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

fn mem_available() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kb: u64 = text
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    kb * 1024
}

fn mem_total() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    text.lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// Resident memory of every server this suite runs.
fn servers_rss(env: &TestEnv) -> u64 {
    env.server_pids()
        .iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .sum::<u64>()
        * 1024
}

fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

/// Starts a plain mariadbd on `datadir` (the cp/reflink peers) and waits until it answers.
fn start_plain(datadir: &Path, port: u16) -> (f64, std::process::Child) {
    let cnf = datadir.with_extension("cnf");
    std::fs::write(
        &cnf,
        format!(
            "[mysqld]\ndatadir={}\nport={port}\nbind-address=127.0.0.1\nsocket={}\npid-file={}\nuser=mysql\n\
             skip-name-resolve\nskip-log-bin\ninnodb-buffer-pool-load-at-startup=0\n\
             innodb-buffer-pool-dump-at-shutdown=0\ninnodb-log-buffer-size=2M\n",
            datadir.display(),
            datadir.join("peer.sock").display(),
            datadir.join("peer.pid").display()
        ),
    )
    .unwrap();
    let t = Instant::now();
    let child = Command::new("/usr/sbin/mariadbd")
        .arg(format!("--defaults-file={}", cnf.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    loop {
        let ok = Command::new("mariadb")
            .args([
                "--no-defaults",
                "-h127.0.0.1",
                "-uroot",
                &format!("-P{port}"),
                "-e",
                "DO 1",
            ])
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

struct Row {
    what: String,
    v: (f64, f64, f64),
}

fn main() {
    let o = opts();
    let env = TestEnv::with_service("process", "40G", "", "");
    // A wide port range for the scaling runs.
    let text = std::fs::read_to_string(&env.config).unwrap();
    let text = text
        .lines()
        .map(|l| {
            if l.starts_with("ports = ") {
                "ports = \"31000-31799\"".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&env.config, text).unwrap();
    env.run_ok(&["init"]);

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
    // Disk and memory of one branch.
    let probe = env.json(&["create", "probe"]);
    let fresh_disk = probe["disk_bytes"].as_u64().unwrap_or(0);
    let idle_rss = env.json(&["status", "probe"])["rss_bytes"]
        .as_u64()
        .unwrap_or(0);
    let p2 = port(&probe);
    sql(p2, "CHECKSUM TABLE shop.orders, shop.order_items, shop.customers, shop.reviews, shop.products, shop.audit_events");
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

    // 3. Peers on the same data.
    env.run_ok(&["create", "peer"]);
    let pp = env.port("peer");
    sql(pp, "CREATE DATABASE shop_copy");
    let conn = format!("--no-defaults -h127.0.0.1 -P{pp} -uroot");
    let t_dump = sh(&format!(
        "mariadb-dump {conn} --single-transaction shop | mariadb {conn} shop_copy"
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
            let (t_start, mut child) = start_plain(&dir, 31790);
            if i == 0 {
                copy_start.push(t_copy + t_start)
            } else {
                reflink_start.push(t_copy + t_start)
            }
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    // Bake against mydumper/myloader.
    env.run_ok(&["delete", "--yes", "peer"]);
    let src = port(&env.json(&["create", "source"]));
    let url = format!("mysql://root@127.0.0.1:{src}");
    let bake: Vec<f64> = (0..o.runs.min(3))
        .map(|_| timed(|| env.run_ok(&["bake", "--from", &url])).0)
        .collect();
    let mydumper = if which("mydumper") && which("myloader") && !o.smoke {
        let dir = env.root.join("mydumper");
        let d = sh(&format!(
            "rm -rf {0} && mydumper -h 127.0.0.1 -P {src} -u root -B shop -t 2 -r 200000 -o {0} 2>/dev/null",
            dir.display()
        ));
        let tgt = port(&env.json(&["create", "myloader", "--baseline", "1"]));
        let l = sh(&format!(
            "myloader -h 127.0.0.1 -P {tgt} -u root -t 2 -B shop_copy -d {} 2>/dev/null",
            dir.display()
        ));
        env.run_ok(&["delete", "--yes", "myloader"]);
        Some((d, l))
    } else {
        None
    };
    env.run_ok(&["delete", "--yes", "source"]);

    // 4. Scaling: time until N branches are ready, sequential and 4 at a time; memory.
    let mut seq_curve = Vec::new();
    let par_curve = std::sync::Mutex::new(Vec::new());
    let max_n = *o.steps.last().unwrap();
    let mut elapsed = 0.0;
    for i in 1..=max_n {
        elapsed += timed(|| env.run_ok(&["create", &format!("s{i}")])).0;
        if o.steps.contains(&i) {
            seq_curve.push((i, elapsed, servers_rss(&env)));
        }
    }
    for i in 1..=max_n {
        env.run_ok(&["delete", "--yes", &format!("s{i}")]);
    }
    let start = Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(1);
    let done = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i > max_n {
                    break;
                }
                env.run_ok(&["create", &format!("p{i}")]);
                let mut d = done.lock().unwrap();
                d.push(i);
                if o.steps.contains(&d.len()) {
                    par_curve
                        .lock()
                        .unwrap()
                        .push((d.len(), start.elapsed().as_secs_f64(), 0));
                }
            });
        }
    });
    let par_curve = par_curve.into_inner().unwrap();
    let rss_at_max: Vec<u64> = env
        .json(&["list"])
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["rss_bytes"].as_u64())
        .collect();
    let avg_rss = rss_at_max.iter().sum::<u64>() / rss_at_max.len().max(1) as u64;
    for i in 1..=max_n {
        env.run_ok(&["delete", "--yes", &format!("p{i}")]);
    }
    // Where the guard refuses: headroom set so that about 1.5 GB (smoke: 0.3 GB) is left to
    // branches, then create until refused.
    let budget: u64 = if o.smoke { 300 << 20 } else { 1500 << 20 };
    let avail = mem_available();
    let headroom = avail.saturating_sub(budget + (128 << 20));
    let text = std::fs::read_to_string(&env.config).unwrap();
    std::fs::write(
        &env.config,
        format!("{text}\n[memory]\nheadroom = \"{}\"\n", headroom),
    )
    .unwrap();
    let mut admitted = 0;
    let mut refusal = String::new();
    for i in 1..=400 {
        let out = env.run(&["create", &format!("g{i}")]);
        if out.status.code() == Some(75) {
            refusal = String::from_utf8_lossy(&out.stderr).trim().to_string();
            break;
        }
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        admitted += 1;
        if o.smoke && admitted >= 5 {
            refusal = "(smoke run: stopped after 5)".into();
            break;
        }
    }
    let used_by_guarded = servers_rss(&env);
    for i in 1..=admitted {
        env.run_ok(&["delete", "--yes", &format!("g{i}")]);
    }

    // 5. The document and the chart.
    std::fs::create_dir_all(&o.out).unwrap();
    let svg = o.out.join("benchmarks-scaling.svg");
    chart(&svg, &seq_curve, &par_curve);
    let rows = vec![
        Row {
            what: "create".into(),
            v: stats(create),
        },
        Row {
            what: "reset (SIGKILL, roll back, start)".into(),
            v: stats(reset),
        },
        Row {
            what: "delete".into(),
            v: stats(delete),
        },
        Row {
            what: "start after stop-idle".into(),
            v: stats(woken),
        },
        Row {
            what: "bake (tablespace path, whole)".into(),
            v: stats(bake),
        },
    ];
    let peers = vec![
        Row {
            what: "`mariadb-dump \\| mariadb` into a new database".into(),
            v: (t_dump, t_dump, t_dump),
        },
        Row {
            what: "`cp -a` of the datadir + start".into(),
            v: stats(copy_start),
        },
        Row {
            what: "reflink copy + start".into(),
            v: stats(reflink_start),
        },
        Row {
            what: "graceful-stop reset (stop + reset)".into(),
            v: stats(graceful),
        },
    ];
    let doc = document(
        &o,
        datadir_bytes,
        t_baseline,
        &rows,
        &peers,
        mydumper,
        fresh_disk,
        deleted_disk,
        idle_rss,
        warm_rss,
        avg_rss,
        &seq_curve,
        &par_curve,
        admitted,
        used_by_guarded,
        &refusal,
        headroom,
    );
    std::fs::write(o.out.join("benchmarks.md"), doc).unwrap();
    eprintln!(
        "suite: wrote {} and {}",
        o.out.join("benchmarks.md").display(),
        svg.display()
    );
}

fn chart(path: &Path, seq: &[(usize, f64, u64)], par: &[(usize, f64, u64)]) {
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let (left, right) = root.split_horizontally(450);
    let max_n = seq.iter().chain(par).map(|p| p.0).max().unwrap_or(1) as f64;
    let max_t = seq.iter().chain(par).map(|p| p.1).fold(0.1, f64::max) * 1.1;
    let max_m = seq
        .iter()
        .chain(par)
        .map(|p| p.2 as f64 / 1e9)
        .fold(0.1, f64::max)
        * 1.1;
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
    for (data, color, label) in [(seq, &BLUE, "one at a time"), (par, &RED, "4 in parallel")] {
        let pts: Vec<(f64, f64)> = std::iter::once((0.0, 0.0))
            .chain(data.iter().map(|p| (p.0 as f64, p.1)))
            .collect();
        c.draw_series(LineSeries::new(pts.clone(), color))
            .unwrap()
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        c.draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .unwrap();
    }
    c.configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .unwrap();
    let mut m = ChartBuilder::on(&right)
        .caption(
            "resident memory of N idle branch servers",
            ("sans-serif", 18),
        )
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
    let pts: Vec<(f64, f64)> = std::iter::once((0.0, 0.0))
        .chain(seq.iter().map(|p| (p.0 as f64, p.2 as f64 / 1e9)))
        .collect();
    m.draw_series(LineSeries::new(pts.clone(), &BLUE)).unwrap();
    m.draw_series(pts.iter().map(|p| Circle::new(*p, 3, BLUE.filled())))
        .unwrap();
    root.present().unwrap();
}

#[allow(clippy::too_many_arguments)]
fn document(
    o: &Opts,
    datadir: u64,
    t_baseline: f64,
    rows: &[Row],
    peers: &[Row],
    mydumper: Option<(f64, f64)>,
    fresh_disk: u64,
    deleted_disk: u64,
    idle_rss: u64,
    warm_rss: u64,
    avg_rss: u64,
    seq: &[(usize, f64, u64)],
    par: &[(usize, f64, u64)],
    admitted: usize,
    used_by_guarded: u64,
    refusal: &str,
    headroom: u64,
) -> String {
    let version = String::from_utf8(
        Command::new("/usr/sbin/mariadbd")
            .arg("--version")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut d = String::new();
    let _ = writeln!(d, "# Benchmarks\n");
    let _ = writeln!(d, "Generated by `sudo scripts/bench suite` (examples/bench_suite.rs) — do not edit; run it again.\n");
    let _ = writeln!(d, "Machine: {cpus} CPUs, {:.0} GiB RAM, {}; btrfs on a loop-mounted sparse image; built-in process supervisor. {}. {}",
        mem_total() as f64 / (1u64 << 30) as f64, version.trim(), now_utc(), if o.smoke { "**Smoke run: tiny data, 2 runs — not figures to quote.**" } else { "" });
    let _ = writeln!(d, "\nSample database: `scripts/sample-sql` (the `shop` schema: integer and string keys, secondary indexes, a wide text table, a table without a primary key), {:.0} MB datadir, built in {t_baseline:.1} s. {} runs per operation.\n", mb(datadir), o.runs);
    let dump = peers[0].v.1;
    let _ = writeln!(d, "## Operations and peers\n");
    let _ = writeln!(
        d,
        "| operation | min s | median s | max s | goal | `mariadb-dump \\| mariadb` ÷ median |"
    );
    let _ = writeln!(d, "|---|---|---|---|---|---|");
    let goals = ["≤ 0.35", "≤ 0.45", "≤ 0.2", "", ""];
    for (r, g) in rows.iter().zip(goals) {
        let _ = writeln!(
            d,
            "| {} | {:.3} | {:.3} | {:.3} | {g} | {:.0}× |",
            r.what,
            r.v.0,
            r.v.1,
            r.v.2,
            dump / r.v.1
        );
    }
    let _ = writeln!(
        d,
        "\n| peer (same data, same run) | min s | median s | max s | ÷ our create median |"
    );
    let _ = writeln!(d, "|---|---|---|---|---|");
    for p in peers {
        let _ = writeln!(
            d,
            "| {} | {:.3} | {:.3} | {:.3} | {:.1}× |",
            p.what,
            p.v.0,
            p.v.1,
            p.v.2,
            p.v.1 / rows[0].v.1
        );
    }
    match mydumper {
        Some((dd, ll)) => {
            let _ = writeln!(d, "| mydumper ({dd:.1} s) + myloader ({ll:.1} s), 2 threads | | {:.1} | | bake is {:.1}× faster |", dd + ll, (dd + ll) / rows[4].v.1);
        }
        None => {
            let _ = writeln!(
                d,
                "| mydumper/myloader | not run (not installed, or a smoke run) | | | |"
            );
        }
    }
    let _ = writeln!(d, "\n## Disk and memory per branch\n");
    let _ = writeln!(d, "| measure | value | goal |\n|---|---|---|");
    let _ = writeln!(
        d,
        "| own disk right after create | {:.1} MB | |",
        mb(fresh_disk)
    );
    let _ = writeln!(
        d,
        "| own disk after `DELETE FROM order_items` (whole table), stopped | {:.1} MB | |",
        mb(deleted_disk)
    );
    let _ = writeln!(
        d,
        "| idle RSS right after create | {:.1} MB | ≤ 60 MB |",
        mb(idle_rss)
    );
    let _ = writeln!(
        d,
        "| RSS after reading every table | {:.1} MB | |",
        mb(warm_rss)
    );
    let _ = writeln!(
        d,
        "| average idle RSS with {} branches running | {:.1} MB | ≤ 60 MB |",
        o.steps.last().unwrap(),
        mb(avg_rss)
    );
    let _ = writeln!(d, "\n## Scaling\n");
    let _ = writeln!(
        d,
        "![time and memory for N branches](benchmarks-scaling.svg)\n"
    );
    let _ = writeln!(d, "| branches | ready, one at a time (s) | ready, 4 in parallel (s) | resident memory of the servers (MB) |\n|---|---|---|---|");
    for (i, s) in seq.iter().enumerate() {
        let p = par.get(i).map_or("-".into(), |p| format!("{:.1}", p.1));
        let _ = writeln!(d, "| {} | {:.1} | {p} | {:.0} |", s.0, s.1, mb(s.2));
    }
    let _ = writeln!(d, "\nGoal: 100 branches ready in ≤ 40 s.\n");
    let _ = writeln!(d, "Memory guard: with `memory.headroom` set to leave about {:.1} GB to branches ({} headroom), it admitted {admitted} default branches (their servers held {:.0} MB) and then refused:\n\n```\n{refusal}\n```", (mem_available().saturating_sub(headroom)) as f64 / 1e9, db_branch::values::ByteSize(headroom), mb(used_by_guarded));
    let _ = writeln!(d, "\nThe guard admits on the buffer pool (128M by default) plus headroom: idle servers use far less ({:.0} MB), so this refusal is conservative by design: a branch that fills its buffer pool still fits.", mb(avg_rss));
    d
}
