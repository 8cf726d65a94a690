//! The supervisor's handle on a branch's server: enough to stop, kill or query it, and
//! what it holds now. The lowest of the shared steps: the budget and the launch use it.

use crate::branch::BranchName;
use crate::host::Host;
use crate::supervisor::Launch;

/// What the supervisor needs to run `name`'s server, without memory ceilings (enough to
/// stop, kill or query it).
pub fn launch(host: &Host, name: &BranchName) -> Launch {
    Launch {
        name: name.clone(),
        binary: host.config.mysqld.binary.clone(),
        option_file: host.layout.option_file(name),
        error_log: host.layout.error_log(name),
        user: host.config.mysqld.user.clone(),
        pid_file: host.layout.pid_file(name),
        supervisor_pid_file: host.layout.branch_dir(name).join("supervisor.pid"),
        memory_high: 0,
        memory_max: 0,
        environment: Vec::new(),
    }
}

pub fn is_up(host: &Host, name: &BranchName) -> bool {
    host.services
        .state(&launch(host, name))
        .is_ok_and(|s| s.is_up())
}

/// Resident memory of a branch's server, if it runs.
pub fn server_rss(host: &Host, name: &BranchName) -> Option<u64> {
    let pid = host.services.main_pid(&launch(host, name)).ok()??;
    host.memory.rss(pid)
}
