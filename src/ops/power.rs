//! Start and stop a branch's server; its data is kept either way.

use crate::branch::{BranchName, BranchRecord};
use crate::config::Profile;
use crate::host::Host;
use crate::ops::branch::budget::admit;
use crate::ops::branch::record::require;
use crate::ops::branch::{
    launch::{self},
    unit::launch,
};
use crate::store::records;
use crate::supervisor::ServiceState;
use anyhow::{Context, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Started {
    Started,
    AlreadyRunning,
}

pub fn start(host: &Host, name: &BranchName) -> Result<(Started, BranchRecord)> {
    host.storage.open()?;
    let _lock = host.branch_lock(name)?;
    let mut record = require(host, name)?;
    let state = host.services.state(&launch(host, name))?;
    if state.is_up() {
        return Ok((Started::AlreadyRunning, record));
    }
    if state == ServiceState::Failed && record.profile == Profile::Test {
        host.printer.warn(format!(
            "the server of branch {name} died uncleanly under the test profile (no \
             doublewrite, no fsync): its data may be damaged. `db-branch reset {name}` \
             returns it to its clean baseline."
        ));
    }
    crate::ops::branch::fit::check_server(host, &record)?;
    let _reservation = admit(host, &record, 0)?;
    launch::start_and_wait(host, &mut record)?;
    records::save(&host.layout, &record)?;
    crate::ops::follow::after_start(host, &record)?;
    Ok((Started::Started, record))
}

pub fn stop(host: &Host, name: &BranchName) -> Result<BranchRecord> {
    let _lock = host.branch_lock(name)?;
    let mut record = require(host, name)?;
    host.services
        .stop(&launch(host, name))
        .with_context(|| format!("stopping the server of branch {name}"))?;
    if record.stopped_idle {
        record.stopped_idle = false;
        records::save(&host.layout, &record)?;
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::create::create;
    use crate::ops::create::CreateOptions;
    use crate::ops::testing::{name, sim_host};
    use crate::supervisor::ServiceState;

    #[test]
    fn stop_then_start() {
        let sim = sim_host();
        create(&sim.host, &CreateOptions::named(name("a"))).unwrap();
        stop(&sim.host, &name("a")).unwrap();
        assert_eq!(
            sim.services.with_state(|s| s.units[&name("a")]),
            ServiceState::Stopped
        );
        start(&sim.host, &name("a")).unwrap();
        assert_eq!(
            sim.services.with_state(|s| s.units[&name("a")]),
            ServiceState::Running
        );
        // Starting a running branch is a no-op.
        start(&sim.host, &name("a")).unwrap();
        assert_eq!(sim.services.with_state(|s| s.starts), 2);
    }
}
