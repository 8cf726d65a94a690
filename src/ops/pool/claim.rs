//! Claim a pristine slot and release it. A claim is a rename of a ready token (one winner
//! however many try) and a lease naming the claiming process, so a claimant that dies
//! without releasing loses the slot to the recycler. Nothing here waits for a server: the
//! recycler made the slot ready before it was put back.

use super::slots::{self, Lease, State};
use super::{pool_dir, recycle, require, slot_branch, PoolName};
use crate::branch::BranchRecord;
use crate::error::{Error, Kind};
use crate::host::Host;
use crate::store::records;
use anyhow::Result;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct ClaimOptions {
    pub pool: PoolName,
    /// How long to wait for a ready slot; None: not at all.
    pub wait: Option<Duration>,
    /// The process whose exit ends the lease.
    pub holder: u32,
}

#[derive(Debug, Clone)]
pub struct Claimed {
    pub pool: PoolName,
    pub slot: usize,
    pub record: BranchRecord,
}

/// How often a waiting claimant looks again.
const POLL: Duration = Duration::from_millis(10);

pub fn claim(host: &Host, opts: &ClaimOptions) -> Result<Claimed> {
    let spec = require(host, &opts.pool)?;
    let dir = pool_dir(host, &opts.pool);
    let lease = Lease::of(opts.holder, host.clock.now(), host.caller.uid).ok_or_else(|| {
        Error::new(
            Kind::Usage,
            format!("process {} does not exist to hold the claim", opts.holder),
        )
        .hint("--pid names a running process whose exit releases the slot")
    })?;
    let now = Instant::now();
    // A wait too long to add to the clock waits as long as the clock can count.
    let deadline = now
        .checked_add(opts.wait.unwrap_or_default())
        .unwrap_or(now + Duration::from_secs(100 * 366 * 86_400));
    let mut recycler_checked = false;
    loop {
        // Lowest first: a slot another claimant won costs one failed rename.
        for slot in &slots::in_state(&dir, State::Ready)? {
            if !slots::transition(&dir, *slot, State::Ready, State::Claimed)? {
                continue; // another claimant was first
            }
            slots::write_lease(&dir, *slot, &lease)?;
            let name = slot_branch(&opts.pool, *slot);
            match records::load(&host.layout, &name)? {
                Some(record) => {
                    recycle::ensure_running(host, &opts.pool)?;
                    return Ok(Claimed {
                        pool: opts.pool.clone(),
                        slot: *slot,
                        record,
                    });
                }
                // Its branch is gone (deleted by hand): the recycler remakes it.
                None => {
                    slots::transition(&dir, *slot, State::Claimed, State::Recycling)?;
                }
            }
        }
        if !recycler_checked {
            // Waiting makes sense only while something puts slots back.
            recycle::ensure_running(host, &opts.pool)?;
            recycler_checked = true;
        }
        if Instant::now() >= deadline {
            let states = slots::all(&dir)?;
            let count = |s: State| states.values().filter(|v| **v == s).count();
            let mut err = Error::new(
                Kind::Refused,
                format!(
                    "no ready slot in pool {} ({} slots: {} claimed, {} recycling){}",
                    opts.pool,
                    spec.size,
                    count(State::Claimed),
                    count(State::Recycling),
                    match opts.wait {
                        Some(w) => format!(" after waiting {w:?}"),
                        None => String::new(),
                    }
                ),
            );
            if opts.wait.is_none() {
                err = err.hint("--wait 60s waits for a released slot to come back");
            }
            return Err(err
                .hint(format!(
                    "more slots: `db-branch pool resize {} --size {}`",
                    opts.pool,
                    spec.size * 2
                ))
                .into());
        }
        std::thread::sleep(POLL);
    }
}

/// What `release` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// Handed to the recycler.
    Released,
    /// It was not claimed (released already, or never claimed): nothing to do.
    NotClaimed,
}

pub fn release(host: &Host, pool: &PoolName, slot: usize) -> Result<Released> {
    let spec = require(host, pool)?;
    let dir = pool_dir(host, pool);
    // Only its claimant (or an admin) may hand a slot back: anyone else would reset it
    // under the tests of whoever holds it.
    if host.caller.role(&host.config.access) != crate::access::Role::Admin {
        if let Some(holder) = slots::lease(&dir, slot).and_then(|l| l.uid) {
            if holder != host.caller.uid {
                return Err(Error::new(
                    Kind::Permission,
                    format!(
                        "slot {slot} of pool {pool} was claimed by {}, not {}",
                        crate::access::user_name(holder),
                        host.caller.name
                    ),
                )
                .hint("its claimant releases it (or its process ends); or ask an admin")
                .into());
            }
        }
    }
    if slots::transition(&dir, slot, State::Claimed, State::Recycling)? {
        recycle::ensure_running(host, pool)?;
        return Ok(Released::Released);
    }
    if slots::all(&dir)?.contains_key(&slot) {
        return Ok(Released::NotClaimed);
    }
    Err(Error::new(
        Kind::NotFound,
        format!(
            "pool {pool} has no slot {slot} (its slots are 1 to {})",
            spec.size
        ),
    )
    .into())
}
