//! `baseline cut`: the follower's data now, as the next generation, masked.

use super::state::{load, nothing_followed, save, socket, Following, LastCut};
use crate::branch::Generation;
use crate::error::{Error, Kind};
use crate::host::Host;
use crate::replication::{Cut, ReplicaStatus};
use crate::server::Preparation;
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Debug, Clone, Default)]
pub struct CutOptions {
    /// Instead of the masking SQL `baseline follow` was given.
    pub mask_sql: Option<PathBuf>,
}

/// What `baseline cut` reports.
#[derive(Debug, Clone, Serialize)]
pub struct CutDone {
    pub generation: Generation,
    #[serde(flatten)]
    pub cut: Cut,
    pub masked: bool,
    pub seconds: f64,
}

/// `baseline cut`: the follower's data now, as the next generation, masked.
pub fn cut(host: &Host, opts: &CutOptions) -> Result<CutDone> {
    let started = Instant::now();
    host.storage.open()?;
    let mut following = load(host)?.ok_or_else(nothing_followed)?;
    let mask = opts.mask_sql.clone().or_else(|| {
        following
            .mask_sql
            .as_ref()
            .map(|_| host.layout.follow_mask_file())
    });
    if let Some(m) = &mask {
        if !m.is_file() {
            return Err(crate::error::not_found(format!(
                "masking SQL file {} does not exist; no generation was made",
                m.display()
            )));
        }
    }
    let name = following.branch.clone();
    let state = host
        .services
        .state(&crate::ops::branch::unit::launch(host, &name))?;
    if !state.is_up() {
        // After a reboot, say: its unit is not started with the host.
        return Err(Error::new(
            Kind::Failed,
            format!(
                "follower {name} is {state}, so it is not replicating {}; no generation was made",
                following.source
            ),
        )
        .hint(format!(
            "start it with `db-branch start {name}`: it resumes from the position it had \
             applied, then cut again"
        ))
        .into());
    }
    let sock = socket(host, &following);
    let progress = host.printer.progress().labelled("cut");
    let (generation, cut) =
        crate::ops::baseline::build_in(host, "baseline", |work, generation| {
            let _lock = host.branch_lock(&name)?;
            let status = host
                .server
                .replica_status(&sock)
                .with_context(|| format!("reading the replication status of follower {name}"))?;
            if !status.healthy() {
                return Err(broken(&following, &status));
            }
            progress.phase("pause the applier, snapshot, resume", 0);
            let paused = Instant::now();
            let gtid = host.server.pause_applier(&sock)?;
            let taken = (|| -> Result<PathBuf> {
                host.server
                    .flush_logs(&sock)
                    .with_context(|| format!("flushing the redo log of follower {name}"))?;
                host.storage.begin_baseline_from_branch(generation, &name)
            })();
            // The follower goes on replicating whatever happened to the snapshot.
            let resumed = host.server.resume_applier(&sock);
            let pause_seconds = paused.elapsed().as_secs_f64();
            let workspace = taken?;
            resumed?;
            let prep = Preparation {
                initialize: false,
                create_client_user: false,
                sql_files: mask.iter().cloned().collect(),
                from_follower: true,
            };
            let made = host
                .server
                .prepare_baseline(&workspace, work, &prep, &progress)
                .with_context(|| format!("preparing baseline {generation} from follower {name}"));
            progress.finish();
            let cut = Cut {
                source: following.source.clone(),
                gtid,
                lag_seconds: status.lag_seconds,
                pause_seconds,
            };
            Ok((
                workspace,
                made?,
                format!("follow {}", following.source),
                Some(cut.clone()),
                cut,
            ))
        })?;
    following.last_cut = Some(LastCut {
        generation,
        at: host.clock.now(),
        gtid: cut.gtid.clone(),
    });
    save(host, &following)?;
    Ok(CutDone {
        generation,
        cut,
        masked: mask.is_some(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// A follower that is not replicating makes no generation: what it holds is of a moment
/// nobody chose, and may never catch up.
fn broken(following: &Following, status: &ReplicaStatus) -> anyhow::Error {
    let why = status.trouble();
    Error::new(
        Kind::Failed,
        format!(
            "follower {} is not replicating {} ({why}); no generation was made",
            following.branch, following.source
        ),
    )
    .hint("if the source is back, replication resumes by itself; see `db-branch baseline follower`")
    .hint(
        "if the source purged binary logs the follower still needs, or the data diverged: \
         `db-branch baseline unfollow`, then `baseline follow` again to seed it anew",
    )
    .into()
}
