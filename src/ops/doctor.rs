//! Is this host ready, how many more branches fit, and what did crashes leave behind?
//! Read-only unless asked to repair.

use crate::branch::{BranchName, Phase};
use crate::check::{Check, Level};
use crate::host::Host;
use crate::ops::branch::discard::discard;
use crate::ops::branch::{launch::write_options, unit::launch};
use crate::store::{locks, records, reservations};
use crate::values::ByteSize;
use anyhow::Result;
use serde::Serialize;
use std::collections::BTreeSet;

#[derive(Debug, Clone, Serialize)]
pub struct DoctorReport {
    pub checks: Vec<Check>,
    pub available_memory_bytes: u64,
    /// Warm ceiling of a new branch with the defaults: buffer pool + allowance.
    pub per_branch_bytes: u64,
    /// How many more default-sized branches the memory guard would admit, one after another.
    pub branches_that_fit: u64,
    /// The guard's figures for a new default branch: free memory, what running branches
    /// still owe, reservations, headroom (None when memory could not be read).
    pub memory: Option<crate::memory::Admission>,
    pub free_ports: usize,
    /// What crashes left behind (empty when the scan could not run, see checks).
    pub findings: Vec<Finding>,
}

/// Whether `test`-profile branches will skip their fsyncs (`server::preload`). Not a
/// warning when missing: branches work, they only start slower.
fn fsync_check(host: &Host) -> Check {
    match (
        host.config.mysqld.skip_fsync,
        host.server.fsync_free_library(),
    ) {
        (false, _) => Check::ok("fsync", "mysqld.skip_fsync = false: servers fsync as they like"),
        (true, Some(lib)) => Check::ok(
            "fsync",
            format!("test-profile branches preload {} (fsync is a no-op)", lib.display()),
        ),
        (true, None) => Check::ok(
            "fsync",
            "libeatmydata is not installed: test-profile branches fsync (install libeatmydata1 for faster starts)",
        ),
    }
}

/// Whether MySQL servers will skip their timer calibration (`server::preload`, the
/// `times()` shim). Informational: without it they start 0.1 s slower, nothing else.
fn timer_check(host: &Host) -> Check {
    let shim = host
        .layout
        .lib_dir()
        .join(crate::server::preload::TICKS_SHIM_FILE);
    match (
        host.config.mysqld.skip_timer_calibration,
        crate::server::preload::ticks_shim_built(),
    ) {
        (false, _) => Check::ok(
            "timer calibration",
            "mysqld.skip_timer_calibration = false: MySQL servers calibrate their ticks timer at every start (~0.1 s)",
        ),
        (true, true) => Check::ok(
            "timer calibration",
            format!("MySQL servers preload {} (their start skips ~0.1 s of timer calibration)", shim.display()),
        ),
        (true, false) => Check::ok(
            "timer calibration",
            "this build has no times() shim for this architecture: MySQL servers calibrate their ticks timer at every start (~0.1 s)",
        ),
    }
}

/// The host's readiness, without looking for orphans.
pub fn report(host: &Host, config_note: &str) -> DoctorReport {
    let c = &host.config;
    let mut checks = vec![Check::ok("config", config_note)];
    checks.push(if nix::unistd::geteuid().is_root() {
        Check::ok("root", "running as root")
    } else {
        Check::fail("root", "db-branch must run as root (sudo)")
    });
    checks.push(match host.server.flavour() {
        Ok(f) => Check::ok(
            "server",
            format!("{f} ({})", host.config.mysqld.binary.display()),
        ),
        Err(e) => Check::fail("server", format!("{e:#}")),
    });
    checks.push(fsync_check(host));
    if host.server.flavour().is_ok_and(|f| f.is_mysql()) {
        checks.push(timer_check(host));
    }
    let kind = host.services.kind();
    let systemd_up = crate::supervisor::systemd::is_running();
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
    checks.extend(host.services.readiness());

    let probe = new_branch_probe(host);
    let memory = crate::ops::branch::budget::assess(host, &probe, 0);
    checks.push(match &memory {
        Ok(m) => {
            let mib = crate::memory::mib;
            Check::new(
                "memory",
                if m.more_that_fit() == 0 {
                    Level::Fail
                } else {
                    Level::Ok
                },
                format!(
                    "{} free{}; {} running branch(es) may still take {}; {} headroom; a new \
                     branch may use {} once warm ({} buffer pool + {} allowance): {} more fit",
                    mib(m.free()),
                    match m.cgroup_room_bytes {
                        Some(room) if room < m.available_bytes => " (its cgroup's memory limit)",
                        _ => "",
                    },
                    m.running.len(),
                    mib(m.owed()),
                    mib(m.headroom_bytes),
                    mib(m.ceiling_bytes),
                    ByteSize(m.buffer_pool_bytes),
                    ByteSize(m.allowance_bytes),
                    m.more_that_fit(),
                ),
            )
        }
        Err(e) => Check::fail("memory", format!("{e:#}")),
    });
    let memory = memory.ok();
    let available = memory.as_ref().map_or(0, |m| m.available_bytes);
    let per_branch = memory.as_ref().map_or(0, |m| m.ceiling_bytes);
    let fit = memory.as_ref().map_or(0, |m| m.more_that_fit());

    let records = records::list(&host.layout).unwrap_or_default();
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
    if let Some(check) = pools_check(host) {
        checks.push(check);
    }
    if let Some(check) = trash_check(host) {
        checks.push(check);
    }
    if let Some(check) = follower_check(host) {
        checks.push(check);
    }
    DoctorReport {
        checks,
        available_memory_bytes: available,
        per_branch_bytes: per_branch,
        branches_that_fit: fit,
        memory,
        free_ports,
        findings: Vec::new(),
    }
}

/// A new branch with the defaults, as the guard would see it now (`doctor`, `metrics`).
pub fn new_branch_probe(host: &Host) -> crate::branch::BranchRecord {
    let c = &host.config;
    let mut probe = crate::branch::BranchRecord::new(
        "new-branch".parse().expect("a valid name"),
        crate::branch::Generation(1),
        c.mysqld.buffer_pool,
        host.clock.now(),
    );
    probe.profile = c.mysqld.profile;
    probe.server = host.server.flavour().ok();
    probe
}

/// The pools and whether their recyclers run (a pool without one hands out no recycled
/// slots until the next pool command starts it). None without pools.
fn pools_check(host: &Host) -> Option<Check> {
    let pools = match crate::ops::pool::manage::all(host) {
        Ok(p) if p.is_empty() => return None,
        Ok(p) => p,
        Err(e) => {
            return Some(Check::warn(
                "pools",
                format!("cannot read the pools: {}", crate::report::chain_text(&e)),
            ))
        }
    };
    let idle: Vec<String> = pools
        .iter()
        .filter(|p| !p.recycler && p.recycling > 0)
        .map(|p| p.name.to_string())
        .collect();
    let detail = pools
        .iter()
        .map(|p| {
            format!(
                "{} ({} ready, {} claimed, {} recycling; recycler {})",
                p.name,
                p.ready,
                p.claimed,
                p.recycling,
                if p.recycler { "running" } else { "not running" }
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    Some(if idle.is_empty() {
        Check::ok("pools", detail)
    } else {
        Check::warn(
            "pools",
            format!(
                "{detail} — slots wait for a recycler in {}: any `db-branch pool` command for \
                 it starts one",
                idle.join(", ")
            ),
        )
    })
}

/// What the trash holds (None when it is empty), and entries a crash left half-moved.
fn trash_check(host: &Host) -> Option<Check> {
    let rows = match crate::ops::trash::list(host) {
        Ok(r) if r.is_empty() => return None,
        Ok(r) => r,
        Err(e) => {
            return Some(Check::warn(
                "trash",
                format!("cannot read the trash: {}", crate::report::chain_text(&e)),
            ))
        }
    };
    let held: u64 = rows.iter().filter_map(|r| r.own_bytes).sum();
    let next = rows.iter().map(|r| r.keep_until).min().expect("not empty");
    let detail = format!(
        "{} deleted branch{} kept, holding {} of their own; the next goes at {} (lifecycle.keep_deleted = {}; `db-branch trash` lists them)",
        rows.len(),
        if rows.len() == 1 { "" } else { "es" },
        crate::values::ByteSize(held),
        next.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        host.config.lifecycle.keep_deleted
    );
    let half: Vec<String> = rows
        .iter()
        .filter(|r| !r.complete)
        .map(|r| r.id.to_string())
        .collect();
    Some(if half.is_empty() {
        Check::ok("trash", detail)
    } else {
        Check::warn(
            "trash",
            format!(
                "{detail}; half-moved by a crash, their branch's name since taken by another: {} (`db-branch trash purge ID` removes one)",
                half.join(", ")
            ),
        )
    })
}

/// What is followed and whether it replicates (None: nothing is followed). A broken
/// stream is a warning: branches work, but no new generation can be cut.
fn follower_check(host: &Host) -> Option<Check> {
    let view = match crate::ops::follow::status(host) {
        Ok(v) => v?,
        Err(e) => {
            return Some(Check::warn(
                "follower",
                format!(
                    "cannot read what is followed: {}",
                    crate::report::chain_text(&e)
                ),
            ))
        }
    };
    let who = format!(
        "{} follows {}",
        view.following.branch, view.following.source
    );
    let cut = view.following.last_cut.as_ref().map_or_else(
        || "no generation cut yet".to_string(),
        |c| {
            format!(
                "last cut {} at {}",
                c.generation,
                c.at.format("%Y-%m-%d %H:%M:%S")
            )
        },
    );
    Some(match &view.status {
        Some(s) if s.healthy() => Check::ok(
            "follower",
            format!(
                "{who}, {} behind; {cut}",
                s.lag_seconds
                    .map_or("an unknown time".to_string(), |l| format!("{l} s"))
            ),
        ),
        Some(s) => Check::warn(
            "follower",
            format!(
                "{who} but is not replicating ({}); cuts make no generation until it does; \
                 a source back again is picked up by itself; purged binary logs or diverged \
                 data need `db-branch baseline unfollow`, then `baseline follow` to seed anew",
                s.trouble()
            ),
        ),
        None => Check::warn(
            "follower",
            format!(
                "{who}: {}",
                view.status_error
                    .clone()
                    .unwrap_or_else(|| "no status".into())
            ),
        ),
    })
}

/// The report, and the orphans (repaired with `repair`) when they can be looked for.
pub fn doctor(host: &Host, config_note: &str, repair: bool) -> DoctorReport {
    let mut report = report(host, config_note);
    // Orphans can be looked for when we are root and the pool is there.
    let ready = !report
        .checks
        .iter()
        .any(|c| c.level == Level::Fail && (c.name == "root" || c.name == "pool"));
    if ready {
        match orphans(host, repair) {
            Ok(f) => report.findings = f,
            Err(e) => report
                .checks
                .push(Check::fail("orphans", format!("could not look: {e:#}"))),
        }
    } else if repair {
        report.checks.push(Check::fail(
            "orphans",
            "not looked for: run as root with the pool in place (`db-branch init`)",
        ));
    }
    report
}

/// What a crash or a hand left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum FindingKind {
    #[serde(rename = "half-made branch")]
    HalfMadeBranch,
    #[serde(rename = "record without storage")]
    RecordWithoutStorage,
    #[serde(rename = "record rebuilt from the pool")]
    RecordRebuilt,
    #[serde(rename = "storage without record")]
    StorageWithoutRecord,
    #[serde(rename = "server without branch")]
    ServerWithoutBranch,
    #[serde(rename = "directory without record")]
    DirectoryWithoutRecord,
    #[serde(rename = "stale reservation")]
    StaleReservation,
    #[serde(rename = "unfinished baseline")]
    UnfinishedBaseline,
    /// A `baseline receive` that did not finish (an interrupted push or pull).
    #[serde(rename = "partial receive")]
    PartialReceive,
}

/// What `--repair` did about a finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    Found,
    Repaired,
    /// Another invocation holds it: left alone.
    SkippedInUse,
    /// Under the branch's lock it was no longer so (a command finished meanwhile): left.
    Resolved,
    Failed(String),
}

impl std::fmt::Display for Repair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Repair::Found => f.write_str("found"),
            Repair::Repaired => f.write_str("repaired"),
            Repair::SkippedInUse => f.write_str("skipped (in use)"),
            Repair::Resolved => f.write_str("left (no longer so)"),
            Repair::Failed(e) => write!(f, "repair failed: {e}"),
        }
    }
}

impl Serialize for Repair {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl std::fmt::Display for FindingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = serde_json::to_value(self).expect("plain enum");
        f.write_str(s.as_str().unwrap_or("?"))
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Finding {
    pub kind: FindingKind,
    pub subject: String,
    pub action: Repair,
}

/// Takes the lock (`lock` returns once it is held, and keeps it until this returns), judges
/// the finding again (`still`), and only then repairs: true when it did, false when the
/// finding was no longer so.
fn repair_under_lock<G>(
    lock: impl FnOnce() -> Result<G>,
    still: &dyn Fn() -> Result<bool>,
    f: &dyn Fn() -> Result<()>,
) -> Result<bool> {
    let _held = lock()?;
    if !still()? {
        return Ok(false);
    }
    f().map(|()| true)
}

/// Looks for orphans and, with `repair`, removes them. Branches another command holds are
/// left alone (their lock says someone is working on them).
pub fn orphans(host: &Host, repair: bool) -> Result<Vec<Finding>> {
    host.storage.open()?;
    // A delete a crash interrupted is finished first: its branch is not an orphan.
    crate::ops::trash::list(host)?;
    let mut findings = Vec::new();
    let mut note = |kind: FindingKind, subject: String, outcome: Option<Result<bool>>| {
        let action = match outcome {
            None => Repair::Found,
            Some(Ok(true)) => Repair::Repaired,
            Some(Ok(false)) => Repair::Resolved,
            Some(Err(e)) if locks::is_busy(&e) => Repair::SkippedInUse,
            Some(Err(e)) => Repair::Failed(format!("{e:#}")),
        };
        findings.push(Finding {
            kind,
            subject,
            action,
        });
    };
    let try_lock = |name: &BranchName| {
        locks::try_lock(&host.layout.branch_lock(name), &format!("branch {name}"))
    };
    // What was found without the lock is judged again with it: a command that held the
    // branch a moment ago may have finished it meanwhile (then it is left alone).
    let fix = |name: &BranchName,
               still: &dyn Fn() -> Result<bool>,
               f: &dyn Fn() -> Result<()>|
     -> Option<Result<bool>> {
        repair.then(|| repair_under_lock(|| try_lock(name), still, f))
    };
    let record_of = |name: &BranchName| records::load(&host.layout, name);

    let listed = records::list(&host.layout)?;
    let recorded: BTreeSet<BranchName> = listed.iter().map(|r| r.name.clone()).collect();
    for r in &listed {
        // A record still `creating` whose branch lock nobody holds: its create died.
        if r.phase == Phase::Creating && try_lock(&r.name).is_ok() {
            let half_made = || Ok(record_of(&r.name)?.is_some_and(|r| r.phase == Phase::Creating));
            let outcome = fix(&r.name, &half_made, &|| discard(host, &r.name));
            note(FindingKind::HalfMadeBranch, r.name.to_string(), outcome);
        } else if r.phase == Phase::Ready && !host.storage.branch_exists(&r.name)? {
            let lost = || {
                Ok(record_of(&r.name)?.is_some_and(|r| r.phase == Phase::Ready)
                    && !host.storage.branch_exists(&r.name)?)
            };
            let outcome = fix(&r.name, &lost, &|| discard(host, &r.name));
            note(
                FindingKind::RecordWithoutStorage,
                r.name.to_string(),
                outcome,
            );
        }
    }
    for name in host.storage.branches()? {
        if recorded.contains(&name) {
            continue;
        }
        // Storage that carries its own metadata (ZFS user properties) gets its record back;
        // anything else is an orphan.
        let meta = host.storage.get_branch_metadata(&name).unwrap_or_default();
        let unrecorded = || Ok(record_of(&name)?.is_none() && host.storage.branch_exists(&name)?);
        if let Some(record) = records::from_metadata(&name, &meta) {
            let outcome = fix(&name, &unrecorded, &|| {
                host.server
                    .prepare_runtime_dir(&host.layout.run_dir(&name))?;
                records::save(&host.layout, &record)?;
                write_options(host, &record)
            });
            note(FindingKind::RecordRebuilt, name.to_string(), outcome);
        } else {
            let outcome = fix(&name, &unrecorded, &|| discard(host, &name));
            note(FindingKind::StorageWithoutRecord, name.to_string(), outcome);
        }
    }
    for name in host.services.running_branches()? {
        if !recorded.contains(&name) && !host.storage.branch_exists(&name)? {
            let serverless =
                || Ok(record_of(&name)?.is_none() && !host.storage.branch_exists(&name)?);
            let outcome = fix(&name, &serverless, &|| {
                let l = launch(host, &name);
                host.services.kill(&l)?;
                host.services.forget(&l)
            });
            note(FindingKind::ServerWithoutBranch, name.to_string(), outcome);
        }
    }
    if let Ok(entries) = std::fs::read_dir(host.layout.branches_dir()) {
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().to_string_lossy().parse::<BranchName>() else {
                continue;
            };
            // A record the repair above just rebuilt counts too.
            let has_record = recorded.contains(&name)
                || records::load(&host.layout, &name).ok().flatten().is_some();
            if !has_record && entry.path().is_dir() {
                let unrecorded = || Ok(record_of(&name)?.is_none());
                let outcome = fix(&name, &unrecorded, &|| {
                    records::remove_dir(&host.layout, &name)
                });
                note(
                    FindingKind::DirectoryWithoutRecord,
                    name.to_string(),
                    outcome,
                );
            }
        }
    }
    for (path, pid) in reservations::stale(&host.layout) {
        let outcome = repair.then(|| {
            std::fs::remove_file(&path)
                .map(|()| true)
                .map_err(Into::into)
        });
        note(
            FindingKind::StaleReservation,
            format!("{} (pid {pid})", path.display()),
            outcome,
        );
    }
    for gen in host.storage.workspaces()? {
        // A build in progress holds the baseline lock.
        let busy = locks::try_lock(&host.layout.baseline_lock(), "baseline");
        let outcome = match busy {
            // Judged again under the lock: the build may have sealed it meanwhile.
            Ok(_held) if repair => Some(host.storage.workspaces().and_then(|now| {
                if now.contains(&gen) {
                    host.storage.abandon_baseline(gen).map(|()| true)
                } else {
                    Ok(false)
                }
            })),
            Ok(_) => None,
            Err(e) => repair.then_some(Err(e)),
        };
        note(FindingKind::UnfinishedBaseline, gen.to_string(), outcome);
    }
    let partial = host.storage.partial_receives()?;
    if !partial.is_empty() {
        // A receive in progress holds the baseline lock too.
        let busy = locks::try_lock(&host.layout.baseline_lock(), "baseline");
        let outcome = match busy {
            Ok(_held) if repair => Some(host.storage.abort_received()),
            Ok(_) => None,
            Err(e) => repair.then_some(Err(e)),
        };
        for what in partial {
            let o = outcome.as_ref().map(|r| match r {
                Ok(()) => Ok(true),
                Err(e) => Err(anyhow::anyhow!("{e:#}")),
            });
            note(FindingKind::PartialReceive, what, o);
        }
    }
    // Locks cannot go stale: they are flock(2) locks, which the kernel releases when their
    // process dies. Their small files stay for the next command on the same name.
    Ok(findings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::sim_host;

    #[test]
    fn counts_branches_that_fit() {
        let sim = sim_host();
        // 8 GiB available, 300 MiB headroom, 320 MiB per MariaDB branch (128 + 192).
        let r = report(&sim.host, "defaults");
        assert_eq!(r.per_branch_bytes, 320 << 20);
        assert_eq!(
            r.branches_that_fit,
            ((8u64 << 30) - (300 << 20)) / (320 << 20)
        );
        // A running branch that may still grow owes memory: one fewer fits.
        crate::ops::create::create(
            &sim.host,
            &crate::ops::create::CreateOptions::named(crate::ops::testing::name("a")),
        )
        .unwrap();
        let r = report(&sim.host, "defaults");
        assert_eq!(r.memory.unwrap().owed(), (320 - 50) << 20);
        assert_eq!(
            r.branches_that_fit,
            ((8u64 << 30) - (300 << 20) - (270 << 20)) / (320 << 20)
        );
        assert_eq!(r.free_ports, 599, "the branch holds one port");
        sim.memory.set_available(100 << 20);
        let r = report(&sim.host, "defaults");
        assert_eq!(r.branches_that_fit, 0);
        assert!(r
            .checks
            .iter()
            .any(|c| c.name == "memory" && c.level == Level::Fail));
    }
}

#[cfg(test)]
mod orphan_tests {
    use super::*;

    #[test]
    fn a_finding_put_right_meanwhile_is_left_alone() {
        let repaired = std::cell::Cell::new(false);
        let f = || {
            repaired.set(true);
            Ok(())
        };
        // Found without the lock; under it, the create had finished: nothing is removed.
        let out = repair_under_lock(|| Ok(()), &|| Ok(false), &f).unwrap();
        assert!(!out && !repaired.get());
        let out = repair_under_lock(|| Ok(()), &|| Ok(true), &f).unwrap();
        assert!(out && repaired.get());
    }
    use crate::branch::{Generation, Phase};
    use crate::ops::create::create;
    use crate::ops::create::CreateOptions;
    use crate::ops::testing::{name, sim_host};
    use crate::supervisor::ServiceState;

    #[test]
    fn finds_and_repairs_every_kind_of_orphan() {
        let sim = sim_host();
        for n in ["ok", "half", "nostorage"] {
            create(&sim.host, &CreateOptions::named(name(n))).unwrap();
        }
        // A create that died after its record, a record whose storage vanished, storage
        // and a server nobody records, an unfinished baseline.
        let mut r = records::load(&sim.host.layout, &name("half"))
            .unwrap()
            .unwrap();
        r.phase = Phase::Creating;
        records::save(&sim.host.layout, &r).unwrap();
        sim.storage.with_state(|s| {
            s.branches.remove(&name("nostorage"));
            s.branches.insert(name("ghost"), (Generation(1), false));
            s.workspaces.insert(Generation(2));
        });
        sim.services
            .with_state(|s| s.units.insert(name("zombie"), ServiceState::Running));

        let found = orphans(&sim.host, false).unwrap();
        let kinds: Vec<(FindingKind, &str)> =
            found.iter().map(|f| (f.kind, f.subject.as_str())).collect();
        assert!(
            kinds.contains(&(FindingKind::HalfMadeBranch, "half")),
            "{kinds:?}"
        );
        assert!(
            kinds.contains(&(FindingKind::RecordWithoutStorage, "nostorage")),
            "{kinds:?}"
        );
        assert!(
            kinds.contains(&(FindingKind::StorageWithoutRecord, "ghost")),
            "{kinds:?}"
        );
        assert!(
            kinds.contains(&(FindingKind::ServerWithoutBranch, "zombie")),
            "{kinds:?}"
        );
        assert!(
            kinds.contains(&(FindingKind::UnfinishedBaseline, "gen-000002")),
            "{kinds:?}"
        );
        assert!(found.iter().all(|f| f.action == Repair::Found));
        assert_eq!(
            sim.storage.with_state(|s| s.branches.len()),
            3,
            "a scan changes nothing"
        );

        let fixed = orphans(&sim.host, true).unwrap();
        assert!(
            fixed.iter().all(|f| f.action == Repair::Repaired),
            "{fixed:?}"
        );
        let again = orphans(&sim.host, false).unwrap();
        assert!(again.is_empty(), "{again:?}");
        let names: Vec<String> = records::list(&sim.host.layout)
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
    use crate::ops::create::create;
    use crate::ops::create::CreateOptions;
    use crate::ops::testing::{name, sim_host};
    use crate::store::records::to_metadata as storage_metadata;

    #[test]
    fn a_lost_record_comes_back_from_storage_metadata() {
        let sim = sim_host();
        let made = create(&sim.host, &CreateOptions::named(name("a"))).unwrap();
        let r = records::load(&sim.host.layout, &name("a"))
            .unwrap()
            .unwrap();
        sim.storage
            .with_state(|s| s.metadata.insert(name("a"), storage_metadata(&r)));
        std::fs::remove_file(sim.host.layout.record_file(&name("a"))).unwrap();
        let fixed = orphans(&sim.host, true).unwrap();
        assert!(
            fixed
                .iter()
                .any(|f| f.kind == FindingKind::RecordRebuilt && f.action == Repair::Repaired),
            "{fixed:?}"
        );
        let back = records::load(&sim.host.layout, &name("a"))
            .unwrap()
            .unwrap();
        assert_eq!(back.port, made.record.port);
        assert!(orphans(&sim.host, false).unwrap().is_empty());
    }
}
