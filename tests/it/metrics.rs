//! Root integration test of `metrics` on real btrfs and a real server, judged by what
//! nobody here wrote: Debian's promtool lints the exposition (stdout and the textfile gc
//! rewrites), and Debian's Prometheus scrapes `metrics --listen` and answers a query with
//! the branch count. scripts/install-prometheus unpacks both.

use db_branch::testkit::TestEnv;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

fn prometheus_bin(name: &str) -> PathBuf {
    let dir = std::env::var_os("DB_BRANCH_PROMETHEUS")
        .map_or_else(|| PathBuf::from("/opt/db-branch/prometheus"), PathBuf::from);
    let bin = dir.join("usr/bin").join(name);
    assert!(
        bin.exists(),
        "{} is missing: run scripts/install-prometheus",
        bin.display()
    );
    bin
}

/// `promtool check metrics` of `text`: it must accept it without a lint.
fn promtool_accepts(text: &str, what: &str) {
    let mut child = Command::new(prometheus_bin("promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics of {what}: {said}\n{text}"
    );
}

/// A process this test started, ended (by its PID) however the test ends.
struct Started(Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port free right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The endpoint's address, from the note `metrics --listen` prints once it listens.
fn endpoint(server: &mut Child) -> String {
    let stderr = BufReader::new(server.stderr.take().unwrap());
    for line in stderr.lines() {
        let line = line.unwrap();
        if let Some(rest) = line.split("serving the figures at http://").nth(1) {
            return rest.trim_end_matches("/metrics").to_string();
        }
    }
    panic!("metrics --listen ended without serving");
}

/// What Prometheus answers for `query` (its value), or None before it has one.
fn query(port: u16, query: &str) -> Option<String> {
    let out = Command::new(prometheus_bin("promtool"))
        .args([
            "query",
            "instant",
            &format!("http://127.0.0.1:{port}"),
            query,
        ])
        .output()
        .unwrap();
    // `{} => 2 @[1796330000.123]`
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.split(" => ").nth(1))
        .and_then(|v| v.split(' ').next())
        .map(str::to_string)
}

fn write_config(dir: &Path, target: &str) -> PathBuf {
    let path = dir.join("prometheus.yml");
    std::fs::write(
        &path,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: db-branch\n    \
             static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    path
}

#[test]
#[ignore = "root: real btrfs, a real server, Debian's Prometheus"]
fn prometheus_scrapes_the_branch_count() {
    let dir = tempfile::Builder::new()
        .prefix("dbbt-prom.")
        .tempdir_in("/var/tmp")
        .unwrap();
    let textfile = dir.path().join("db-branch.prom");
    let env = TestEnv::new(
        "",
        &format!("[metrics]\ntextfile = \"{}\"\n", textfile.display()),
    )
    .seeded();
    env.run_ok(&["create", "a"]);
    env.run_ok(&["create", "b"]);
    env.run_ok(&["reset", "a", "--yes"]);
    env.run_ok(&["stop", "b"]);
    env.run_ok(&["gc", "--yes"]);

    let text = env.run_ok(&["metrics"]);
    promtool_accepts(&text, "`db-branch metrics`");
    for line in [
        "db_branch_operation_duration_seconds_count{operation=\"create\"} 2",
        "db_branch_operation_duration_seconds_count{operation=\"reset\"} 1",
        "db_branch_job_last_run_success{job=\"gc\"} 1.0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
    }
    let written = std::fs::read_to_string(&textfile).expect("gc rewrote metrics.textfile");
    promtool_accepts(&written, "the textfile gc wrote");
    assert!(written.contains("db_branch_job_last_run_timestamp_seconds{job=\"gc\"}"));

    let mut server = env
        .command(&["metrics", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let target = endpoint(&mut server);
    let _server = Started(server);
    let port = free_port();
    let prometheus = Command::new(prometheus_bin("prometheus"))
        .arg(format!(
            "--config.file={}",
            write_config(dir.path(), &target).display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
        .spawn()
        .unwrap();
    let _prometheus = Started(prometheus);
    db_branch::testkit::wait_for("Prometheus scraping db-branch's endpoint", || {
        query(port, "sum(db_branch_branches)").as_deref() == Some("2")
    });
    assert_eq!(
        query(port, "sum(db_branch_branches{state=\"stopped\"})").as_deref(),
        Some("1")
    );
    assert_eq!(
        query(port, "up{job=\"db-branch\"}").as_deref(),
        Some("1"),
        "the scrape itself succeeded"
    );
    dashboard_queries_run(port);
}

/// Every query of docs/grafana/db-branch.json, with Grafana's variables filled in as a
/// dashboard would, is one Prometheus accepts (a typo in PromQL is an error here, not an
/// empty panel for whoever imports it).
fn dashboard_queries_run(port: u16) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/grafana/db-branch.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut ran = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "1m")
                .replace("$instance", ".*");
            let out = Command::new(prometheus_bin("promtool"))
                .args([
                    "query",
                    "instant",
                    &format!("http://127.0.0.1:{port}"),
                    &expr,
                ])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "panel {:?}: Prometheus refused {expr}: {}",
                panel["title"],
                String::from_utf8_lossy(&out.stderr)
            );
            ran += 1;
        }
    }
    assert!(ran >= 10, "{ran} queries");
}
