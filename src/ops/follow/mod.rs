//! Baselines that follow a primary (`baseline follow`, `baseline cut`, `baseline unfollow`):
//! a follower is a branch whose datadir was baked from the source at a GTID position and
//! whose server replicates from it ever after. A cut pauses its applier, snapshots its
//! datadir (crash-consistent, the pause as long as a snapshot), resumes it, and makes the
//! snapshot a masked generation off the critical path. The follower itself is never
//! branched from, checkpointed or reset: its data is the source's, unmasked.

mod cut;
mod seed;
mod state;
#[cfg(test)]
mod tests;

pub use cut::{cut, CutDone, CutOptions};
pub use seed::{follow, FollowOptions, Followed};
pub use state::{Following, LastCut};

use crate::host::Host;
use crate::replication::ReplicaStatus;
use crate::store::files;
use anyhow::{Context, Result};
use serde::Serialize;
use state::{load, nothing_followed, replica_source, socket};

/// After the server of `record` started: a follower's replication starts again, with the
/// login db-branch keeps (a no-op for any other branch).
pub fn after_start(host: &Host, record: &crate::branch::BranchRecord) -> Result<()> {
    if record.follows.is_none() {
        return Ok(());
    }
    let Some(following) = load(host)?.filter(|f| f.branch == record.name) else {
        return Ok(());
    };
    let source = replica_source(host, &following)?;
    host.server
        .start_replication(&socket(host, &following), &source)
        .with_context(|| format!("follower {} started, but not its replication", record.name))
}

/// What `baseline follower` shows.
#[derive(Debug, Clone, Serialize)]
pub struct FollowerView {
    pub following: Following,
    pub port: u16,
    /// The follower's server: running, stopped, failed.
    pub state: String,
    pub status: Option<ReplicaStatus>,
    /// Why the status could not be read (its server is down).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_error: Option<String>,
}

pub fn status(host: &Host) -> Result<Option<FollowerView>> {
    let Some(following) = load(host)? else {
        return Ok(None);
    };
    let record = crate::ops::branch::record::require(host, &following.branch)?;
    let l = crate::ops::branch::unit::launch(host, &following.branch);
    let state = host.services.state(&l)?;
    let (status, status_error) = if state.is_up() {
        match host.server.replica_status(&socket(host, &following)) {
            Ok(s) => (Some(s), None),
            Err(e) => (None, Some(format!("{e:#}"))),
        }
    } else {
        (
            None,
            Some(format!(
                "the follower's server is {state}; start it with `db-branch start {}`",
                following.branch
            )),
        )
    };
    Ok(Some(FollowerView {
        port: record.port,
        state: state.to_string(),
        following,
        status,
        status_error,
    }))
}

/// `baseline unfollow`: stops following and destroys the follower (its data is unmasked:
/// it never goes to the trash). Generations already cut stay.
pub fn unfollow(host: &Host) -> Result<Following> {
    host.storage.open()?;
    let following = load(host)?.ok_or_else(nothing_followed)?;
    if following.timer.is_some() {
        // First, so no cut starts on a follower on its way out.
        host.services.schedule_cuts(None)?;
    }
    let _lock = host.branch_lock(&following.branch)?;
    crate::ops::branch::discard::discard(host, &following.branch)?;
    files::remove_file(&host.layout.follow_mask_file())?;
    files::remove_file(&host.layout.follow_secret_file())?;
    files::remove_file(&host.layout.follow_file())?;
    Ok(following)
}
