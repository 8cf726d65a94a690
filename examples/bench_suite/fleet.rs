//! Baselines between hosts, on the suite's sample database: `baseline push` over ssh to a
//! host the suite makes (a network namespace with its own sshd and pool), in full and as an
//! increment after 1% of the rows of `orders` and `customers` changed, side by side with a
//! bare `btrfs send | ssh | btrfs receive` of the same generation; and a push to and pull
//! from a stream directory.

use db_branch::testkit::fleet::{FarHost, Keys};
use db_branch::testkit::{port, sql, TestEnv};
use serde_json::Value;
use std::fmt::Write as _;
use std::time::Instant;

pub struct Fleet {
    pub full_bytes: u64,
    pub full_s: f64,
    pub bare_s: f64,
    pub inc_bytes: u64,
    pub inc_s: f64,
    pub dir_push_s: f64,
    pub dir_pull_s: f64,
}

fn one(v: &Value) -> (u64, f64) {
    (
        v[0]["bytes"].as_u64().unwrap(),
        v[0]["seconds"].as_f64().unwrap(),
    )
}

pub fn measure(scale: u32) -> Fleet {
    let keys = Keys::new();
    let near = TestEnv::with_service("process", "40G", "", &keys.fleet_table());
    near.run_ok(&["init"]);
    near.sample_baseline(scale);
    let far = FarHost::new(&keys, false);

    let (full_bytes, full_s) = one(&near.json(&["baseline", "push", &far.url()]));
    let bare_s = far.bare_btrfs_push(&keys, &near.pool().join("baselines/gen-000001"));

    let p = port(&near.json(&["create", "touch"]));
    sql(
        p,
        "UPDATE shop.orders SET total = total + 1 WHERE id % 100 = 0; \
         UPDATE shop.customers SET name = CONCAT(name, '.') WHERE id % 100 = 0",
    );
    near.run_ok(&["baseline", "create", "--from-branch", "touch"]);
    let inc = near.json(&["baseline", "push", &far.url()]);
    assert_eq!(inc[0]["parent"], 1, "{inc}");
    let (inc_bytes, inc_s) = one(&inc);

    let streams = tempfile::tempdir().unwrap();
    let dir = format!("file:{}", streams.path().display());
    let started = Instant::now();
    near.run_ok(&["baseline", "push", &dir, "1"]);
    let dir_push_s = started.elapsed().as_secs_f64();
    let other = TestEnv::with_service("process", "40G", "", "");
    other.run_ok(&["init"]);
    let started = Instant::now();
    other.run_ok(&["baseline", "pull", &dir, "1"]);
    let dir_pull_s = started.elapsed().as_secs_f64();
    Fleet {
        full_bytes,
        full_s,
        bare_s,
        inc_bytes,
        inc_s,
        dir_push_s,
        dir_pull_s,
    }
}

pub const BEGIN: &str = "<!-- fleet: begin -->";
pub const END: &str = "<!-- fleet: end -->";

/// The section, for `(server, figures)` pairs; `separate` names a run of its own.
pub fn section<F: std::borrow::Borrow<Fleet>>(
    rows: &[(String, F)],
    separate: Option<&str>,
) -> String {
    let mut d = String::new();
    let _ = writeln!(d, "{BEGIN}\n## Fleet: baselines between hosts\n");
    if let Some(when) = separate {
        let _ = writeln!(
            d,
            "Measured in a run of its own ({when}, `scripts/bench suite` with `SUITE_ARGS=\"--only fleet\"`), not the run above; same machine.\n"
        );
    }
    let _ = writeln!(d, "The sample database's generation pushed over ssh to a host the suite makes (a network namespace joined by a veth pair, with its own sshd and pool): in full, next to a bare `btrfs send | ssh | btrfs receive` of the same generation; then as an increment after 1% of the rows of `orders` and `customers` changed (a generation promoted from a branch). A push to a stream directory (`file:DIR`) and a pull from it on a host with no baselines. Once each.\n");
    let _ = writeln!(d, "| server | full push (MB) | full push (s) | bare send\\|ssh\\|receive (s) | incremental (MB) | incremental (s) | incremental / full bytes | push to file: (s) | pull from file: (s) |");
    let _ = writeln!(d, "|---|---|---|---|---|---|---|---|---|");
    for (server, f) in rows {
        let f: &Fleet = f.borrow();
        let _ = writeln!(
            d,
            "| {server} | {:.1} | {:.2} | {:.2} | {:.1} | {:.2} | {:.1}% | {:.2} | {:.2} |",
            f.full_bytes as f64 / 1e6,
            f.full_s,
            f.bare_s,
            f.inc_bytes as f64 / 1e6,
            f.inc_s,
            f.inc_bytes as f64 * 100.0 / f.full_bytes.max(1) as f64,
            f.dir_push_s,
            f.dir_pull_s,
        );
    }
    let _ = writeln!(d, "\n{END}");
    d
}

/// Where `doc`'s section between `begin` and `end` starts and ends, markers included.
fn span(doc: &str, (begin, end): (&str, &str)) -> Option<(usize, usize)> {
    match (doc.find(begin), doc.find(end)) {
        (Some(b), Some(e)) if e > b => Some((b, e + end.len())),
        _ => None,
    }
}

/// The section of `doc` between `begin` and `end`, markers included, if it has one.
pub fn section_of<'a>(doc: &'a str, markers: (&str, &str)) -> Option<&'a str> {
    span(doc, markers).map(|(b, e)| &doc[b..e])
}

/// `doc` with its section between `begin` and `end` replaced by `section` (which carries
/// the markers), or `section` added at the end.
pub fn splice(doc: &str, markers: (&str, &str), section: &str) -> String {
    match span(doc, markers) {
        Some((b, e)) => format!(
            "{}{}{}",
            &doc[..b],
            section,
            doc[e..].trim_start_matches('\n')
        ),
        _ => format!("{}\n{section}", doc.trim_end()),
    }
}
