//! Making one slot: an ordinary branch of the pool's generation, labelled with its pool,
//! protected from gc, never expiring. Used by `pool create`/`resize` (manage) and by the
//! recycler when a slot has gone missing.

use super::{slot_branch, PoolSpec, POOL_LABEL};
use crate::branch::{BranchName, ExpiryRequest};
use crate::branch::{Label, Protection};
use crate::error::{Error, Kind};
use crate::host::Host;
use crate::ops::branch::record::persist;
use crate::ops::create::{create, CreateOptions};
use crate::store::records;
use anyhow::Result;

/// Makes slot `n` of a pool: an ordinary branch, labelled, protected, never expiring.
pub fn make_slot(host: &Host, spec: &PoolSpec, n: usize) -> Result<()> {
    make_branch(host, spec, &slot_branch(&spec.name, n), None)
}

/// Makes branch `name` of a pool (a slot's, or a dense server's holding `dense_slots`) as
/// `make_slot` says.
pub fn make_branch(
    host: &Host,
    spec: &PoolSpec,
    name: &BranchName,
    dense_slots: Option<u32>,
) -> Result<()> {
    let name = name.clone();
    let is_ours =
        |r: &crate::branch::BranchRecord| r.labels.get(POOL_LABEL) == Some(&spec.name.to_string());
    if let Some(other) = records::load(&host.layout, &name)?.filter(|r| !is_ours(r)) {
        return Err(Error::new(
            Kind::Usage,
            format!(
                "branch {name} exists (owned by {}) and is not a slot of pool {}",
                other.owner, spec.name
            ),
        )
        .hint(format!(
            "choose another pool name than {}, or delete branch {name}",
            spec.name
        ))
        .into());
    }
    let created = create(
        host,
        &CreateOptions {
            baseline: spec.baseline,
            buffer_pool: spec.buffer_pool,
            profile: spec.profile,
            labels: vec![Label {
                key: POOL_LABEL.into(),
                value: spec.name.to_string(),
            }],
            expiry: ExpiryRequest::Unset,
            dense_slots,
            ..CreateOptions::named(name.clone())
        },
    )?;
    let mut record = created.record;
    let _lock = host.branch_lock(&name)?;
    record.expires_at = None;
    record.protection = Some(Protection { until: None });
    persist(host, &record)
}
