//! The bundle of trait objects a command runs against: real ones built from the config, or
//! in-memory ones for unit tests.

use crate::clock::Clock;
use crate::config::{Backend, Config, ServiceManagerKind};
use crate::layout::Layout;
use crate::memory::{MemoryProbe, SysinfoMemory};
use crate::ports::{BindProbe, PortProbe};
use crate::server::{mariadb::MariaDb, Server};
use crate::service::{process::ProcessSupervisor, systemd, ServiceManager};
use crate::storage::{btrfs::BtrfsStorage, Storage};
use std::sync::Arc;
use std::time::Duration;

pub struct Host {
    pub config: Config,
    pub layout: Layout,
    pub storage: Arc<dyn Storage>,
    pub services: Arc<dyn ServiceManager>,
    pub server: Arc<dyn Server>,
    pub memory: Arc<dyn MemoryProbe>,
    pub ports: Arc<dyn PortProbe>,
    pub clock: Arc<dyn Clock>,
    /// `--yes`: destructive commands do not ask.
    pub assume_yes: bool,
}

impl Host {
    /// `config_path`: the config file when it is not the default one (the timers' services
    /// must read the same file).
    pub fn real(config: Config, config_path: Option<&std::path::Path>) -> anyhow::Result<Host> {
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
                }),
            ))
        } else {
            Arc::new(ProcessSupervisor::new(
                Duration::from_secs(600),
                layout.branches_dir(),
            ))
        };
        let server: Arc<dyn Server> = Arc::new(MariaDb::new(
            config.mysqld.binary.clone(),
            config.mysqld.user.clone(),
            config.client.user.clone(),
            config.client.password.clone(),
        ));
        Ok(Host {
            layout,
            storage,
            services,
            server,
            memory: Arc::new(SysinfoMemory),
            ports: Arc::new(BindProbe),
            clock: Arc::from(crate::clock::from_env()?),
            assume_yes: false,
            config,
        })
    }
}
