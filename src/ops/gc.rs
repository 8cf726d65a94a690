//! Garbage collection: delete expired branches, for PR-close events that never arrived;
//! with selectors also branches older or idler than a threshold, narrowed by labels. A
//! protected branch is never deleted. Each branch is judged again under its own lock, so
//! a TTL renewed by another invocation meanwhile is honoured. What it deletes goes to the
//! trash (`lifecycle.keep_deleted`); what has been in the trash longer goes for good, and
//! so do the `before-reset-N` checkpoints older than that.

use crate::branch::{BranchRecord, Label, Phase};
use crate::host::Host;
use crate::ops::branch::dispose::{dispose, Disposed};
use crate::store::trash::Reason;
use crate::store::{records, stats};
use crate::values::Duration;
use anyhow::Result;
use chrono::{DateTime, Utc};
use serde::Serialize;

#[derive(Debug, Clone, Default)]
pub struct GcOptions {
    pub dry_run: bool,
    pub older_than: Option<Duration>,
    pub idle_for: Option<Duration>,
    pub labels: Vec<Label>,
}

/// What `gc` did with one branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GcAction {
    #[serde(rename = "deleted")]
    Deleted,
    #[serde(rename = "would delete")]
    WouldDelete,
    #[serde(rename = "kept (protected)")]
    KeptProtected,
    #[serde(rename = "error")]
    Error,
    /// Past `lifecycle.keep_deleted` in the trash: destroyed for good.
    #[serde(rename = "purged")]
    Purged,
    #[serde(rename = "would purge")]
    WouldPurge,
}

impl std::fmt::Display for GcAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GcAction::Deleted => "deleted",
            GcAction::WouldDelete => "would delete",
            GcAction::KeptProtected => "kept (protected)",
            GcAction::Error => "error",
            GcAction::Purged => "purged",
            GcAction::WouldPurge => "would purge",
        })
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct GcRow {
    pub name: String,
    /// Why it was chosen: expired, older than …, idle for …
    pub reason: String,
    pub action: GcAction,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The trash entry a deleted branch went to (None: destroyed at once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trash_id: Option<crate::branch::TrashId>,
}

/// What gc decided for one branch under its lock: why, what it did, the trash entry.
type Decided = (Vec<String>, GcAction, Option<crate::branch::TrashId>);

/// Why `record` is due for collection at `now` (empty: it is not).
fn reasons(record: &BranchRecord, opts: &GcOptions, now: DateTime<Utc>) -> Vec<String> {
    if record.phase != Phase::Ready || !record.has_labels(&opts.labels) {
        return Vec::new();
    }
    let mut reasons = Vec::new();
    if record.is_expired(now) {
        reasons.push("expired".to_string());
    }
    if let Some(d) = opts
        .older_than
        .filter(|d| now - record.created >= d.chrono())
    {
        reasons.push(format!("older than {d}"));
    }
    if let Some(d) = opts
        .idle_for
        .filter(|d| now - record.activity.last >= d.chrono())
    {
        reasons.push(format!("idle for {d}"));
    }
    reasons
}

pub fn gc(host: &Host, opts: &GcOptions) -> Result<Vec<GcRow>> {
    let started = std::time::Instant::now();
    let rows = collect(host, opts);
    if !opts.dry_run {
        let outcome = rows.as_ref().ok().map(|rows| {
            let acted = rows
                .iter()
                .filter(|r| matches!(r.action, GcAction::Deleted | GcAction::Purged))
                .count();
            (acted as u64, rows.iter().all(|r| r.error.is_none()))
        });
        stats::finished(
            &host.layout,
            stats::Job::Gc,
            host.clock.now(),
            started.elapsed(),
            outcome,
        );
    }
    rows
}

fn collect(host: &Host, opts: &GcOptions) -> Result<Vec<GcRow>> {
    host.storage.open()?;
    let now = host.clock.now();
    let mut rows = Vec::new();
    for listed in records::list(&host.layout)? {
        if reasons(&listed, opts, now).is_empty() {
            continue;
        }
        let name = listed.name.clone();
        let mut row = GcRow {
            name: name.to_string(),
            reason: String::new(),
            action: GcAction::Error,
            error: None,
            trash_id: None,
        };
        let decided = (|| -> Result<Option<Decided>> {
            let _lock = host.branch_lock(&name)?;
            // Judged again under the lock: another invocation may have renewed, protected
            // or deleted it since the list was read.
            let Some(record) = records::load(&host.layout, &name)? else {
                return Ok(None);
            };
            let why = reasons(&record, opts, now);
            if why.is_empty() {
                return Ok(None);
            }
            let mut trashed = None;
            let action = if record.is_protected(now) {
                GcAction::KeptProtected
            } else if opts.dry_run {
                GcAction::WouldDelete
            } else {
                let reason = if record.is_expired(now) {
                    Reason::Expiry
                } else {
                    Reason::Gc
                };
                if let Disposed::Trashed(e) = dispose(host, &name, Some(&record), reason)? {
                    trashed = Some(e.id);
                }
                crate::failpoint::hit("gc:after-delete");
                GcAction::Deleted
            };
            Ok(Some((why, action, trashed)))
        })();
        match decided {
            Ok(None) => continue,
            Ok(Some((why, action, trashed))) => {
                row.reason = why.join(", ");
                row.action = action;
                row.trash_id = trashed;
            }
            Err(e) => {
                row.reason = reasons(&listed, opts, now).join(", ");
                row.error = Some(format!("{e:#}"));
            }
        }
        rows.push(row);
    }
    rows.extend(expire_kept(host, opts.dry_run)?);
    Ok(rows)
}

/// What was kept for `lifecycle.keep_deleted` and is older: trash entries and
/// `before-reset-N` checkpoints.
fn expire_kept(host: &Host, dry_run: bool) -> Result<Vec<GcRow>> {
    let now = host.clock.now();
    let keep = host.config.lifecycle.keep_deleted;
    let mut rows = Vec::new();
    let reason = format!("kept longer than lifecycle.keep_deleted ({keep})");
    if dry_run {
        for e in crate::store::trash::list(&host.layout)?
            .into_iter()
            .filter(|e| e.keep_until <= now)
        {
            rows.push(GcRow {
                name: e.id.to_string(),
                reason: format!("in the trash: {reason}"),
                action: GcAction::WouldPurge,
                error: None,
                trash_id: Some(e.id),
            });
        }
    } else {
        for (id, error) in crate::ops::trash::purge_expired(host)? {
            rows.push(GcRow {
                name: id.to_string(),
                reason: format!("in the trash: {reason}"),
                action: if error.is_some() {
                    GcAction::Error
                } else {
                    GcAction::Purged
                },
                error,
                trash_id: Some(id),
            });
        }
    }
    let limit = chrono::Duration::from_std(keep.0).unwrap_or(chrono::Duration::MAX);
    for record in records::list(&host.layout)? {
        for c in record
            .checkpoints
            .iter()
            .filter(|c| crate::ops::checkpoint::is_before_reset(&c.tag))
            .filter(|c| now - c.created >= limit)
        {
            let mut row = GcRow {
                name: format!("{}@{}", record.name, c.tag),
                reason: format!("checkpoint of a reset: {reason}"),
                action: if dry_run {
                    GcAction::WouldPurge
                } else {
                    GcAction::Purged
                },
                error: None,
                trash_id: None,
            };
            if !dry_run {
                if let Err(e) = crate::ops::checkpoint::delete(host, &record.name, &c.tag) {
                    row.action = GcAction::Error;
                    row.error = Some(format!("{e:#}"));
                }
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::branch::ExpiryRequest;
    use crate::branch::Protection;
    use crate::ops::create::create;
    use crate::ops::create::CreateOptions;
    use crate::ops::testing::{name, sim_host};

    #[test]
    fn deletes_exactly_the_expired_unprotected_matching_branches() {
        let sim = sim_host();
        let mk = |n: &str, ttl: Option<&str>, label: Option<&str>| {
            let mut a = CreateOptions::named(name(n));
            a.expiry = ttl.map_or(ExpiryRequest::Unset, |t| {
                ExpiryRequest::Ttl(t.parse().unwrap())
            });
            a.labels = label.into_iter().map(|l| l.parse().unwrap()).collect();
            create(&sim.host, &a).unwrap();
        };
        mk("expired", Some("1h"), None);
        mk("expired-pr", Some("1h"), Some("pr=1"));
        mk("guarded", Some("1h"), None);
        mk("fresh", Some("3h"), None);
        mk("forever", None, None);
        let mut g = records::load(&sim.host.layout, &name("guarded"))
            .unwrap()
            .unwrap();
        g.protection = Some(Protection { until: None });
        records::save(&sim.host.layout, &g).unwrap();
        sim.advance(chrono::Duration::hours(2));

        let dry = gc(
            &sim.host,
            &GcOptions {
                dry_run: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(dry.len(), 3);
        assert_eq!(
            sim.storage.with_state(|s| s.branches.len()),
            5,
            "dry run deletes nothing"
        );

        let by_label = GcOptions {
            labels: vec!["pr=1".parse().unwrap()],
            ..Default::default()
        };
        let r = gc(&sim.host, &by_label).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].name.as_str(), r[0].action),
            ("expired-pr", GcAction::Deleted)
        );

        let r = gc(&sim.host, &GcOptions::default()).unwrap();
        let actions: Vec<_> = r
            .iter()
            .map(|r| (r.name.as_str(), r.action.to_string()))
            .collect();
        assert_eq!(
            actions,
            [
                ("expired", "deleted".to_string()),
                ("guarded", "kept (protected)".to_string())
            ]
        );
        let left: Vec<String> = sim
            .storage
            .with_state(|s| s.branches.keys().map(|k| k.to_string()).collect());
        assert_eq!(left, ["forever", "fresh", "guarded"]);

        let old = GcOptions {
            older_than: Some("1h".parse().unwrap()),
            ..Default::default()
        };
        gc(&sim.host, &old).unwrap();
        let left: Vec<String> = sim
            .storage
            .with_state(|s| s.branches.keys().map(|k| k.to_string()).collect());
        assert_eq!(left, ["guarded"]);
    }

    #[test]
    fn a_ttl_renewed_while_gc_waits_for_the_branch_is_honoured() {
        let mut sim = sim_host();
        sim.host.config.lock_timeout = "10s".parse().unwrap();
        let mut a = CreateOptions::named(name("a"));
        a.expiry = ExpiryRequest::Ttl("1h".parse().unwrap());
        create(&sim.host, &a).unwrap();
        sim.advance(chrono::Duration::hours(2));
        // Another invocation (a CI re-run renewing the TTL) holds the branch.
        let held = sim.host.branch_lock(&name("a")).unwrap();
        std::thread::scope(|s| {
            let collecting = s.spawn(|| gc(&sim.host, &GcOptions::default()));
            // gc has read the list (the branch is expired in it) and waits for the lock.
            std::thread::sleep(std::time::Duration::from_millis(300));
            let mut r = records::load(&sim.host.layout, &name("a"))
                .unwrap()
                .unwrap();
            r.expires_at = Some(sim.host.clock.now() + chrono::Duration::days(7));
            records::save(&sim.host.layout, &r).unwrap();
            drop(held);
            let rows = collecting.join().unwrap().unwrap();
            assert!(rows.is_empty(), "{rows:?}");
        });
        assert!(sim
            .storage
            .with_state(|s| s.branches.contains_key(&name("a"))));
    }
}
