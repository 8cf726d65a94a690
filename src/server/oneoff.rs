//! A one-off server on a datadir being prepared (a new baseline): no networking, its own
//! socket and scratch directory, dies with us (PR_SET_PDEATHSIG), and is shut down with a
//! full purge so the datadir it leaves is clean.

use super::binary::ServerBinary;
use super::client::ClientFeed;
use super::conn;
use super::options::{render, ServerSpec};
use super::{crash_recovery_line, ServerError};
use crate::flavour::Flavour;
use crate::printer::PhaseProgress;
use crate::values::ByteSize;
use anyhow::{anyhow, Context, Result};
use mysql::prelude::Queryable;
use std::fs;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct OneOff<'a> {
    binary: &'a ServerBinary,
    child: Mutex<Option<Child>>,
    pub spec: ServerSpec,
}

impl<'a> OneOff<'a> {
    /// Starts the server on `datadir` (made by `flavour`) and waits until it answers.
    pub fn start(
        binary: &'a ServerBinary,
        flavour: Flavour,
        datadir: &Path,
        work: &Path,
        buffer_pool: ByteSize,
    ) -> Result<Self> {
        Self::start_with(binary, flavour, datadir, work, buffer_pool, &[])
    }

    /// `start` with extra option-file lines (`skip-grant-tables` for a datadir whose
    /// accounts db-branch does not know yet).
    pub fn start_with(
        binary: &'a ServerBinary,
        flavour: Flavour,
        datadir: &Path,
        work: &Path,
        buffer_pool: ByteSize,
        extra: &[&str],
    ) -> Result<Self> {
        let spec = ServerSpec {
            flavour,
            datadir: datadir.to_path_buf(),
            network: None,
            socket: work.join("mysqld.sock"),
            pid_file: work.join("mysqld.pid"),
            error_log: work.join("error.log"),
            tmpdir: work.join("tmp"),
            secure_file_priv: work.join("tmp"),
            buffer_pool,
            user: binary.user.clone(),
            extra_args: Vec::new(),
            // Only the final shutdown must be durable, and InnoDB flushes everything at a
            // clean shutdown whatever the profile.
            profile: crate::config::Profile::Test,
            branch_options: [
                // Bulk loads: many rows per statement, big sort buffers for index builds.
                "max-allowed-packet=1G",
                "innodb-sort-buffer-size=64M",
            ]
            .iter()
            .chain(flavour.oneoff_flags())
            .chain(extra)
            .map(|s| s.to_string())
            .collect(),
            init_file: None,
            tls: if flavour.makes_certificate_at_start() {
                Some(crate::store::tls::self_signed_files(
                    work,
                    crate::store::secrets::gid_of(&binary.user),
                )?)
            } else {
                None
            },
            tls_required: false,
        };
        let option_file = work.join("my.cnf");
        fs::write(&option_file, render(&spec))?;
        let mut cmd = Command::new(&binary.path);
        // fsync is a no-op for it (libeatmydata, where installed): a bake's DDL and loads
        // made an fsync per CREATE TABLE and per import, and nothing it writes matters until
        // the clean shutdown, which `shutdown_clean` follows with one syncfs.
        cmd.envs(super::preload::environment(
            Some(flavour),
            crate::config::Profile::Test,
            true,
            super::preload::fsync_free_library().as_deref(),
            binary.ticks_shim(flavour)?.as_deref(),
        ));
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
            .with_context(|| format!("starting {}", binary.path.display()))?;
        let me = OneOff {
            binary,
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
        conn::wait_ready(
            &me.spec.socket,
            &me.spec.error_log,
            Duration::from_secs(300),
            &alive,
        )?;
        Ok(me)
    }

    /// A connection as root over the socket.
    pub fn conn(&self) -> Result<mysql::Conn> {
        conn::socket_conn(&self.spec.socket).with_context(|| {
            format!(
                "connecting as root to the one-off server's socket {} (db-branch logs in as \
                 root@localhost by socket authentication)",
                self.spec.socket.display()
            )
        })
    }

    /// Runs statements one after another.
    pub fn run_statements(&self, statements: &[String]) -> Result<()> {
        let mut c = self.conn()?;
        for s in statements {
            c.query_drop(s).with_context(|| format!("`{s}`"))?;
        }
        Ok(())
    }

    /// Runs an SQL file through the server's own client program (it understands DELIMITER
    /// and the rest of what dumps and scripts contain), fed by us so progress can be shown.
    pub fn run_sql_file(&self, file: &Path, progress: &PhaseProgress) -> Result<()> {
        let mut input =
            fs::File::open(file).with_context(|| format!("opening SQL file {}", file.display()))?;
        let size = input.metadata().map_or(0, |m| m.len());
        progress.phase(
            &format!(
                "run {}",
                file.file_name().unwrap_or_default().to_string_lossy()
            ),
            size,
        );
        let mut client = self.client(false, None)?;
        let mut buf = vec![0u8; 1 << 20];
        let fed = loop {
            let n = match input.read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) => break Err(e),
            };
            // The client stops reading at the first error: its exit status tells.
            if !client.write(&buf[..n]) {
                break Ok(());
            }
            progress.advance(n as u64, "");
        };
        let finished = client.finish(&file.display().to_string());
        fed.with_context(|| format!("reading {}", file.display()))?;
        finished
            .map_err(|f| f.error)
            .with_context(|| format!("running SQL file {}", file.display()))
    }

    /// The server's client program, connected as root and reading from us.
    pub fn client(&self, binary_mode: bool, delimiter: Option<&str>) -> Result<ClientFeed> {
        ClientFeed::start(
            &self.binary.client_program(),
            &self.spec.socket,
            binary_mode,
            delimiter,
        )
    }

    /// A plain shutdown (a scratch server whose datadir is thrown away).
    pub fn stop(self) -> Result<()> {
        let mut conn = self.conn()?;
        conn.query_drop("SHUTDOWN")?;
        drop(conn);
        let mut child = self.child.lock().unwrap().take().expect("running");
        wait_exit(&mut child, Duration::from_secs(600))
    }

    /// A full purge and a clean shutdown, then proof from the log that the datadir needed
    /// no crash recovery when it started (unless `recovery_expected`: a clone's first start
    /// applies its redo).
    pub fn shutdown_clean(self, recovery_expected: bool) -> Result<()> {
        let mut conn = self.conn()?;
        conn.query_drop("SET GLOBAL innodb_fast_shutdown = 0")?;
        conn.query_drop("SHUTDOWN")?;
        drop(conn);
        let mut child = self.child.lock().unwrap().take().expect("running");
        wait_exit(&mut child, Duration::from_secs(1800))?;
        // What the server's skipped fsyncs left in the page cache goes to disk now, once,
        // before anything seals or snapshots the datadir.
        let dir = fs::File::open(&self.spec.datadir)
            .with_context(|| format!("opening {}", self.spec.datadir.display()))?;
        nix::unistd::syncfs(&dir).with_context(|| {
            format!(
                "syncing the file system of {} after the clean shutdown",
                self.spec.datadir.display()
            )
        })?;
        let log = super::conn::read_no_follow(&self.spec.error_log)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        if !recovery_expected {
            if let Some(line) = crash_recovery_line(&log) {
                return Err(ServerError::UncleanDatadir {
                    line: line.trim().to_string(),
                }
                .into());
            }
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
