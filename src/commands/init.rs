//! `init`: make this host ready. Creates `root`, the embedded pool (a sparse btrfs image,
//! loop-mounted) or checks `btrfs.path`, and installs the unit template. Idempotent.

use crate::cli::InitArgs;
use crate::error::refused;
use crate::host::Host;
use crate::output::{bytes, Human, Output};
use crate::state;
use crate::storage::PoolInfo;
use crate::values::ByteSize;
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Serialize)]
pub struct InitReport {
    pub root: PathBuf,
    /// Branches whose storage was lost with a RAM pool (reboot) and were removed.
    pub lost_branches: Vec<String>,
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
    if host.storage.ram_backed() {
        check_ram_pool_fits(host)?;
    }
    let rebuilt = host.storage.prepare(true)?;
    let mut lost = Vec::new();
    if rebuilt {
        // A new pool holds no branch: records of branches that lived in the old one (a RAM
        // pool lost at reboot) are gone with their data.
        for record in state::list_records(&host.layout)? {
            if !host.storage.branch_exists(&record.name)? {
                super::delete::discard(host, &record.name)?;
                lost.push(record.name.to_string());
            }
        }
        if !lost.is_empty() {
            out.note(format!(
                "the pool was made anew; these branches lived in the old one and are gone: {}",
                lost.join(", ")
            ));
        }
    }
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
        lost_branches: lost,
        timers,
        pool: host.storage.info()?,
        service_manager: host.services.kind().into(),
        server_version,
    })
}

/// A RAM-backed pool must fit in memory as a whole: a tmpfs that fills RAM is the OOM
/// failure in another form.
fn check_ram_pool_fits(host: &Host) -> Result<()> {
    let size = host.config.btrfs.image_size;
    let available = host.memory.available()?;
    let headroom = host.config.memory.headroom;
    if size.bytes().saturating_add(headroom.bytes()) > available {
        return Err(refused(format!(
            "the pool image is on a RAM filesystem ({}), but btrfs.image_size = {size} plus \
             memory.headroom = {headroom} is more than the {} of memory available; lower \
             btrfs.image_size or put btrfs.image_dir on disk. Nothing was changed.",
            host.config.btrfs.image_dir.display(),
            ByteSize(available)
        )));
    }
    Ok(())
}
