//! Reset a branch: SIGKILL (no graceful shutdown: the data is being thrown away), roll the
//! datadir back to the clean `@init` snapshot, start, wait. Same port, same connection
//! details, and no crash recovery, because `@init` was taken from a clean shutdown.

use crate::branch::after;
use crate::branch::{BranchName, BranchRecord, Phase};
use crate::error::{Error, Kind};
use crate::host::Host;
use crate::ops::branch::budget::admit;
use crate::ops::branch::record::{persist, require};
use crate::ops::branch::{
    launch::{self},
    unit::{launch, server_rss},
};
use crate::store::{records, stats};
use crate::values::Duration;
use anyhow::{Context, Result};

#[derive(Debug, Clone)]
pub struct ResetOptions {
    pub name: BranchName,
    /// Also set the expiry to this long from now.
    pub ttl: Option<Duration>,
    /// Replace the branch's extra option-file lines (migrate-check's instrumentation);
    /// None keeps them.
    pub server_options: Option<Vec<String>>,
    /// `--to TAG`: back to this checkpoint instead of the branch's birth (`@init`).
    pub to: Option<crate::branch::CheckpointTag>,
    /// `--keep`: first keep the state thrown away as checkpoint `before-reset-N`.
    pub keep: bool,
}

impl ResetOptions {
    pub fn named(name: BranchName) -> Self {
        ResetOptions {
            name,
            ttl: None,
            server_options: None,
            to: None,
            keep: false,
        }
    }
}

/// What `reset` did.
#[derive(Debug, Clone)]
pub struct ResetDone {
    pub record: BranchRecord,
    /// The checkpoint that keeps the state thrown away (`--keep`).
    pub kept: Option<crate::branch::CheckpointTag>,
}

pub fn reset(host: &Host, opts: &ResetOptions) -> Result<BranchRecord> {
    reset_keeping(host, opts).map(|d| d.record)
}

pub fn reset_keeping(host: &Host, opts: &ResetOptions) -> Result<ResetDone> {
    let started = std::time::Instant::now();
    let done = reset_timed(host, opts)?;
    stats::observe(&host.layout, stats::Operation::Reset, started.elapsed());
    Ok(done)
}

fn reset_timed(host: &Host, opts: &ResetOptions) -> Result<ResetDone> {
    host.storage.open()?;
    let name = &opts.name;
    // Everything that can be refused is decided before the kill: a refusal leaves the
    // branch running as it was.
    let expires_at = opts
        .ttl
        .map(|ttl| after(host.clock.now(), ttl, "--ttl"))
        .transpose()?;
    let _lock = host.branch_lock(name)?;
    let mut record = require(host, name)?;
    if record.phase != Phase::Ready {
        return Err(Error::new(
            Kind::Usage,
            format!("branch {name} was never finished (its create was interrupted)"),
        )
        .hint(format!(
            "run `db-branch create {name}` to finish or redo it"
        ))
        .into());
    }
    if let Some(source) = &record.follows {
        return Err(Error::new(
            Kind::Usage,
            format!(
                "branch {name} follows {source}: a reset would take it back to its seed, behind what it has applied"
            ),
        )
        .hint("to seed it again: `db-branch baseline unfollow`, then `baseline follow` anew")
        .into());
    }
    crate::ops::branch::fit::check_server(host, &record)?;
    if let Some(tag) = &opts.to {
        super::checkpoint::require_checkpoint(&record, tag)?;
    }
    if let Some(options) = &opts.server_options {
        record.server_options = options.clone();
    }
    let kept = if opts.keep {
        Some(keep_state(host, &mut record)?)
    } else {
        None
    };
    // The old server's memory comes back when it is killed.
    let freed = server_rss(host, name).unwrap_or(0);
    let _reservation = admit(host, &record, freed)?;
    host.services
        .kill(&launch(host, name))
        .with_context(|| format!("killing the server of branch {name}"))?;
    crate::failpoint::hit("reset:after-kill");
    match &opts.to {
        Some(tag) => host
            .storage
            .rollback_to_checkpoint(name, tag)
            .with_context(|| format!("rolling branch {name} back to its checkpoint {tag}"))?,
        None => host
            .storage
            .rollback_branch(name)
            .with_context(|| format!("rolling branch {name} back to its clean snapshot"))?,
    }
    crate::failpoint::hit("reset:after-rollback");
    if expires_at.is_some() {
        record.expires_at = expires_at;
        persist(host, &record)?;
    }
    launch::write_options(host, &record)?;
    let started = launch::start(host, &record).and_then(|()| {
        crate::failpoint::hit("reset:after-start");
        launch::wait_ready(host, &mut record)
    });
    started.with_context(|| {
        format!("branch {name} was rolled back but its server did not come up; try `db-branch start {name}`")
    })?;
    records::save(&host.layout, &record)?;
    Ok(ResetDone { record, kept })
}

/// The branch as it is now, as checkpoint `before-reset-N` (crash-consistent, after the
/// redo log is flushed: every committed transaction is in it), recorded before the kill.
fn keep_state(host: &Host, record: &mut BranchRecord) -> Result<crate::branch::CheckpointTag> {
    let name = record.name.clone();
    let present = host.storage.checkpoints(&name)?;
    let tag = super::checkpoint::next_before_reset(record, &present);
    let captured = crate::ops::branch::capture::capture(host, record, false, || {
        host.storage.checkpoint_branch(&name, &tag)
    })
    .with_context(|| format!("keeping branch {name} as checkpoint {tag} before its reset"))?;
    record.checkpoints.push(crate::branch::Checkpoint {
        tag: tag.clone(),
        created: host.clock.now(),
        clean: captured.clean,
    });
    if let Err(e) = persist(host, record) {
        let _ = host.storage.remove_checkpoint(&name, &tag);
        return Err(e);
    }
    Ok(tag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{EXIT_REFUSED, EXIT_USAGE};
    use crate::ops::create::create;
    use crate::ops::create::CreateOptions;
    use crate::ops::testing::{name, sim_host};
    use crate::report::exit_code;
    use crate::supervisor::ServiceState;

    fn make(sim: &crate::ops::testing::SimHost) {
        create(&sim.host, &CreateOptions::named(name("a"))).unwrap();
    }

    #[test]
    fn reset_kills_rolls_back_and_starts_on_the_same_port() {
        let sim = sim_host();
        make(&sim);
        let before = state_port(&sim);
        sim.storage
            .with_state(|s| s.branches.get_mut(&name("a")).unwrap().1 = true);
        let record = reset(&sim.host, &ResetOptions::named(name("a"))).unwrap();
        assert_eq!(record.port, before);
        assert_eq!(
            sim.services.with_state(|s| s.units[&name("a")]),
            ServiceState::Running
        );
        assert_eq!(sim.services.with_state(|s| (s.kills, s.starts)), (1, 2));
        assert!(sim.storage.with_state(|s| !s.branches[&name("a")].1));
    }

    fn state_port(sim: &crate::ops::testing::SimHost) -> u16 {
        crate::store::records::load(&sim.host.layout, &name("a"))
            .unwrap()
            .unwrap()
            .port
    }

    #[test]
    fn refusal_leaves_the_branch_running_untouched() {
        let sim = sim_host();
        make(&sim);
        sim.storage
            .with_state(|s| s.branches.get_mut(&name("a")).unwrap().1 = true);
        sim.memory.set_available(10 << 20);
        let e = reset(&sim.host, &ResetOptions::named(name("a"))).unwrap_err();
        assert_eq!(exit_code(&e), EXIT_REFUSED);
        assert_eq!(sim.services.with_state(|s| s.kills), 0);
        assert!(sim.storage.with_state(|s| s.branches[&name("a")].1));
    }

    #[test]
    fn unknown_branch_is_a_usage_error() {
        let sim = sim_host();
        let e = reset(&sim.host, &ResetOptions::named(name("nope"))).unwrap_err();
        assert_eq!(exit_code(&e), EXIT_USAGE);
        assert!(crate::report::render(&e).contains("db-branch create nope"));
    }

    #[test]
    fn a_ttl_too_far_is_refused_before_the_branch_is_touched() {
        let sim = sim_host();
        make(&sim);
        let mut opts = ResetOptions::named(name("a"));
        // Past any timestamp (the parser refuses such a duration; a config or caller that
        // builds one otherwise meets this check).
        opts.ttl = Some(crate::values::Duration(std::time::Duration::from_secs(
            1 << 62,
        )));
        let e = reset(&sim.host, &opts).unwrap_err();
        assert_eq!(exit_code(&e), EXIT_USAGE);
        assert_eq!(sim.services.with_state(|s| s.kills), 0);
        assert_eq!(
            sim.services.with_state(|s| s.units[&name("a")]),
            ServiceState::Running,
            "the branch stays up"
        );
    }

    /// Branch `a` of MariaDB 10.11.19's baseline reset with the configured server swapped
    /// for MySQL `version`: refused with exit 2 before any kill; the rendered error.
    fn reset_refused_under_mysql(version: (u32, u32, u32)) -> String {
        let sim = sim_host();
        make(&sim);
        let (major, minor, patch) = version;
        *sim.server.flavour.lock().unwrap() =
            crate::flavour::Flavour::new(crate::flavour::Family::Mysql, major, minor, patch);
        let e = reset(&sim.host, &ResetOptions::named(name("a"))).unwrap_err();
        assert_eq!(exit_code(&e), EXIT_USAGE);
        assert_eq!(
            sim.services.with_state(|s| s.kills),
            0,
            "nothing was touched"
        );
        crate::report::render(&e)
    }

    #[test]
    fn a_branch_of_another_server_is_refused_before_the_kill() {
        let text = reset_refused_under_mysql((9, 7, 4));
        assert!(
            text.contains("MariaDB 10.11.19") && text.contains("MySQL 9.7.4"),
            "{text}"
        );
    }

    #[test]
    fn a_server_release_known_to_crash_is_refused_naming_the_bug() {
        let text = reset_refused_under_mysql((8, 4, 1));
        assert!(
            text.contains("MySQL 8.4.1") && text.contains("115517") && text.contains("8.4.2"),
            "{text}"
        );
    }
}
