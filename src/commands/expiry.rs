//! `extend`, `protect`, `unprotect`: a branch's expiry and deletion protection.

use super::view::BranchView;
use super::{branch_lock, expiry, require_record};
use crate::branch::Protection;
use crate::cli::{ExtendArgs, NameArg, ProtectArgs};
use crate::host::Host;
use crate::output::Output;
use crate::state;
use anyhow::Result;

pub fn extend(host: &Host, args: &ExtendArgs, out: &Output) -> Result<()> {
    let _lock = branch_lock(host, &args.name)?;
    let mut record = require_record(host, &args.name)?;
    record.expires_at = expiry(host.clock.now(), &args.expiry, None);
    state::save_record(&host.layout, &record)?;
    if let Some(t) = record.expires_at {
        out.note(format!(
            "branch {} now expires at {}",
            args.name,
            t.to_rfc3339()
        ));
    }
    out.emit(&BranchView::of(host, &record))
}

pub fn protect(host: &Host, args: &ProtectArgs, out: &Output) -> Result<()> {
    let _lock = branch_lock(host, &args.name)?;
    let mut record = require_record(host, &args.name)?;
    let until = args.duration.map(|d| host.clock.now() + d.chrono());
    record.protection = Some(Protection { until });
    state::save_record(&host.layout, &record)?;
    out.note(match until {
        Some(u) => format!("branch {} is protected until {}", args.name, u.to_rfc3339()),
        None => format!(
            "branch {} is protected until `db-branch unprotect`",
            args.name
        ),
    });
    out.emit(&BranchView::of(host, &record))
}

pub fn unprotect(host: &Host, args: &NameArg, out: &Output) -> Result<()> {
    let _lock = branch_lock(host, &args.name)?;
    let mut record = require_record(host, &args.name)?;
    record.protection = None;
    state::save_record(&host.layout, &record)?;
    out.note(format!("branch {} is no longer protected", args.name));
    out.emit(&BranchView::of(host, &record))
}
