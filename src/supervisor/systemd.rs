//! systemd over D-Bus (zbus + zbus_systemd): `mysqld@NAME.service` started, stopped and
//! killed through `org.freedesktop.systemd1`, waiting on the job's `JobRemoved` signal.

use super::{Launch, ServiceManager, ServiceState};
use anyhow::{anyhow, Context, Result};
use futures_util::StreamExt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use zbus::proxy::CacheProperties;
use zbus_systemd::systemd1::{ManagerProxy, ServiceProxy, UnitProxy};

pub const UNIT_TEMPLATE: &str = include_str!("../../units/mysqld@.service");
/// The timers, their services, and the metrics endpoint's service and the follower's cut
/// service (installed, not enabled: `baseline follow --every` writes the cut's timer).
const TIMER_UNITS: [(&str, &str); 6] = [
    (
        "stop-idle.service",
        include_str!("../../units/db-branch-stop-idle.service"),
    ),
    (
        "stop-idle.timer",
        include_str!("../../units/db-branch-stop-idle.timer"),
    ),
    (
        "gc.service",
        include_str!("../../units/db-branch-gc.service"),
    ),
    ("gc.timer", include_str!("../../units/db-branch-gc.timer")),
    (
        "metrics.service",
        include_str!("../../units/db-branch-metrics.service"),
    ),
    (
        "cut.service",
        include_str!("../../units/db-branch-cut.service"),
    ),
];

/// The timer that runs the cut service every `every` (`baseline follow --every`): first
/// one `every` after it starts, then `every` after each run began.
pub fn cut_timer(every: std::time::Duration) -> String {
    let secs = every.as_secs().max(1);
    format!(
        "# db-branch: run `baseline cut` every {shown}, written by `baseline follow --every`;\n\
         # `baseline unfollow` removes it.\n\
         [Unit]\n\
         Description=db-branch: cut a generation from the follower every {shown}\n\
         Documentation=man:db-branch-baseline-cut(1)\n\
         \n\
         [Timer]\n\
         OnActiveSec={secs}s\n\
         OnUnitActiveSec={secs}s\n\
         AccuracySec=1s\n\
         \n\
         [Install]\n\
         WantedBy=timers.target\n",
        shown = crate::values::Duration(every),
    )
}
pub struct Systemd {
    unit_dir: PathBuf,
    prefix: String,
    /// (file name, text) of every unit `init` installs.
    units: Vec<(String, String)>,
    /// How long a start job may take (`mysqld.start_timeout`).
    start_timeout: Duration,
    /// Where distribution packages put their units: a `mysqld@.service` there is not ours.
    vendor_unit_dirs: Vec<PathBuf>,
    conn: OnceLock<zbus::Connection>,
}

/// The first line of every unit db-branch writes.
const OUR_MARK: &str = "# db-branch:";

/// What the units need to know about this host.
pub struct UnitParams<'a> {
    pub root: &'a Path,
    /// The pool directory holding branch datadirs (`root/pool`, or `btrfs.path`).
    pub pool: &'a Path,
    pub mysqld: &'a Path,
    pub user: &'a str,
    pub prefix: &'a str,
    /// db-branch itself, for the timers' services.
    pub bin: &'a Path,
    /// The config file, when it is not the default one.
    pub config: Option<&'a Path>,
    /// Install `db-branchd` for users without root (`[access] service`).
    pub service: bool,
}

/// Timers are `db-branch-*`, or `db-branch-<prefix>-*` next to a non-default unit prefix
/// (several roots side by side under one systemd).
pub fn timer_prefix(prefix: &str) -> String {
    if prefix == "mysqld" {
        "db-branch".into()
    } else {
        format!("db-branch-{prefix}")
    }
}

/// Every unit with this host's paths filled in: the branch template, the timers and the
/// metrics endpoint.
pub fn render_units(p: &UnitParams) -> Vec<(String, String)> {
    let template = UNIT_TEMPLATE
        .replace("@ROOT@", &p.root.display().to_string())
        .replace("@POOL@", &p.pool.display().to_string())
        .replace("@MYSQLD@", &p.mysqld.display().to_string())
        .replace("@USER@", p.user);
    let config_args = p
        .config
        .map_or(String::new(), |c| format!("--config {} ", c.display()));
    let mut units = vec![(format!("{}@.service", p.prefix), template)];
    for (suffix, text) in TIMER_UNITS {
        units.push((
            format!("{}-{suffix}", timer_prefix(p.prefix)),
            text.replace("@BIN@", &p.bin.display().to_string())
                .replace("@CONFIG_ARGS@", &config_args),
        ));
    }
    if p.service {
        units.push((
            crate::service::UNIT.to_string(),
            crate::service::install::unit(p.bin, p.config),
        ));
    }
    units
}

/// The memory ceilings of a branch's unit: MemoryHigh and MemoryMax, plus the deprecated
/// MemoryLimit only where the memory controller is cgroup v1's (systemd warns about it at
/// every start, and it means nothing on a unified host).
pub fn memory_properties(launch: &Launch, cgroup_v1: bool) -> Vec<(&'static str, u64)> {
    let mut props = vec![
        ("MemoryHigh", launch.memory_high),
        ("MemoryMax", launch.memory_max),
    ];
    if cgroup_v1 {
        props.push(("MemoryLimit", launch.memory_max));
    }
    props
}

/// True when the memory controller is mounted as cgroup v1 (legacy or hybrid hosts), where
/// systemd applies `MemoryLimit=`; on a unified (v2) host `MemoryMax=` is the one.
fn memory_controller_is_v1() -> bool {
    let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
        .is_ok_and(|c| c.split_whitespace().any(|x| x == "memory"));
    !v2 && Path::new("/sys/fs/cgroup/memory").is_dir()
}

/// True when systemd is the running init system (the test of `sd_booted()`).
pub fn is_running() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

fn is_no_such_unit(e: &zbus::Error) -> bool {
    matches!(e, zbus::Error::MethodError(name, _, _)
        if name.as_str() == "org.freedesktop.systemd1.NoSuchUnit")
}

impl Systemd {
    pub fn new(
        unit_dir: PathBuf,
        prefix: String,
        units: Vec<(String, String)>,
        start_timeout: Duration,
    ) -> Self {
        Systemd {
            unit_dir,
            prefix,
            units,
            start_timeout,
            vendor_unit_dirs: [
                "/lib/systemd/system",
                "/usr/lib/systemd/system",
                "/etc/systemd/system",
            ]
            .into_iter()
            .map(PathBuf::from)
            .collect(),
            conn: OnceLock::new(),
        }
    }

    /// Refuses to install the branch template over (or beside) a unit of the same name
    /// that a package installed: RHEL and Fedora's MySQL packages ship `mysqld@.service`,
    /// and ours would shadow it.
    fn check_template_is_ours(&self) -> Result<()> {
        let name = format!("{}@.service", self.prefix);
        let dirs = self
            .vendor_unit_dirs
            .iter()
            .chain(std::iter::once(&self.unit_dir));
        for dir in dirs {
            let path = dir.join(&name);
            let Ok(text) = fs::read_to_string(&path) else {
                continue;
            };
            if !text.starts_with(OUR_MARK) {
                return Err(crate::error::Error::new(
                    crate::error::Kind::Usage,
                    format!(
                        "{} exists and is not db-branch's (a server package installed it); \
                         installing db-branch's template would shadow it",
                        path.display()
                    ),
                )
                .hint(format!(
                    "set systemd.unit_prefix in the config to another name, e.g. \
                     unit_prefix = \"db-branch-{}\"",
                    self.prefix
                ))
                .into());
            }
        }
        Ok(())
    }

    /// Installs unit `file` with `text` (atomically; left alone when it holds that already).
    fn write_unit(&self, file: &str, text: &str) -> Result<()> {
        let path = self.unit_dir.join(file);
        if fs::read_to_string(&path).ok().as_deref() != Some(text) {
            let tmp = self.unit_dir.join(format!(".{file}.tmp"));
            fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
            fs::rename(&tmp, &path).with_context(|| format!("installing {}", path.display()))?;
        }
        Ok(())
    }

    fn unit_name(&self, launch: &Launch) -> String {
        format!("{}@{}.service", self.prefix, launch.name)
    }

    fn conn(&self) -> Result<&zbus::Connection> {
        if let Some(c) = self.conn.get() {
            return Ok(c);
        }
        let c = zbus::block_on(zbus::Connection::system()).context(
            "connecting to the system D-Bus (is systemd running? set service_manager = \"process\" otherwise)",
        )?;
        Ok(self.conn.get_or_init(|| c))
    }

    fn manager(&self) -> Result<ManagerProxy<'static>> {
        let conn = self.conn()?.clone();
        Ok(zbus::block_on(ManagerProxy::new(&conn))?)
    }

    /// Runs a job-returning call and waits for its `JobRemoved`, at most `timeout`.
    /// Subscribes and listens before the call: the signal can arrive before the method
    /// reply.
    fn run_job(
        &self,
        unit: &str,
        what: &str,
        timeout: Duration,
        call: impl AsyncFnOnce(&ManagerProxy<'static>) -> zbus::Result<zbus::OwnedObjectPath>
            + Send
            + 'static,
    ) -> Result<()> {
        let mgr = self.manager()?;
        let (tx, rx) = std::sync::mpsc::channel();
        // The wait runs on its own thread so it can be given up on: the system bus has no
        // timeout of its own for a job that never ends.
        std::thread::spawn(move || {
            let result = zbus::block_on(async {
                // Subscribe fails harmlessly if this connection already subscribed.
                let _ = mgr.subscribe().await;
                let mut removed = mgr.receive_job_removed().await?;
                let job = call(&mgr).await?;
                while let Some(signal) = removed.next().await {
                    let args = signal.args()?;
                    if args.job == job {
                        return Ok(args.result.to_string());
                    }
                }
                Err(zbus::Error::Failure(
                    "the system bus closed while waiting for the job".into(),
                ))
            });
            let _ = tx.send(result);
        });
        let result = match rx.recv_timeout(timeout) {
            Ok(r) => r.map_err(anyhow::Error::from),
            Err(_) => Err(anyhow!(
                "systemd did not finish the job within {timeout:?} (mysqld.start_timeout); see \
                 `journalctl -u {unit}`"
            )),
        };
        result
            .and_then(|result| {
                if result == "done" {
                    Ok(())
                } else {
                    Err(anyhow!(
                        "systemd could not {what} {unit}: job result `{result}`; see `journalctl -u {unit}`"
                    ))
                }
            })
            .with_context(|| format!("{what} {unit} over D-Bus"))
    }

    /// Reads a property of a branch's service unit (None: systemd does not know the unit).
    fn service<T>(
        &self,
        launch: &Launch,
        read: impl AsyncFnOnce(&ServiceProxy<'static>) -> zbus::Result<T>,
    ) -> Result<Option<T>> {
        let unit = self.unit_name(launch);
        let mgr = self.manager()?;
        let conn = self.conn()?.clone();
        Ok(zbus::block_on(async {
            let path = match mgr.get_unit(unit.clone()).await {
                Ok(p) => p,
                Err(e) if is_no_such_unit(&e) => return Ok(None),
                Err(e) => return Err(e),
            };
            let svc = ServiceProxy::builder(&conn)
                .path(path)
                .cache_properties(CacheProperties::No)
                .build()
                .await?;
            read(&svc).await.map(Some)
        })?)
    }

    fn unit_proxy(&self, unit: &str) -> Result<Option<UnitProxy<'static>>> {
        let mgr = self.manager()?;
        let conn = self.conn()?.clone();
        zbus::block_on(async {
            let path = match mgr.get_unit(unit.to_string()).await {
                Ok(p) => p,
                Err(e) if is_no_such_unit(&e) => return Ok(None),
                Err(e) => return Err(e),
            };
            // No property cache: a cached ActiveState goes stale between polls.
            UnitProxy::builder(&conn)
                .path(path)
                .cache_properties(CacheProperties::No)
                .build()
                .await
                .map(Some)
        })
        .map_err(Into::into)
    }

    fn active_state(&self, unit: &str) -> Result<String> {
        match self.unit_proxy(unit)? {
            None => Ok("inactive".into()),
            Some(p) => Ok(zbus::block_on(p.active_state())?),
        }
    }

    fn reset_failed(&self, unit: &str) -> Result<()> {
        let mgr = self.manager()?;
        match zbus::block_on(mgr.reset_failed_unit(unit.to_string())) {
            Ok(()) => Ok(()),
            Err(e) if is_no_such_unit(&e) => Ok(()),
            // A unit that is not failed answers with an error too; nothing to reset then.
            Err(zbus::Error::MethodError(..)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

impl Systemd {
    /// The system bus's policy and activation file for `db-branchd`, then a reload of the
    /// bus's configuration so they count at once.
    fn install_bus_files(&self) -> Result<()> {
        for (path, text) in crate::service::install::bus_files() {
            if fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
                continue;
            }
            let dir = path.parent().expect("bus files live in a directory");
            fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            crate::store::files::write_atomic(&path, text.as_bytes(), 0o644)?;
        }
        let conn = self.conn()?;
        zbus::block_on(async { zbus::fdo::DBusProxy::new(conn).await?.reload_config().await })
            .context("asking the system bus to reload its configuration")?;
        Ok(())
    }
}

impl ServiceManager for Systemd {
    fn kind(&self) -> &'static str {
        "systemd"
    }

    fn install(&self) -> Result<()> {
        self.check_template_is_ours()?;
        fs::create_dir_all(&self.unit_dir)
            .with_context(|| format!("creating {}", self.unit_dir.display()))?;
        for (file, text) in &self.units {
            self.write_unit(file, text)?;
        }
        let mgr = self.manager()?;
        zbus::block_on(mgr.reload()).context("systemd daemon-reload over D-Bus")?;
        if self.units.iter().any(|(f, _)| f == crate::service::UNIT) {
            self.install_bus_files()?;
        }
        Ok(())
    }

    fn enable_timers(&self) -> Result<Vec<String>> {
        let timers: Vec<String> = self
            .units
            .iter()
            .map(|(f, _)| f.clone())
            .filter(|f| f.ends_with(".timer"))
            .collect();
        let mgr = self.manager()?;
        // Units under /run are runtime units: enable them for this boot only.
        let runtime = self.unit_dir.starts_with("/run");
        zbus::block_on(mgr.enable_unit_files(timers.clone(), runtime, true))
            .context("enabling the timers over D-Bus")?;
        for t in &timers {
            let unit = t.clone();
            self.run_job(t, "start", Duration::from_secs(60), async move |m| {
                m.start_unit(unit, "replace".into()).await
            })?;
        }
        Ok(timers)
    }

    fn schedule_cuts(&self, every: Option<std::time::Duration>) -> Result<Option<String>> {
        let (service, text) = self
            .units
            .iter()
            .find(|(f, _)| f.ends_with("-cut.service"))
            .cloned()
            .expect("render_units renders the cut service");
        let timer = service.replace(".service", ".timer");
        let path = self.unit_dir.join(&timer);
        let mgr = self.manager()?;
        let runtime = self.unit_dir.starts_with("/run");
        match every {
            Some(every) => {
                fs::create_dir_all(&self.unit_dir)
                    .with_context(|| format!("creating {}", self.unit_dir.display()))?;
                self.write_unit(&service, &text)?;
                self.write_unit(&timer, &cut_timer(every))?;
                zbus::block_on(mgr.reload()).context("systemd daemon-reload over D-Bus")?;
                zbus::block_on(mgr.enable_unit_files(vec![timer.clone()], runtime, true))
                    .with_context(|| format!("enabling {timer} over D-Bus"))?;
                // A restart, so a changed interval counts from now.
                let unit = timer.clone();
                self.run_job(&timer, "start", Duration::from_secs(60), async move |m| {
                    m.restart_unit(unit, "replace".into()).await
                })?;
                Ok(Some(timer))
            }
            None => {
                if !path.exists() {
                    return Ok(None);
                }
                let unit = timer.clone();
                self.run_job(&timer, "stop", Duration::from_secs(60), async move |m| {
                    m.stop_unit(unit, "replace".into()).await
                })?;
                zbus::block_on(mgr.disable_unit_files(vec![timer.clone()], runtime))
                    .with_context(|| format!("disabling {timer} over D-Bus"))?;
                fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
                zbus::block_on(mgr.reload()).context("systemd daemon-reload over D-Bus")?;
                Ok(None)
            }
        }
    }

    fn start(&self, launch: &Launch) -> Result<()> {
        let unit = self.unit_name(launch);
        // Written at every start, empty when nothing is wanted: the unit reads it
        // (`EnvironmentFile=-`), so turning `mysqld.skip_fsync` off drops the preload at
        // the next start.
        let env = launch.environment_file();
        crate::store::files::write_atomic(
            &env,
            environment_file_text(&launch.environment).as_bytes(),
            0o644,
        )
        .with_context(|| format!("writing the environment of {unit}"))?;
        // Clears a `failed` state left by a kill, and its start counter.
        self.reset_failed(&unit)?;
        if launch.memory_max > 0 {
            // Runtime properties: a drop-in under /run for this instance only. MemoryLimit
            // (deprecated; systemd warns on every start) only where the memory controller
            // is cgroup v1's.
            let props: Vec<(String, zbus::OwnedVariant)> =
                memory_properties(launch, memory_controller_is_v1())
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.into()))
                    .collect();
            let mgr = self.manager()?;
            zbus::block_on(mgr.set_unit_properties(unit.clone(), true, props))
                .with_context(|| format!("setting the memory ceilings of {unit}"))?;
        }
        let name = unit.clone();
        self.run_job(&unit, "start", self.start_timeout, async move |m| {
            m.start_unit(name, "replace".into()).await
        })
        .map_err(|e| e.context(format!("the server log is {}", launch.error_log.display())))
    }

    fn stop(&self, launch: &Launch) -> Result<()> {
        let unit = self.unit_name(launch);
        if !self.state(launch)?.is_up() {
            return Ok(());
        }
        let name = unit.clone();
        // The unit's own TimeoutStopSec (600 s) bounds a stop; this only guards the bus.
        self.run_job(&unit, "stop", Duration::from_secs(900), async move |m| {
            m.stop_unit(name, "replace".into()).await
        })
    }

    fn kill(&self, launch: &Launch) -> Result<()> {
        let unit = self.unit_name(launch);
        if matches!(
            self.state(launch)?,
            ServiceState::Stopped | ServiceState::Failed
        ) {
            return Ok(());
        }
        let mgr = self.manager()?;
        // systemd 255 (Ubuntu 24.04) may answer EINVAL ("Failed to send signal SIGKILL to
        // auxiliary processes") when its walk of the unit's cgroup meets a process already
        // gone, after it killed the main process: the unit's state, not the answer, says
        // whether the server is dead. The answer is reported only if it is not.
        let sent = zbus::block_on(mgr.kill_unit(unit.clone(), "all".into(), 9))
            .with_context(|| format!("KillUnit {unit} SIGKILL"));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let state = self.active_state(&unit)?;
            if state == "failed" || state == "inactive" {
                if let Err(e) = &sent {
                    tracing::debug!("{unit} died despite KillUnit's answer: {e:#}");
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(match sent {
                    Err(e) => e.context(format!("{unit} is still {state} 10 s later")),
                    Ok(_) => anyhow!("{unit} is still {state} 10 s after SIGKILL"),
                });
            }
            std::thread::sleep(Duration::from_millis(3));
        }
    }

    fn state(&self, launch: &Launch) -> Result<ServiceState> {
        Ok(match self.active_state(&self.unit_name(launch))?.as_str() {
            "active" | "reloading" | "refreshing" => ServiceState::Running,
            "activating" => ServiceState::Starting,
            "deactivating" => ServiceState::Stopping,
            "failed" => ServiceState::Failed,
            _ => ServiceState::Stopped,
        })
    }

    fn main_pid(&self, launch: &Launch) -> Result<Option<u32>> {
        let pid = self
            .service(launch, async |svc| svc.main_pid().await)?
            .unwrap_or(0);
        Ok((pid != 0).then_some(pid))
    }

    fn out_of_memory(&self, launch: &Launch) -> Result<bool> {
        let Some((result, started)) = self.service(launch, async |svc| {
            Ok((
                svc.result().await?,
                svc.exec_main_start_timestamp_monotonic().await?,
            ))
        })?
        else {
            return Ok(false);
        };
        Ok(result == "oom-kill" || super::kmsg::oom_killed_in(&self.unit_name(launch), started))
    }

    fn start_helper(&self, args: &[String], log: &std::path::Path) -> Result<()> {
        super::detached::spawn(args, log)
    }

    fn running_branches(&self) -> Result<Vec<crate::branch::BranchName>> {
        let mgr = self.manager()?;
        let pattern = format!("{}@*.service", self.prefix);
        let units = zbus::block_on(mgr.list_units_by_patterns(Vec::new(), vec![pattern]))
            .context("listing units over D-Bus")?;
        let prefix = format!("{}@", self.prefix);
        let mut names: Vec<crate::branch::BranchName> = units
            .into_iter()
            .filter(|u| {
                matches!(
                    u.3.as_str(),
                    "active" | "activating" | "deactivating" | "failed"
                )
            })
            .filter_map(|u| {
                u.0.strip_prefix(&prefix)?
                    .strip_suffix(".service")?
                    .parse()
                    .ok()
            })
            .collect();
        names.sort();
        Ok(names)
    }

    fn forget(&self, launch: &Launch) -> Result<()> {
        self.reset_failed(&self.unit_name(launch))
    }
}

/// `EnvironmentFile=` syntax: one `NAME="value"` per line, `\\` and `"` escaped.
fn environment_file_text(vars: &[(String, String)]) -> String {
    vars.iter()
        .map(|(k, v)| {
            let v = v.replace('\\', "\\\\").replace('"', "\\\"");
            format!("{k}=\"{v}\"\n")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch() -> Launch {
        Launch {
            name: "a".parse().unwrap(),
            binary: "/usr/sbin/mariadbd".into(),
            option_file: "/r/branches/a/my.cnf".into(),
            error_log: "/r/branches/a/error.log".into(),
            user: "mysql".into(),
            pid_file: "/r/branches/a/mysqld.pid".into(),
            supervisor_pid_file: "/r/branches/a/supervisor.pid".into(),
            memory_high: 100,
            memory_max: 200,
            environment: vec![("LD_PRELOAD".into(), "/usr/lib/libeatmydata.so.1".into())],
        }
    }

    #[test]
    fn the_environment_file_is_beside_the_option_file_and_quoted() {
        let l = launch();
        assert_eq!(
            l.environment_file(),
            std::path::Path::new("/r/branches/a/server.env")
        );
        assert_eq!(
            environment_file_text(&l.environment),
            "LD_PRELOAD=\"/usr/lib/libeatmydata.so.1\"\n"
        );
        assert_eq!(environment_file_text(&[]), "");
        assert_eq!(
            environment_file_text(&[("A".into(), "x\"y\\z".into())]),
            "A=\"x\\\"y\\\\z\"\n"
        );
    }

    #[test]
    fn memory_limit_only_on_cgroup_v1() {
        let v2 = memory_properties(&launch(), false);
        assert_eq!(v2, vec![("MemoryHigh", 100), ("MemoryMax", 200)]);
        let v1 = memory_properties(&launch(), true);
        assert!(v1.contains(&("MemoryLimit", 200)));
    }

    #[test]
    fn a_packaged_unit_of_the_same_name_is_not_shadowed() {
        let vendor = tempfile::tempdir().unwrap();
        let ours = tempfile::tempdir().unwrap();
        let units = render_units(&UnitParams {
            root: Path::new("/var/lib/db-branch"),
            pool: Path::new("/var/lib/db-branch/pool"),
            mysqld: Path::new("/usr/sbin/mysqld"),
            user: "mysql",
            prefix: "mysqld",
            bin: Path::new("/usr/bin/db-branch"),
            config: None,
            service: false,
        });
        let mut sd = Systemd::new(
            ours.path().to_path_buf(),
            "mysqld".into(),
            units.clone(),
            Duration::from_secs(1),
        );
        sd.vendor_unit_dirs = vec![vendor.path().to_path_buf()];
        assert!(sd.check_template_is_ours().is_ok(), "nothing there yet");
        std::fs::write(ours.path().join("mysqld@.service"), &units[0].1).unwrap();
        assert!(sd.check_template_is_ours().is_ok(), "ours may be replaced");
        std::fs::write(
            vendor.path().join("mysqld@.service"),
            "[Unit]\nDescription=MySQL Server\n",
        )
        .unwrap();
        let e = sd.check_template_is_ours().unwrap_err();
        let text = crate::report::render(&e);
        assert!(text.contains("systemd.unit_prefix"), "{text}");
        assert_eq!(crate::report::exit_code(&e), crate::error::EXIT_USAGE);
    }
}
