//! Built-in supervisor for hosts where systemd is not PID 1: starts each server detached in
//! its own session with its pid recorded, and stops or kills it by that pid.

use super::cgroup::{self, Hierarchy};
use super::{Launch, ServiceManager, ServiceState};
use anyhow::{anyhow, Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const OOM_SCORE_ADJ_TEXT: &[u8] = b"500";
const _: () = assert!(
    super::OOM_SCORE_ADJ == 500,
    "keep OOM_SCORE_ADJ_TEXT in step"
);

pub struct ProcessSupervisor {
    stop_timeout: Duration,
    /// `ROOT/branches`: every server this supervisor starts reads an option file below it.
    branches_dir: std::path::PathBuf,
    /// Where each server gets a cgroup with its memory ceiling (None: nowhere writable).
    cgroups: Option<Hierarchy>,
    /// This db-branch root's group in it.
    group: String,
}

impl ProcessSupervisor {
    pub fn new(stop_timeout: Duration, root: &std::path::Path) -> Self {
        ProcessSupervisor {
            stop_timeout,
            branches_dir: root.join("branches"),
            cgroups: Hierarchy::find(),
            group: cgroup::group_of(root),
        }
    }

    fn cgroup_dir(&self, launch: &Launch) -> Option<std::path::PathBuf> {
        self.cgroups
            .as_ref()
            .map(|h| h.branch_dir(&self.group, launch.name.as_str()))
    }

    /// The pid of this branch's server if it is alive. The pid file may be stale (after a
    /// SIGKILL or a reboot), so the process's command line must name this branch's option
    /// file; without a pid file (a crash half-way), the process table is searched.
    fn live_pid(&self, launch: &Launch) -> Option<Pid> {
        let recorded = fs::read_to_string(&launch.supervisor_pid_file)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
            .filter(|pid| is_our_server(*pid, launch) || is_between_execs(*pid));
        recorded
            .or_else(|| {
                server_processes()
                    .into_iter()
                    .find(|(_, file)| *file == launch.option_file)
                    .map(|(pid, _)| pid)
            })
            .map(Pid::from_raw)
    }

    /// Waits until `pid` (our server, signalled) has exited: gone or a zombie. Not until
    /// its command line vanishes: a dying process loses its memory (and so its command
    /// line) before its files, and its port and datadir stay busy until those close.
    fn wait_gone(&self, pid: Pid, launch: &Launch, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while !has_exited(pid.as_raw()) {
            if Instant::now() > deadline {
                return Err(anyhow!(
                    "server of branch {} (pid {pid}) did not exit within {timeout:?}; see {}",
                    launch.name,
                    launch.error_log.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }
}

/// Live (not zombie) processes started with `--defaults-file=…`, and that file.
fn server_processes() -> Vec<(i32, std::path::PathBuf)> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let file = cmdline.split(|b| *b == 0).find_map(|arg| {
            arg.strip_prefix(b"--defaults-file=")
                .map(|f| std::path::PathBuf::from(String::from_utf8_lossy(f).into_owned()))
        });
        if let Some(file) = file {
            if is_alive(pid) {
                found.push((pid, file));
            }
        }
    }
    found
}

fn is_alive(pid: i32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, Some("Z") | Some("X") | None)
}

/// The whole process has exited: gone, or a zombie with no thread left. (A killed
/// multi-threaded server's main thread can be a zombie while its other threads still hold
/// its files, its listening port among them.)
fn has_exited(pid: i32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    let threads = fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
    matches!(state, Some("Z") | Some("X") | None) && threads <= 1
}

/// A live process whose command line reads empty: a wrapper script in the middle of
/// `exec`ing the server (MySQL's side-root wrapper execs its loader), for a moment.
fn is_between_execs(pid: i32) -> bool {
    !has_exited(pid) && fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.is_empty())
}

/// Alive (not a zombie) and started with this branch's option file.
fn is_our_server(pid: i32, launch: &Launch) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state letter follows the parenthesised command name.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    if matches!(state, Some("Z") | Some("X") | None) {
        return false;
    }
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let want = format!("--defaults-file={}", launch.option_file.display());
    cmdline.split(|b| *b == 0).any(|arg| arg == want.as_bytes())
}

impl ServiceManager for ProcessSupervisor {
    fn kind(&self) -> &'static str {
        "process"
    }

    fn install(&self) -> Result<()> {
        Ok(())
    }
    fn enable_timers(&self) -> Result<Vec<String>> {
        Err(crate::error::usage(
            "timers need systemd, which is not running here; run `db-branch stop-idle` and \
             `db-branch gc` from cron instead (see docs/ci.md, \"Without systemd\")",
        ))
    }

    fn schedule_cuts(&self, every: Option<std::time::Duration>) -> Result<Option<String>> {
        match every {
            Some(_) => Err(crate::error::usage(
                "--every needs systemd's timers, and systemd is not running here; run \
                 `db-branch baseline cut` from cron instead (see docs/follow.md)",
            )),
            None => Ok(None),
        }
    }

    fn start(&self, launch: &Launch) -> Result<()> {
        if self.live_pid(launch).is_some() {
            return Ok(());
        }
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&launch.error_log)
            .with_context(|| format!("opening {}", launch.error_log.display()))?;
        // The server reopens it as its own user (MySQL aborts when it cannot).
        if let Ok(Some(user)) = nix::unistd::User::from_name(&launch.user) {
            nix::unistd::fchown(&log, Some(user.uid), Some(user.gid)).with_context(|| {
                format!("chown {} to {}", launch.error_log.display(), launch.user)
            })?;
        }
        // Its own cgroup with its ceiling, where the host lets us make one (doctor says
        // when it does not); the server joins it before it runs.
        let mut join: Option<std::ffi::CString> = None;
        if let (Some(h), Some(dir)) = (&self.cgroups, self.cgroup_dir(launch)) {
            if launch.memory_max > 0 {
                h.prepare(&dir, launch.memory_high, launch.memory_max)
                    .with_context(|| {
                        format!(
                            "giving the server of branch {} its memory ceiling",
                            launch.name
                        )
                    })?;
                join = Some(
                    std::ffi::CString::new(
                        Hierarchy::procs_file(&dir)
                            .into_os_string()
                            .into_encoded_bytes(),
                    )
                    .context("cgroup path")?,
                );
            }
        }
        let mut cmd = Command::new(&launch.binary);
        cmd.arg(format!("--defaults-file={}", launch.option_file.display()))
            .envs(launch.environment.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        // SAFETY: setsid is async-signal-safe; it detaches the server from our session and
        // terminal so it outlives this command and ignores a Ctrl-C meant for us.
        // It also makes the server the OOM killer's first choice over the host's services,
        // and puts it in its cgroup (writing "0" moves the writer).
        unsafe {
            cmd.pre_exec(move || {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                if let Some(procs) = &join {
                    let fd = nix::fcntl::open(
                        procs.as_c_str(),
                        nix::fcntl::OFlag::O_WRONLY,
                        nix::sys::stat::Mode::empty(),
                    )
                    .map_err(std::io::Error::from)?;
                    nix::unistd::write(&fd, b"0").map_err(std::io::Error::from)?;
                }
                // Only async-signal-safe calls here: open/write/close with fixed bytes.
                let fd = nix::fcntl::open(
                    "/proc/self/oom_score_adj",
                    nix::fcntl::OFlag::O_WRONLY,
                    nix::sys::stat::Mode::empty(),
                )
                .map_err(std::io::Error::from)?;
                nix::unistd::write(&fd, OOM_SCORE_ADJ_TEXT).map_err(std::io::Error::from)?;
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", launch.binary.display()))?;
        crate::store::files::write_atomic(
            &launch.supervisor_pid_file,
            format!("{}\n", child.id()).as_bytes(),
            0o644,
        )?;
        // The child is not waited for: it is a daemon. If it dies before we exit it stays a
        // zombie until then, which `is_our_server` treats as gone.
        std::mem::forget(child);
        Ok(())
    }

    fn stop(&self, launch: &Launch) -> Result<()> {
        let Some(pid) = self.live_pid(launch) else {
            return Ok(());
        };
        kill(pid, Signal::SIGTERM).with_context(|| format!("SIGTERM to pid {pid}"))?;
        self.wait_gone(pid, launch, self.stop_timeout)
    }

    fn kill(&self, launch: &Launch) -> Result<()> {
        let Some(pid) = self.live_pid(launch) else {
            return Ok(());
        };
        kill(pid, Signal::SIGKILL).with_context(|| format!("SIGKILL to pid {pid}"))?;
        self.wait_gone(pid, launch, Duration::from_secs(10))
    }

    fn state(&self, launch: &Launch) -> Result<ServiceState> {
        Ok(if self.live_pid(launch).is_some() {
            ServiceState::Running
        } else if launch.pid_file.exists() {
            // mysqld removes its pid file on a clean shutdown; one left behind means it died.
            ServiceState::Failed
        } else {
            ServiceState::Stopped
        })
    }

    fn main_pid(&self, launch: &Launch) -> Result<Option<u32>> {
        Ok(self.live_pid(launch).map(|p| p.as_raw() as u32))
    }

    fn start_helper(&self, args: &[String], log: &std::path::Path) -> Result<()> {
        super::detached::spawn(args, log)
    }

    fn running_branches(&self) -> Result<Vec<crate::branch::BranchName>> {
        let mut names: Vec<crate::branch::BranchName> = server_processes()
            .into_iter()
            .filter_map(|(_, file)| {
                let dir = file.parent()?;
                (dir.parent()? == self.branches_dir)
                    .then(|| dir.file_name()?.to_str()?.parse().ok())
                    .flatten()
            })
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn out_of_memory(&self, launch: &Launch) -> Result<bool> {
        Ok(match (&self.cgroups, self.cgroup_dir(launch)) {
            (Some(h), Some(dir)) => h.oom_kills(&dir) > 0,
            _ => false,
        })
    }

    fn readiness(&self) -> Vec<crate::check::Check> {
        use crate::check::Check;
        vec![match &self.cgroups {
            Some(h) => {
                let probe = h.root.join("db-branch");
                match fs::create_dir_all(&probe) {
                    Ok(()) => Check::ok(
                        "memory ceilings",
                        format!(
                            "each server in its own cgroup ({}, {}) with its ceiling",
                            match h.version {
                                cgroup::Version::V2 => "cgroup v2",
                                cgroup::Version::V1 => "cgroup v1 memory controller",
                            },
                            probe.display()
                        ),
                    ),
                    Err(e) => Check::warn(
                        "memory ceilings",
                        format!(
                            "cannot make cgroups under {} ({e}): servers run without a ceiling; \
                             a runaway one can make the OOM killer take its neighbours",
                            probe.display()
                        ),
                    ),
                }
            }
            None => Check::warn(
                "memory ceilings",
                "no cgroup with the memory controller is mounted: servers run without a \
                 ceiling; a runaway one can make the OOM killer take its neighbours",
            ),
        }]
    }

    fn forget(&self, launch: &Launch) -> Result<()> {
        if let Some(dir) = self.cgroup_dir(launch) {
            Hierarchy::remove(&dir);
        }
        for file in [&launch.supervisor_pid_file, &launch.pid_file] {
            match fs::remove_file(file) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        Ok(())
    }
}
