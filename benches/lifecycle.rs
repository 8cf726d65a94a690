//! Benchmark (not a test): branch create / reset / delete on a baseline of a few hundred MB,
//! next to `mariadb-dump | mariadb` of the same data on the same machine, with ratios.
//!
//!   sudo cargo bench --bench lifecycle
//!
//! Environment: DBB_BENCH_SCALE (sample size, default 2 ≈ 360 MB datadir), DBB_BENCH_RUNS
//! (default 10), DBB_BENCH_SERVICE (auto | process | systemd, default auto).
//! It builds its own root (tests/common) and removes it at the end.

use db_branch::testkit::bench::{dir_bytes, env_or, now_utc, stats};
use db_branch::testkit::TestEnv;
use std::process::Command;
use std::time::Instant;

fn timed(env: &TestEnv, args: &[&str]) -> f64 {
    let t = Instant::now();
    env.run_ok(args);
    t.elapsed().as_secs_f64()
}

fn main() {
    let scale: u32 = env_or("DBB_BENCH_SCALE", 2);
    let runs: usize = env_or("DBB_BENCH_RUNS", 10);
    let service: String = env_or("DBB_BENCH_SERVICE", "auto".to_string());
    let env = TestEnv::with_service(&service, "16G", "", "");
    env.run_ok(&["init"]);

    let sample = env.root.join("sample.sql");
    let sql_text = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/sample-sql"))
        .arg(scale.to_string())
        .output()
        .unwrap()
        .stdout;
    std::fs::write(&sample, sql_text).unwrap();
    let t_baseline = timed(
        &env,
        &[
            "baseline",
            "create",
            "--empty",
            "--sql",
            sample.to_str().unwrap(),
        ],
    );
    let data = dir_bytes(&env.pool().join("baselines/gen-000001"));
    eprintln!(
        "baseline of {:.0} MB built in {t_baseline:.1} s",
        data as f64 / 1e6
    );

    let names: Vec<String> = (0..runs).map(|i| format!("bench-{i}")).collect();
    let create: Vec<f64> = names.iter().map(|n| timed(&env, &["create", n])).collect();
    let port = env.port("bench-0");
    let reset: Vec<f64> = (0..runs)
        .map(|i| {
            // Dirty the branch first, as a test run would.
            db_branch::testkit::sql(
                port,
                &format!(
                    "UPDATE shop.orders SET total = total + 1 WHERE id <= {}",
                    1000 * (i + 1)
                ),
            );
            timed(&env, &["reset", "bench-0"])
        })
        .collect();
    let delete: Vec<f64> = names
        .iter()
        .map(|n| timed(&env, &["delete", "--yes", n]))
        .collect();

    // Peer: a logical copy of the same data on the same kind of server.
    env.run_ok(&["create", "peer"]);
    let port = env.port("peer");
    db_branch::testkit::sql(port, "CREATE DATABASE shop_copy");
    let t = Instant::now();
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "mariadb-dump {0} --single-transaction shop | mariadb {0} shop_copy",
            db_branch::testkit::login(port)
        ))
        .status()
        .unwrap()
        .success();
    assert!(ok, "mariadb-dump | mariadb failed");
    let t_dump = t.elapsed().as_secs_f64();
    assert_eq!(
        db_branch::testkit::sql(port, "SELECT COUNT(*) FROM shop_copy.order_items"),
        db_branch::testkit::sql(port, "SELECT COUNT(*) FROM shop.order_items"),
        "the peer copied everything"
    );

    println!("\n## db-branch lifecycle benchmark\n");
    println!(
        "{runs} runs each; baseline: sample scale {scale}, {:.0} MB datadir; service manager: {}; {}\n",
        data as f64 / 1e6,
        env.service,
        now_utc()
    );
    println!("| operation | min s | median s | max s | `mariadb-dump \\| mariadb` ÷ median |");
    println!("|---|---|---|---|---|");
    for (name, v) in [("create", create), ("reset", reset), ("delete", delete)] {
        let (min, med, max) = stats(v);
        println!(
            "| {name} | {min:.3} | {med:.3} | {max:.3} | {:.0}× |",
            t_dump / med
        );
    }
    println!("| `mariadb-dump \\| mariadb` into a new database (once) | | {t_dump:.1} | | 1× |");
    println!(
        "| baseline build (load sample + clean shutdown + snapshot) | | {t_baseline:.1} | | |"
    );
}
