//! `start NAME` and `stop NAME`: a branch's server up or down, its data kept.

use super::view::BranchView;
use super::{admit, branch_lock, launch, require_record, start_and_wait};
use crate::cli::NameArg;
use crate::host::Host;
use crate::output::Output;
use anyhow::{Context, Result};

pub fn start(host: &Host, args: &NameArg, out: &Output) -> Result<()> {
    host.storage.prepare(false)?;
    let name = &args.name;
    let _lock = branch_lock(host, name)?;
    let mut record = require_record(host, name)?;
    if host.services.state(&launch(host, name))?.is_up() {
        out.note(format!("branch {name} is already running"));
    } else {
        if host.services.state(&launch(host, name))? == crate::service::ServiceState::Failed
            && record.profile == crate::config::Profile::Test
        {
            out.note(format!(
                "warning: the server of branch {name} died uncleanly under the test profile \
                 (no doublewrite, no fsync): its data may be damaged. `db-branch reset {name}` \
                 returns it to its clean baseline."
            ));
        }
        let _reservation = admit(host, &record, 0)?;
        start_and_wait(host, &mut record)?;
        out.note(format!("started branch {name}"));
    }
    out.emit(&BranchView::of(host, &record))
}

pub fn stop(host: &Host, args: &NameArg, out: &Output) -> Result<()> {
    let name = &args.name;
    let _lock = branch_lock(host, name)?;
    let mut record = require_record(host, name)?;
    host.services
        .stop(&launch(host, name))
        .with_context(|| format!("stopping the server of branch {name}"))?;
    if record.stopped_idle {
        record.stopped_idle = false;
        crate::state::save_record(&host.layout, &record)?;
    }
    out.note(format!("stopped branch {name}; its data is kept"));
    out.emit(&BranchView::of(host, &record))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::CreateArgs;
    use crate::commands::create::create;
    use crate::commands::testing::{name, sim_host, OUT};
    use crate::service::ServiceState;

    #[test]
    fn stop_then_start() {
        let sim = sim_host();
        let a = NameArg { name: name("a") };
        let args = CreateArgs::named(name("a"));
        create(&sim.host, &args, &OUT).unwrap();
        stop(&sim.host, &a, &OUT).unwrap();
        assert_eq!(
            sim.services.with_state(|s| s.units[&name("a")]),
            ServiceState::Stopped
        );
        start(&sim.host, &a, &OUT).unwrap();
        assert_eq!(
            sim.services.with_state(|s| s.units[&name("a")]),
            ServiceState::Running
        );
        // Starting a running branch is a no-op.
        start(&sim.host, &a, &OUT).unwrap();
        assert_eq!(sim.services.with_state(|s| s.starts), 2);
    }
}
