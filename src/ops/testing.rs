//! A host made of in-memory parts, for unit tests of operations and commands.

use crate::branch::BranchName;
use crate::clock::SimClock;
use crate::config::Config;
use crate::host::Host;
use crate::layout::Layout;
use crate::memory::SimMemory;
use crate::ports::SimPorts;
use crate::printer::Printer;
use crate::server::sim::SimServer;
use crate::storage::sim::SimStorage;
use crate::supervisor::sim::SimServices;
use std::sync::Arc;

pub struct SimHost {
    pub host: Host,
    pub baker: Arc<crate::bake::SimBaker>,
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

pub fn name(s: &str) -> BranchName {
    s.parse().expect("valid test name")
}

/// A sim host whose clock starts at a fixed moment (snapshot tests need stable times).
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
    let baker = Arc::new(crate::bake::SimBaker::default());
    let memory = Arc::new(SimMemory::new(8 << 30));
    let start = chrono::DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let clock = Arc::new(SimClock(std::sync::Mutex::new(start)));
    let host = Host {
        layout: Layout::new(dir.path()),
        storage: storage.clone(),
        services: services.clone(),
        server: server.clone(),
        baker: baker.clone(),
        memory: memory.clone(),
        ports: Arc::new(SimPorts::default()),
        clock: clock.clone(),
        printer: Printer::new(false, true),
        assume_yes: true,
        caller: crate::access::Caller {
            uid: 0,
            gids: vec![0],
            name: "root".into(),
            cwd: None,
            pid: None,
        },
        config_file: None,
        config,
    };
    SimHost {
        host,
        baker,
        storage,
        services,
        server,
        memory,
        clock,
        _dir: dir,
    }
}
