//! Checkpoints: read-only snapshots of a branch to reset to (`reset NAME --to TAG`), kept
//! with it and deleted with it.

use crate::branch::{BranchName, Checkpoint, CheckpointTag, Phase};
use crate::error::{usage, Error, Kind};
use crate::host::Host;
use crate::ops::branch::capture::{capture, Captured};
use crate::ops::branch::record::{persist, require};
use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;

/// One checkpoint as `checkpoints` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointInfo {
    pub branch: BranchName,
    pub tag: CheckpointTag,
    pub created: DateTime<Utc>,
    pub age_seconds: i64,
    pub clean: bool,
    /// Bytes only this checkpoint holds (None where the storage cannot tell).
    pub own_bytes: Option<u64>,
}

/// What `checkpoint` did.
#[derive(Debug, Clone)]
pub struct Made {
    pub checkpoint: Checkpoint,
    pub captured: Captured,
}

/// `checkpoint NAME [TAG]`: the branch now, as a read-only snapshot. Default tag: `c1`,
/// `c2`, … (the next free one).
pub fn make(
    host: &Host,
    name: &BranchName,
    tag: Option<CheckpointTag>,
    clean: bool,
) -> Result<Made> {
    host.storage.open()?;
    let _lock = host.branch_lock(name)?;
    let mut record = require(host, name)?;
    if record.phase != Phase::Ready {
        return Err(usage(format!(
            "branch {name} was never finished (its create was interrupted)"
        )));
    }
    crate::ops::create::refuse_follower(&record, "a checkpoint")?;
    let present = host.storage.checkpoints(name)?;
    let tag = match tag {
        Some(t) => t,
        None => (1..)
            .map(|n| format!("c{n}").parse::<CheckpointTag>().expect("valid tag"))
            .find(|t| !present.contains(t) && !record.checkpoints.iter().any(|c| &c.tag == t))
            .expect("a free tag"),
    };
    if present.contains(&tag) || record.checkpoints.iter().any(|c| c.tag == tag) {
        return Err(Error::new(
            Kind::Usage,
            format!("branch {name} already has a checkpoint {tag}"),
        )
        .hint(format!(
            "pick another tag, or delete it first: `db-branch checkpoint delete {name} {tag}`"
        ))
        .into());
    }
    let captured = capture(host, &mut record, clean, || {
        host.storage.checkpoint_branch(name, &tag)
    })
    .with_context(|| format!("taking checkpoint {name}@{tag}"))?;
    let checkpoint = Checkpoint {
        tag,
        created: host.clock.now(),
        clean: captured.clean,
    };
    record.checkpoints.push(checkpoint.clone());
    if let Err(e) = persist(host, &record) {
        // A snapshot the record does not know would only be found by `checkpoints`.
        let _ = host.storage.remove_checkpoint(name, &checkpoint.tag);
        return Err(e);
    }
    Ok(Made {
        checkpoint,
        captured,
    })
}

/// What `reset --keep` names the state it keeps: `before-reset-N`.
pub const BEFORE_RESET: &str = "before-reset-";

/// A checkpoint `reset --keep` made (gc removes it after `lifecycle.keep_deleted`).
pub fn is_before_reset(tag: &CheckpointTag) -> bool {
    tag.as_str()
        .strip_prefix(BEFORE_RESET)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `before-reset-N` with N one past the highest the branch has (recorded or stored).
pub fn next_before_reset(
    record: &crate::branch::BranchRecord,
    present: &[CheckpointTag],
) -> CheckpointTag {
    let n = record
        .checkpoints
        .iter()
        .map(|c| &c.tag)
        .chain(present)
        .filter(|t| is_before_reset(t))
        .filter_map(|t| t.as_str()[BEFORE_RESET.len()..].parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    format!("{BEFORE_RESET}{}", n + 1)
        .parse()
        .expect("a valid tag")
}

/// `checkpoints NAME`: oldest first, with age and the disk each holds alone.
pub fn list(host: &Host, name: &BranchName) -> Result<Vec<CheckpointInfo>> {
    host.storage.open()?;
    let record = require(host, name)?;
    let now = host.clock.now();
    record
        .checkpoints
        .iter()
        .map(|c| {
            Ok(CheckpointInfo {
                branch: name.clone(),
                tag: c.tag.clone(),
                created: c.created,
                age_seconds: (now - c.created).num_seconds().max(0),
                clean: c.clean,
                own_bytes: host.storage.checkpoint_usage(name, &c.tag)?,
            })
        })
        .collect()
}

/// `checkpoint delete NAME TAG`. Deleting one that is not there is not an error (scripts
/// re-run), but the answer says so.
pub fn delete(host: &Host, name: &BranchName, tag: &CheckpointTag) -> Result<bool> {
    host.storage.open()?;
    let _lock = host.branch_lock(name)?;
    let mut record = require(host, name)?;
    let known = record.checkpoints.iter().any(|c| &c.tag == tag);
    let stored = host.storage.checkpoints(name)?.contains(tag);
    host.storage
        .remove_checkpoint(name, tag)
        .with_context(|| format!("deleting checkpoint {name}@{tag}"))?;
    if known {
        record.checkpoints.retain(|c| &c.tag != tag);
        persist(host, &record)?;
    }
    Ok(known || stored)
}

/// The checkpoint `tag` of the branch, or a not-found error listing the ones it has.
pub fn require_checkpoint<'a>(
    record: &'a crate::branch::BranchRecord,
    tag: &CheckpointTag,
) -> Result<&'a Checkpoint> {
    record
        .checkpoints
        .iter()
        .find(|c| &c.tag == tag)
        .ok_or_else(|| {
            let have: Vec<String> = record
                .checkpoints
                .iter()
                .map(|c| c.tag.to_string())
                .collect();
            Error::new(
                Kind::NotFound,
                format!(
                    "branch {} has no checkpoint {tag} (it has: {})",
                    record.name,
                    if have.is_empty() {
                        "none".to_string()
                    } else {
                        have.join(", ")
                    }
                ),
            )
            .hint(format!(
                "make one with `db-branch checkpoint {} {tag}`",
                record.name
            ))
            .into()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::create::{create, CreateOptions};
    use crate::ops::testing::{name, sim_host};
    use crate::storage::Storage;

    fn tag(s: &str) -> CheckpointTag {
        s.parse().unwrap()
    }

    #[test]
    fn checkpoints_are_numbered_listed_refused_twice_and_deleted() {
        let sim = sim_host();
        create(&sim.host, &CreateOptions::named(name("a"))).unwrap();
        let first = make(&sim.host, &name("a"), None, false).unwrap();
        assert_eq!(first.checkpoint.tag, tag("c1"));
        assert!(!first.checkpoint.clean, "taken from a running server");
        assert_eq!(
            *sim.server.flushes.lock().unwrap(),
            1,
            "redo log flushed first"
        );
        let seeded = make(&sim.host, &name("a"), Some(tag("seeded")), true).unwrap();
        assert!(seeded.checkpoint.clean);
        assert!(seeded.captured.downtime_seconds.is_some());
        let again = make(&sim.host, &name("a"), Some(tag("seeded")), false).unwrap_err();
        assert_eq!(crate::report::exit_code(&again), crate::error::EXIT_USAGE);
        let listed: Vec<String> = list(&sim.host, &name("a"))
            .unwrap()
            .iter()
            .map(|c| c.tag.to_string())
            .collect();
        assert_eq!(listed, ["c1", "seeded"]);
        assert!(delete(&sim.host, &name("a"), &tag("c1")).unwrap());
        assert!(!delete(&sim.host, &name("a"), &tag("c1")).unwrap());
        assert_eq!(
            sim.storage.checkpoints(&name("a")).unwrap(),
            [tag("seeded")]
        );
    }
}
