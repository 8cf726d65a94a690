//! Expiry and protection: when `gc` may delete a branch, and what keeps it from `delete`.

use crate::branch::{after, resolve, BranchName, BranchRecord, ExpiryRequest, Protection};
use crate::host::Host;
use crate::ops::branch::record::{persist, require};
use crate::values::Duration;
use anyhow::Result;

pub fn extend(host: &Host, name: &BranchName, req: ExpiryRequest) -> Result<BranchRecord> {
    let expires_at = resolve(host.clock.now(), req, None)?;
    let _lock = host.branch_lock(name)?;
    let mut record = require(host, name)?;
    record.expires_at = expires_at;
    persist(host, &record)?;
    Ok(record)
}

/// Protects a branch for `duration` (None: until `unprotect`).
pub fn protect(host: &Host, name: &BranchName, duration: Option<Duration>) -> Result<BranchRecord> {
    let until = duration
        .map(|d| after(host.clock.now(), d, "--for"))
        .transpose()?;
    let _lock = host.branch_lock(name)?;
    let mut record = require(host, name)?;
    record.protection = Some(Protection { until });
    persist(host, &record)?;
    Ok(record)
}

pub fn unprotect(host: &Host, name: &BranchName) -> Result<BranchRecord> {
    let _lock = host.branch_lock(name)?;
    let mut record = require(host, name)?;
    record.protection = None;
    persist(host, &record)?;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::EXIT_USAGE;
    use crate::report::exit_code;
    use chrono::Utc;

    #[test]
    fn huge_durations_are_usage_errors_not_panics() {
        let now = Utc::now();
        // Built directly: the parser refuses them already (values::MAX_DURATION).
        for secs in [1u64 << 62, 300_000 * 366 * 86_400, u64::MAX] {
            let d = Duration(std::time::Duration::from_secs(secs));
            let e = resolve(now, ExpiryRequest::Ttl(d), None).unwrap_err();
            assert_eq!(exit_code(&e), EXIT_USAGE, "{d}");
            assert!(e.to_string().contains("too far"), "{e}");
            let e = resolve(now, ExpiryRequest::Unset, Some(d)).unwrap_err();
            assert!(e.to_string().contains("lifecycle.default_ttl"), "{e}");
        }
        let week: Duration = "7d".parse().unwrap();
        assert_eq!(
            resolve(now, ExpiryRequest::Ttl(week), None).unwrap(),
            Some(now + chrono::Duration::days(7))
        );
        assert_eq!(
            resolve(now, ExpiryRequest::Unset, Some("0s".parse().unwrap())).unwrap(),
            None
        );
    }
}
