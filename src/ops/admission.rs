//! Memory admission for starting a branch's server, and the reservation that makes the
//! memory it was promised visible to other invocations until it is up.

use super::launch::{instrumentation, is_up};
use crate::branch::BranchRecord;
use crate::host::Host;
use crate::memory::Admission;
use crate::store::{records, reservations};
use anyhow::Result;

fn running_branches(host: &Host) -> usize {
    records::list(&host.layout)
        .unwrap_or_default()
        .iter()
        .filter(|r| is_up(host, &r.name))
        .count()
}

/// Admits `record`'s server (taking the host lock). `freed` is memory this operation
/// releases before the start (a reset kills the old server first).
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
    let pool_growth = if host.storage.ram_backed() {
        host.config.memory.ram_pool_growth.bytes()
    } else {
        0
    };
    let extra = instrumentation(host, record);
    let admission = Admission {
        branch: record.name.to_string(),
        buffer_pool: record.buffer_pool.bytes() + extra,
        headroom: host.config.memory.headroom.bytes(),
        pool_growth,
        starting: reservations::reserved_by_others(&host.layout, &record.name),
        available: host.memory.available()?.saturating_add(freed),
        running_branches: running_branches(host),
    };
    admission.check()?;
    reservations::reserve(
        &host.layout,
        &record.name,
        record.buffer_pool.bytes() + extra + pool_growth,
    )
}
