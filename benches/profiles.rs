//! Benchmark (not a test): sysbench OLTP and a test-suite-like DDL workload on a branch,
//! with the `durable` and `test` profiles, on the loop-file pool and on a /dev/shm pool.
//!
//!   sudo cargo bench --bench profiles
//!
//! Environment: DBB_BENCH_SECONDS (per run, default 20), DBB_BENCH_THREADS (default 2),
//! DBB_BENCH_ROWS (rows per sysbench table, default 200000; 4 tables).
//! Needs sysbench (Debian package). Builds its own roots and removes them at the end.

use db_branch::testkit::bench::{env_or, now_utc};
use db_branch::testkit::TestEnv;
use std::process::Command;

const WORKLOADS: [&str; 4] = [
    "oltp_read_write",
    "oltp_write_only",
    "oltp_insert",
    "ddl_suite",
];

fn sysbench(
    port: u16,
    workload: &str,
    action: &str,
    seconds: u32,
    threads: u32,
    rows: u32,
) -> String {
    let script = if workload == "ddl_suite" {
        concat!(env!("CARGO_MANIFEST_DIR"), "/benches/ddl_suite.lua").to_string()
    } else {
        workload.to_string()
    };
    let out = Command::new("sysbench")
        .arg(script)
        .args([
            "--db-driver=mysql",
            "--mysql-host=127.0.0.1",
            "--mysql-user=root",
            "--mysql-db=sbtest",
            "--tables=4",
            "--report-interval=0",
        ])
        .arg(format!("--mysql-port={port}"))
        .arg(format!("--table-size={rows}"))
        .arg(format!("--threads={threads}"))
        .arg(format!("--time={seconds}"))
        .arg(action)
        .output()
        .expect("run sysbench (apt-get install sysbench)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "sysbench {workload} {action}: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// (transactions per second, p95 ms). The DDL suite runs one transaction per event.
fn rates(text: &str) -> (f64, f64) {
    let mut per_sec = 0.0;
    let mut p95 = 0.0;
    for line in text.lines() {
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix("transactions:") {
            // "transactions:   12345  (617.05 per sec.)"
            if let Some(v) = rest
                .split('(')
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
            {
                per_sec = v.parse().unwrap_or(0.0);
            }
        }
        if let Some(rest) = line.strip_prefix("95th percentile:") {
            p95 = rest.trim().parse().unwrap_or(0.0);
        }
    }
    (per_sec, p95)
}

fn main() {
    let seconds: u32 = env_or("DBB_BENCH_SECONDS", 20);
    let threads: u32 = env_or("DBB_BENCH_THREADS", 2);
    let rows: u32 = env_or("DBB_BENCH_ROWS", 200_000);

    // A baseline holding the sysbench tables, made once on the loop pool.
    let disk = TestEnv::with_service("process", "8G", "", "");
    disk.run_ok(&["init"]);
    disk.run_ok(&["baseline", "create", "--empty"]);
    let port = disk.json(&["create", "seed"])["port"].as_u64().unwrap() as u16;
    db_branch::testkit::sql(port, "CREATE DATABASE sbtest");
    sysbench(port, "oltp_read_write", "prepare", seconds, threads, rows);
    disk.run_ok(&["stop", "seed"]);
    let seed_dir = disk.pool().join("branches/seed");
    disk.run_ok(&[
        "baseline",
        "create",
        "--from-datadir",
        seed_dir.to_str().unwrap(),
    ]);

    let ram = TestEnv::with_service("process", "6G", "", "").with_ram_pool("6G");
    ram.run_ok(&["init"]);
    ram.run_ok(&[
        "baseline",
        "create",
        "--from-datadir",
        seed_dir.to_str().unwrap(),
    ]);
    // RAM the pool holds, as db-branch reports it (init is idempotent).
    let image_bytes = || {
        let _ = Command::new("sync").status();
        ram.json(&["init"])["pool"]["ram_bytes"]
            .as_u64()
            .unwrap_or(0)
    };

    let mut results = Vec::new();
    let mut ram_cost = Vec::new();
    for (pool, env) in [("loop file", &disk), ("/dev/shm", &ram)] {
        for profile in ["durable", "test"] {
            let name = format!("{profile}-bench");
            let before = image_bytes();
            let port = env.json(&["create", &name, "--profile", profile])["port"]
                .as_u64()
                .unwrap() as u16;
            if pool == "/dev/shm" && profile == "test" {
                ram_cost.push(("right after create", image_bytes().saturating_sub(before)));
            }
            for w in WORKLOADS {
                let (rate, p95) = rates(&sysbench(port, w, "run", seconds, threads, rows));
                eprintln!("{pool:9} {profile:7} {w:16} {rate:9.1}/s p95 {p95:.2} ms");
                results.push((pool, profile, w, rate, p95));
                if pool == "/dev/shm" && profile == "test" {
                    ram_cost.push((w, image_bytes().saturating_sub(before)));
                    // measured after the run, before its reset
                }
                env.run_ok(&["reset", &name]);
            }
            env.run_ok(&["delete", "--yes", &name]);
        }
    }

    println!("\n## Profiles and pools (sysbench)\n");
    println!(
        "{threads} threads, {seconds} s per run, 4 tables × {rows} rows; a fresh branch (reset) per run; {}\n",
        now_utc()
    );
    println!("| pool | workload | durable /s (p95 ms) | test /s (p95 ms) | test ÷ durable |");
    println!("|---|---|---|---|---|");
    for pool in ["loop file", "/dev/shm"] {
        for w in WORKLOADS {
            let get = |p: &str| {
                results
                    .iter()
                    .find(|r| r.0 == pool && r.1 == p && r.2 == w)
                    .map(|r| (r.3, r.4))
                    .unwrap()
            };
            let (d, dp) = get("durable");
            let (t, tp) = get("test");
            println!(
                "| {pool} | {w} | {d:.0} ({dp:.2}) | {t:.0} ({tp:.2}) | {:.2}× |",
                t / d.max(0.001)
            );
        }
    }
    let loop_test = |w: &str| {
        results
            .iter()
            .find(|r| r.0 == "loop file" && r.1 == "test" && r.2 == w)
            .unwrap()
            .3
    };
    let shm_test = |w: &str| {
        results
            .iter()
            .find(|r| r.0 == "/dev/shm" && r.1 == "test" && r.2 == w)
            .unwrap()
            .3
    };
    println!("\n| workload (test profile) | /dev/shm ÷ loop file |");
    println!("|---|---|");
    for w in WORKLOADS {
        println!("| {w} | {:.2}× |", shm_test(w) / loop_test(w).max(0.001));
    }
    println!("\nRAM a branch holds in a /dev/shm pool (test profile), cumulative, before its next reset:\n");
    println!("| after | RAM |");
    println!("|---|---|");
    for (when, bytes) in ram_cost {
        println!("| {when} | {} |", db_branch::values::ByteSize(bytes));
    }
}
