//! The memory guard's arithmetic for one branch, all of it here: its ceiling (buffer
//! pool, allowance, instrumentation, a RAM pool's growth), the limits its server runs
//! under, and admission for starting it: its warm ceiling must fit in what is
//! free once every running branch has grown to its own, and the headroom. Then a
//! reservation makes the memory it was promised visible to other invocations until it is
//! up (from then on its own ceiling counts).

use super::unit::{launch, server_rss};
use crate::branch::{BranchName, BranchRecord};
use crate::config::Allowance;
use crate::flavour::Family;
use crate::host::Host;
use crate::memory::{measured_allowance, Admission, Commitment};
use crate::store::{records, reservations};
use anyhow::Result;

/// The most a branch's server may use once warm, and of what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ceiling {
    pub buffer_pool: u64,
    pub allowance: u64,
    /// migrate-check's instrumentation, a RAM pool's growth.
    pub extra: u64,
}

impl Ceiling {
    /// Saturating: a buffer pool typed as 16 EiB is a ceiling nothing fits under, never a
    /// sum that wraps round to a small one.
    pub fn total(&self) -> u64 {
        self.buffer_pool
            .saturating_add(self.allowance)
            .saturating_add(self.extra)
    }

    /// (MemoryHigh, MemoryMax) of its server: killed alone at its ceiling, throttled a
    /// quarter of the allowance below it.
    pub fn limits(&self) -> (u64, u64) {
        let max = self.total();
        (max - self.allowance / 4, max)
    }
}

/// The family whose allowance applies: the branch's server, else the configured binary's.
fn family(host: &Host, record: &BranchRecord) -> Family {
    record
        .server
        .map(|f| f.family)
        .or_else(|| host.server.flavour().ok().map(|f| f.family))
        .unwrap_or(Family::Mariadb)
}

/// Bytes a branch's server may use beyond its buffer pool: extra instrumentation
/// (migrate-check) takes more.
pub fn instrumentation(host: &Host, record: &BranchRecord) -> u64 {
    if record.server_options.is_empty() {
        0
    } else {
        host.server.instrumentation_memory()
    }
}

pub fn ceiling(host: &Host, record: &BranchRecord) -> Ceiling {
    let allowance = match host.config.memory.branch_allowance {
        Allowance::Size(s) => s.bytes(),
        Allowance::Auto => measured_allowance(family(host, record), record.profile),
    };
    // A dense pool's server serves a client per slot.
    let slots = u64::from(record.dense_slots.unwrap_or(1).max(1));
    let allowance =
        allowance.saturating_add((slots - 1).saturating_mul(crate::memory::DENSE_SLOT_ALLOWANCE));
    let pool_growth = if host.storage.ram_backed() {
        host.config.memory.ram_pool_growth.bytes()
    } else {
        0
    };
    Ceiling {
        buffer_pool: record.buffer_pool.bytes(),
        allowance,
        extra: instrumentation(host, record).saturating_add(pool_growth),
    }
}

/// Every running branch but `except`, with its ceiling and what it holds now.
pub fn commitments(host: &Host, except: Option<&BranchName>) -> Vec<Commitment> {
    records::list(&host.layout)
        .unwrap_or_default()
        .iter()
        .filter(|r| Some(&r.name) != except)
        .filter(|r| {
            host.services
                .state(&launch(host, &r.name))
                .is_ok_and(|s| s.is_up())
        })
        .map(|r| Commitment {
            branch: r.name.to_string(),
            ceiling_bytes: ceiling(host, r).total(),
            rss_bytes: server_rss(host, &r.name).unwrap_or(0),
        })
        .collect()
}

/// The figures for starting `record`'s server now. `freed` is memory this operation
/// releases first (a reset kills the old server).
pub fn assess(host: &Host, record: &BranchRecord, freed: u64) -> Result<Admission> {
    let c = ceiling(host, record);
    let running = commitments(host, Some(&record.name));
    // A branch whose server is up counts as running (its ceiling less what it holds); its
    // reservation, until its create lets go of it, must not count a second time.
    let mut not_starting: Vec<&str> = running.iter().map(|c| c.branch.as_str()).collect();
    not_starting.push(record.name.as_str());
    let starting_bytes = reservations::reserved_except(&host.layout, &not_starting);
    Ok(Admission {
        branch: record.name.to_string(),
        ceiling_bytes: c.total(),
        buffer_pool_bytes: c.buffer_pool,
        allowance_bytes: c.allowance,
        available_bytes: host.memory.available()?.saturating_add(freed),
        cgroup_room_bytes: host.memory.cgroup_room(),
        running,
        owed_fraction: host.config.memory.owed_fraction,
        starting_bytes,
        headroom_bytes: host.config.memory.headroom.bytes(),
    })
}

/// Admits `record`'s server (taking the host lock).
pub fn admit(host: &Host, record: &BranchRecord, freed: u64) -> Result<reservations::Reservation> {
    let _host = host.host_lock()?;
    admit_locked(host, record, freed)
}

/// `admit` for a caller that already holds the host lock.
pub fn admit_locked(
    host: &Host,
    record: &BranchRecord,
    freed: u64,
) -> Result<reservations::Reservation> {
    let admission = assess(host, record, freed)?;
    admission.check()?;
    reservations::reserve(&host.layout, &record.name, admission.ceiling_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttled_a_quarter_of_the_allowance_below_the_ceiling() {
        let c = Ceiling {
            buffer_pool: 128 << 20,
            allowance: 200 << 20,
            extra: 8 << 20,
        };
        assert_eq!(c.total(), 336 << 20);
        assert_eq!(c.limits(), ((336 - 50) << 20, 336 << 20));
        let huge = Ceiling {
            buffer_pool: u64::MAX,
            allowance: 4,
            extra: 0,
        };
        assert_eq!(huge.limits(), (u64::MAX - 1, u64::MAX));
    }
}
