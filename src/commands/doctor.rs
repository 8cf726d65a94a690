//! `doctor`: is this host ready, and how many more branches fit? Read-only.

use crate::check::{Check, Level};
use crate::cli::DoctorArgs;
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
    /// What crashes left behind (empty when the scan could not run, see checks).
    pub findings: Vec<Finding>,
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
        let mut out = table(&["", "CHECK", "DETAIL"], rows);
        if !self.findings.is_empty() {
            out += "\n";
            out += &table(
                &["FOUND", "WHAT", "ACTION"],
                self.findings
                    .iter()
                    .map(|f| vec![f.kind.clone(), f.subject.clone(), f.action.clone()])
                    .collect(),
            );
        }
        out
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
        findings: Vec::new(),
    }
}

pub fn run(host: &Host, args: &DoctorArgs, config_note: &str, out: &Output) -> Result<()> {
    let mut report = report(host, config_note);
    // Orphans can be looked for when we are root and the pool is there.
    let ready = !report
        .checks
        .iter()
        .any(|c| c.level == Level::Fail && (c.name == "root" || c.name == "pool"));
    if ready {
        match orphans(host, args.repair) {
            Ok(f) => report.findings = f,
            Err(e) => report
                .checks
                .push(Check::fail("orphans", format!("could not look: {e:#}"))),
        }
    } else if args.repair {
        report.checks.push(Check::fail(
            "orphans",
            "not looked for: run as root with the pool in place (`db-branch init`)",
        ));
    }
    out.emit(&report)?;
    let failed = report
        .checks
        .iter()
        .filter(|c| c.level == Level::Fail)
        .count();
    if failed > 0 {
        return Err(anyhow!("{failed} check(s) failed; see the table above"));
    }
    let open = report
        .findings
        .iter()
        .filter(|f| f.action != "repaired")
        .count();
    if open > 0 {
        return Err(anyhow!(
            "{open} thing(s) left behind by crashes{}",
            if args.repair {
                " could not be repaired; see the table above"
            } else {
                "; `db-branch doctor --repair` removes them"
            }
        ));
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

/// Something a crash or a hand left behind, and what `--repair` did about it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Finding {
    /// half-made branch | record without storage | storage without record | server without
    /// branch | directory without record | stale reservation | unfinished baseline
    pub kind: String,
    pub subject: String,
    /// found | repaired | skipped (in use) | repair failed: …
    pub action: String,
}

/// Looks for orphans and, with `repair`, removes them. Branches another command holds are
/// left alone (their lock says someone is working on them).
pub fn orphans(host: &Host, repair: bool) -> Result<Vec<Finding>> {
    use crate::branch::{BranchName, Phase};
    use std::collections::BTreeSet;
    host.storage.prepare(false)?;
    let mut findings = Vec::new();
    let mut note = |kind: &str, subject: String, outcome: Option<Result<()>>| {
        let action = match outcome {
            None => "found".to_string(),
            Some(Ok(())) => "repaired".to_string(),
            Some(Err(e)) if e.to_string().contains("lock") => "skipped (in use)".to_string(),
            Some(Err(e)) => format!("repair failed: {e:#}"),
        };
        findings.push(Finding {
            kind: kind.into(),
            subject,
            action,
        });
    };
    let try_lock = |name: &BranchName| {
        state::lock(
            &host.layout.branch_lock(name),
            &format!("branch {name}"),
            std::time::Duration::ZERO,
        )
    };
    let fix = |name: &BranchName, f: &dyn Fn() -> Result<()>| -> Option<Result<()>> {
        repair.then(|| {
            let _lock = try_lock(name)?;
            f()
        })
    };

    let records = state::list_records(&host.layout)?;
    let recorded: BTreeSet<BranchName> = records.iter().map(|r| r.name.clone()).collect();
    for r in &records {
        // A record still `creating` whose branch lock nobody holds: its create died.
        if r.phase == Phase::Creating && try_lock(&r.name).is_ok() {
            let outcome = fix(&r.name, &|| super::delete::discard(host, &r.name));
            note("half-made branch", r.name.to_string(), outcome);
        } else if r.phase == Phase::Ready && !host.storage.branch_exists(&r.name)? {
            let outcome = fix(&r.name, &|| super::delete::discard(host, &r.name));
            note("record without storage", r.name.to_string(), outcome);
        }
    }
    for name in host.storage.branches()? {
        if recorded.contains(&name) {
            continue;
        }
        // Storage that carries its own metadata (ZFS user properties) gets its record back;
        // anything else is an orphan.
        let meta = host.storage.get_branch_metadata(&name).unwrap_or_default();
        if let Some(record) = super::create::record_from_metadata(&name, &meta) {
            let outcome = fix(&name, &|| {
                host.server
                    .prepare_runtime_dir(&host.layout.branch_dir(&name))?;
                state::save_record(&host.layout, &record)?;
                super::write_options(host, &record)
            });
            note("record rebuilt from the pool", name.to_string(), outcome);
        } else {
            let outcome = fix(&name, &|| super::delete::discard(host, &name));
            note("storage without record", name.to_string(), outcome);
        }
    }
    for name in host.services.running_branches()? {
        if !recorded.contains(&name) && !host.storage.branch_exists(&name)? {
            let outcome = fix(&name, &|| {
                let l = super::launch(host, &name);
                host.services.kill(&l)?;
                host.services.forget(&l)
            });
            note("server without branch", name.to_string(), outcome);
        }
    }
    if let Ok(entries) = std::fs::read_dir(host.layout.branches_dir()) {
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().to_string_lossy().parse::<BranchName>() else {
                continue;
            };
            // A record the repair above just rebuilt counts too.
            let has_record = recorded.contains(&name)
                || state::load_record(&host.layout, &name)
                    .ok()
                    .flatten()
                    .is_some();
            if !has_record && entry.path().is_dir() {
                let outcome = fix(&name, &|| state::remove_branch_dir(&host.layout, &name));
                note("directory without record", name.to_string(), outcome);
            }
        }
    }
    for (path, pid) in state::stale_reservations(&host.layout) {
        let outcome = repair.then(|| std::fs::remove_file(&path).map_err(Into::into));
        note(
            "stale reservation",
            format!("{} (pid {pid})", path.display()),
            outcome,
        );
    }
    for gen in host.storage.workspaces()? {
        // A build in progress holds the baseline lock.
        let busy = state::lock(
            &host.layout.locks_dir().join("baseline.lock"),
            "baseline",
            std::time::Duration::ZERO,
        );
        let outcome = match busy {
            Ok(_held) if repair => Some(host.storage.abandon_baseline(gen)),
            Ok(_) => None,
            Err(e) => repair.then_some(Err(e)),
        };
        note("unfinished baseline", gen.to_string(), outcome);
    }
    // Locks cannot go stale: they are flock(2) locks, which the kernel releases when their
    // process dies. Their small files stay for the next command on the same name.
    Ok(findings)
}

#[cfg(test)]
mod orphan_tests {
    use super::*;
    use crate::branch::{Generation, Phase};
    use crate::cli::CreateArgs;
    use crate::commands::create::create;
    use crate::commands::testing::{name, sim_host, OUT};
    use crate::service::ServiceState;

    #[test]
    fn finds_and_repairs_every_kind_of_orphan() {
        let sim = sim_host();
        for n in ["ok", "half", "nostorage"] {
            create(&sim.host, &CreateArgs::named(name(n)), &OUT).unwrap();
        }
        // A create that died after its record, a record whose storage vanished, storage
        // and a server nobody records, an unfinished baseline.
        let mut r = state::load_record(&sim.host.layout, &name("half"))
            .unwrap()
            .unwrap();
        r.phase = Phase::Creating;
        state::save_record(&sim.host.layout, &r).unwrap();
        sim.storage.with_state(|s| {
            s.branches.remove(&name("nostorage"));
            s.branches.insert(name("ghost"), (Generation(1), false));
            s.workspaces.insert(Generation(2));
        });
        sim.services
            .with_state(|s| s.units.insert(name("zombie"), ServiceState::Running));

        let found = orphans(&sim.host, false).unwrap();
        let kinds: Vec<(&str, &str)> = found
            .iter()
            .map(|f| (f.kind.as_str(), f.subject.as_str()))
            .collect();
        assert!(kinds.contains(&("half-made branch", "half")), "{kinds:?}");
        assert!(
            kinds.contains(&("record without storage", "nostorage")),
            "{kinds:?}"
        );
        assert!(
            kinds.contains(&("storage without record", "ghost")),
            "{kinds:?}"
        );
        assert!(
            kinds.contains(&("server without branch", "zombie")),
            "{kinds:?}"
        );
        assert!(
            kinds.contains(&("unfinished baseline", "gen-000002")),
            "{kinds:?}"
        );
        assert!(found.iter().all(|f| f.action == "found"));
        assert_eq!(
            sim.storage.with_state(|s| s.branches.len()),
            3,
            "a scan changes nothing"
        );

        let fixed = orphans(&sim.host, true).unwrap();
        assert!(fixed.iter().all(|f| f.action == "repaired"), "{fixed:?}");
        let again = orphans(&sim.host, false).unwrap();
        assert!(again.is_empty(), "{again:?}");
        let names: Vec<String> = state::list_records(&sim.host.layout)
            .unwrap()
            .iter()
            .map(|r| r.name.to_string())
            .collect();
        assert_eq!(names, ["ok"], "the healthy branch stays");
        assert_eq!(
            sim.services
                .with_state(|s| s.units.keys().cloned().collect::<Vec<_>>()),
            vec![name("ok")]
        );
    }
}

#[cfg(test)]
mod rebuild_tests {
    use super::*;
    use crate::cli::CreateArgs;
    use crate::commands::create::{create, storage_metadata};
    use crate::commands::testing::{name, sim_host, OUT};

    #[test]
    fn a_lost_record_comes_back_from_storage_metadata() {
        let sim = sim_host();
        let made = create(&sim.host, &CreateArgs::named(name("a")), &OUT).unwrap();
        let r = state::load_record(&sim.host.layout, &name("a"))
            .unwrap()
            .unwrap();
        sim.storage
            .with_state(|s| s.metadata.insert(name("a"), storage_metadata(&r)));
        std::fs::remove_file(sim.host.layout.record_file(&name("a"))).unwrap();
        let fixed = orphans(&sim.host, true).unwrap();
        assert!(
            fixed
                .iter()
                .any(|f| f.kind == "record rebuilt from the pool" && f.action == "repaired"),
            "{fixed:?}"
        );
        let back = state::load_record(&sim.host.layout, &name("a"))
            .unwrap()
            .unwrap();
        assert_eq!(back.port, made.branch.port);
        assert!(orphans(&sim.host, false).unwrap().is_empty());
    }
}
