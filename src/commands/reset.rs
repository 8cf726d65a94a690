//! `reset NAME`: SIGKILL (no graceful shutdown: the data is being thrown away), roll the
//! datadir back to the clean `@init` snapshot, start, wait. Same port, same connection
//! details, and no crash recovery, because `@init` was taken from a clean shutdown.

use super::view::BranchView;
use super::{admit, branch_lock, launch, require_record, server_rss, start_and_wait};
use crate::branch::Phase;
use crate::cli::ResetArgs;
use crate::error::usage;
use crate::host::Host;
use crate::output::Output;
use anyhow::{Context, Result};

pub fn run(host: &Host, args: &ResetArgs, out: &Output) -> Result<()> {
    let view = reset(host, args)?;
    out.note(format!(
        "reset branch {} to its baseline {}",
        view.name, view.baseline
    ));
    out.emit(&view)
}

pub fn reset(host: &Host, args: &ResetArgs) -> Result<BranchView> {
    host.storage.prepare(false)?;
    let name = &args.name;
    let _lock = branch_lock(host, name)?;
    let mut record = require_record(host, name)?;
    if record.phase != Phase::Ready {
        return Err(usage(format!(
            "branch {name} was never finished (its create was interrupted); run `db-branch create {name}`"
        )));
    }
    let l = launch(host, name);
    // Admission before the kill, so a refusal leaves the branch as it was. The old server's
    // memory comes back when it is killed.
    let freed = server_rss(host, name).unwrap_or(0);
    let _reservation = admit(host, &record, freed)?;
    host.services
        .kill(&l)
        .with_context(|| format!("killing the server of branch {name}"))?;
    crate::failpoint::hit("reset:after-kill");
    host.storage
        .rollback_branch(name)
        .with_context(|| format!("rolling branch {name} back to its clean snapshot"))?;
    crate::failpoint::hit("reset:after-rollback");
    if let Some(ttl) = args.ttl {
        record.expires_at = Some(host.clock.now() + ttl.chrono());
        crate::state::save_record(&host.layout, &record)?;
    }
    start_and_wait(host, &mut record).with_context(|| {
        format!("branch {name} was rolled back but its server did not come up; try `db-branch start {name}`")
    })?;
    Ok(BranchView::of(host, &record))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::CreateArgs;
    use crate::commands::create::create;
    use crate::commands::testing::{name, sim_host, OUT};
    use crate::error::{exit_code, EXIT_REFUSED, EXIT_USAGE};
    use crate::service::ServiceState;

    fn make(sim: &crate::commands::testing::SimHost) {
        create(&sim.host, &CreateArgs::named(name("a")), &OUT).unwrap();
    }

    #[test]
    fn reset_kills_rolls_back_and_starts_on_the_same_port() {
        let sim = sim_host();
        make(&sim);
        let before = state_port(&sim);
        sim.storage
            .with_state(|s| s.branches.get_mut(&name("a")).unwrap().1 = true);
        let view = reset(
            &sim.host,
            &ResetArgs {
                name: name("a"),
                ttl: None,
            },
        )
        .unwrap();
        assert_eq!(view.port, before);
        assert_eq!(view.state, ServiceState::Running);
        assert_eq!(sim.services.with_state(|s| (s.kills, s.starts)), (1, 2));
        assert!(sim.storage.with_state(|s| !s.branches[&name("a")].1));
    }

    fn state_port(sim: &crate::commands::testing::SimHost) -> u16 {
        crate::state::load_record(&sim.host.layout, &name("a"))
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
        sim.memory
            .0
            .store(10 << 20, std::sync::atomic::Ordering::SeqCst);
        let e = reset(
            &sim.host,
            &ResetArgs {
                name: name("a"),
                ttl: None,
            },
        )
        .unwrap_err();
        assert_eq!(exit_code(&e), EXIT_REFUSED);
        assert_eq!(sim.services.with_state(|s| s.kills), 0);
        assert!(sim.storage.with_state(|s| s.branches[&name("a")].1));
    }

    #[test]
    fn unknown_branch_is_a_usage_error() {
        let sim = sim_host();
        let e = reset(
            &sim.host,
            &ResetArgs {
                name: name("nope"),
                ttl: None,
            },
        )
        .unwrap_err();
        assert_eq!(exit_code(&e), EXIT_USAGE);
        assert!(e.to_string().contains("db-branch create nope"));
    }
}
