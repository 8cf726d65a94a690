//! Benchmark (not a test): each bake path on a sample database of a few hundred MB, next to
//! `mariadb-dump | mariadb`, `mariadb < dump` and mydumper/myloader on the same data, with
//! ratios.
//!
//!   sudo cargo bench --bench bake        (scripts/bench installs mydumper)
//!
//! Environment: DBB_BENCH_SCALE (default 2 ≈ 360 MB datadir), DBB_BENCH_RUNS (default 3).

use db_branch::testkit::bench::{env_or, now_utc, stats, which};
use db_branch::testkit::TestEnv;
use std::process::Command;
use std::time::Instant;

fn sh(script: &str) -> f64 {
    let t = Instant::now();
    let ok = Command::new("sh")
        .arg("-c")
        .arg(script)
        .status()
        .unwrap()
        .success();
    assert!(ok, "failed: {script}");
    t.elapsed().as_secs_f64()
}

fn main() {
    let scale: u32 = env_or("DBB_BENCH_SCALE", 2);
    let runs: usize = env_or("DBB_BENCH_RUNS", 3);
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    // Generation 1: the sample; generation 2: empty, for the peers to load into.
    let env = TestEnv::with_sample(TestEnv::with_service("process", "24G", "", ""), scale);
    env.run_ok(&["baseline", "create", "--empty"]);
    let source = env.json(&["create", "source", "--baseline", "1"])["port"]
        .as_u64()
        .unwrap() as u16;
    let url = format!("mysql://root@127.0.0.1:{source}");
    let data_mb: f64 = db_branch::testkit::sql(
        source,
        "SELECT ROUND(SUM(DATA_LENGTH + INDEX_LENGTH) / 1e6) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'shop'",
    )
    .parse()
    .unwrap();
    let dump = env.root.join("shop.sql");
    let conn = format!("--no-defaults -h127.0.0.1 -P{source} -uroot");
    let t_dump = sh(&format!(
        "mariadb-dump {conn} --single-transaction --databases shop > {}",
        dump.display()
    ));
    eprintln!("sample: {data_mb} MB of data and indexes; mariadb-dump took {t_dump:.1} s");

    // A fresh empty server for each peer run (a branch of the empty generation 2), with
    // MariaDB's default durability, as a standalone restore target has.
    let mut n = 0;
    let mut fresh = || {
        n += 1;
        let name = format!("peer-{n}");
        let p = env.json(&["create", &name, "--baseline", "2", "--profile", "durable"])["port"]
            .as_u64()
            .unwrap() as u16;
        (name, format!("--no-defaults -h127.0.0.1 -P{p} -uroot"))
    };
    // Times of each run, and the phases of the last one (`bake --json`).
    let bake_times = |args: &[&str]| -> (Vec<f64>, String) {
        let mut phases = String::new();
        let times = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let mut a = vec!["bake", "--from"];
                a.extend_from_slice(args);
                let report = env.json(&a);
                phases = report["phases"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| {
                        format!(
                            "{} {:.1} s",
                            p["name"].as_str().unwrap(),
                            p["seconds"].as_f64().unwrap()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                t.elapsed().as_secs_f64()
            })
            .collect();
        (times, phases)
    };
    let jobs_s = jobs.to_string();
    let from_file = format!("file:{}", dump.display());
    let tablespace = bake_times(&[&url]);
    let logical = bake_times(&[&url, "--logical", "--jobs", &jobs_s]);
    let from_dump = bake_times(&[&from_file]);

    let mut peer = |script: &dyn Fn(&str) -> String| -> f64 {
        let (name, target) = fresh();
        let t = sh(&script(&target));
        env.run_ok(&["delete", "--yes", &name]);
        t
    };
    let dump_pipe = peer(&|target| {
        format!("mariadb-dump {conn} --single-transaction --databases shop | mariadb {target}")
    });
    let load_only = peer(&|target| format!("mariadb {target} < {}", dump.display()));
    // The same load into a relaxed-durability server (db-branch's test profile), for reference.
    let relaxed =
        db_branch::testkit::port(&env.json(&["create", "peer-relaxed", "--baseline", "2"]));
    let load_relaxed = sh(&format!(
        "mariadb --no-defaults -h127.0.0.1 -P{relaxed} -uroot < {}",
        dump.display()
    ));
    env.run_ok(&["delete", "--yes", "peer-relaxed"]);
    let mydumper = which("mydumper") && which("myloader");
    let (t_mydumper, t_myloader) = if mydumper {
        let dir = env.root.join("mydumper");
        let threads = jobs.to_string();
        let d = sh(&format!(
            "rm -rf {0} && mydumper -h 127.0.0.1 -P {source} -u root -B shop -t {threads} -r 200000 -o {0}",
            dir.display()
        ));
        let l = peer(&|target| {
            let port = target
                .split("-P")
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap()
                .to_string();
            format!(
                "myloader -h 127.0.0.1 -P {port} -u root -t {threads} -d {}",
                dir.display()
            )
        });
        (Some(d), Some(l))
    } else {
        (None, None)
    };

    println!("\n## Bake paths and their peers\n");
    println!(
        "Sample scale {scale}: {data_mb} MB of data and indexes in 30 tables; {runs} runs per bake, peers once; {jobs} jobs; {}\n",
        now_utc()
    );
    println!("| method | min s | median s | max s | `mariadb-dump \\| mariadb` ÷ it | `mariadb < dump` ÷ it |");
    println!("|---|---|---|---|---|---|");
    let mut breakdown = Vec::new();
    for (name, (v, phases)) in [
        ("bake: tablespace path", tablespace),
        ("bake: logical path", logical),
        ("bake: from a dump file", from_dump),
    ] {
        let (a, m, b) = stats(v);
        println!(
            "| {name} (whole bake: initialise, load, clean shutdown, snapshot) | {a:.1} | {m:.1} | {b:.1} | {:.1}× | {:.1}× |",
            dump_pipe / m,
            load_only / m
        );
        breakdown.push(format!("- {name}: {phases}"));
    }
    println!("| `mariadb-dump \\| mariadb` | | {dump_pipe:.1} | | 1× | |");
    println!(
        "| `mariadb < dump` (load only; the dump took {t_dump:.1} s) | | {load_only:.1} | | | 1× |"
    );
    match (t_mydumper, t_myloader) {
        (Some(d), Some(l)) => println!(
            "| mydumper ({d:.1} s) + myloader ({l:.1} s), {jobs} threads | | {:.1} | | {:.1}× | |",
            d + l,
            dump_pipe / (d + l)
        ),
        _ => println!("| mydumper/myloader | not installed (scripts/bench installs it) | | | | |"),
    }
    println!(
        "| `mariadb < dump` into a relaxed-durability server (db-branch's test profile) | | {load_relaxed:.1} | | | {:.1}× |",
        load_only / load_relaxed
    );
    println!("\nPeers load into servers with MariaDB's default durability, as a standalone restore would; the last row shows the same load into a relaxed server.\n");
    println!("Where a bake's time goes (last run):\n");
    for line in breakdown {
        println!("{line}");
    }
}
