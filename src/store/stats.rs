//! What the operations measured of themselves, kept for `metrics`: a latency histogram each
//! for create, reset and claim, and the last run of gc and stop-idle. One small document
//! (`root/stats.json`), changed under its own lock and replaced whole, so a reader sees
//! one state or the next.
//!
//! Recording is best effort: an operation never fails, nor waits long, because its timing
//! could not be kept (a caller without write access to the root, a lock held by a hung
//! process). A lost sample costs a metric one observation; a failed create costs a user.

use crate::layout::Layout;
use anyhow::Result;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Upper bounds of the histograms' buckets, in seconds: a claim takes about a millisecond, a
/// reset of MariaDB a tenth of a second, a create of MySQL a second or more.
pub const BOUNDS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// An operation whose latency is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Reset,
    Claim,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "create",
            Operation::Reset => "reset",
            Operation::Claim => "claim",
        }
    }
}

/// A job whose last run is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    Gc,
    StopIdle,
}

impl Job {
    pub fn as_str(self) -> &'static str {
        match self {
            Job::Gc => "gc",
            Job::StopIdle => "stop-idle",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// By operation name (`create`, `reset`, `claim`).
    #[serde(default)]
    pub operations: BTreeMap<String, Histogram>,
    /// By job name (`gc`, `stop-idle`).
    #[serde(default)]
    pub runs: BTreeMap<String, Run>,
}

/// Observations counted into `BOUNDS`' buckets (not cumulative; the last counts what took
/// longer than every bound).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    pub bounds: Vec<f64>,
    pub counts: Vec<u64>,
    pub count: u64,
    pub sum_seconds: f64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            bounds: BOUNDS.to_vec(),
            counts: vec![0; BOUNDS.len() + 1],
            count: 0,
            sum_seconds: 0.0,
        }
    }
}

impl Histogram {
    pub fn observe(&mut self, seconds: f64) {
        // Kept from an older build with other buckets: starting again is what a counter
        // reset means to Prometheus.
        if self.bounds != BOUNDS || self.counts.len() != BOUNDS.len() + 1 {
            *self = Histogram::default();
        }
        let i = BOUNDS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(BOUNDS.len());
        self.counts[i] += 1;
        self.count += 1;
        self.sum_seconds += seconds;
    }
}

/// How a job's last run went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub finished_at: DateTime<Utc>,
    pub seconds: f64,
    /// False when it ended in an error, or could not act on some branch.
    pub ok: bool,
    /// Branches (and trash entries) it acted on.
    pub acted: u64,
}

fn file(layout: &Layout) -> std::path::PathBuf {
    layout.root().join("stats.json")
}

/// What is kept; nothing yet is an empty document.
pub fn load(layout: &Layout) -> Result<Stats> {
    Ok(super::files::read_json(&file(layout), "statistics file")?.unwrap_or_default())
}

/// Counts one `op` that took `took`.
pub fn observe(layout: &Layout, op: Operation, took: Duration) {
    change(layout, |s| {
        s.operations
            .entry(op.as_str().to_string())
            .or_default()
            .observe(took.as_secs_f64())
    });
}

/// Keeps `run` as `job`'s last.
pub fn ran(layout: &Layout, job: Job, run: Run) {
    change(layout, |s| {
        s.runs.insert(job.as_str().to_string(), run);
    });
}

/// How long samples recorded with `observe_soon` wait to be written together.
const SOON: Duration = Duration::from_secs(1);

/// Samples waiting to be written, and the root they belong to.
type Pending = Option<(std::path::PathBuf, Vec<(Operation, Duration)>)>;
static PENDING: std::sync::Mutex<Pending> = std::sync::Mutex::new(None);

/// `observe`, written within `SOON` together with the samples recorded meanwhile: for a
/// long-running process that records many (the recycler, a sample per claim), where each
/// write of the document is a lock, a read, a write and a rename — measured, with what the
/// file system does after each, at more CPU than the claim itself. A process that ends
/// first loses what it had not written yet, as a crash would.
pub fn observe_soon(layout: &Layout, op: Operation, took: Duration) {
    let root = layout.root().to_path_buf();
    let mut pending = PENDING.lock().unwrap();
    match pending.as_mut() {
        Some((r, samples)) if *r == root => samples.push((op, took)),
        // Another root in the same process (tests): written at once.
        Some(_) => {
            drop(pending);
            observe(layout, op, took);
        }
        None => {
            *pending = Some((root, vec![(op, took)]));
            let layout = layout.clone();
            std::thread::spawn(move || {
                std::thread::sleep(SOON);
                let Some((_, samples)) = PENDING.lock().unwrap().take() else {
                    return;
                };
                change(&layout, |s| {
                    for (op, took) in samples {
                        s.operations
                            .entry(op.as_str().to_string())
                            .or_default()
                            .observe(took.as_secs_f64());
                    }
                });
            });
        }
    }
}

/// Keeps `job`'s run that ended at `at` after `took`: `outcome` is what it acted on and
/// whether it could act on everything it meant to; None when it failed outright.
pub fn finished(
    layout: &Layout,
    job: Job,
    at: DateTime<Utc>,
    took: Duration,
    outcome: Option<(u64, bool)>,
) {
    let (acted, ok) = outcome.unwrap_or((0, false));
    ran(
        layout,
        job,
        Run {
            finished_at: at,
            seconds: took.as_secs_f64(),
            ok,
            acted,
        },
    );
}

/// How long a recording waits for another one to finish before it gives its sample up.
const LOCK_WAIT: Duration = Duration::from_millis(500);

fn change(layout: &Layout, f: impl FnOnce(&mut Stats)) {
    if let Err(e) = try_change(layout, f) {
        tracing::debug!("statistics not kept: {e:#}");
    }
}

fn try_change(layout: &Layout, f: impl FnOnce(&mut Stats)) -> Result<()> {
    if !layout.root().is_dir() {
        return Ok(()); // no host here (yet): nothing to keep them for
    }
    let _lock = super::locks::lock(
        &layout.locks_dir().join("stats.lock"),
        "statistics",
        LOCK_WAIT,
        &|_| {},
    )?;
    // A damaged document (a full disk mid-write elsewhere) starts again rather than
    // stopping every later sample.
    let mut stats = load(layout).unwrap_or_default();
    f(&mut stats);
    super::files::replace(&file(layout), &serde_json::to_vec(&stats)?, 0o644)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_fall_into_the_first_bucket_that_holds_them() {
        let mut h = Histogram::default();
        for s in [0.0001, 0.001, 0.0011, 0.2, 99.0] {
            h.observe(s);
        }
        assert_eq!(h.count, 5);
        assert_eq!(h.counts[0], 1);
        assert_eq!(h.counts[1], 1, "a bound holds what equals it");
        assert_eq!(h.counts[2], 1);
        assert_eq!(h.counts[8], 1, "0.2 s is in the 0.25 s bucket");
        assert_eq!(h.counts[BOUNDS.len()], 1, "past every bound: +Inf");
        assert!((h.sum_seconds - 99.2022).abs() < 1e-9);
    }

    #[test]
    fn a_histogram_of_other_buckets_starts_again() {
        let mut h = Histogram {
            bounds: vec![1.0],
            counts: vec![5, 6],
            count: 11,
            sum_seconds: 30.0,
        };
        h.observe(0.002);
        assert_eq!(h.count, 1);
        assert_eq!(h.bounds, BOUNDS.to_vec());
    }

    #[test]
    fn samples_and_runs_are_kept_across_processes_reading_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        observe(&layout, Operation::Claim, Duration::from_micros(800));
        observe(&layout, Operation::Claim, Duration::from_millis(3));
        observe(&layout, Operation::Create, Duration::from_millis(150));
        let at = DateTime::parse_from_rfc3339("2026-12-03T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        ran(
            &layout,
            Job::Gc,
            Run {
                finished_at: at,
                seconds: 0.5,
                ok: true,
                acted: 2,
            },
        );
        let s = load(&layout).unwrap();
        assert_eq!(s.operations["claim"].count, 2);
        assert_eq!(s.operations["claim"].counts[1], 1);
        assert_eq!(s.operations["create"].count, 1);
        assert_eq!(s.runs["gc"].acted, 2);
        assert!(!s.operations.contains_key("reset"));
    }

    #[test]
    fn samples_recorded_soon_are_written_together_within_a_second_or_so() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        for ms in [1, 2, 3] {
            observe_soon(&layout, Operation::Claim, Duration::from_millis(ms));
        }
        // Waiting: nothing written yet (unless another test's root held the batch, in
        // which case these were written at once — either way all three arrive).
        let deadline = std::time::Instant::now() + SOON * 3;
        loop {
            let n = load(&layout)
                .ok()
                .and_then(|s| s.operations.get("claim").map(|h| h.count))
                .unwrap_or(0);
            if n == 3 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{n} of 3 written");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    #[test]
    fn a_damaged_file_starts_again_and_no_root_keeps_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        std::fs::write(dir.path().join("stats.json"), b"{not json").unwrap();
        assert!(load(&layout).is_err(), "a reader says it is damaged");
        observe(&layout, Operation::Reset, Duration::from_millis(90));
        assert_eq!(load(&layout).unwrap().operations["reset"].count, 1);

        let missing = Layout::new(&dir.path().join("absent"));
        observe(&missing, Operation::Reset, Duration::from_millis(90));
        assert!(!dir.path().join("absent").exists());
    }
}
