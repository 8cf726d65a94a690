//! The database server itself: initialising datadirs, preparing baselines with a one-off
//! server, and probing a branch's server until it answers. Real (MariaDB/MySQL) and sim.

pub mod bake;
pub mod mariadb;
pub mod oneoff;
pub mod options;
pub mod sim;

use crate::branch::ActivitySample;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How a baseline is made ready before it is frozen.
#[derive(Debug, Clone, Default)]
pub struct Preparation {
    /// Run the engine's initialiser first (`baseline create --empty`).
    pub initialize: bool,
    /// Give the configured client user password-less loopback access (empty baselines).
    pub create_client_user: bool,
    /// SQL files run in order after start-up (seed data, masking).
    pub sql_files: Vec<PathBuf>,
}

pub trait Server: Send + Sync {
    /// `mariadbd --version` or equivalent, for `status` and error messages.
    fn version(&self) -> Result<String>;
    /// Creates a branch's runtime directory and its `tmp`, writable by the server's OS user.
    fn prepare_runtime_dir(&self, dir: &Path) -> Result<()>;
    /// Waits until the server behind `socket` answers (a query, or an authentication
    /// refusal: either way it is serving). `alive` says whether the process still runs, so a
    /// server that dies during start-up fails fast instead of at the timeout.
    fn wait_ready(
        &self,
        socket: &Path,
        error_log: &Path,
        timeout: Duration,
        alive: &dyn Fn() -> bool,
    ) -> Result<()>;
    /// Starts a one-off server on `datadir` (scratch files in `work`), applies `prep`, shuts
    /// it down cleanly with a full purge, and refuses a datadir that needed crash recovery.
    fn prepare_baseline(&self, datadir: &Path, work: &Path, prep: &Preparation) -> Result<()>;
    /// Reads the server's own activity counters over its socket. db-branch's probes use
    /// statements that are subtracted out (`DO`, `SHOW STATUS`, `SHOW PROCESSLIST`), so they
    /// never count as use.
    fn activity(&self, socket: &Path) -> Result<ActivitySample>;
    /// Option-file lines that record every statement with the stages that tell how an
    /// `ALTER` ran (for `migrate-check`).
    fn instrumentation_options(&self) -> Vec<String>;
    /// Extra memory a server with those options takes (the memory guard counts it).
    fn instrumentation_memory(&self) -> u64;
    /// User tables with their InnoDB table id (changes when the table is rebuilt) and size.
    fn tables(&self, socket: &Path) -> Result<Vec<TableInfo>>;
    /// Statements recorded since the server started, oldest first, without db-branch's own.
    fn statement_history(&self, socket: &Path) -> Result<StatementHistory>;
    /// Fills `req.datadir` from the source and leaves it cleanly shut down (the baker).
    fn bake(
        &self,
        req: &bake::BakeRequest,
        progress: &dyn bake::BakeProgress,
    ) -> Result<bake::BakeSummary>;
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TableInfo {
    pub schema: String,
    pub name: String,
    /// InnoDB's table id: a rebuild or copy gives the table a new one.
    pub table_id: Option<u64>,
    pub bytes: u64,
    pub rows: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StatementEvent {
    pub thread: u64,
    pub event_id: u64,
    /// The statement kind, e.g. `alter_table`, `insert`, `select`.
    pub kind: String,
    pub sql: String,
    pub schema: Option<String>,
    pub duration: Duration,
    pub lock: Duration,
    pub rows_examined: u64,
    pub rows_affected: u64,
    pub error: Option<String>,
    /// How an ALTER ran: `stage/sql/copy to tmp table`, `stage/innodb/alter table (…)`.
    pub stages: Vec<String>,
}

#[derive(Debug, Clone, Default)]
pub struct StatementHistory {
    pub events: Vec<StatementEvent>,
    /// Rows the history holds at most; a full history may have lost the oldest.
    pub capacity: u64,
}

/// Lines a server writes when it had to recover from an unclean shutdown.
pub const CRASH_RECOVERY_MARKERS: &[&str] = &[
    "Starting crash recovery",
    "crash recovery",
    "Starting final batch to recover",
    "Aria engine: starting recovery",
];

/// The first line of `log` (the part written since a start) showing crash recovery.
pub fn crash_recovery_line(log: &str) -> Option<&str> {
    log.lines().find(|l| {
        CRASH_RECOVERY_MARKERS
            .iter()
            .any(|m| l.to_ascii_lowercase().contains(&m.to_ascii_lowercase()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_is_spotted() {
        let clean = "2026-11-30 [Note] InnoDB: Buffer pool(s) load completed\n[Note] ready for connections.";
        assert_eq!(crash_recovery_line(clean), None);
        let dirty = "[Note] InnoDB: Starting crash recovery from checkpoint LSN=46846\n";
        assert!(crash_recovery_line(dirty).is_some());
    }
}
