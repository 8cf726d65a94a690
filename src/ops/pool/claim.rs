//! Claim a pristine slot and release it. A claim is a rename of a ready token (one winner
//! however many try) and a lease naming the claiming process, so a claimant that dies
//! without releasing loses the slot to the recycler. Nothing here waits for a server: the
//! recycler made the slot ready before it was put back.

use super::slots::{self, ConnectionLease, Lease, State};
use super::{pool_dir, recycle, require, PoolName, PoolSpec};
use crate::access::Caller;
use crate::branch::BranchRecord;
use crate::config::AccessConfig;
use crate::error::{Error, Kind};
use crate::host::Host;
use crate::ops::branch::connection::Connection;
use crate::store::{records, stats};
use anyhow::Result;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct ClaimOptions {
    pub pool: PoolName,
    /// How long to wait for a ready slot; None: not at all.
    pub wait: Option<Duration>,
    /// What ends the lease.
    pub holder: Holder,
    /// Who claims: only they (or an admin) may release it.
    pub uid: u32,
}

/// What a claim lasts as long as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// This process's exit.
    Process(u32),
    /// A connection to the pool's socket, which this process (the recycler) serves.
    Connection(ConnectionLease),
}

impl ClaimOptions {
    /// A claim for `host`'s caller held by process `pid`.
    pub fn for_process(host: &Host, pool: &PoolName, wait: Option<Duration>, pid: u32) -> Self {
        ClaimOptions {
            pool: pool.clone(),
            wait,
            holder: Holder::Process(pid),
            uid: host.caller.uid,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Claimed {
    pub pool: PoolName,
    pub slot: usize,
    /// The branch whose server serves it (shared with other slots in a dense pool).
    pub record: BranchRecord,
    /// A dense slot's database and account.
    pub account: Option<crate::server::dense::DenseSlot>,
}

impl Claimed {
    /// Slot `slot` of pool `spec`, served by `record`'s server.
    pub fn of(host: &Host, spec: &PoolSpec, slot: usize, record: BranchRecord) -> Result<Claimed> {
        let account = match &spec.dense {
            Some(d) => Some(super::dense::account(&pool_dir(host, &spec.name), d, slot)?),
            None => None,
        };
        Ok(Claimed {
            pool: spec.name.clone(),
            slot,
            record,
            account,
        })
    }
}

/// How often a waiting claimant looks again.
const POLL: Duration = Duration::from_millis(10);

pub fn claim(host: &Host, opts: &ClaimOptions) -> Result<Claimed> {
    take(host, opts, false).map(|(claimed, _)| claimed)
}

/// A won slot's lease, not yet on disk: the recycler replies first and writes it next,
/// keeping the file system's latency out of the claim's. Until it is written the slot
/// counts as claimed (the token is in `claimed/`) and the recycler's own check for
/// abandoned claims allows a new claim ten seconds to write its lease.
#[must_use = "the lease must be written, or the recycler takes the slot back"]
pub struct DeferredLease {
    dir: std::path::PathBuf,
    slot: usize,
    lease: Lease,
    /// The claim's latency, kept with the lease (after the reply, like it).
    layout: crate::layout::Layout,
    took: Duration,
    /// Written by the recycler, which lives on: its latency sample joins the others of the
    /// next second (`stats::observe_soon`) instead of a write of the statistics per claim.
    in_recycler: bool,
}

impl DeferredLease {
    pub fn write(self) -> Result<()> {
        slots::write_lease(&self.dir, self.slot, &self.lease)?;
        if self.in_recycler {
            stats::observe_soon(&self.layout, stats::Operation::Claim, self.took);
        } else {
            stats::observe(&self.layout, stats::Operation::Claim, self.took);
        }
        Ok(())
    }
}

/// `claim` as the recycler serves it over its socket: it runs already (so nothing starts
/// it), and the lease is written after the reply.
pub fn claim_in_recycler(host: &Host, opts: &ClaimOptions) -> Result<(Claimed, DeferredLease)> {
    let (claimed, lease) = take(host, opts, true)?;
    Ok((claimed, lease.expect("a deferred lease")))
}

fn take(
    host: &Host,
    opts: &ClaimOptions,
    in_recycler: bool,
) -> Result<(Claimed, Option<DeferredLease>)> {
    let spec = require(host, &opts.pool)?;
    let dir = pool_dir(host, &opts.pool);
    let lease = match opts.holder {
        Holder::Process(pid) => Lease::of(pid, host.clock.now(), opts.uid).ok_or_else(|| {
            Error::new(
                Kind::Usage,
                format!("process {pid} does not exist to hold the claim"),
            )
            .hint("--pid names a running process whose exit releases the slot")
        })?,
        Holder::Connection(c) => Lease::of_connection(c, host.clock.now(), opts.uid),
    };
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
            let deferred = DeferredLease {
                dir: dir.clone(),
                slot: *slot,
                lease: lease.clone(),
                layout: host.layout.clone(),
                took: now.elapsed(),
                in_recycler,
            };
            let deferred = if in_recycler {
                Some(deferred)
            } else {
                deferred.write()?;
                None
            };
            let name = spec.server_of(*slot);
            match records::load(&host.layout, &name)? {
                Some(record) => {
                    if !in_recycler {
                        recycle::ensure_running(host, &opts.pool)?;
                    }
                    return Ok((Claimed::of(host, &spec, *slot, record)?, deferred));
                }
                // Its branch is gone (deleted by hand): the recycler remakes it.
                None => {
                    slots::transition(&dir, *slot, State::Claimed, State::Recycling)?;
                }
            }
        }
        if !recycler_checked && !in_recycler {
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

/// The slot's connection variables, as `env` prints them, and which slot it is; and its URL.
pub fn variables(host: &Host, claimed: &Claimed) -> (Vec<(&'static str, String)>, String) {
    let mut conn = Connection::of(host, &claimed.record);
    if let Some(a) = &claimed.account {
        conn = conn.for_account(&a.user, &a.password, &a.database);
    }
    let mut vars = conn.variables(claimed.record.name.as_str());
    vars.push(("DB_BRANCH_POOL", claimed.pool.to_string()));
    vars.push(("DB_BRANCH_POOL_SLOT", claimed.slot.to_string()));
    (vars, conn.url)
}

/// A process of `caller`'s own to hold a claim (an admin's may be anyone's): a lease held
/// by a process that never ends (PID 1) would keep the slot from everyone.
pub fn check_holder(caller: &Caller, access: &AccessConfig, pid: u32) -> Result<u32> {
    if caller.role(access) == crate::access::Role::Admin {
        return Ok(pid);
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|u| u.parse::<u32>().ok());
    if uid == Some(caller.uid) {
        Ok(pid)
    } else {
        Err(Error::new(
            Kind::Permission,
            format!("process {pid} is not a process of {}", caller.name),
        )
        .hint("name one of your own processes, or leave the pid out (the caller holds it)")
        .into())
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

/// Hands back the slot connection `id` of this recycler holds — unless it is no longer
/// that connection's (an admin released it and someone else claimed it since): closing a
/// connection must never take a slot from its next claimant.
pub fn release_connection(host: &Host, pool: &PoolName, slot: usize, id: u64) -> Result<bool> {
    let dir = pool_dir(host, pool);
    Ok(held_by_connection(&dir, slot, id)
        && slots::transition(&dir, slot, State::Claimed, State::Recycling)?)
}

/// Whether `slot` is still claimed for connection `id` of this recycler (an admin may have
/// released it since, and someone else claimed it).
pub fn held_by_connection(dir: &std::path::Path, slot: usize, id: u64) -> bool {
    slots::lease(dir, slot)
        .is_some_and(|l| l.pid == std::process::id() && l.connection.is_some_and(|c| c.id == id))
}
