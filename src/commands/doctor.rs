//! `doctor`: is this host ready, and how many more branches fit? Read-only.

use crate::check::{Check, Level};
use crate::host::Host;
use crate::output::{table, Human, Output};
use crate::state;
use crate::values::ByteSize;
use anyhow::{anyhow, Result};
use serde::Serialize;
use std::collections::BTreeSet;

/// Memory a running branch costs beyond its buffer pool once warm (measured: 145 MB RSS
/// with a full 128 MB pool; 55 MB idle).
pub const SERVER_OVERHEAD: u64 = 32 << 20;

#[derive(Debug, Serialize)]
pub struct DoctorReport {
    pub checks: Vec<Check>,
    pub available_memory_bytes: u64,
    /// Warm memory per branch at the default buffer pool: buffer pool + server overhead.
    pub per_branch_bytes: u64,
    /// How many more default-sized branches the memory guard would admit, one after another.
    pub branches_that_fit: u64,
    pub free_ports: usize,
}

impl Human for DoctorReport {
    fn human(&self) -> String {
        let rows = self
            .checks
            .iter()
            .map(|c| {
                let mark = match c.level {
                    Level::Ok => "ok",
                    Level::Warn => "WARN",
                    Level::Fail => "FAIL",
                };
                vec![mark.to_string(), c.name.clone(), c.detail.clone()]
            })
            .collect();
        table(&["", "CHECK", "DETAIL"], rows)
    }
}

pub fn report(host: &Host, config_note: &str) -> DoctorReport {
    let c = &host.config;
    let mut checks = vec![Check::ok("config", config_note)];
    checks.push(if nix::unistd::geteuid().is_root() {
        Check::ok("root", "running as root")
    } else {
        Check::fail("root", "db-branch must run as root (sudo)")
    });
    checks.push(match host.server.version() {
        Ok(v) => Check::ok("server", v),
        Err(e) => Check::fail("server", format!("{e:#}")),
    });
    let kind = host.services.kind();
    let systemd_up = crate::service::systemd::is_running();
    checks.push(match (kind, systemd_up) {
        ("systemd", true) => Check::ok("service manager", "systemd (running as init)"),
        ("systemd", false) => Check::fail(
            "service manager",
            "service_manager = \"systemd\" but systemd is not running; use \"auto\" or \"process\"",
        ),
        (k, _) => Check::ok(
            "service manager",
            format!(
                "{k} (systemd {})",
                if systemd_up { "running" } else { "not running" }
            ),
        ),
    });
    checks.extend(host.storage.readiness());

    let available = host.memory.available().unwrap_or(0);
    let headroom = c.memory.headroom.bytes();
    let per_branch = c.mysqld.buffer_pool.bytes() + SERVER_OVERHEAD;
    let fit = available.saturating_sub(headroom) / per_branch;
    checks.push(Check::new(
        "memory",
        if fit == 0 { Level::Fail } else { Level::Ok },
        format!(
            "{} available; a branch needs {} warm ({} buffer pool + {} server) and {} headroom stays free: {fit} more fit",
            ByteSize(available),
            ByteSize(per_branch),
            c.mysqld.buffer_pool,
            ByteSize(SERVER_OVERHEAD),
            c.memory.headroom
        ),
    ));

    let records = state::list_records(&host.layout).unwrap_or_default();
    let held: BTreeSet<u16> = records.iter().map(|r| r.port).collect();
    let free_ports = c
        .ports
        .iter()
        .filter(|p| !held.contains(p) && host.ports.is_free(c.bind_address, *p))
        .count();
    checks.push(Check::new(
        "ports",
        if free_ports == 0 {
            Level::Fail
        } else {
            Level::Ok
        },
        format!(
            "{} on {}: {} held by branches, {free_ports} free",
            c.ports,
            c.bind_address,
            held.len()
        ),
    ));
    if !c.bind_address.is_loopback() {
        checks.push(Check::warn(
            "bind address",
            format!("branch servers listen on {}, not loopback", c.bind_address),
        ));
    }
    checks.push(Check::ok("branches", format!("{} recorded", records.len())));
    DoctorReport {
        checks,
        available_memory_bytes: available,
        per_branch_bytes: per_branch,
        branches_that_fit: fit,
        free_ports,
    }
}

pub fn run(host: &Host, config_note: &str, out: &Output) -> Result<()> {
    let report = report(host, config_note);
    out.emit(&report)?;
    let failed = report
        .checks
        .iter()
        .filter(|c| c.level == Level::Fail)
        .count();
    if failed > 0 {
        return Err(anyhow!("{failed} check(s) failed; see the table above"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::testing::sim_host;

    #[test]
    fn counts_branches_that_fit() {
        let sim = sim_host();
        // 8 GiB available, 300 MiB headroom, 160 MiB per branch.
        let r = report(&sim.host, "defaults");
        assert_eq!(r.per_branch_bytes, 160 << 20);
        assert_eq!(
            r.branches_that_fit,
            ((8u64 << 30) - (300 << 20)) / (160 << 20)
        );
        assert_eq!(r.free_ports, 600);
        sim.memory
            .0
            .store(100 << 20, std::sync::atomic::Ordering::SeqCst);
        let r = report(&sim.host, "defaults");
        assert_eq!(r.branches_that_fit, 0);
        assert!(r
            .checks
            .iter()
            .any(|c| c.name == "memory" && c.level == Level::Fail));
    }
}
