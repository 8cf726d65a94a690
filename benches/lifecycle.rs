//! Benchmark (not a test): branch create / reset / delete on a baseline of a few hundred MB,
//! next to `mariadb-dump | mariadb` of the same data on the same machine, with ratios.
//!
//!   sudo cargo bench --bench lifecycle
//!
//! Environment: DBB_BENCH_SCALE (sample size, default 2 ≈ 350 MB of data), DBB_BENCH_RUNS
//! (default 10), DBB_BENCH_SERVICE (auto | process | systemd, default auto).
//! It builds its own root under /var/lib/dbb-bench and removes it at the end.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_db-branch");
const ROOT: &str = "/var/lib/dbb-bench";

struct Bench {
    config: PathBuf,
}

impl Bench {
    fn cmd(&self, args: &[&str]) -> String {
        let out = Command::new(BIN)
            .args(args)
            .env("DB_BRANCH_CONFIG", &self.config)
            .stdin(Stdio::null())
            .output()
            .expect("run db-branch");
        assert!(
            out.status.success(),
            "db-branch {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn timed(&self, args: &[&str]) -> f64 {
        let t = Instant::now();
        self.cmd(args);
        t.elapsed().as_secs_f64()
    }

    fn port(&self, name: &str) -> String {
        let v: serde_json::Value =
            serde_json::from_str(&self.cmd(&["--json", "status", name])).unwrap();
        v["port"].to_string()
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&self.cmd(&["--json", "list"])) {
            for b in v.as_array().into_iter().flatten() {
                let _ = Command::new(BIN)
                    .args(["delete", "--yes", b["name"].as_str().unwrap_or("")])
                    .env("DB_BRANCH_CONFIG", &self.config)
                    .status();
            }
        }
        let _ = Command::new("umount").arg(format!("{ROOT}/pool")).status();
        let _ = std::fs::remove_dir_all(ROOT);
        let _ = std::fs::remove_file(&self.config);
    }
}

fn sql(port: &str, query: &str) {
    let ok = Command::new("mariadb")
        .args([
            "--no-defaults",
            "-h127.0.0.1",
            "-uroot",
            "-P",
            port,
            "-e",
            query,
        ])
        .status()
        .unwrap()
        .success();
    assert!(ok, "SQL failed: {query}");
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    (v[0], median, v[v.len() - 1])
}

fn dir_bytes(p: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
        let m = e.metadata().unwrap();
        total += if m.is_dir() {
            dir_bytes(&e.path())
        } else {
            m.len()
        };
    }
    total
}

fn main() {
    // `cargo bench` passes --bench; nothing else is accepted.
    let scale: u32 = std::env::var("DBB_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let runs: usize = std::env::var("DBB_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let service = std::env::var("DBB_BENCH_SERVICE").unwrap_or_else(|_| "auto".into());
    let _ = std::fs::remove_dir_all(ROOT);
    std::fs::create_dir_all(ROOT).unwrap();
    let config = PathBuf::from(format!("{ROOT}.toml"));
    std::fs::write(
        &config,
        format!("root = \"{ROOT}\"\nservice_manager = \"{service}\"\nports = \"23400-23499\"\n[btrfs]\nimage_size = \"16G\"\n"),
    )
    .unwrap();
    let b = Bench { config };
    b.cmd(&["init"]);

    let sample = PathBuf::from(format!("{ROOT}/sample.sql"));
    let sql_text = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/sample-sql"))
        .arg(scale.to_string())
        .output()
        .unwrap()
        .stdout;
    std::fs::write(&sample, sql_text).unwrap();
    let t_baseline = b.timed(&[
        "baseline",
        "create",
        "--empty",
        "--sql",
        sample.to_str().unwrap(),
    ]);
    let data = dir_bytes(&PathBuf::from(format!("{ROOT}/pool/baselines/gen-000002"))).max(
        dir_bytes(&PathBuf::from(format!("{ROOT}/pool/baselines/gen-000001"))),
    );
    eprintln!(
        "baseline of {:.0} MB built in {t_baseline:.1} s",
        data as f64 / 1e6
    );

    let names: Vec<String> = (0..runs).map(|i| format!("bench-{i}")).collect();
    let create: Vec<f64> = names.iter().map(|n| b.timed(&["create", n])).collect();
    let port = b.port("bench-0");
    let reset: Vec<f64> = (0..runs)
        .map(|i| {
            // Dirty the branch first, as a test run would.
            sql(
                &port,
                &format!(
                    "UPDATE shop.orders SET total = total + 1 WHERE id <= {}",
                    1000 * (i + 1)
                ),
            );
            b.timed(&["reset", "bench-0"])
        })
        .collect();
    let delete: Vec<f64> = names
        .iter()
        .map(|n| b.timed(&["delete", "--yes", n]))
        .collect();

    // Peer: a logical copy of the same data on the same kind of server.
    b.cmd(&["create", "peer"]);
    let port = b.port("peer");
    sql(&port, "CREATE DATABASE shop_copy");
    let t = Instant::now();
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "mariadb-dump --no-defaults -h127.0.0.1 -P{port} -uroot --single-transaction shop | \
             mariadb --no-defaults -h127.0.0.1 -P{port} -uroot shop_copy"
        ))
        .status()
        .unwrap()
        .success();
    assert!(ok, "mariadb-dump | mariadb failed");
    let t_dump = t.elapsed().as_secs_f64();

    println!("\n## db-branch lifecycle benchmark\n");
    println!(
        "{} runs each; baseline: sample scale {scale}, {:.0} MB datadir; service manager: {service}; {}\n",
        runs,
        data as f64 / 1e6,
        chrono_like_now()
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
    println!("| `mariadb-dump \\| mariadb` (once) | | {t_dump:.1} | | 1× |");
    println!(
        "| baseline build (load sample + clean shutdown + snapshot) | | {t_baseline:.1} | | |"
    );
}

fn chrono_like_now() -> String {
    String::from_utf8(
        Command::new("date")
            .arg("-u")
            .arg("+%Y-%m-%d %H:%M UTC")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string()
}
