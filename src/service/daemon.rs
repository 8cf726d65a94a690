//! The service side: `db-branch daemon`, owner of `io.dbbranch.Manager1` on the system bus.
//! It holds no capability and changes nothing itself: each call becomes a transient systemd
//! unit running `db-branch ARGS` as root for the caller (see `service`).

use super::{BUS_NAME, FORWARDED_ENV, OBJECT_PATH};
use crate::access::{CALLER_GIDS_ENV, CALLER_UID_ENV};
use anyhow::{Context, Result};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use zbus::message::Header;
use zbus::{Fd, OwnedVariant, Variant};
use zbus_systemd::systemd1::{ManagerProxy, ServiceProxy, UnitProxy};

/// Where the service hands a caller's `MYSQL_PWD` to its command: a root-only file the
/// command reads and removes, never the unit's environment (which any user can read).
pub const SECRET_FILE_ENV: &str = "DB_BRANCH_MYSQL_PWD_FILE";

struct Manager {
    /// The config file this service serves (callers must name the same one, or none).
    config: PathBuf,
    /// Commands running for each uid (`access.max_operations_per_user` caps it).
    running: std::sync::Arc<std::sync::Mutex<HashMap<u32, u32>>>,
    /// db-branch itself, run as the command.
    exe: PathBuf,
    /// `RuntimeDirectory=` of the unit: private files handed to commands.
    runtime_dir: PathBuf,
    next: AtomicU64,
}

#[zbus::interface(name = "io.dbbranch.Manager1")]
impl Manager {
    /// Runs `db-branch ARGS` for the caller with the given standard streams; writes the exit
    /// code (decimal, newline) to `status` when it ends, then closes it.
    #[allow(clippy::too_many_arguments)]
    async fn run(
        &self,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        args: Vec<String>,
        config: String,
        env: HashMap<String, String>,
        stdin: Fd<'_>,
        stdout: Fd<'_>,
        stderr: Fd<'_>,
        status: Fd<'_>,
        cwd: Fd<'_>,
    ) -> zbus::fdo::Result<()> {
        let sender = header
            .sender()
            .ok_or_else(|| zbus::fdo::Error::AccessDenied("no sender".into()))?
            .to_owned();
        let creds = zbus::fdo::DBusProxy::new(conn)
            .await?
            .get_connection_credentials(sender.into())
            .await?;
        let uid = creds.unix_user_id().ok_or_else(|| {
            zbus::fdo::Error::AccessDenied("the bus did not say who you are".into())
        })?;
        let gids = creds.unix_group_ids().cloned().unwrap_or_default();
        if !same_file(Path::new(&config), &self.config) {
            return Err(zbus::fdo::Error::AccessDenied(format!(
                "this host's db-branch service serves {}; only root may use another config ({config})",
                self.config.display()
            )));
        }
        // Nobody outside the groups gets a root process at all, and nobody gets many.
        let access = crate::config::load(&self.config, false)
            .map_err(|e| zbus::fdo::Error::Failed(format!("{e:#}")))?
            .access;
        let caller = crate::access::Caller {
            uid,
            gids: gids.clone(),
            name: String::new(),
            cwd: None,
            pid: None,
        };
        let caller = crate::access::Caller {
            name: crate::access::user_name(uid),
            gids: crate::access::with_primary_first(uid, caller.gids),
            ..caller
        };
        if caller.role(&access) == crate::access::Role::Outsider {
            return Err(zbus::fdo::Error::AccessDenied(format!(
                "{} may not use db-branch on this host: not in group {} (ask an admin: \
                 `sudo usermod -aG {} {}`)",
                caller.name, access.users_group, access.users_group, caller.name
            )));
        }
        let slot = RunningSlot::take(&self.running, uid, access.max_operations_per_user)
            .ok_or_else(|| {
                zbus::fdo::Error::LimitsExceeded(format!(
                    "{} has {} db-branch commands running already (access.max_operations_per_user); \
                     wait for one to end",
                    caller.name, access.max_operations_per_user
                ))
            })?;
        let cwd = caller_directory(&cwd).map_err(zbus::fdo::Error::AccessDenied)?;
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let unit = format!("db-branch-u{uid}-{}-{n}.service", std::process::id());
        let mut environment = vec![
            format!("{CALLER_UID_ENV}={uid}"),
            format!(
                "{CALLER_GIDS_ENV}={}",
                gids.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            format!("{}={}", crate::config::CONFIG_ENV, self.config.display()),
            format!("{}={}", crate::access::CALLER_CWD_ENV, cwd.display()),
        ];
        if let Some(pid) = creds.process_id() {
            environment.push(format!("{}={pid}", crate::access::CALLER_PID_ENV));
        }
        let mut secret_file = None;
        for (k, v) in &env {
            if k == "MYSQL_PWD" {
                let path = self.runtime_dir.join(format!("{unit}.pw"));
                write_private(&path, v).map_err(|e| zbus::fdo::Error::Failed(format!("{e:#}")))?;
                environment.push(format!("{SECRET_FILE_ENV}={}", path.display()));
                secret_file = Some(path);
            } else if FORWARDED_ENV.contains(&k.as_str()) && !v.contains('\n') {
                environment.push(format!("{k}={v}"));
            }
        }
        let mut argv = vec![self.exe.display().to_string()];
        argv.extend(args.iter().cloned());
        let first = args
            .iter()
            .find(|a| !a.starts_with('-'))
            .cloned()
            .unwrap_or_default();
        let props = |fd: &Fd<'_>| -> zbus::Result<OwnedVariant> {
            OwnedVariant::try_from(Variant::from(fd.try_to_owned()?))
        };
        let properties: Vec<(String, OwnedVariant)> = vec![
            (
                "Description".into(),
                OwnedVariant::try_from(Variant::from(format!("db-branch {first} for uid {uid}")))?,
            ),
            (
                "ExecStart".into(),
                OwnedVariant::try_from(Variant::from(vec![(
                    self.exe.display().to_string(),
                    argv,
                    false,
                )]))?,
            ),
            (
                "Environment".into(),
                OwnedVariant::try_from(Variant::from(environment))?,
            ),
            (
                "Type".into(),
                OwnedVariant::try_from(Variant::from("exec"))?,
            ),
            (
                "AddRef".into(),
                OwnedVariant::try_from(Variant::from(true))?,
            ),
            // Helpers the command starts for the host (a pool's recycler) outlive it, as
            // they do when root runs the command from a shell.
            (
                "KillMode".into(),
                OwnedVariant::try_from(Variant::from("process"))?,
            ),
            ("StandardInputFileDescriptor".into(), props(&stdin)?),
            ("StandardOutputFileDescriptor".into(), props(&stdout)?),
            ("StandardErrorFileDescriptor".into(), props(&stderr)?),
        ];
        let status: std::os::fd::OwnedFd = status
            .try_to_owned()
            .map_err(zbus::fdo::Error::from)?
            .try_into()
            .map_err(zbus::fdo::Error::from)?;
        let mgr = ManagerProxy::new(conn).await?;
        let _ = mgr.subscribe().await;
        // Subscribed before the start, so the job's end cannot be missed.
        let removed = mgr.receive_job_removed().await?;
        let job = match mgr
            .start_transient_unit(unit.clone(), "fail".into(), properties, Vec::new())
            .await
        {
            Ok(job) => job,
            Err(e) => {
                if let Some(p) = &secret_file {
                    let _ = std::fs::remove_file(p);
                }
                return Err(e.into());
            }
        };
        tracing::info!("uid {uid}: db-branch {first} as {unit}");
        let conn = conn.clone();
        std::thread::spawn(move || {
            let _slot = slot;
            let code = zbus::block_on(wait_exit(&conn, &unit, job, removed)).unwrap_or_else(|e| {
                tracing::warn!("{unit}: {e:#}");
                1
            });
            if let Some(p) = &secret_file {
                let _ = std::fs::remove_file(p);
            }
            let mut f = std::fs::File::from(status);
            let _ = writeln!(f, "{code}");
        });
        Ok(())
    }
}

/// Waits for the unit's start job, then for the unit to end; its command's exit code
/// (128 + signal when killed).
async fn wait_exit(
    conn: &zbus::Connection,
    unit: &str,
    job: zbus::OwnedObjectPath,
    mut removed: zbus_systemd::systemd1::JobRemovedStream,
) -> Result<u8> {
    while let Some(signal) = removed.next().await {
        if signal.args().is_ok_and(|a| a.job == job) {
            break;
        }
    }
    drop(removed);
    let mgr = ManagerProxy::new(conn).await?;
    let path = mgr.get_unit(unit.to_string()).await?;
    let u = UnitProxy::builder(conn).path(path.clone()).build().await?;
    let svc = ServiceProxy::builder(conn).path(path).build().await?;
    let mut changes = u.receive_active_state_changed().await;
    loop {
        let state = u.active_state().await?;
        if state == "inactive" || state == "failed" {
            break;
        }
        if changes.next().await.is_none() {
            anyhow::bail!("lost track of {unit}");
        }
    }
    // CLD_EXITED = 1, CLD_KILLED = 2, CLD_DUMPED = 3.
    let code = match (svc.exec_main_code().await?, svc.exec_main_status().await?) {
        (1, status) => status.clamp(0, 255) as u8,
        (2 | 3, signal) => (128 + signal).clamp(0, 255) as u8,
        _ => 1,
    };
    let _ = mgr.unref_unit(unit.to_string()).await;
    let _ = mgr.reset_failed_unit(unit.to_string()).await;
    Ok(code)
}

/// One of a user's running commands; given back when dropped.
struct RunningSlot {
    running: std::sync::Arc<std::sync::Mutex<HashMap<u32, u32>>>,
    uid: u32,
}

impl RunningSlot {
    fn take(
        running: &std::sync::Arc<std::sync::Mutex<HashMap<u32, u32>>>,
        uid: u32,
        max: u32,
    ) -> Option<RunningSlot> {
        let mut map = running.lock().unwrap_or_else(|e| e.into_inner());
        let n = map.entry(uid).or_insert(0);
        // Root is not limited: it could run db-branch itself.
        if uid != 0 && *n >= max {
            return None;
        }
        *n += 1;
        Some(RunningSlot {
            running: running.clone(),
            uid,
        })
    }
}

impl Drop for RunningSlot {
    fn drop(&mut self) {
        let mut map = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get_mut(&self.uid) {
            *n = n.saturating_sub(1);
        }
    }
}

/// The caller's working directory, from a descriptor of it they opened and passed: where
/// they are, not a path they claim. Its use is checked again by the kernel, as the caller,
/// when a command runs there for them (`access::run_as_caller`).
fn caller_directory(fd: &Fd<'_>) -> std::result::Result<PathBuf, String> {
    use std::os::fd::AsRawFd;
    let raw = fd.as_raw_fd();
    let stat = nix::sys::stat::fstat(fd).map_err(|e| format!("the working directory: {e}"))?;
    if stat.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err("the descriptor given as the working directory is not a directory".into());
    }
    std::fs::read_link(format!("/proc/self/fd/{raw}"))
        .map_err(|e| format!("the working directory: {e}"))
        .and_then(|p| {
            // (Not checked for existence here: this sandbox has its own /tmp.)
            if p.is_absolute() && !p.to_string_lossy().ends_with(" (deleted)") {
                Ok(p)
            } else {
                Err(format!(
                    "the working directory {} is not reachable from here",
                    p.display()
                ))
            }
        })
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// Serves the bus name until killed. `config`: the config file the service serves.
pub fn serve(config: &Path) -> Result<()> {
    let exe = std::env::current_exe().context("finding db-branch's own path")?;
    let runtime_dir = std::env::var_os("RUNTIME_DIRECTORY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/db-branchd"));
    std::fs::create_dir_all(&runtime_dir)
        .with_context(|| format!("creating {}", runtime_dir.display()))?;
    let manager = Manager {
        config: config.to_path_buf(),
        running: Default::default(),
        exe,
        runtime_dir,
        next: AtomicU64::new(0),
    };
    zbus::block_on(async {
        let _conn = zbus::connection::Builder::system()
            .serve_at(OBJECT_PATH, manager)
            .name(BUS_NAME)
            .build()
            .await
            .with_context(|| format!("owning {BUS_NAME} on the system bus"))?;
        tracing::info!("serving {BUS_NAME} for {}", config.display());
        std::future::pending::<()>().await;
        Ok(())
    })
}
