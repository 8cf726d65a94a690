//! A one-off server on a datadir being prepared (a new baseline): no networking, its own
//! socket and scratch directory, dies with us (PR_SET_PDEATHSIG), and is shut down with a
//! full purge so the datadir it leaves is clean.

use super::mariadb::MariaDb;
use super::options::{render, ServerSpec};
use super::{crash_recovery_line, Server};
use crate::error::usage;
use crate::exec;
use crate::values::ByteSize;
use anyhow::{anyhow, Context, Result};
use mysql::prelude::Queryable;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct OneOff<'a> {
    server: &'a MariaDb,
    child: Mutex<Option<Child>>,
    pub spec: ServerSpec,
}

impl<'a> OneOff<'a> {
    /// Starts the server on `datadir` and waits until it answers.
    pub fn start(
        server: &'a MariaDb,
        datadir: &Path,
        work: &Path,
        buffer_pool: ByteSize,
    ) -> Result<Self> {
        let spec = ServerSpec {
            datadir: datadir.to_path_buf(),
            network: None,
            socket: work.join("mysqld.sock"),
            pid_file: work.join("mysqld.pid"),
            error_log: work.join("error.log"),
            tmpdir: work.join("tmp"),
            buffer_pool,
            user: server.user().to_string(),
            extra_args: Vec::new(),
            // Only the final shutdown must be durable, and InnoDB flushes everything at a
            // clean shutdown whatever the profile.
            profile: crate::config::Profile::Test,
            branch_options: vec![
                // Bulk loads: many rows per statement, big sort buffers for index builds.
                "max-allowed-packet=256M".into(),
                "innodb-sort-buffer-size=64M".into(),
            ],
        };
        let option_file = work.join("my.cnf");
        fs::write(&option_file, render(&spec))?;
        let mut cmd = Command::new(server.binary());
        cmd.arg(format!("--defaults-file={}", option_file.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: prctl is async-signal-safe. The one-off server must not outlive us: if we
        // are killed half-way, the kernel kills it too.
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                    .map_err(std::io::Error::from)
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", server.binary().display()))?;
        let me = OneOff {
            server,
            child: Mutex::new(Some(child)),
            spec,
        };
        let alive = || {
            me.child
                .lock()
                .unwrap()
                .as_mut()
                .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
        };
        server.wait_ready(
            &me.spec.socket,
            &me.spec.error_log,
            Duration::from_secs(300),
            &alive,
        )?;
        Ok(me)
    }

    /// A connection as root over the socket.
    pub fn conn(&self) -> Result<mysql::Conn> {
        MariaDb::socket_conn(&self.spec.socket)
            .context("connecting as root to the one-off server's socket")
    }

    /// Runs an SQL file through the client program (it understands DELIMITER and the rest
    /// of what dumps and scripts contain).
    pub fn run_sql_file(&self, file: &Path) -> Result<()> {
        let input =
            fs::File::open(file).with_context(|| format!("opening SQL file {}", file.display()))?;
        exec::run(
            Command::new(self.server.client_program())
                .arg("--no-defaults")
                .arg(format!("--socket={}", self.spec.socket.display()))
                .arg("--user=root")
                .stdin(input),
        )
        .with_context(|| format!("running SQL file {}", file.display()))?;
        Ok(())
    }

    /// A full purge and a clean shutdown, then proof from the log that the datadir needed
    /// no crash recovery when it started.
    pub fn shutdown_clean(self) -> Result<()> {
        let mut conn = self.conn()?;
        conn.query_drop("SET GLOBAL innodb_fast_shutdown = 0")?;
        conn.query_drop("SHUTDOWN")?;
        drop(conn);
        let mut child = self.child.lock().unwrap().take().expect("running");
        wait_exit(&mut child, Duration::from_secs(1800))?;
        let log = fs::read_to_string(&self.spec.error_log).unwrap_or_default();
        if let Some(line) = crash_recovery_line(&log) {
            return Err(usage(format!(
                "the datadir was not shut down cleanly: its server had to run crash recovery \
                 (\"{}\"). Start a server on the original datadir and stop it cleanly \
                 (`mariadb-admin shutdown`, or `systemctl stop mariadb`), then try again. \
                 A clean datadir starts without any \"crash recovery\" line in its error log.",
                line.trim()
            )));
        }
        Ok(())
    }
}

impl Drop for OneOff<'_> {
    fn drop(&mut self) {
        // Not shut down cleanly (an error on the way): the datadir is being thrown away.
        if let Some(mut child) = self.child.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn wait_exit(child: &mut Child, timeout: Duration) -> Result<()> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return if status.success() {
                Ok(())
            } else {
                Err(anyhow!("the one-off server exited with {status}"))
            };
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            return Err(anyhow!(
                "the one-off server did not shut down within {timeout:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
