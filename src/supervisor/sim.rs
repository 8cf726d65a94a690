//! In-memory service manager for unit tests.

use super::{Launch, ServiceManager, ServiceState};
use crate::branch::BranchName;
use anyhow::{anyhow, Result};
use std::collections::BTreeMap;
use std::sync::Mutex;

#[derive(Default)]
pub struct SimServices {
    pub state: Mutex<SimServiceState>,
}

#[derive(Default, Debug)]
pub struct SimServiceState {
    pub units: BTreeMap<BranchName, ServiceState>,
    pub starts: usize,
    pub kills: usize,
    pub stops: usize,
    pub fail_start: bool,
    /// `start_helper` calls, by arguments.
    pub helpers: Vec<Vec<String>>,
    /// The interval `schedule_cuts` set (None: no timer).
    pub cut_every: Option<std::time::Duration>,
}

impl SimServices {
    pub fn with_state<R>(&self, f: impl FnOnce(&mut SimServiceState) -> R) -> R {
        f(&mut self.state.lock().unwrap())
    }
}

impl ServiceManager for SimServices {
    fn kind(&self) -> &'static str {
        "sim"
    }
    fn install(&self) -> Result<()> {
        Ok(())
    }
    fn enable_timers(&self) -> Result<Vec<String>> {
        Ok(vec!["sim.timer".into()])
    }
    fn schedule_cuts(&self, every: Option<std::time::Duration>) -> Result<Option<String>> {
        self.with_state(|s| s.cut_every = every);
        Ok(every.map(|_| "sim-cut.timer".into()))
    }
    fn start(&self, launch: &Launch) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        if st.fail_start {
            st.units.insert(launch.name.clone(), ServiceState::Failed);
            return Err(anyhow!("simulated start failure"));
        }
        st.starts += 1;
        st.units.insert(launch.name.clone(), ServiceState::Running);
        Ok(())
    }
    fn stop(&self, launch: &Launch) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        st.stops += 1;
        st.units.insert(launch.name.clone(), ServiceState::Stopped);
        Ok(())
    }
    fn kill(&self, launch: &Launch) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        if st.units.get(&launch.name).is_some_and(|s| s.is_up()) {
            st.kills += 1;
            st.units.insert(launch.name.clone(), ServiceState::Failed);
        }
        Ok(())
    }
    fn state(&self, launch: &Launch) -> Result<ServiceState> {
        Ok(*self
            .state
            .lock()
            .unwrap()
            .units
            .get(&launch.name)
            .unwrap_or(&ServiceState::Stopped))
    }
    fn main_pid(&self, launch: &Launch) -> Result<Option<u32>> {
        Ok(self.state(launch)?.is_up().then_some(4242))
    }
    fn start_helper(&self, args: &[String], _log: &std::path::Path) -> Result<()> {
        self.state.lock().unwrap().helpers.push(args.to_vec());
        Ok(())
    }

    fn running_branches(&self) -> Result<Vec<BranchName>> {
        Ok(self
            .state
            .lock()
            .unwrap()
            .units
            .iter()
            .filter(|(_, s)| s.is_up() || **s == ServiceState::Failed)
            .map(|(n, _)| n.clone())
            .collect())
    }
    fn forget(&self, launch: &Launch) -> Result<()> {
        self.state.lock().unwrap().units.remove(&launch.name);
        Ok(())
    }
}
