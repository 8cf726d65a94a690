//! How a branch looks on a terminal: `ops::inspect`'s reports (the same structs `--json`
//! serialises) rendered as text or a table. Nothing here asks the host anything.

use crate::branch::BranchName;
use crate::ops::inspect::{BranchReport, StatusReport};
use crate::printer::{bytes, table, Human};
use chrono::{DateTime, Utc};
use serde::Serialize;

impl BranchReport {
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

    /// Its generation, or `follower` for a follower (`baseline follow`), made from none.
    fn baseline_text(&self) -> String {
        if self.baseline == crate::branch::Generation::NONE {
            "follower".into()
        } else {
            self.baseline.to_string()
        }
    }

    pub fn row(&self) -> Vec<String> {
        vec![
            self.name.to_string(),
            self.owner.clone(),
            self.state_text(),
            self.port.to_string(),
            self.baseline_text(),
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

impl Human for BranchReport {
    fn human(&self) -> String {
        let c = &self.connection;
        format!(
            "branch:   {}\nstate:    {}\nserver:   {}\nprofile:  {}\nbaseline: {}\ncreated:  {}\nowner:    {}\nlabels:   {}\nexpires:  {}\nprotected: {}\nactive:   {}\ndisk:     {}\nrss:      {}\nhost:     {}\nport:     {}\nsocket:   {}\nuser:     {}\ndatabase: {}\nurl:      {}\n",
            self.name,
            self.state_text(),
            self.server.map_or("-".into(), |s| s.to_string()),
            self.profile,
            self.baseline_text(),
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
pub struct BranchList(pub Vec<BranchReport>);

impl Human for BranchList {
    fn human(&self) -> String {
        if self.0.is_empty() {
            return "no branches; create one with `db-branch create NAME`".into();
        }
        table(&LIST_HEADER, self.0.iter().map(BranchReport::row).collect())
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
    pub branch: BranchReport,
}

impl Human for CreateView {
    fn human(&self) -> String {
        self.branch.human()
    }
}

impl Human for StatusReport {
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
    /// The trash entry that keeps it (None: destroyed at once, or nothing there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trash_id: Option<crate::branch::TrashId>,
    /// Until when `restore` can bring it back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_until: Option<chrono::DateTime<chrono::Utc>>,
}

impl Human for DeleteView {
    fn human(&self) -> String {
        String::new()
    }
}
