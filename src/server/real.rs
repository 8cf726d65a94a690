//! The real server: Oracle MySQL's `mysqld` or MariaDB's `mariadbd`, its initialiser and
//! client. With `conn`, the only code that talks to a server over the MySQL protocol.

use super::binary::ServerBinary;
use super::conn;
use super::oneoff::OneOff;
use super::{Preparation, Server, ServerError, StatementEvent, StatementHistory, TableInfo};
use crate::branch::ActivitySample;
use crate::flavour::{self, Flavour};
use crate::printer::PhaseProgress;
use crate::values::ByteSize;
use anyhow::{anyhow, Context, Result};
use mysql::prelude::Queryable;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct RealServer {
    pub binary: ServerBinary,
    client_user: String,
    client_password: String,
}

impl RealServer {
    pub fn new(
        binary: PathBuf,
        user: String,
        client_user: String,
        client_password: String,
        version_cache: Option<PathBuf>,
        ticks_shim_dir: Option<PathBuf>,
    ) -> Self {
        RealServer {
            binary: ServerBinary::new(binary, user, version_cache).with_ticks_shim(ticks_shim_dir),
            client_user,
            client_password,
        }
    }

    /// The statements that give the configured client user loopback access.
    pub fn client_account_sql(&self, flavour: &Flavour) -> Vec<String> {
        flavour.client_account_sql(&self.client_user, &self.client_password)
    }

    /// Refuses a datadir this server must not start (another family or release series).
    pub fn check_can_serve(&self, what: &str, made_by: Option<Flavour>) -> Result<Flavour> {
        let binary = self.binary.flavour()?;
        super::check_may_serve(what, binary, made_by)?;
        Ok(binary)
    }
}

impl Server for RealServer {
    fn dense_template(&self, socket: &Path, database: &str) -> Result<super::dense::DenseTemplate> {
        super::dense::template(socket, database)
    }

    fn dense_copy(
        &self,
        socket: &Path,
        datadir: &Path,
        template: &super::dense::DenseTemplate,
        database: &str,
    ) -> Result<()> {
        super::dense::copy(socket, datadir, template, database)
    }

    fn dense_account(&self, socket: &Path, slot: &super::dense::DenseSlot) -> Result<()> {
        super::dense::account(socket, slot)
    }

    fn dense_end_sessions(&self, socket: &Path, user: &str) -> Result<()> {
        super::dense::end_sessions(socket, user)
    }

    fn dense_swap(
        &self,
        socket: &Path,
        template: &super::dense::DenseTemplate,
        slot: &super::dense::DenseSlot,
        spare: &str,
        trash: &str,
    ) -> Result<super::dense::Swap> {
        super::dense::swap(socket, template, slot, spare, trash)
    }

    fn dense_reset_rows(
        &self,
        socket: &Path,
        datadir: &Path,
        template: &super::dense::DenseTemplate,
        slot: &super::dense::DenseSlot,
    ) -> Result<super::dense::RowReset> {
        super::dense::reset_rows(socket, datadir, template, slot)
    }

    fn dense_drop(&self, socket: &Path, database: &str) -> Result<()> {
        super::dense::drop_database(socket, database)
    }

    fn version(&self) -> Result<String> {
        self.binary.version_line()
    }

    fn flavour(&self) -> Result<Flavour> {
        self.binary.flavour()
    }

    fn client_program(&self) -> PathBuf {
        self.binary.client_program()
    }

    fn fsync_free_library(&self) -> Option<PathBuf> {
        super::preload::fsync_free_library()
    }

    fn ticks_shim(&self) -> Result<Option<PathBuf>> {
        // A binary that cannot say what it is fails its start with that message instead.
        match self.binary.flavour() {
            Ok(flavour) => self.binary.ticks_shim(flavour),
            Err(_) => Ok(None),
        }
    }

    fn prepare_runtime_dir(&self, dir: &Path) -> Result<()> {
        let (uid, gid) = user_ids(&self.binary.user)?;
        // `run/` is the server user's, so `run/tmp` is whatever that user left there: a link
        // planted in its place is removed, and the owner is given through a descriptor of
        // the real directory (O_NOFOLLOW), never by path.
        for d in [dir.to_path_buf(), dir.join("tmp")] {
            match fs::symlink_metadata(&d) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => fs::remove_file(&d)
                    .with_context(|| format!("removing {} (not a directory)", d.display()))?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).with_context(|| format!("reading {}", d.display())),
            }
            if d == dir {
                if let Some(parent) = dir.parent() {
                    fs::create_dir_all(parent)
                        .with_context(|| format!("creating {}", parent.display()))?;
                }
            }
            match fs::create_dir(&d) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                    return Err(e).with_context(|| format!("creating {}", d.display()))
                }
                _ => {}
            }
            let fd = nix::fcntl::open(
                &d,
                nix::fcntl::OFlag::O_RDONLY
                    | nix::fcntl::OFlag::O_DIRECTORY
                    | nix::fcntl::OFlag::O_NOFOLLOW
                    | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            .with_context(|| format!("opening {} (not through a link)", d.display()))?;
            nix::unistd::fchown(&fd, Some(uid), Some(gid))
                .with_context(|| format!("chown {} to {}", d.display(), self.binary.user))?;
        }
        Ok(())
    }

    fn adopt_datadir(&self, datadir: &Path) -> Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let (uid, _) = user_ids(&self.binary.user)?;
        let meta =
            fs::metadata(datadir).with_context(|| format!("reading {}", datadir.display()))?;
        if meta.uid() == uid.as_raw() {
            return Ok(false);
        }
        self.binary.give_to_server_user(datadir).with_context(|| {
            format!(
                "giving {} (owned by uid {}, made where {} has another uid) to {}",
                datadir.display(),
                meta.uid(),
                self.binary.user,
                self.binary.user
            )
        })?;
        Ok(true)
    }

    fn wait_ready(
        &self,
        socket: &Path,
        error_log: &Path,
        timeout: Duration,
        alive: &dyn Fn() -> bool,
    ) -> Result<()> {
        conn::wait_ready(socket, error_log, timeout, alive)
    }

    fn prepare_baseline(
        &self,
        datadir: &Path,
        work: &Path,
        prep: &Preparation,
        progress: &PhaseProgress,
    ) -> Result<Flavour> {
        let flavour = if prep.initialize {
            self.binary.flavour()?
        } else {
            self.check_can_serve("this datadir", Flavour::of_datadir(datadir))?
        };
        let _ = fs::remove_dir_all(work);
        self.prepare_runtime_dir(work)?;
        if prep.initialize {
            progress.phase(&format!("initialise an empty {flavour} datadir"), 0);
            let cache = work.parent().unwrap_or(work);
            self.binary
                .initialize_cached(datadir, &work.join("tmp"), cache)?;
        }
        self.binary.give_to_server_user(datadir)?;
        progress.phase("start a one-off server", 0);
        let server = OneOff::start(&self.binary, flavour, datadir, work, ByteSize::mib(256))?;
        if prep.initialize {
            server
                .run_statements(&flavour.admin_login_sql())
                .context("giving db-branch its socket-authenticated login")?;
        }
        if prep.create_client_user {
            server
                .run_statements(&self.client_account_sql(&flavour))
                .context("creating the client user in the new baseline")?;
        }
        if prep.from_follower {
            server
                .run_statements(&crate::replication::forget_sql(flavour.family))
                .context("removing the follower's replication settings from the copy")?;
        }
        for file in &prep.sql_files {
            server.run_sql_file(file, progress)?;
        }
        progress.phase("clean shutdown (full purge)", 0);
        server.shutdown_clean(prep.from_follower)?;
        let _ = fs::remove_dir_all(work);
        Ok(flavour)
    }

    fn instrumentation_memory(&self) -> u64 {
        self.binary
            .flavour()
            .map_or(256 << 20, |f| f.instrumentation_memory())
    }

    fn instrumentation_options(&self) -> Vec<String> {
        flavour::instrumentation_options()
    }

    fn tables(&self, socket: &Path) -> Result<Vec<TableInfo>> {
        let mut conn = conn::admin(socket)?;
        let view = self.binary.flavour()?.innodb_tables_view();
        let ids: Vec<(String, u64)> = conn
            .query(format!(
                "SELECT NAME, TABLE_ID FROM information_schema.{view}"
            ))
            .context("reading InnoDB table ids")?;
        let ids: std::collections::HashMap<String, u64> = ids.into_iter().collect();
        // schema, table, data bytes, index bytes, rows (estimated)
        type Row = (String, String, Option<u64>, Option<u64>, Option<u64>);
        let rows: Vec<Row> = conn.query(
            "SELECT TABLE_SCHEMA, TABLE_NAME, DATA_LENGTH, INDEX_LENGTH, TABLE_ROWS \
             FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA \
             NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')",
        )?;
        Ok(rows
            .into_iter()
            .map(|(schema, name, data, index, rows)| TableInfo {
                table_id: ids.get(&format!("{schema}/{name}")).copied(),
                schema,
                name,
                bytes: data.unwrap_or(0) + index.unwrap_or(0),
                rows: rows.unwrap_or(0),
            })
            .collect())
    }

    fn flush_logs(&self, socket: &Path) -> Result<()> {
        let mut c = conn::admin(socket)?;
        // MariaDB's FLUSH ENGINE LOGS writes nothing while innodb_flush_log_at_trx_commit
        // is 0 (the test profile): have it write the log buffer (2), then put it back.
        let relaxed: Option<u64> =
            c.query_first("SELECT @@GLOBAL.innodb_flush_log_at_trx_commit")?;
        if relaxed == Some(0) {
            c.query_drop("SET GLOBAL innodb_flush_log_at_trx_commit = 2")?;
        }
        let flushed = c
            .query_drop("FLUSH ENGINE LOGS")
            .context("flushing the redo log (FLUSH ENGINE LOGS)");
        if relaxed == Some(0) {
            c.query_drop("SET GLOBAL innodb_flush_log_at_trx_commit = 0")?;
        }
        flushed
    }

    fn follow(&self, socket: &Path, source: &crate::replication::ReplicaSource) -> Result<()> {
        let mut c = conn::admin(socket)?;
        for statement in crate::replication::follow_sql(source) {
            // The statement holds the password: say which one failed, not what it held.
            let verb: String = statement.split(" TO ").next().unwrap_or("").into();
            c.query_drop(&statement)
                .with_context(|| format!("`{verb}` on the follower"))?;
        }
        Ok(())
    }

    fn start_replication(
        &self,
        socket: &Path,
        source: &crate::replication::ReplicaSource,
    ) -> Result<()> {
        // The statement holds the password: the error says which one failed, not its text.
        conn::admin(socket)?
            .query_drop(crate::replication::start_sql(source))
            .context("starting the follower's replication (START REPLICA)")
    }

    fn replica_status(&self, socket: &Path) -> Result<crate::replication::ReplicaStatus> {
        let family = self.binary.flavour()?.family;
        let mut c = conn::admin(socket)?;
        let row: Option<mysql::Row> = c
            .query_first(crate::replication::status_query(family))
            .context("reading the follower's replication status")?;
        let position: Option<String> =
            c.query_first(crate::replication::applied_position_query(family))?;
        let Some(row) = row else {
            return Ok(crate::replication::ReplicaStatus {
                position: position.unwrap_or_default(),
                last_error: Some("replication is not set up on this server".into()),
                ..Default::default()
            });
        };
        let [io, sql, lag, io_error, sql_error] = crate::replication::status_columns(family);
        let text = |col: &str| -> Option<String> {
            row.get_opt::<Option<String>, _>(col)
                .and_then(|v| v.ok())
                .flatten()
                .filter(|v| !v.is_empty())
        };
        let error = match (text(io_error), text(sql_error)) {
            (_, Some(e)) => Some(format!("applier: {e}")),
            (Some(e), None) => Some(format!("receiver: {e}")),
            (None, None) => None,
        };
        Ok(crate::replication::ReplicaStatus {
            receiving: text(io).as_deref() == Some("Yes"),
            applying: text(sql).as_deref() == Some("Yes"),
            lag_seconds: text(lag).and_then(|l| l.parse().ok()),
            position: position.unwrap_or_default(),
            last_error: error,
        })
    }

    fn pause_applier(&self, socket: &Path) -> Result<String> {
        let family = self.binary.flavour()?.family;
        let mut c = conn::admin(socket)?;
        c.query_drop(crate::replication::pause_sql(family))
            .context("pausing the follower's applier")?;
        let position: Option<String> =
            c.query_first(crate::replication::applied_position_query(family))?;
        Ok(position.unwrap_or_default())
    }

    fn resume_applier(&self, socket: &Path) -> Result<()> {
        let family = self.binary.flavour()?.family;
        conn::admin(socket)?
            .query_drop(crate::replication::resume_sql(family))
            .context("resuming the follower's applier")
    }

    fn schema(&self, socket: &Path) -> Result<super::schema::Schema> {
        super::schema::read(&mut conn::admin(socket)?)
    }

    fn table_data(
        &self,
        socket: &Path,
    ) -> Result<std::collections::BTreeMap<String, super::schema::TableData>> {
        super::schema::data(&mut conn::admin(socket)?)
    }

    fn statement_history(&self, socket: &Path) -> Result<StatementHistory> {
        let mut conn = conn::admin(socket)?;
        let me: u64 = conn
            .query_first("SELECT THREAD_ID FROM performance_schema.threads WHERE PROCESSLIST_ID = CONNECTION_ID()")?
            .unwrap_or(0);
        // -1 (autosized) or 0 when the history is not on.
        let capacity: i64 = conn
            .query_first("SELECT @@performance_schema_events_statements_history_long_size")?
            .unwrap_or(0);
        if capacity <= 0 {
            return Err(anyhow!(
                "performance_schema statement history is off on this server; \
                 it must be started with the instrumentation options"
            ));
        }
        let capacity = capacity as u64;
        // A server records a statement's end after it has sent the client its answer, so
        // a migration that has exited may have a last statement not yet in the history:
        // wait (briefly) until no other thread is inside a statement.
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        loop {
            let running: u64 = conn
                .query_first(format!(
                    "SELECT COUNT(*) FROM performance_schema.events_statements_current \
                     WHERE THREAD_ID <> {me} AND END_EVENT_ID IS NULL"
                ))?
                .unwrap_or(0);
            if running == 0 || std::time::Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        type Row = (
            u64,
            u64,
            String,
            Option<String>,
            Option<String>,
            Option<u64>,
            Option<u64>,
            Option<u64>,
            Option<u64>,
            Option<u32>,
            Option<String>,
        );
        let rows: Vec<Row> = conn
            .query(format!(
                "SELECT THREAD_ID, EVENT_ID, EVENT_NAME, SQL_TEXT, CURRENT_SCHEMA, TIMER_WAIT, \
             LOCK_TIME, ROWS_EXAMINED, ROWS_AFFECTED, MYSQL_ERRNO, MESSAGE_TEXT \
             FROM performance_schema.events_statements_history_long \
             WHERE THREAD_ID <> {me} ORDER BY TIMER_START"
            ))
            .context("reading the statement history (performance_schema)")?;
        // NESTING_EVENT_ID is NULL for stages outside a statement (MySQL).
        let stages: Vec<(u64, Option<u64>, String)> = conn.query(
            "SELECT THREAD_ID, NESTING_EVENT_ID, EVENT_NAME \
             FROM performance_schema.events_stages_history_long",
        )?;
        let picos = |p: u64| Duration::from_nanos(p / 1000);
        let events = rows
            .into_iter()
            .map(
                |(
                    thread,
                    event_id,
                    name,
                    sql,
                    schema,
                    wait,
                    lock,
                    examined,
                    affected,
                    errno,
                    msg,
                )| {
                    StatementEvent {
                        thread,
                        event_id,
                        kind: name.rsplit('/').next().unwrap_or(&name).to_string(),
                        sql: sql.unwrap_or_default(),
                        schema,
                        duration: picos(wait.unwrap_or(0)),
                        lock: picos(lock.unwrap_or(0)),
                        rows_examined: examined.unwrap_or(0),
                        rows_affected: affected.unwrap_or(0),
                        error: errno
                            .filter(|e| *e != 0)
                            .map(|e| format!("{e}: {}", msg.unwrap_or_default())),
                        stages: stages
                            .iter()
                            .filter(|(t, nest, _)| *t == thread && *nest == Some(event_id))
                            .map(|(_, _, n)| n.clone())
                            .collect(),
                    }
                },
            )
            .collect();
        Ok(StatementHistory { events, capacity })
    }

    fn activity(&self, socket: &Path) -> Result<ActivitySample> {
        let mut conn = conn::admin(socket)?;
        let status: std::collections::HashMap<String, u64> = conn
            .query_map(
                "SHOW GLOBAL STATUS WHERE Variable_name LIKE 'Com\\_%' OR Variable_name = 'Uptime'",
                |(k, v): (String, String)| (k, v.parse().unwrap_or(0)),
            )?
            .into_iter()
            .collect();
        let me = u64::from(conn.connection_id());
        // Id, User, Host, db, Command, Time, State, Info, …
        let rows: Vec<mysql::Row> = conn.query("SHOW PROCESSLIST")?;
        let busy_clients = rows
            .iter()
            .filter(|r| {
                let id: Option<u64> = r.get(0);
                let user: Option<String> = r.get(1);
                let command: Option<String> = r.get(4);
                id != Some(me)
                    && user.as_deref() != Some("system user")
                    && !matches!(command.as_deref(), Some("Sleep" | "Daemon" | "Binlog Dump"))
            })
            .count() as u64;
        Ok(ActivitySample {
            counter: client_statements(&status),
            uptime_secs: status.get("Uptime").copied().unwrap_or(0),
            busy_clients,
        })
    }
}

/// Statements clients ran, from the server's `Com_*` counters, leaving out the kinds
/// db-branch's own probes use (`DO`, `SHOW STATUS`, `SHOW PROCESSLIST`) and pings.
/// `Questions` is not used: it also counts each connection's set-up, ours included.
pub fn client_statements(status: &std::collections::HashMap<String, u64>) -> u64 {
    const OURS: [&str; 4] = [
        "Com_do",
        "Com_show_status",
        "Com_show_processlist",
        "Com_admin_commands",
    ];
    status
        .iter()
        .filter(|(k, _)| k.starts_with("Com_") && !OURS.contains(&k.as_str()))
        .map(|(_, v)| *v)
        .sum()
}

fn user_ids(user: &str) -> Result<(nix::unistd::Uid, nix::unistd::Gid)> {
    nix::unistd::User::from_name(user)?
        .map(|u| (u.uid, u.gid))
        .ok_or_else(|| ServerError::NoSuchUser(user.to_string()).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_probes_and_pings_do_not_count() {
        let status: std::collections::HashMap<String, u64> = [
            ("Com_select", 7),
            ("Com_insert", 3),
            ("Com_do", 50),
            ("Com_show_status", 40),
            ("Com_show_processlist", 20),
            ("Com_admin_commands", 9),
            ("Questions", 1000),
            ("Uptime", 60),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(client_statements(&status), 10);
    }
}
