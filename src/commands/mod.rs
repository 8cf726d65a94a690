//! One file per command. Each validates, takes its locks, plans, then applies through the
//! host's traits, pushing an undo for every side effect.

pub mod bake;
pub mod baseline;
pub mod create;
pub mod delete;
pub mod doctor;
pub mod env;
pub mod expiry;
pub mod gc;
pub mod init;
pub mod list;
pub mod migrate_check;
pub mod power;
pub mod reset;
pub mod stop_idle;
pub mod view;

use crate::branch::{BranchName, BranchRecord};
use crate::error::usage;
use crate::host::Host;
use crate::memory::Admission;
use crate::server::options::{render, ServerSpec};
use crate::service::Launch;
use crate::state::{self, LockGuard};
use anyhow::{Context, Result};

pub fn launch(host: &Host, name: &BranchName) -> Launch {
    Launch {
        name: name.clone(),
        binary: host.config.mysqld.binary.clone(),
        option_file: host.layout.option_file(name),
        error_log: host.layout.error_log(name),
        pid_file: host.layout.pid_file(name),
        supervisor_pid_file: host.layout.branch_dir(name).join("supervisor.pid"),
        memory_high: 0,
        memory_max: 0,
    }
}

/// `launch` with the memory ceilings a branch's record and the config give it.
pub fn launch_for(host: &Host, record: &BranchRecord) -> Launch {
    let mut l = launch(host, &record.name);
    let base = record.buffer_pool.bytes()
        + if record.server_options.is_empty() {
            0
        } else {
            host.server.instrumentation_memory()
        };
    let allowance = host.config.memory.branch_allowance.bytes();
    l.memory_max = base + allowance;
    l.memory_high = base + allowance / 4 * 3;
    l
}

pub fn server_spec(host: &Host, record: &BranchRecord) -> ServerSpec {
    let name = &record.name;
    ServerSpec {
        datadir: host.storage.branch_datadir(name),
        network: Some((host.config.bind_address, record.port)),
        socket: host.layout.socket(name),
        pid_file: host.layout.pid_file(name),
        error_log: host.layout.error_log(name),
        tmpdir: host.layout.branch_dir(name).join("tmp"),
        buffer_pool: record.buffer_pool,
        user: host.config.mysqld.user.clone(),
        extra_args: host.config.mysqld.extra_args.clone(),
        profile: record.profile,
        branch_options: record.server_options.clone(),
    }
}

/// Per-branch settings read by the unit (or the built-in supervisor) at start.
pub fn write_options(host: &Host, record: &BranchRecord) -> Result<()> {
    let path = host.layout.option_file(&record.name);
    state::write_atomic(&path, render(&server_spec(host, record)).as_bytes(), 0o644)
}

pub fn branch_lock(host: &Host, name: &BranchName) -> Result<LockGuard> {
    state::lock(
        &host.layout.branch_lock(name),
        &format!("branch {name}"),
        host.config.lock_timeout.0,
    )
}

/// One baseline build or prune at a time; branch commands are not held up by it.
pub fn baseline_lock(host: &Host) -> Result<LockGuard> {
    state::lock(
        &host.layout.locks_dir().join("baseline.lock"),
        "baseline",
        host.config.lock_timeout.0,
    )
}

pub fn host_lock(host: &Host) -> Result<LockGuard> {
    state::lock(&host.layout.host_lock(), "host", host.config.lock_timeout.0)
}

/// Refuses (exit 75) when the pool is too full for a new branch or baseline: better than a
/// server that cannot write its first file.
pub fn check_free_space(host: &Host) -> Result<()> {
    let info = host.storage.info()?;
    let min = host.config.btrfs.min_free;
    if info.free_bytes < min.bytes() {
        return Err(crate::error::refused(format!(
            "the pool at {} is full: {} free, at least {min} (btrfs.min_free) needed. Delete \
             branches you no longer need (`db-branch list` shows each one's own disk use); \
             space a delete frees appears within seconds. Nothing was changed.",
            info.path.display(),
            crate::values::ByteSize(info.free_bytes)
        )));
    }
    Ok(())
}

/// Existing record, or a clear error naming the command that would make one.
pub fn require_record(host: &Host, name: &BranchName) -> Result<BranchRecord> {
    match state::load_record(&host.layout, name)? {
        Some(r) => Ok(r),
        None => Err(usage(format!(
            "there is no branch {name}; see `db-branch list`, or create it with `db-branch create {name}`"
        ))),
    }
}

fn running_branches(host: &Host) -> usize {
    state::list_records(&host.layout)
        .unwrap_or_default()
        .iter()
        .filter(|r| {
            host.services
                .state(&launch(host, &r.name))
                .is_ok_and(|s| s.is_up())
        })
        .count()
}

/// Memory admission for starting `record`'s server, then a reservation that other
/// invocations count until this server is up. `freed` is memory this operation releases
/// before the start (a reset kills the old server first).
pub fn admit(host: &Host, record: &BranchRecord, freed: u64) -> Result<state::Reservation> {
    let _host = host_lock(host)?;
    admit_locked(host, record, freed)
}

/// `admit` for a caller that already holds the host lock.
pub fn admit_locked(host: &Host, record: &BranchRecord, freed: u64) -> Result<state::Reservation> {
    let pool_growth = if host.storage.ram_backed() {
        host.config.memory.ram_pool_growth.bytes()
    } else {
        0
    };
    // A server with extra instrumentation (migrate-check) needs memory beyond its pool.
    let instrumentation = if record.server_options.is_empty() {
        0
    } else {
        host.server.instrumentation_memory()
    };
    let admission = Admission {
        branch: record.name.to_string(),
        buffer_pool: record.buffer_pool.bytes() + instrumentation,
        headroom: host.config.memory.headroom.bytes(),
        pool_growth,
        starting: state::reserved_by_others(&host.layout, &record.name),
        available: host.memory.available()?.saturating_add(freed),
        running_branches: running_branches(host),
    };
    admission.check()?;
    state::reserve(
        &host.layout,
        &record.name,
        record.buffer_pool.bytes() + instrumentation + pool_growth,
    )
}

/// Starts the server and waits until it answers (the caller has admitted it), then records
/// the start as activity: a branch someone just started is not idle.
pub fn start_and_wait(host: &Host, record: &mut BranchRecord) -> Result<()> {
    let l = launch_for(host, record);
    write_options(host, record)?;
    if record.phase == crate::branch::Phase::Creating {
        crate::failpoint::hit("create:after-options");
    }
    host.services
        .start(&l)
        .with_context(|| format!("starting the server of branch {}", record.name))?;
    crate::failpoint::hit(if record.phase == crate::branch::Phase::Creating {
        "create:after-start"
    } else {
        "reset:after-start"
    });
    let alive = || host.services.state(&l).is_ok_and(|s| s.is_up());
    host.server
        .wait_ready(
            &host.layout.socket(&record.name),
            &l.error_log,
            host.config.mysqld.start_timeout.0,
            &alive,
        )
        .with_context(|| format!("waiting for the server of branch {} to answer", record.name))?;
    record.activity = crate::branch::Activity::started(host.clock.now());
    record.stopped_idle = false;
    if record.phase == crate::branch::Phase::Ready {
        state::save_record(&host.layout, record)?;
    }
    Ok(())
}

/// The user a new branch belongs to: the sudo caller under sudo, else the effective user.
pub fn invoking_user() -> String {
    if let Ok(u) = std::env::var("SUDO_USER") {
        if !u.is_empty() {
            return u;
        }
    }
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map_or_else(|| nix::unistd::geteuid().to_string(), |u| u.name)
}

/// The expiry asked for on the command line, else `default` (zero = none), from `now`.
pub fn expiry(
    now: chrono::DateTime<chrono::Utc>,
    asked: &crate::cli::Expiry,
    default: Option<crate::values::Duration>,
) -> Option<chrono::DateTime<chrono::Utc>> {
    if let Some(t) = asked.expires_at {
        return Some(t.0);
    }
    asked
        .ttl
        .or(default)
        .filter(|d| !d.is_zero())
        .map(|d| now + d.chrono())
}

/// Resident memory of a branch's server, if it runs.
pub fn server_rss(host: &Host, name: &BranchName) -> Option<u64> {
    let pid = host.services.main_pid(&launch(host, name)).ok()??;
    host.memory.rss(pid)
}

#[cfg(test)]
pub mod testing {
    //! A host made of in-memory parts, for unit tests of command logic.
    use super::*;
    use crate::clock::SimClock;
    use crate::config::Config;
    use crate::layout::Layout;
    use crate::memory::SimMemory;
    use crate::ports::SimPorts;
    use crate::server::sim::SimServer;
    use crate::service::sim::SimServices;
    use crate::storage::sim::SimStorage;
    use std::sync::Arc;

    pub struct SimHost {
        pub host: Host,
        pub storage: Arc<SimStorage>,
        pub services: Arc<SimServices>,
        pub server: Arc<SimServer>,
        pub memory: Arc<SimMemory>,
        pub clock: Arc<SimClock>,
        pub _dir: tempfile::TempDir,
    }

    impl SimHost {
        pub fn advance(&self, by: chrono::Duration) {
            let mut now = self.clock.0.lock().unwrap();
            *now += by;
        }
    }

    pub const OUT: crate::output::Output = crate::output::Output {
        json: false,
        quiet: true,
    };

    pub fn name(s: &str) -> BranchName {
        s.parse().expect("valid test name")
    }

    pub fn sim_host() -> SimHost {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            root: dir.path().to_path_buf(),
            lock_timeout: crate::values::Duration(std::time::Duration::from_millis(200)),
            ..Config::default()
        };
        let storage = Arc::new(SimStorage::with_generation(1));
        let services = Arc::new(SimServices::default());
        let server = Arc::new(SimServer::default());
        let memory = Arc::new(SimMemory::new(8 << 30));
        let clock = Arc::new(SimClock(std::sync::Mutex::new(chrono::Utc::now())));
        let host = Host {
            layout: Layout::new(dir.path()),
            storage: storage.clone(),
            services: services.clone(),
            server: server.clone(),
            memory: memory.clone(),
            ports: Arc::new(SimPorts::default()),
            clock: clock.clone(),
            assume_yes: true,
            config,
        };
        SimHost {
            host,
            storage,
            services,
            server,
            memory,
            clock,
            _dir: dir,
        }
    }
}
