//! Make this host ready: `root`, the storage pool (an embedded sparse btrfs image,
//! loop-mounted, or a configured btrfs path or ZFS dataset) and the units. Idempotent.

use crate::error::refused;
use crate::host::Host;
use crate::ops::branch::discard::discard;
use crate::storage::PoolInfo;
use crate::store::records;
use crate::values::ByteSize;
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Clone, Default)]
pub struct InitOptions {
    pub enable_timers: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Initialised {
    pub root: PathBuf,
    /// Branches whose storage was lost with a RAM pool (reboot) and were removed.
    pub lost_branches: Vec<String>,
    /// Timers enabled by `--enable-timers`.
    pub timers: Vec<String>,
    pub pool: PoolInfo,
    pub service_manager: String,
    pub server_version: String,
}

pub fn init(host: &Host, opts: &InitOptions) -> Result<Initialised> {
    let root = host.layout.root();
    std::fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
    for dir in [host.layout.branches_dir(), host.layout.locks_dir()] {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let server_version = host.server.version()?;
    // The CA of branches reachable from other machines (used when bind_address is not
    // loopback; made now so clients can be given it before the first branch).
    crate::store::tls::ensure_ca(&host.layout)?;
    if host.storage.ram_backed() {
        check_ram_pool_fits(host)?;
    }
    let rebuilt = host.storage.init()?;
    let mut lost = Vec::new();
    if rebuilt {
        // A new pool holds no branch: records of branches that lived in the old one (a RAM
        // pool lost at reboot) are gone with their data.
        for record in records::list(&host.layout)? {
            if !host.storage.branch_exists(&record.name)? {
                discard(host, &record.name)?;
                lost.push(record.name.to_string());
            }
        }
        if !lost.is_empty() {
            host.printer.warn(format!(
                "the pool was made anew; these branches lived in the old one and are gone: {}",
                lost.join(", ")
            ));
        }
    }
    host.services
        .install()
        .with_context(|| format!("installing the {} units", host.services.kind()))?;
    let timers = if opts.enable_timers {
        host.services.enable_timers()?
    } else {
        Vec::new()
    };
    Ok(Initialised {
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
