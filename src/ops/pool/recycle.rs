//! The recycler's work and whether it runs: one background process per pool (recycler.rs,
//! started by the first pool command that finds none running, holding `recycler.lock`
//! while it runs). It resets released slots and puts them back as ready, takes back slots whose claimant
//! died without releasing, recycles ready slots whose server is gone, remakes slots whose
//! branch was deleted by hand, and retires slots beyond the pool's size. It exits when the
//! pool is deleted.

use super::make::make_slot;
use super::slots::{self, State};
use super::{load_spec, pool_dir, slot_branch, PoolName, PoolSpec};
use crate::host::Host;
use crate::ops::branch::unit::launch;
use crate::ops::reset::{reset, ResetOptions};
use crate::store::{locks, records};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub(super) fn lock_file(dir: &Path) -> PathBuf {
    dir.join("recycler.lock")
}

pub fn log_file(dir: &Path) -> PathBuf {
    dir.join("recycler.log")
}

/// Whether the pool's recycler runs (someone holds its lock).
pub fn is_running(dir: &Path) -> Result<bool> {
    match locks::try_lock(&lock_file(dir), "pool recycler") {
        Ok(_free) => Ok(false),
        Err(e) if locks::is_busy(&e) => Ok(true),
        Err(e) => Err(e),
    }
}

/// Starts the pool's recycler unless one runs. Cheap when it does (one `flock`): claims
/// call it every time.
pub fn ensure_running(host: &Host, pool: &PoolName) -> Result<()> {
    let dir = pool_dir(host, pool);
    if is_running(&dir)? {
        return Ok(());
    }
    let mut args = Vec::new();
    if let Some(config) = &host.config_file {
        args.push("--config".to_string());
        args.push(config.display().to_string());
    }
    args.extend(["pool".into(), "recycle".into(), pool.to_string()]);
    host.services
        .start_helper(&args, &log_file(&dir))
        .with_context(|| format!("starting the recycler of pool {pool}"))
}

/// How long a claim may go without its lease before it counts as abandoned (the claimant
/// writes it right after winning the slot).
const LEASE_GRACE: Duration = Duration::from_secs(10);

/// Until the pool is deleted: recycles what comes back, takes back abandoned claims, and
/// recycles ready slots whose server died.
pub fn keep_recycling(host: &Host, pool: &PoolName, dir: &Path) -> Result<()> {
    let dir = dir.to_path_buf();
    let mut leases_checked = Instant::now();
    let mut health_checked = Instant::now();
    loop {
        let Some(spec) = load_spec(&dir)? else {
            host.printer
                .note(format!("pool {pool} was deleted; the recycler exits"));
            return Ok(());
        };
        let waiting = slots::in_state(&dir, State::Recycling)?;
        let worked = !waiting.is_empty();
        if worked {
            recycle_all(host, &spec, &dir, waiting);
        }
        if leases_checked.elapsed() >= Duration::from_millis(250) {
            reclaim_abandoned(host, &dir)?;
            leases_checked = Instant::now();
        }
        if health_checked.elapsed() >= Duration::from_secs(5) {
            recycle_dead_servers(host, &spec, &dir)?;
            health_checked = Instant::now();
        }
        if !worked {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Recycles `waiting`, as many at once as there are CPUs (a reset is mostly a server
/// starting: CPU-bound). A slot that fails waits for the next turn.
fn recycle_all(host: &Host, spec: &PoolSpec, dir: &Path, waiting: Vec<usize>) {
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    let queue = std::sync::Mutex::new(
        waiting
            .into_iter()
            .collect::<std::collections::VecDeque<_>>(),
    );
    let failed = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                while let Some(slot) = queue.lock().unwrap().pop_front() {
                    if let Err(e) = recycle_one(host, spec, dir, slot) {
                        host.printer.warn(format!(
                            "slot {slot} of pool {}: {}; trying again shortly",
                            spec.name,
                            crate::report::chain_text(&e)
                        ));
                        failed.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    if failed.into_inner() {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Resets (or remakes, or retires) one released slot and puts it back as ready.
fn recycle_one(host: &Host, spec: &PoolSpec, dir: &Path, slot: usize) -> Result<()> {
    if spec.dense.is_some() {
        // Its copy alone; the server's other slots keep serving. Ready as soon as it is
        // pristine; its next spare is made after.
        let refill = super::dense::reset_slot(host, spec, slot)?;
        slots::make_ready(dir, slot)?;
        return refill.run();
    }
    let name = slot_branch(&spec.name, slot);
    if slot > spec.size {
        // The pool shrank while this slot was out.
        let _lock = host.branch_lock(&name)?;
        crate::ops::branch::discard::discard(host, &name)?;
        slots::remove(dir, slot)?;
        return Ok(());
    }
    match records::load(&host.layout, &name)? {
        Some(_) => {
            reset(host, &ResetOptions::named(name))?;
        }
        None => {
            host.printer.note(format!(
                "slot {slot} of pool {} has no branch: remaking it",
                spec.name
            ));
            make_slot(host, spec, slot)?;
        }
    }
    slots::make_ready(dir, slot)?;
    Ok(())
}

/// Claimed slots whose claimant has exited without releasing go back to be recycled.
fn reclaim_abandoned(host: &Host, dir: &Path) -> Result<()> {
    for slot in slots::in_state(dir, State::Claimed)? {
        let abandoned = match slots::lease(dir, slot) {
            Some(lease) => !lease.holder_alive(),
            None => slots::age(dir, slot, State::Claimed).is_some_and(|a| a > LEASE_GRACE),
        };
        if abandoned && slots::transition(dir, slot, State::Claimed, State::Recycling)? {
            host.printer.note(format!(
                "slot {slot}: its claimant exited without releasing it"
            ));
        }
    }
    Ok(())
}

/// Ready slots whose server is not running (killed, out of memory, stopped by hand) are
/// recycled before anyone claims them.
fn recycle_dead_servers(host: &Host, spec: &PoolSpec, dir: &Path) -> Result<()> {
    for slot in slots::in_state(dir, State::Ready)? {
        let name = spec.server_of(slot);
        let up = records::load(&host.layout, &name)?.is_some()
            && host.services.state(&launch(host, &name))?.is_up();
        if !up && slots::transition(dir, slot, State::Ready, State::Recycling)? {
            host.printer.note(format!(
                "slot {slot}: its server is not running; recycling it"
            ));
        }
    }
    Ok(())
}
