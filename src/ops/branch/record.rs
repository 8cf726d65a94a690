//! A branch's record as operations use it: found or a clear error, and saved together with
//! the copy the storage keeps (ZFS user properties), so the pool alone can rebuild it.

use crate::branch::{BranchName, BranchRecord};
use crate::error::Error;
use crate::error::Kind;
use crate::host::Host;
use crate::store::records;
use anyhow::{Context, Result};

/// The record of `name`, or a not-found error naming the command that would make it.
pub fn require(host: &Host, name: &BranchName) -> Result<BranchRecord> {
    match records::load(&host.layout, name)? {
        Some(r) => Ok(r),
        None => Err(
            Error::new(Kind::NotFound, format!("there is no branch {name}"))
                .hint("see `db-branch list`")
                .hint(format!("create it with `db-branch create {name}`"))
                .into(),
        ),
    }
}

/// Saves the record and the storage's copy of what a rebuild needs (expiry, protection,
/// labels…). Used whenever those change.
pub fn persist(host: &Host, record: &BranchRecord) -> Result<()> {
    records::save(&host.layout, record)?;
    host.storage
        .set_branch_metadata(&record.name, &records::to_metadata(record))
        .context("keeping the branch's metadata with its storage")
}
