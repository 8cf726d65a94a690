//! What `status`, `list` and the commands that change a branch show about it, gathered from
//! the host in one place (its state, memory, disk, connection), for `view::branch` to render.

use crate::branch::{BranchName, BranchRecord, Generation, Phase};
use crate::host::Host;
use crate::ops::branch::connection::Connection;
use crate::ops::branch::unit::{launch, server_rss};
use crate::supervisor::ServiceState;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Clone, Serialize)]
pub struct BranchReport {
    pub name: BranchName,
    pub state: ServiceState,
    pub phase: Phase,
    pub port: u16,
    pub baseline: Generation,
    pub created: DateTime<Utc>,
    pub buffer_pool_bytes: u64,
    /// Bytes only this branch holds on the pool (copy-on-write: starts near zero).
    pub disk_bytes: Option<u64>,
    pub rss_bytes: Option<u64>,
    pub owner: String,
    pub labels: std::collections::BTreeMap<String, String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub protected: bool,
    pub protected_until: Option<DateTime<Utc>>,
    /// Last client activity db-branch saw (or the last start).
    pub last_activity: DateTime<Utc>,
    /// Stopped by `stop-idle`; `start` or `create` wakes it.
    pub stopped_idle: bool,
    pub profile: crate::config::Profile,
    /// The server that made the branch's baseline (and that serves it).
    pub server: Option<crate::flavour::Flavour>,
    /// The server died uncleanly under the `test` profile: its data may be damaged;
    /// `reset` is the way back.
    pub unclean: bool,
    /// The server died because it passed its memory ceiling (killed alone, by its cgroup).
    pub out_of_memory: bool,
    /// The most its server may use once warm (buffer pool + allowance …), which the memory
    /// guard counts and its cgroup enforces.
    pub ceiling_bytes: u64,
    pub connection: Connection,
    /// Made from another branch (or its checkpoint); absent: from `baseline`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<crate::branch::Parent>,
    /// Its checkpoints' tags, oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<crate::branch::CheckpointTag>,
}

#[derive(Debug, Serialize)]
pub struct StatusReport {
    #[serde(flatten)]
    pub branch: BranchReport,
    pub datadir: PathBuf,
    pub option_file: PathBuf,
    pub error_log: PathBuf,
    pub service_manager: String,
    pub main_pid: Option<u32>,
    pub pool: Option<crate::storage::PoolInfo>,
    /// ZFS: used, referenced and written bytes of the branch's dataset.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub space: std::collections::BTreeMap<String, u64>,
    /// The memory guard's view of the host with this branch's ceiling: free memory, what
    /// the other running branches still owe, headroom, and how many more of its size fit.
    pub memory: Option<crate::memory::Admission>,
}

/// What is known of `record`'s branch now.
pub fn branch(host: &Host, record: &BranchRecord) -> BranchReport {
    let state = host
        .services
        .state(&launch(host, &record.name))
        .unwrap_or(ServiceState::Failed);
    BranchReport {
        name: record.name.clone(),
        state,
        phase: record.phase,
        port: record.port,
        baseline: record.baseline,
        created: record.created,
        buffer_pool_bytes: record.buffer_pool.bytes(),
        disk_bytes: host.storage.branch_usage(&record.name).ok().flatten(),
        rss_bytes: if state.is_up() {
            server_rss(host, &record.name)
        } else {
            None
        },
        owner: record.owner.clone(),
        labels: record.labels.clone(),
        expires_at: record.expires_at,
        protected: record.is_protected(host.clock.now()),
        protected_until: record.protection.as_ref().and_then(|p| p.until),
        last_activity: record.activity.last,
        stopped_idle: record.stopped_idle,
        profile: record.profile,
        server: record
            .server
            .or_else(|| crate::ops::branch::fit::generation_server(host, record.baseline)),
        unclean: state == ServiceState::Failed && record.profile == crate::config::Profile::Test,
        out_of_memory: state == ServiceState::Failed
            && host
                .services
                .out_of_memory(&launch(host, &record.name))
                .unwrap_or(false),
        ceiling_bytes: crate::ops::branch::budget::ceiling(host, record).total(),
        connection: {
            let mut c = Connection::of(host, record);
            // Everyone may see everyone's branches; only the owner (and admins) its password.
            if !host.caller.may_see_secrets(&host.config.access, record) {
                c.redact();
            }
            c
        },
        parent: record.parent.clone(),
        checkpoints: record.checkpoints.iter().map(|c| c.tag.clone()).collect(),
    }
}

/// `branch`, with where its files are and the memory guard's view of the host.
pub fn status(host: &Host, record: &BranchRecord) -> StatusReport {
    let name = &record.name;
    StatusReport {
        branch: branch(host, record),
        datadir: host.storage.branch_datadir(name),
        option_file: host.layout.option_file(name),
        error_log: host.layout.error_log(name),
        service_manager: host.services.kind().into(),
        main_pid: host.services.main_pid(&launch(host, name)).ok().flatten(),
        pool: host.storage.info().ok(),
        space: host.storage.branch_space(name).unwrap_or_default(),
        memory: crate::ops::branch::budget::assess(host, record, 0).ok(),
    }
}
