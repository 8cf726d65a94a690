//! The figures `metrics` gathers, before they are encoded (`--json` prints them as they
//! are; `encode` turns them into the exposition format).

use chrono::{DateTime, Utc};
use serde::Serialize;

/// What `metrics` reads, before it is encoded (`--json` prints this).
#[derive(Debug, Clone, Default, Serialize)]
pub struct HostMetrics {
    /// Branches by server state, owner and pool (`pool` empty: none).
    pub branches: Vec<BranchCount>,
    /// What the guard holds for running branches once warm (their ceilings).
    pub memory_committed_bytes: u64,
    /// What their servers hold now.
    pub memory_rss_bytes: u64,
    /// Free memory as the guard reads it (MemAvailable, or its cgroup's room).
    pub memory_available_bytes: u64,
    /// What is left for new branches once every running one is warm.
    pub memory_left_bytes: u64,
    /// Pools' slots by state (`ready`, `claimed`, `recycling`).
    pub pool_slots: Vec<SlotCount>,
    pub trash_entries: u64,
    pub trash_bytes: u64,
    pub baseline_generations: u64,
    /// Age of the newest generation (None without one).
    pub baseline_newest_age_seconds: Option<i64>,
    /// Latency of create, reset and claim, as each measured itself (those run at least once).
    pub operations: Vec<OperationLatency>,
    /// The last run of gc and stop-idle (those that ran).
    pub runs: Vec<JobRun>,
    /// What is followed (`baseline follow`; None: nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follower: Option<FollowerFigures>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FollowerFigures {
    /// The source, password left out.
    pub source: String,
    /// Both replication threads run without an error.
    pub replicating: bool,
    /// Seconds the applier is behind (None: not known, e.g. stopped).
    pub lag_seconds: Option<u64>,
    /// The follower's newest error, as its server words it.
    pub last_error: Option<String>,
    /// Age of the newest generation cut from it (None: none yet).
    pub last_cut_age_seconds: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct OperationLatency {
    pub operation: String,
    pub count: u64,
    pub sum_seconds: f64,
    /// Cumulative: how many took at most `le` seconds (the `+Inf` bucket is `count`).
    pub buckets: Vec<Bucket>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Bucket {
    pub le: f64,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobRun {
    pub job: String,
    pub finished_at: DateTime<Utc>,
    pub seconds: f64,
    pub ok: bool,
    pub acted: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct BranchCount {
    pub state: String,
    pub owner: String,
    pub pool: String,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SlotCount {
    pub pool: String,
    pub state: String,
    pub count: u64,
}
