//! What commands print about a branch: one struct serialised for `--json` and rendered as
//! text or a table otherwise.

use crate::branch::{BranchName, BranchRecord, Generation, Phase};
use crate::host::Host;
use crate::ops::branch::connection::Connection;
use crate::ops::branch::unit::{launch, server_rss};
use crate::printer::{bytes, table, Human};
use crate::supervisor::ServiceState;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Clone, Serialize)]
pub struct BranchView {
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

impl BranchView {
    pub fn of(host: &Host, record: &BranchRecord) -> BranchView {
        let state = host
            .services
            .state(&launch(host, &record.name))
            .unwrap_or(ServiceState::Failed);
        BranchView {
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
            unclean: state == ServiceState::Failed
                && record.profile == crate::config::Profile::Test,
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

    /// "stopped (idle)" for a branch stop-idle stopped.
    pub fn state_text(&self) -> String {
        if self.out_of_memory {
            format!("{} (out of memory: reset it)", self.state)
        } else if self.unclean {
            format!("{} (unclean: reset it)", self.state)
        } else if self.stopped_idle && !self.state.is_up() {
            format!("{} (idle)", self.state)
        } else {
            self.state.to_string()
        }
    }

    pub fn row(&self) -> Vec<String> {
        vec![
            self.name.to_string(),
            self.owner.clone(),
            self.state_text(),
            self.port.to_string(),
            self.baseline.to_string(),
            short_time(Some(self.created)),
            short_time(Some(self.last_activity)),
            short_time(self.expires_at),
            bytes(self.disk_bytes),
            bytes(self.rss_bytes),
        ]
    }
}

fn short_time(t: Option<DateTime<Utc>>) -> String {
    t.map_or("-".into(), |t| t.format("%m-%d %H:%M").to_string())
}

pub const LIST_HEADER: [&str; 10] = [
    "NAME", "OWNER", "STATE", "PORT", "BASELINE", "CREATED", "ACTIVE", "EXPIRES", "DISK", "RSS",
];

impl Human for BranchView {
    fn human(&self) -> String {
        let c = &self.connection;
        format!(
            "branch:   {}\nstate:    {}\nserver:   {}\nprofile:  {}\nbaseline: {}\ncreated:  {}\nowner:    {}\nlabels:   {}\nexpires:  {}\nprotected: {}\nactive:   {}\ndisk:     {}\nrss:      {}\nhost:     {}\nport:     {}\nsocket:   {}\nuser:     {}\ndatabase: {}\nurl:      {}\n",
            self.name,
            self.state_text(),
            self.server.map_or("-".into(), |s| s.to_string()),
            self.profile,
            self.baseline,
            self.created.to_rfc3339(),
            self.owner,
            self.labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" "),
            self.expires_at.map_or("never".into(), |t| t.to_rfc3339()),
            match (self.protected, self.protected_until) {
                (false, _) => "no".to_string(),
                (true, None) => "yes".to_string(),
                (true, Some(u)) => format!("until {}", u.to_rfc3339()),
            },
            self.last_activity.to_rfc3339(),
            bytes(self.disk_bytes),
            bytes(self.rss_bytes),
            c.host,
            c.port,
            c.socket.display(),
            c.user,
            c.database.as_deref().unwrap_or("-"),
            c.url
        )
    }
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct BranchList(pub Vec<BranchView>);

impl Human for BranchList {
    fn human(&self) -> String {
        if self.0.is_empty() {
            return "no branches; create one with `db-branch create NAME`".into();
        }
        table(&LIST_HEADER, self.0.iter().map(BranchView::row).collect())
    }
}

/// `create`: the branch, and whether it existed already.
#[derive(Debug, Serialize)]
pub struct CreateView {
    /// true when the branch already existed (an idempotent re-run changed nothing).
    pub existed: bool,
    /// `create --from SRC --clean`: how long SRC's server was down for the copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_downtime_seconds: Option<f64>,
    #[serde(flatten)]
    pub branch: BranchView,
}

impl Human for CreateView {
    fn human(&self) -> String {
        self.branch.human()
    }
}

#[derive(Debug, Serialize)]
pub struct Status {
    #[serde(flatten)]
    pub branch: BranchView,
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

impl Status {
    pub fn of(host: &Host, record: &BranchRecord) -> Status {
        let name = &record.name;
        Status {
            branch: BranchView::of(host, record),
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
}

impl Human for Status {
    fn human(&self) -> String {
        format!(
            "{}ceiling:  {}\nmemory:   {}\ndatadir:  {}\noptions:  {}\nlog:      {}\nmanager:  {}\npid:      {}\nspace:    {}\npool:     {}\n",
            self.branch.human(),
            crate::memory::mib(self.branch.ceiling_bytes),
            self.memory.as_ref().map_or("-".into(), |m| format!(
                "{} free, {} owed to {} other running branch(es), {} headroom: {} more of this size fit",
                crate::memory::mib(m.free()),
                crate::memory::mib(m.owed()),
                m.running.len(),
                crate::memory::mib(m.headroom_bytes),
                m.more_that_fit()
            )),
            self.datadir.display(),
            self.option_file.display(),
            self.error_log.display(),
            self.service_manager,
            self.main_pid.map_or("-".into(), |p| p.to_string()),
            if self.space.is_empty() {
                String::new()
            } else {
                self.space
                    .iter()
                    .map(|(k, v)| format!("{k} {}", crate::values::ByteSize(*v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            self.pool.as_ref().map_or("-".into(), |p| {
                let ram = match (p.ram_backed, p.ram_bytes) {
                    (true, Some(b)) => format!(", in RAM: holds {}", crate::values::ByteSize(b)),
                    (true, None) => ", in RAM".into(),
                    _ => String::new(),
                };
                format!(
                    "{} {} ({} free of {}{ram})",
                    p.kind,
                    p.path.display(),
                    crate::values::ByteSize(p.free_bytes),
                    crate::values::ByteSize(p.total_bytes)
                )
            }),
        )
    }
}

/// `delete`: which branch, and whether there was anything to delete.
#[derive(Debug, Serialize)]
pub struct DeleteView {
    pub name: BranchName,
    /// false when there was nothing to delete.
    pub deleted: bool,
}

impl Human for DeleteView {
    fn human(&self) -> String {
        String::new()
    }
}
