//! Taking a branch's datadir at one moment (`create --from`, `checkpoint`): while its server
//! runs, a crash-consistent snapshot after the redo log is flushed (no downtime; whoever
//! starts from it runs InnoDB crash recovery); with `clean`, the server is stopped for the
//! snapshot and started again (a short downtime; no recovery later).

use crate::branch::BranchRecord;
use crate::host::Host;
use crate::ops::branch::budget::admit;
use crate::ops::branch::{
    launch::{self},
    unit::launch,
};
use crate::supervisor::ServiceState;
use anyhow::{Context, Result};
use std::time::Instant;

/// How a snapshot was taken.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Captured {
    /// From a cleanly stopped server: starts without crash recovery.
    pub clean: bool,
    /// How long the source's server was down for it (`clean` of a running server).
    pub downtime_seconds: Option<f64>,
}

/// Runs `snapshot` at a moment that is crash-consistent or clean (see the module). The
/// caller holds the branch's lock.
pub fn capture(
    host: &Host,
    record: &mut BranchRecord,
    clean: bool,
    snapshot: impl FnOnce() -> Result<()>,
) -> Result<Captured> {
    let name = record.name.clone();
    let l = launch(host, &name);
    let state = host.services.state(&l)?;
    if !state.is_up() {
        snapshot()?;
        // A server stopped by `stop`/`stop-idle` shut down cleanly; one that died did not.
        return Ok(Captured {
            clean: state != ServiceState::Failed,
            downtime_seconds: None,
        });
    }
    if !clean {
        host.server
            .flush_logs(&host.layout.socket(&name))
            .with_context(|| format!("flushing the redo log of branch {name}"))?;
        snapshot()?;
        return Ok(Captured {
            clean: false,
            downtime_seconds: None,
        });
    }
    let down = Instant::now();
    host.services
        .stop(&l)
        .with_context(|| format!("stopping the server of branch {name} for a clean copy"))?;
    let taken = snapshot();
    // The source comes back whether or not the snapshot worked.
    let _reservation = admit(host, record, 0)?;
    launch::start_and_wait(host, record)
        .with_context(|| format!("starting branch {name} again after its clean copy"))?;
    let downtime = down.elapsed().as_secs_f64();
    crate::store::records::save(&host.layout, record)?;
    taken?;
    Ok(Captured {
        clean: true,
        downtime_seconds: Some(downtime),
    })
}
