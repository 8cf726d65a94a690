//! The recycler process (`db-branch pool recycle POOL`): one per pool, holding the pool's
//! recycler lock while it runs. It serves the claim socket (listener.rs) on one thread and
//! recycles slots (recycle.rs) on the others, and ends when the pool is deleted.

use super::{listener, pool_dir, recycle, PoolName};
use crate::host::Host;
use crate::store::locks;
use anyhow::Result;
use std::time::Duration;

/// The recycler's loop; returns when the pool is gone or another recycler runs.
pub fn run(host: &Host, pool: &PoolName) -> Result<()> {
    let dir = pool_dir(host, pool);
    // Others only look at the lock for an instant (`is_running`); a recycler holds it. Wait
    // out the lookers; give way to a recycler.
    let _running = match locks::lock(
        &recycle::lock_file(&dir),
        "pool recycler",
        Duration::from_secs(2),
        &|_| {},
    ) {
        Ok(guard) => guard,
        Err(e) if locks::is_busy(&e) => return Ok(()),
        Err(e) => return Err(e),
    };
    crate::store::files::write_atomic(
        &dir.join("recycler.pid"),
        format!("{}\n", std::process::id()).as_bytes(),
        0o644,
    )?;
    host.printer.note(format!(
        "recycler of pool {pool} running (pid {})",
        std::process::id()
    ));
    // Claims over the socket are the fast path; without it, claims go through the files.
    let listener = match listener::bind(host, pool) {
        Ok(l) => Some(l),
        Err(e) => {
            host.printer.warn(format!(
                "{}; claims go through the pool's files instead",
                crate::report::chain_text(&e)
            ));
            None
        }
    };
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        if let Some(l) = &listener {
            s.spawn(|| listener::serve(host, pool, l, &stop));
        }
        let outcome = recycle::keep_recycling(host, pool, &dir);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if listener.is_some() {
            listener::wake(host, pool);
        }
        outcome
    })
}
