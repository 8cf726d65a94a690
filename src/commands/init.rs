//! `init`: make this host ready. Creates `root`, the embedded pool (a sparse btrfs image,
//! loop-mounted) or checks `btrfs.path`, and installs the unit template. Idempotent.

use crate::cli::InitArgs;
use crate::host::Host;
use crate::output::{bytes, Human, Output};
use crate::storage::PoolInfo;
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Serialize)]
pub struct InitReport {
    pub root: PathBuf,
    /// Timers enabled by `--enable-timers`.
    pub timers: Vec<String>,
    pub pool: PoolInfo,
    pub service_manager: String,
    pub server_version: String,
}

impl Human for InitReport {
    fn human(&self) -> String {
        format!(
            "root:            {}\npool:            {} at {} ({} free of {})\nservice manager: {}\nserver:          {}\n",
            self.root.display(),
            self.pool.kind,
            self.pool.path.display(),
            bytes(Some(self.pool.free_bytes)),
            bytes(Some(self.pool.total_bytes)),
            self.service_manager,
            self.server_version
        )
    }
}

pub fn run(host: &Host, args: &InitArgs, out: &Output) -> Result<()> {
    let root = host.layout.root();
    std::fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
    for dir in [host.layout.branches_dir(), host.layout.locks_dir()] {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let server_version = host.server.version()?;
    host.storage.prepare(true)?;
    host.services
        .install()
        .with_context(|| format!("installing the {} units", host.services.kind()))?;
    let timers = if args.enable_timers {
        host.services.enable_timers()?
    } else {
        Vec::new()
    };
    out.note("this host is ready; next: `db-branch baseline create --empty`");
    out.emit(&InitReport {
        root: root.to_path_buf(),
        timers,
        pool: host.storage.info()?,
        service_manager: host.services.kind().into(),
        server_version,
    })
}
