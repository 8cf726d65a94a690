//! Starting, stopping and killing branch servers, behind one trait: systemd over D-Bus, a
//! built-in supervisor for hosts without systemd, and an in-memory one for unit tests.

pub mod cgroup;
pub mod detached;
pub mod kmsg;
pub mod process;
#[cfg(any(test, feature = "testing"))]
pub mod sim;
pub mod systemd;

use crate::branch::BranchName;
use anyhow::Result;
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceState {
    Running,
    Starting,
    Stopping,
    Stopped,
    /// Ended uncleanly (killed, crashed) and not restarted.
    Failed,
}

impl ServiceState {
    pub fn is_up(self) -> bool {
        matches!(self, ServiceState::Running | ServiceState::Starting)
    }
}

impl std::fmt::Display for ServiceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = serde_json::to_value(self).expect("plain enum");
        f.write_str(s.as_str().unwrap_or("?"))
    }
}

/// What a supervisor needs to run one branch's server.
#[derive(Debug, Clone)]
pub struct Launch {
    pub name: BranchName,
    pub binary: PathBuf,
    pub option_file: PathBuf,
    pub error_log: PathBuf,
    /// The OS user the server runs as (it must be able to write its error log).
    pub user: String,
    /// The pid file the server itself writes (and removes on a clean shutdown).
    pub pid_file: PathBuf,
    /// The built-in supervisor's own record of the pid it started.
    pub supervisor_pid_file: PathBuf,
    /// cgroup memory ceilings (systemd): throttled above `memory_high`, killed above
    /// `memory_max`, so a runaway branch cannot push the OOM killer onto its neighbours.
    pub memory_high: u64,
    pub memory_max: u64,
    /// Variables the server starts with (`server::preload`); the systemd unit reads them
    /// from `server.env` beside the option file, which `start` writes.
    pub environment: Vec<(String, String)>,
}

impl Launch {
    /// The file the systemd template unit reads as its `EnvironmentFile`.
    pub fn environment_file(&self) -> PathBuf {
        self.option_file.with_file_name("server.env")
    }
}

/// How likely the kernel's OOM killer picks a branch server (-1000..1000): above the host's
/// own services (0), so branch servers go first.
pub const OOM_SCORE_ADJ: i32 = 500;

pub trait ServiceManager: Send + Sync {
    fn kind(&self) -> &'static str;
    /// One-time set-up for `init` (the systemd units); idempotent.
    fn install(&self) -> Result<()>;
    /// Enables and starts the stop-idle and gc timers; returns their names.
    fn enable_timers(&self) -> Result<Vec<String>>;
    /// Runs `baseline cut` every `every` from a timer (`baseline follow --every`), or no
    /// more (None); returns the timer's name while there is one.
    fn schedule_cuts(&self, every: Option<std::time::Duration>) -> Result<Option<String>>;
    /// Starts the server; returns when the manager considers it started (systemd: the
    /// `Type=notify` job is done; process: spawned). Readiness is probed by the caller.
    fn start(&self, launch: &Launch) -> Result<()>;
    /// Graceful stop; returns when the server has exited. No-op when not running.
    fn stop(&self, launch: &Launch) -> Result<()>;
    /// SIGKILL; returns when the server is gone. No-op when not running.
    fn kill(&self, launch: &Launch) -> Result<()>;
    fn state(&self, launch: &Launch) -> Result<ServiceState>;
    fn main_pid(&self, launch: &Launch) -> Result<Option<u32>>;
    /// Drops whatever the manager remembers of a deleted branch (failed state, pid file).
    fn forget(&self, launch: &Launch) -> Result<()>;
    /// The server's last run ended because it passed its memory ceiling (systemd's
    /// `Result=oom-kill` or the kernel's record of its unit's cgroup; the built-in
    /// supervisor's cgroup counter).
    fn out_of_memory(&self, _launch: &Launch) -> Result<bool> {
        Ok(false)
    }
    /// What this manager needs on the host, for `doctor`.
    fn readiness(&self) -> Vec<crate::check::Check> {
        Vec::new()
    }
    /// Starts a helper of db-branch's own (a pool's recycler: `db-branch ARGS…`) that
    /// outlives this invocation, its output appended to `log`.
    fn start_helper(&self, args: &[String], log: &std::path::Path) -> Result<()>;
    /// Branches whose server this manager is running (or has failed), records or not:
    /// `doctor` compares them with the records to find orphans.
    fn running_branches(&self) -> Result<Vec<BranchName>>;
}
