//! The real server: MariaDB's `mariadbd` (or MySQL's `mysqld`), its initialiser and client.
//! The only module that talks to a server over the MySQL protocol.

use super::oneoff::OneOff;
use super::{Preparation, Server, StatementEvent, StatementHistory, TableInfo};
use crate::branch::ActivitySample;
use crate::error::usage;
use crate::exec;
use crate::values::ByteSize;
use anyhow::{anyhow, Context, Result};
use mysql::prelude::Queryable;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub struct MariaDb {
    binary: PathBuf,
    user: String,
    client_user: String,
    client_password: String,
}

impl MariaDb {
    pub fn new(
        binary: PathBuf,
        user: String,
        client_user: String,
        client_password: String,
    ) -> Self {
        MariaDb {
            binary,
            user,
            client_user,
            client_password,
        }
    }

    fn is_mariadb(&self) -> bool {
        self.binary
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains("mariadb"))
            || self.version().is_ok_and(|v| v.contains("MariaDB"))
    }

    pub(crate) fn binary(&self) -> &Path {
        &self.binary
    }

    pub(crate) fn user(&self) -> &str {
        &self.user
    }

    pub(crate) fn check_binary(&self) -> Result<()> {
        if !self.binary.is_file() {
            return Err(usage(format!(
                "the server binary {} does not exist; install mariadb-server (or mysql-server) \
                 or set mysqld.binary in the config",
                self.binary.display()
            )));
        }
        Ok(())
    }

    pub(crate) fn give_to_server_user(&self, path: &Path) -> Result<()> {
        exec::run(
            Command::new("chown")
                .arg("-R")
                .arg(format!("{0}:{0}", self.user))
                .arg(path),
        )
        .map(|_| ())
    }

    pub(crate) fn initialize(&self, datadir: &Path, tmpdir: &Path) -> Result<()> {
        let mut cmd = if self.is_mariadb() {
            let install_db = sibling_program(&self.binary, "mariadb-install-db")
                .or_else(|| sibling_program(&self.binary, "mysql_install_db"))
                .ok_or_else(|| anyhow!("mariadb-install-db not found (install mariadb-server)"))?;
            let mut c = Command::new(install_db);
            c.arg("--no-defaults")
                .arg(format!("--datadir={}", datadir.display()))
                .arg(format!("--user={}", self.user))
                .arg("--skip-test-db")
                .arg(format!("--tmpdir={}", tmpdir.display()))
                .arg("--auth-root-authentication-method=socket");
            c
        } else {
            let mut c = Command::new(&self.binary);
            c.arg("--no-defaults")
                .arg("--initialize-insecure")
                .arg(format!("--tmpdir={}", tmpdir.display()))
                .arg(format!("--datadir={}", datadir.display()))
                .arg(format!("--user={}", self.user));
            c
        };
        exec::run(&mut cmd).context("initialising an empty datadir")?;
        Ok(())
    }

    /// An empty datadir, copied from one the initialiser made earlier for this exact server
    /// version (kept in `cache`): the initialiser costs a second or more, a copy a fraction.
    pub(crate) fn initialize_cached(
        &self,
        datadir: &Path,
        tmpdir: &Path,
        cache: &Path,
    ) -> Result<()> {
        let version: String = self
            .version()?
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let template = cache.join(format!("empty-datadir-{version}"));
        if !template.join("mysql").is_dir() {
            let partial = cache.join(format!(".empty-datadir.{}", std::process::id()));
            let _ = fs::remove_dir_all(&partial);
            fs::create_dir_all(&partial)?;
            self.initialize(&partial, tmpdir)?;
            // Another invocation may have won the race; either copy is good.
            if fs::rename(&partial, &template).is_err() {
                let _ = fs::remove_dir_all(&partial);
            }
        }
        let mut src = template.as_os_str().to_owned();
        src.push("/.");
        exec::run(
            Command::new("cp")
                .args(["-a", "--reflink=auto"])
                .arg(src)
                .arg(datadir),
        )
        .context("copying the empty datadir template")?;
        Ok(())
    }

    pub(crate) fn client_program(&self) -> PathBuf {
        sibling_program(&self.binary, "mariadb")
            .or_else(|| sibling_program(&self.binary, "mysql"))
            .unwrap_or_else(|| PathBuf::from("mysql"))
    }

    pub(crate) fn grant_client_user(&self, conn: &mut mysql::Conn) -> Result<()> {
        let user = sql_string(&self.client_user);
        let pass = sql_string(&self.client_password);
        for host in ["127.0.0.1", "::1", "localhost"] {
            let account = format!("{user}@'{host}'");
            if host == "localhost" && self.client_user == "root" {
                // Keep socket access for the OS root user, add the password for everyone else.
                conn.query_drop(format!(
                    "ALTER USER {account} IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD({pass})"
                ))
                .or_else(|_| conn.query_drop(format!("ALTER USER {account} IDENTIFIED BY {pass}")))?;
                continue;
            }
            conn.query_drop(format!(
                "CREATE USER IF NOT EXISTS {account} IDENTIFIED BY {pass}"
            ))?;
            conn.query_drop(format!(
                "GRANT ALL PRIVILEGES ON *.* TO {account} WITH GRANT OPTION"
            ))?;
        }
        Ok(())
    }

    /// A connection as the OS root user over the socket (unix_socket authentication). The
    /// packet size is given and socket discovery is off, so the driver sends no
    /// `SELECT @@max_allowed_packet` or `SELECT @@socket`: our probes must stay out of the
    /// statement counters that measure activity.
    pub(crate) fn socket_conn(socket: &Path) -> mysql::Result<mysql::Conn> {
        let opts = mysql::OptsBuilder::new()
            .socket(Some(socket.to_string_lossy().into_owned()))
            .user(Some("root"))
            .prefer_socket(false)
            .max_allowed_packet(Some(16 << 20));
        mysql::Conn::new(opts)
    }
}

/// `name` next to `binary` (`/usr/sbin/mariadbd` → `/usr/bin/name`) or on PATH.
fn sibling_program(binary: &Path, name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = binary.parent() {
        dirs.push(d.to_path_buf());
        if let Some(prefix) = d.parent() {
            dirs.push(prefix.join("bin"));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

/// A single-quoted SQL string literal.
fn sql_string(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

fn log_tail(log: &Path) -> String {
    fs::read(log)
        .map(|b| exec::tail(&b))
        .unwrap_or_else(|e| format!("(no log at {}: {e})", log.display()))
}

impl Server for MariaDb {
    fn version(&self) -> Result<String> {
        self.check_binary()?;
        let out = exec::run(Command::new(&self.binary).arg("--version"))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn prepare_runtime_dir(&self, dir: &Path) -> Result<()> {
        let (uid, gid) = (uid_of(&self.user)?, gid_of(&self.user)?);
        for d in [dir.to_path_buf(), dir.join("tmp")] {
            fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
            nix::unistd::chown(&d, Some(uid), Some(gid))
                .with_context(|| format!("chown {} to {}", d.display(), self.user))?;
        }
        Ok(())
    }

    fn wait_ready(
        &self,
        socket: &Path,
        error_log: &Path,
        timeout: Duration,
        alive: &dyn Fn() -> bool,
    ) -> Result<()> {
        let start = Instant::now();
        loop {
            match Self::socket_conn(socket) {
                Ok(mut conn) => {
                    // `DO 1`, not `SELECT 1`: it is subtracted from the activity counter.
                    conn.query_drop("DO 1")
                        .context("the server accepted a connection but failed `DO 1`")?;
                    return Ok(());
                }
                // An authentication refusal is an answer: the server is serving.
                Err(mysql::Error::MySqlError(_)) => return Ok(()),
                Err(_) => {}
            }
            if !alive() {
                return Err(anyhow!(
                    "the server exited during start-up; last lines of {}:\n{}",
                    error_log.display(),
                    log_tail(error_log)
                ));
            }
            if start.elapsed() > timeout {
                return Err(anyhow!(
                    "the server did not answer on {} within {timeout:?}; last lines of {}:\n{}",
                    socket.display(),
                    error_log.display(),
                    log_tail(error_log)
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn prepare_baseline(&self, datadir: &Path, work: &Path, prep: &Preparation) -> Result<()> {
        self.check_binary()?;
        let _ = fs::remove_dir_all(work);
        self.prepare_runtime_dir(work)?;
        if prep.initialize {
            let cache = work.parent().unwrap_or(work);
            self.initialize_cached(datadir, &work.join("tmp"), cache)?;
        }
        self.give_to_server_user(datadir)?;
        let server = OneOff::start(self, datadir, work, ByteSize::mib(256))?;
        if prep.create_client_user {
            self.grant_client_user(&mut server.conn()?)
                .context("creating the client user in the new baseline")?;
        }
        for file in &prep.sql_files {
            server.run_sql_file(file)?;
        }
        server.shutdown_clean()?;
        let _ = fs::remove_dir_all(work);
        Ok(())
    }

    fn bake(
        &self,
        req: &super::bake::BakeRequest,
        progress: &dyn super::bake::BakeProgress,
    ) -> Result<super::bake::BakeSummary> {
        super::bake::bake(self, req, progress)
    }

    fn instrumentation_memory(&self) -> u64 {
        // Measured on MariaDB 10.11: 195 MB RSS idle with the options below, 55 MB without.
        160 << 20
    }

    fn instrumentation_options(&self) -> Vec<String> {
        [
            "performance-schema=ON",
            "performance-schema-consumer-events-statements-current=ON",
            "performance-schema-consumer-events-statements-history-long=ON",
            "performance-schema-consumer-events-stages-current=ON",
            "performance-schema-consumer-events-stages-history-long=ON",
            // 20,000 statements (a migration beyond that loses its oldest, which
            // migrate-check reports); see instrumentation_memory for the cost.
            "performance-schema-events-statements-history-long-size=20000",
            "performance-schema-events-stages-history-long-size=20000",
            "performance-schema-consumer-statements-digest=OFF",
            "performance-schema-max-digest-length=0",
            // Only the stages that tell how an ALTER ran (the most specific pattern wins).
            "performance-schema-instrument='stage/%=OFF'",
            "performance-schema-instrument='stage/sql/copy to tmp table=ON'",
            "performance-schema-instrument='stage/innodb/alter table%=ON'",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    fn tables(&self, socket: &Path) -> Result<Vec<TableInfo>> {
        let mut conn = Self::socket_conn(socket)
            .with_context(|| format!("connecting to {}", socket.display()))?;
        // MariaDB and MySQL 5.7 name it INNODB_SYS_TABLES, MySQL 8 INNODB_TABLES.
        let ids_query =
            |table: &str| format!("SELECT NAME, TABLE_ID FROM information_schema.{table}");
        let ids: Vec<(String, u64)> = conn
            .query(ids_query("INNODB_SYS_TABLES"))
            .or_else(|_| conn.query(ids_query("INNODB_TABLES")))
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

    fn statement_history(&self, socket: &Path) -> Result<StatementHistory> {
        let mut conn = Self::socket_conn(socket)
            .with_context(|| format!("connecting to {}", socket.display()))?;
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
        let stages: Vec<(u64, u64, String)> = conn.query(
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
                            .filter(|(t, nest, _)| *t == thread && *nest == event_id)
                            .map(|(_, _, n)| n.clone())
                            .collect(),
                    }
                },
            )
            .collect();
        Ok(StatementHistory { events, capacity })
    }

    fn activity(&self, socket: &Path) -> Result<ActivitySample> {
        let mut conn = Self::socket_conn(socket)
            .with_context(|| format!("connecting to {}", socket.display()))?;
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

fn uid_of(user: &str) -> Result<nix::unistd::Uid> {
    nix::unistd::User::from_name(user)?
        .map(|u| u.uid)
        .ok_or_else(|| {
            usage(format!(
                "OS user {user:?} does not exist (mysqld.user); install the server package"
            ))
        })
}

fn gid_of(user: &str) -> Result<nix::unistd::Gid> {
    nix::unistd::User::from_name(user)?
        .map(|u| u.gid)
        .ok_or_else(|| usage(format!("OS user {user:?} does not exist (mysqld.user)")))
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
