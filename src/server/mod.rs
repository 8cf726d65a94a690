//! The database server itself — Oracle MySQL or MariaDB, told apart by `flavour` — behind
//! one trait: initialising datadirs, preparing baselines with a one-off server, probing a
//! branch's server until it answers, reading its counters and catalogue. Real and sim.
//!
//! Module graph (no circles): `flavour` (pure data) ← `options`, `conn`, `binary` ←
//! `oneoff` ← `real`; the baker (`crate::bake`) uses `oneoff`, `conn` and `flavour`.

pub mod binary;
pub mod client;
pub mod conn;
pub mod databases;
pub mod dense;
pub mod oneoff;
pub mod options;
pub mod preload;
pub mod real;
pub mod schema;
#[cfg(any(test, feature = "testing"))]
pub mod sim;

use crate::branch::ActivitySample;
use crate::error::{Classified, Kind};
use crate::flavour::Flavour;
use crate::printer::PhaseProgress;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What can go wrong with the server itself, before any data is touched.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("the server binary {0} does not exist")]
    BinaryMissing(PathBuf),
    #[error("{path} is not a MySQL or MariaDB server (its --version said: {output})")]
    NotAServer { path: PathBuf, output: String },
    #[error("OS user {0:?} does not exist (mysqld.user)")]
    NoSuchUser(String),
    /// A datadir or generation made by a server this binary must not start.
    #[error("{what} was made by {made_by}, but the configured server is {binary}")]
    WrongServer {
        what: String,
        made_by: Flavour,
        binary: Flavour,
    },
    /// A release known to crash at start-up (`Flavour::start_up_bug`).
    #[error("{what} is {flavour}, which db-branch refuses: {bug}")]
    KnownBroken {
        what: String,
        flavour: Flavour,
        bug: &'static str,
    },
    #[error(
        "the datadir was not shut down cleanly: its server had to run crash recovery (\"{line}\")"
    )]
    UncleanDatadir { line: String },
}

impl Classified for ServerError {
    fn kind(&self) -> Kind {
        Kind::Usage
    }
    fn hints(&self) -> Vec<String> {
        match self {
            ServerError::BinaryMissing(_) | ServerError::NotAServer { .. } => vec![
                "install mariadb-server (or a server with scripts/install-server) and set mysqld.binary in the config to its mysqld/mariadbd"
                    .into(),
            ],
            ServerError::NoSuchUser(_) => vec!["install the server package, which makes the user".into()],
            ServerError::WrongServer { made_by, binary, .. } => vec![
                format!(
                    "starting it with {binary} would upgrade its data dictionary in place; point mysqld.binary at a {} {}.{} server, or make a new baseline with this one",
                    made_by.family, made_by.version.major, made_by.version.minor
                ),
            ],
            ServerError::KnownBroken { .. } => vec![
                "install a fixed release (scripts/install-server mysql-9.7 gives 9.7), and make \
                 the baseline again with it if this one made it"
                    .into(),
            ],
            ServerError::UncleanDatadir { .. } => vec![
                "start a server on the original datadir and stop it cleanly (`mariadb-admin shutdown`, `mysqladmin shutdown`, or `systemctl stop mariadb`), then try again; a clean datadir starts without any \"crash recovery\" line in its error log"
                    .into(),
            ],
        }
    }
}

/// Refuses (exit 2) a server release, or data made by one, known to crash at start-up.
/// `what`: "the configured server" or the data's name.
fn check_not_known_broken(what: &str, flavour: Flavour) -> Result<(), ServerError> {
    match flavour.start_up_bug() {
        Some(bug) => Err(ServerError::KnownBroken {
            what: what.to_string(),
            flavour,
            bug,
        }),
        None => Ok(()),
    }
}

/// Whether the configured server (`configured`) may start `what`, made by `made_by`
/// (unknown origins pass): refuses a release known to crash at start-up, data made by one,
/// and data of another family or release series (its first start would upgrade the data
/// dictionary in place).
pub fn check_may_serve(
    what: &str,
    configured: Flavour,
    made_by: Option<Flavour>,
) -> Result<(), ServerError> {
    check_not_known_broken("the configured server", configured)?;
    let Some(made_by) = made_by else {
        return Ok(());
    };
    check_not_known_broken(what, made_by)?;
    if !configured.can_serve(&made_by) {
        return Err(ServerError::WrongServer {
            what: what.to_string(),
            made_by,
            binary: configured,
        });
    }
    Ok(())
}

/// How a baseline is made ready before it is frozen.
#[derive(Debug, Clone, Default)]
pub struct Preparation {
    /// Run the engine's initialiser first (`baseline create --empty`).
    pub initialize: bool,
    /// Give the configured client user loopback access (empty baselines).
    pub create_client_user: bool,
    /// SQL files run in order after start-up (seed data, masking).
    pub sql_files: Vec<PathBuf>,
    /// A crash-consistent snapshot of a follower (`baseline cut`): InnoDB's recovery at
    /// the first start is expected, and replication (source, credentials, relay logs) is
    /// forgotten before the SQL files run.
    pub from_follower: bool,
}

pub trait Server: Send + Sync {
    /// The server's `--version` line, for `status`, `doctor` and messages.
    fn version(&self) -> Result<String>;
    /// What the configured binary is: family and version.
    fn flavour(&self) -> Result<Flavour>;
    /// The server's own command-line client (`mysql` beside MySQL, `mariadb` beside
    /// MariaDB), for `shell` and the `DB_BRANCH_CLIENT` variable.
    fn client_program(&self) -> PathBuf;
    /// The library `test`-profile branch servers preload so their fsyncs are no-ops
    /// (`preload`), when this host has it.
    fn fsync_free_library(&self) -> Option<PathBuf>;
    /// The library Oracle MySQL servers preload so their start skips calibrating a timer
    /// nothing reads (`preload`, `mysqld.skip_timer_calibration`), written out where the
    /// servers can read it; None for MariaDB, when turned off, or where this build has none.
    fn ticks_shim(&self) -> Result<Option<PathBuf>>;
    /// Creates a branch's runtime directory and its `tmp`, writable by the server's OS user.
    fn prepare_runtime_dir(&self, dir: &Path) -> Result<()>;
    /// Gives a branch's datadir to the server's OS user when another uid owns it (a
    /// generation received from a host where that user has another uid: a send stream
    /// carries numeric owners). One `stat` when it is already right. True when it changed.
    fn adopt_datadir(&self, datadir: &Path) -> Result<bool>;
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
    /// it down cleanly with a full purge, and refuses a datadir that needed crash recovery
    /// or was made by a server this one must not start. Returns what made the datadir.
    fn prepare_baseline(
        &self,
        datadir: &Path,
        work: &Path,
        prep: &Preparation,
        progress: &PhaseProgress,
    ) -> Result<Flavour>;
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
    /// Writes and flushes InnoDB's redo log, so a snapshot of the running server taken next
    /// holds every transaction committed so far (the `test` profile flushes once a second).
    fn flush_logs(&self, socket: &Path) -> Result<()>;
    /// Points the server behind `socket` at `source` and starts replicating (a follower).
    fn follow(&self, socket: &Path, source: &crate::replication::ReplicaSource) -> Result<()>;
    /// Starts a follower's replication again (after its server started): a no-op where it
    /// runs.
    fn start_replication(
        &self,
        socket: &Path,
        source: &crate::replication::ReplicaSource,
    ) -> Result<()>;
    /// What a follower's replication threads say.
    fn replica_status(&self, socket: &Path) -> Result<crate::replication::ReplicaStatus>;
    /// Stops a follower's applier (its receiver keeps fetching) and returns the GTIDs it
    /// has applied: nothing changes its data until `resume_applier`.
    fn pause_applier(&self, socket: &Path) -> Result<String>;
    fn resume_applier(&self, socket: &Path) -> Result<()>;
    /// Every schema object of the user databases (`diff`).
    fn schema(&self, socket: &Path) -> Result<schema::Schema>;
    /// Row count and checksum of every user table (`diff --data`).
    fn table_data(
        &self,
        socket: &Path,
    ) -> Result<std::collections::BTreeMap<String, schema::TableData>>;
    /// Application database `database` as dense pool slots copy it; refuses (a usage
    /// error saying why) what a copy inside the same server could not make exact.
    fn dense_template(&self, socket: &Path, database: &str) -> Result<dense::DenseTemplate>;
    /// Makes `database` a pristine copy of `template` (whose files are under `datadir`),
    /// whatever it held.
    fn dense_copy(
        &self,
        socket: &Path,
        datadir: &Path,
        template: &dense::DenseTemplate,
        database: &str,
    ) -> Result<()>;
    /// Gives `slot`'s account every privilege on its database and nothing else.
    fn dense_account(&self, socket: &Path, slot: &dense::DenseSlot) -> Result<()>;
    /// Ends the sessions of account `user`.
    fn dense_end_sessions(&self, socket: &Path, user: &str) -> Result<()>;
    /// Swaps the pristine copy `spare` in as `slot`'s database, its tables going to
    /// `trash`, in one atomic RENAME (see `dense::Swap` for when it cannot).
    fn dense_swap(
        &self,
        socket: &Path,
        template: &dense::DenseTemplate,
        slot: &dense::DenseSlot,
        spare: &str,
        trash: &str,
    ) -> Result<dense::Swap>;
    /// Puts `slot`'s rows back as the template (whose files are under `datadir`) holds
    /// them, in place, where that is exact; declines, changing nothing, where it is not
    /// (`dense::reset_rows`).
    fn dense_reset_rows(
        &self,
        socket: &Path,
        datadir: &Path,
        template: &dense::DenseTemplate,
        slot: &dense::DenseSlot,
    ) -> Result<dense::RowReset>;
    /// Drops `database` if it exists.
    fn dense_drop(&self, socket: &Path, database: &str) -> Result<()>;
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
/// (MySQL logs them as notes: its option file sets `log-error-verbosity=3`. It also logs
/// "Crash recovery finished" on every clean start, so the bare words are no marker.)
pub const CRASH_RECOVERY_MARKERS: &[&str] = &[
    "Starting crash recovery",
    "Database was not shutdown normally",
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
        let mysql_clean = "[Note] [MY-013911] [Server] Crash recovery finished in InnoDB engine. No attempts to commit, rollback or prepare any transactions.";
        assert_eq!(crash_recovery_line(mysql_clean), None);
        let mysql_dirty = "[Note] [MY-012551] [InnoDB] Database was not shutdown normally!\n[Note] [MY-012552] [InnoDB] Starting crash recovery.";
        assert!(crash_recovery_line(mysql_dirty).is_some());
    }
}
