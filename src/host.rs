//! The bundle of trait objects an operation runs against — storage, supervisor, server,
//! baker, memory probe, port probe, clock — plus the printer and the config: real ones
//! built from the config, or in-memory ones for unit tests (`ops::testing`).

use crate::bake::Baker;
use crate::branch::BranchName;
use crate::clock::Clock;
use crate::config::{Backend, Config, ServiceManagerKind};
use crate::error::{Error, Kind};
use crate::layout::Layout;
use crate::memory::{MemoryProbe, SysinfoMemory};
use crate::ports::{BindProbe, PortProbe};
use crate::printer::Printer;
use crate::server::{real::RealServer, Server};
use crate::storage::{btrfs::BtrfsStorage, Storage};
use crate::store::locks::{self, LockGuard};
use crate::supervisor::{process::ProcessSupervisor, systemd, ServiceManager};
use anyhow::Result;
use std::sync::Arc;
use std::time::Duration;

pub struct Host {
    pub config: Config,
    pub layout: Layout,
    pub storage: Arc<dyn Storage>,
    pub services: Arc<dyn ServiceManager>,
    pub server: Arc<dyn Server>,
    pub baker: Arc<dyn Baker>,
    pub memory: Arc<dyn MemoryProbe>,
    pub ports: Arc<dyn PortProbe>,
    pub clock: Arc<dyn Clock>,
    pub printer: Printer,
    /// `--yes`: destructive commands do not ask.
    pub assume_yes: bool,
    /// Who asked: root, or the user the db-branchd service runs this for.
    pub caller: crate::access::Caller,
    /// The config file when it is not the default one: helpers started in the background
    /// must read the same.
    pub config_file: Option<std::path::PathBuf>,
}

/// Unix socket paths (`sun_path`) hold 107 bytes and a terminating NUL.
pub const MAX_SOCKET_PATH: usize = 107;

impl Host {
    /// `config_path`: the config file when it is not the default one (the timers' services
    /// must read the same file).
    pub fn real(
        config: Config,
        config_path: Option<&std::path::Path>,
        printer: Printer,
        caller: crate::access::Caller,
    ) -> Result<Host> {
        let layout = Layout::new(&config.root);
        let storage: Arc<dyn Storage> = match config.backend {
            Backend::Btrfs if config.embedded_pool() => Arc::new(BtrfsStorage::embedded(
                layout.image_file(&config.btrfs.image_dir),
                layout.embedded_mount(),
                config.btrfs.image_size.bytes(),
                layout.baseline_streams(),
            )),
            Backend::Btrfs => Arc::new(BtrfsStorage::at_path(
                config.btrfs.path.clone(),
                layout.baseline_streams(),
            )),
            Backend::Zfs => Arc::new(crate::storage::zfs::ZfsStorage::new(
                config.zfs.dataset.clone(),
                &config.root,
            )),
        };
        let pool_dir = match config.backend {
            Backend::Zfs => config.root.join("zfs"),
            Backend::Btrfs if config.embedded_pool() => layout.embedded_mount(),
            Backend::Btrfs => config.btrfs.path.clone(),
        };
        let use_systemd = match config.service_manager {
            ServiceManagerKind::Systemd => true,
            ServiceManagerKind::Process => false,
            ServiceManagerKind::Auto => systemd::is_running(),
        };
        if use_systemd {
            crate::config::check_root_for_systemd(&config.root)?;
        }
        let services: Arc<dyn ServiceManager> = if use_systemd {
            let bin = std::env::current_exe()
                .unwrap_or_else(|_| std::path::PathBuf::from("/usr/bin/db-branch"));
            Arc::new(systemd::Systemd::new(
                config.systemd.unit_dir.clone(),
                config.systemd.unit_prefix.clone(),
                systemd::render_units(&systemd::UnitParams {
                    root: &config.root,
                    pool: &pool_dir,
                    mysqld: &config.mysqld.binary,
                    user: &config.mysqld.user,
                    prefix: &config.systemd.unit_prefix,
                    bin: &bin,
                    config: config_path,
                    service: config.access.service,
                }),
                config.mysqld.start_timeout.0,
            ))
        } else {
            Arc::new(ProcessSupervisor::new(
                Duration::from_secs(600),
                &config.root,
            ))
        };
        let server = Arc::new(RealServer::new(
            config.mysqld.binary.clone(),
            config.mysqld.user.clone(),
            config.client.user.clone(),
            config.client.password.clone(),
            Some(layout.server_versions_cache()),
            config
                .mysqld
                .skip_timer_calibration
                .then(|| layout.lib_dir()),
        ));
        Ok(Host {
            layout,
            storage,
            services,
            server: server.clone(),
            baker: Arc::new(crate::bake::RealBaker(server)),
            memory: Arc::new(SysinfoMemory),
            ports: Arc::new(BindProbe),
            clock: Arc::from(crate::clock::from_env()?),
            caller,
            printer,
            assume_yes: false,
            config_file: config_path.map(|p| p.to_path_buf()),
            config,
        })
    }

    /// The lock one trash entry's restore or purge holds.
    pub fn trash_lock(&self, id: &crate::branch::TrashId) -> Result<LockGuard> {
        self.lock(&self.layout.trash_lock(id), &format!("trash entry {id}"))
    }

    fn lock(&self, path: &std::path::Path, what: &str) -> Result<LockGuard> {
        let printer = &self.printer;
        locks::lock(path, what, self.config.lock_timeout.0, &|m| printer.note(m))
    }

    /// The lock every operation on one branch holds.
    /// The branch's lock, for acting on it for the caller: once held, the branch is checked
    /// again to be the caller's (or the caller an admin) — the check before the lock may be
    /// stale, as the branch can be deleted and made anew by someone else meanwhile.
    pub fn branch_lock(&self, name: &BranchName) -> Result<LockGuard> {
        let guard = self.branch_lock_for_host(name)?;
        if self.caller.role(&self.config.access) != crate::access::Role::Admin {
            let record = crate::store::records::load(&self.layout, name)?;
            self.caller.check(
                &self.config.access,
                &crate::access::Need::owner(name),
                name,
                record.as_ref(),
            )?;
        }
        Ok(guard)
    }

    /// The branch's lock without the owner check: for what acts on the host's behalf
    /// whoever asked (a pool's slots belong to the pool; its own rules say who may claim).
    pub fn branch_lock_for_host(&self, name: &BranchName) -> Result<LockGuard> {
        self.lock(&self.layout.branch_lock(name), &format!("branch {name}"))
    }

    /// One baseline build or prune at a time; branch commands are not held up by it.
    pub fn baseline_lock(&self) -> Result<LockGuard> {
        self.lock(&self.layout.baseline_lock(), "baseline")
    }

    /// Held while memory is admitted and a port chosen: decisions that count all branches.
    pub fn host_lock(&self) -> Result<LockGuard> {
        self.lock(&self.layout.host_lock(), "host")
    }

    /// Refuses (exit 75) when the pool is too full for a new branch or baseline: better than
    /// a server that cannot write its first file.
    pub fn check_free_space(&self) -> Result<()> {
        let info = self.storage.info()?;
        let min = self.config.btrfs.min_free;
        if info.free_bytes < min.bytes() {
            return Err(Error::new(
                Kind::Refused,
                format!(
                    "the pool at {} is full: {} free, at least {min} (btrfs.min_free) needed. \
                     Nothing was changed.",
                    info.path.display(),
                    crate::values::ByteSize(info.free_bytes)
                ),
            )
            .hint("delete branches you no longer need (`db-branch list` shows each one's own disk use); space a delete frees appears within seconds")
            .into());
        }
        Ok(())
    }

    /// A branch's server socket must fit a Unix socket address.
    pub fn check_socket_path(&self, name: &BranchName) -> Result<()> {
        let socket = self.layout.socket(name);
        let len = socket.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            let fixed = len - name.as_str().len();
            return Err(Error::new(
                Kind::Usage,
                format!(
                    "branch name {name} is too long for root {}: its server socket {} would be \
                     {len} bytes, and Unix socket paths hold at most {MAX_SOCKET_PATH}",
                    self.layout.root().display(),
                    socket.display()
                ),
            )
            .hint(format!(
                "use a name of at most {} bytes here, or a shorter `root` in the config",
                MAX_SOCKET_PATH.saturating_sub(fixed)
            ))
            .into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::testing::{name, sim_host};

    #[test]
    fn socket_paths_past_the_limit_are_refused_with_the_longest_name_that_fits() {
        let mut sim = sim_host();
        let root = std::path::PathBuf::from(format!("/{}", "r".repeat(39)));
        sim.host.layout = crate::layout::Layout::new(&root);
        let long = name(&"n".repeat(48));
        let e = sim.host.check_socket_path(&long).unwrap_err();
        let (kind, hints) = crate::report::classify(&e);
        assert_eq!(kind, crate::error::Kind::Usage);
        assert!(e.to_string().contains("too long"), "{e}");
        let fits: usize = hints[0]
            .split_whitespace()
            .find_map(|w| w.parse().ok())
            .unwrap();
        assert!(sim.host.check_socket_path(&name(&"n".repeat(fits))).is_ok());
        assert!(sim
            .host
            .check_socket_path(&name(&"n".repeat(fits + 1)))
            .is_err());
    }
}
