//! Making, resizing, deleting and describing pools. Slots are made in parallel through
//! the ordinary `create` (so the memory guard counts each); a slot the guard refuses is
//! reported with the guard's reason, and the slots after it are not tried.

use super::make::make_slot;
use super::slots::{self, State};
use super::{
    list, load_spec, pool_dir, recycle, require, save_spec, slot_branch, socket_file, PoolName,
    PoolSpec, MAX_SIZE, POOL_LABEL,
};
use crate::branch::Generation;
use crate::config::Profile;
use crate::error::{usage, Error, Kind};
use crate::host::Host;
use crate::store::{locks, records};
use crate::values::ByteSize;
use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Mutex;

#[derive(Debug, Clone)]
pub struct PoolOptions {
    pub name: PoolName,
    pub size: usize,
    pub baseline: Option<Generation>,
    pub profile: Option<Profile>,
    pub buffer_pool: Option<ByteSize>,
    /// `--dense`: slots are databases in shared servers, `per_server` (default 16) each.
    pub dense: bool,
    pub per_server: Option<usize>,
}

/// One slot as `pool status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SlotRow {
    pub slot: usize,
    pub branch: String,
    pub state: State,
    pub port: Option<u16>,
    /// The claimant's pid (claimed slots).
    pub holder: Option<u32>,
    /// What ends the claim: the holder process's exit, or its connection to the socket.
    pub lease: Option<LeaseKind>,
    pub claimed_at: Option<DateTime<Utc>>,
    /// A dense slot's database (its server is `branch`, shared with other slots).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
}

/// One server of a dense pool.
#[derive(Debug, Clone, Serialize)]
pub struct ServerRow {
    pub branch: String,
    pub port: Option<u16>,
    /// Its slots, first to last.
    pub slots: Vec<usize>,
    /// What the memory guard holds for it once warm (buffer pool and allowance, and
    /// `memory::DENSE_SLOT_ALLOWANCE` for each slot beyond its first), bytes.
    pub memory_bytes: Option<u64>,
    /// What its server holds now (resident), bytes; None when it is not running.
    pub rss_bytes: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LeaseKind {
    Process,
    Connection,
}

/// A pool and its slots.
#[derive(Debug, Clone, Serialize)]
pub struct PoolReport {
    pub name: PoolName,
    pub size: usize,
    pub baseline: Option<Generation>,
    pub ready: usize,
    pub claimed: usize,
    pub recycling: usize,
    /// Whether the recycler process runs.
    pub recycler: bool,
    /// The recycler's claim socket (docs/pools.md, "The claim protocol"); it listens while
    /// the recycler runs.
    pub socket: PathBuf,
    /// Slots the memory guard refused this time (`pool create`, `pool resize`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<usize>,
    /// The guard's reason, when it refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    pub slots: Vec<SlotRow>,
    /// Dense pools: slots per server, and the servers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_server: Option<usize>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<ServerRow>,
}

fn pool_lock(host: &Host, pool: &PoolName) -> Result<locks::LockGuard> {
    locks::lock(
        &host.layout.locks_dir().join(format!("pool-{pool}.lock")),
        "pool",
        host.config.lock_timeout.0,
        &|holder| {
            host.printer
                .note(format!("waiting for {holder} (pool {pool})"))
        },
    )
}

/// Makes the pool's slots that do not exist yet, `jobs` at a time; returns the slots
/// the memory guard refused and its reason.
fn fill(
    host: &Host,
    spec: &PoolSpec,
    dir: &std::path::Path,
) -> Result<(Vec<usize>, Option<String>)> {
    let existing = slots::all(dir)?;
    let missing: Vec<usize> = (1..=spec.size)
        .filter(|n| !existing.contains_key(n))
        .collect();
    if let Some(d) = &spec.dense {
        // A unit of work is a server and every missing slot it holds.
        let mut servers: Vec<usize> = missing.iter().map(|s| d.server_index(*s)).collect();
        servers.dedup();
        let units = servers
            .into_iter()
            .map(|k| (k, d.slots_of(k, spec.size).collect()))
            .collect();
        return make_in_parallel(spec, "servers", units, |k, slots_of| {
            super::dense::make_server(host, spec, k)?;
            for n in slots_of {
                if !slots::all(dir)?.contains_key(n) {
                    slots::add(dir, *n, State::Ready)?;
                }
            }
            Ok(())
        });
    }
    let units = missing.into_iter().map(|n| (n, vec![n])).collect();
    make_in_parallel(spec, "slots", units, |n, _| {
        make_slot(host, spec, n)?;
        slots::add(dir, n, State::Ready)
    })
}

/// Runs `make` over `units` (a unit and the slots it makes), as many at a time as the
/// host has cores (at most 8). A unit the memory guard refuses refuses its slots, and the
/// units after a refusal or a failure are not tried: returns the refused slots and the
/// guard's reason, or the first failure.
fn make_in_parallel(
    spec: &PoolSpec,
    what: &str,
    units: Vec<(usize, Vec<usize>)>,
    make: impl Fn(usize, &[usize]) -> Result<()> + Sync,
) -> Result<(Vec<usize>, Option<String>)> {
    let queue = Mutex::new(std::collections::VecDeque::from(units));
    let refused = Mutex::new((Vec::new(), None::<String>));
    let failed = Mutex::new(None::<anyhow::Error>);
    let jobs = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(8);
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let Some((unit, slots_of)) = queue.lock().unwrap().pop_front() else {
                    return;
                };
                let mut r = refused.lock().unwrap();
                if r.1.is_some() || failed.lock().unwrap().is_some() {
                    r.0.extend(slots_of);
                    continue;
                }
                drop(r);
                match make(unit, &slots_of) {
                    Ok(()) => {}
                    Err(e) if crate::report::classify(&e).0 == Kind::Refused => {
                        let mut r = refused.lock().unwrap();
                        r.0.extend(slots_of);
                        r.1.get_or_insert_with(|| crate::report::chain_text(&e));
                    }
                    Err(e) => {
                        failed.lock().unwrap().get_or_insert(e);
                    }
                }
            });
        }
    });
    if let Some(e) = failed.into_inner().unwrap() {
        return Err(e.context(format!(
            "making the {what} of pool {} (run the command again to finish, or `db-branch \
             pool delete {}`)",
            spec.name, spec.name
        )));
    }
    let (mut refused, why) = refused.into_inner().unwrap();
    refused.sort_unstable();
    Ok((refused, why))
}

/// The dense spec `opts` asks for, or None.
fn dense_spec(host: &Host, opts: &PoolOptions) -> Result<Option<super::dense::DenseSpec>> {
    if !opts.dense {
        if opts.per_server.is_some() {
            return Err(usage("--per-server goes with --dense"));
        }
        return Ok(None);
    }
    let gen = match opts.baseline {
        Some(g) => g,
        None => host.storage.baselines()?.last().copied().ok_or_else(|| {
            Error::new(
                Kind::NotFound,
                "there is no baseline to make the pool's slots of",
            )
            .hint("make one with `db-branch baseline create` or `db-branch bake`")
        })?,
    };
    let databases = host.storage.generation_databases(gen).unwrap_or_default();
    super::dense::plan(&databases, opts.per_server).map(Some)
}

pub fn create_pool(host: &Host, opts: &PoolOptions) -> Result<PoolReport> {
    if opts.size == 0 || opts.size > MAX_SIZE {
        return Err(usage(format!(
            "--size must be between 1 and {MAX_SIZE}, not {}",
            opts.size
        )));
    }
    host.storage.open()?;
    let _lock = pool_lock(host, &opts.name)?;
    let dir = pool_dir(host, &opts.name);
    let dense = dense_spec(host, opts)?;
    let existed = load_spec(&dir)?.is_some();
    let spec = match load_spec(&dir)? {
        Some(existing) => {
            if existing.size != opts.size
                || existing.baseline != opts.baseline
                || existing.dense.is_some() != dense.is_some()
                || (opts.per_server.is_some() && existing.dense != dense)
            {
                return Err(Error::new(
                    Kind::Usage,
                    format!(
                        "pool {} exists with {} {}slot(s) of baseline {}",
                        opts.name,
                        existing.size,
                        existing.dense.as_ref().map_or(String::new(), |d| format!(
                            "dense ({} per server) ",
                            d.per_server
                        )),
                        existing.baseline.map_or("newest".into(), |g| g.to_string())
                    ),
                )
                .hint(format!(
                    "`db-branch pool resize {} --size {}` changes its size",
                    opts.name, opts.size
                ))
                .into());
            }
            existing
        }
        None => {
            let spec = PoolSpec {
                name: opts.name.clone(),
                size: opts.size,
                baseline: opts.baseline,
                profile: opts.profile,
                buffer_pool: opts.buffer_pool,
                created: host.clock.now(),
                dense,
            };
            slots::prepare(&dir)?;
            save_spec(&dir, &spec)?;
            spec
        }
    };
    let (refused, refusal) = match fill(host, &spec, &dir) {
        Ok(r) => r,
        // A pool this command began that cannot be made as asked (a template dense slots
        // cannot copy, a branch of another's in the way) goes again: nothing half-made is
        // left. Other failures keep what was made for a second run to finish.
        Err(e) if !existed && crate::report::classify(&e).0 == Kind::Usage => {
            if let Err(undo) = discard_all(host, &spec, &dir, false) {
                return Err(e.context(format!(
                    "and removing pool {} again failed: {}",
                    spec.name,
                    crate::report::chain_text(&undo)
                )));
            }
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    recycle::ensure_running(host, &spec.name)?;
    let mut report = status(host, &spec.name)?;
    report.refused = refused;
    report.refusal = refusal;
    Ok(report)
}

pub fn resize(host: &Host, pool: &PoolName, size: usize) -> Result<PoolReport> {
    if size == 0 || size > MAX_SIZE {
        return Err(usage(format!(
            "--size must be between 1 and {MAX_SIZE}, not {size}"
        )));
    }
    host.storage.open()?;
    let _lock = pool_lock(host, pool)?;
    let mut spec = require(host, pool)?;
    if spec.dense.is_some() && size != spec.size {
        return Err(Error::new(
            Kind::Usage,
            format!("pool {pool} is dense: its size cannot change in place yet"),
        )
        .hint(format!(
            "delete it and make it again: `db-branch --yes pool delete {pool}` then `db-branch \
             pool create {pool} --size {size} --dense`"
        ))
        .into());
    }
    let dir = pool_dir(host, pool);
    spec.size = size;
    save_spec(&dir, &spec)?;
    // Ready slots beyond the size go now; claimed ones when released (the recycler).
    for n in slots::in_state(&dir, State::Ready)?
        .into_iter()
        .filter(|n| *n > size)
    {
        if slots::transition(&dir, n, State::Ready, State::Recycling)? {
            let name = slot_branch(pool, n);
            let _lock = host.branch_lock(&name)?;
            crate::ops::branch::discard::discard(host, &name)?;
            slots::remove(&dir, n)?;
        }
    }
    let (refused, refusal) = fill(host, &spec, &dir)?;
    recycle::ensure_running(host, pool)?;
    let mut report = status(host, pool)?;
    report.refused = refused;
    report.refusal = refusal;
    Ok(report)
}

/// Deletes every slot (claimed ones too) and the pool; the recycler exits.
pub fn delete_pool(host: &Host, pool: &PoolName) -> Result<bool> {
    host.storage.open()?;
    let _lock = pool_lock(host, pool)?;
    let dir = pool_dir(host, pool);
    let Some(spec) = load_spec(&dir)? else {
        return Ok(false);
    };
    // Without its spec the recycler stops at its next turn; wait for it to let go.
    std::fs::remove_file(dir.join("pool.json"))
        .with_context(|| format!("removing {}", dir.join("pool.json").display()))?;
    let deadline = std::time::Instant::now()
        + host
            .config
            .lock_timeout
            .0
            .max(std::time::Duration::from_secs(30));
    while recycle::is_running(&dir)? {
        if std::time::Instant::now() > deadline {
            // Put the spec back: a half-deleted pool with a running recycler helps nobody.
            save_spec(&dir, &spec)?;
            return Err(Error::new(
                Kind::Refused,
                format!("the recycler of pool {pool} did not stop"),
            )
            .hint(format!("see {}", recycle::log_file(&dir).display()))
            .into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    discard_all(host, &spec, &dir, true)?;
    Ok(true)
}

/// Every branch of the pool (its slots', or its dense servers'), its tokens and its
/// directory; `trash`: the branches go to the trash (`pool delete`), else at once (a
/// create undone). The recycler must not run.
fn discard_all(host: &Host, spec: &PoolSpec, dir: &std::path::Path, trash: bool) -> Result<()> {
    let pool = &spec.name;
    let mut numbers: Vec<usize> = slots::all(dir)?.into_keys().collect();
    numbers.extend(1..=spec.size);
    numbers.sort_unstable();
    numbers.dedup();
    let mut branches: Vec<_> = numbers.iter().map(|n| spec.server_of(*n)).collect();
    branches.dedup();
    for name in branches {
        let _lock = host.branch_lock(&name)?;
        let record = records::load(&host.layout, &name)?
            .filter(|r| r.labels.get(POOL_LABEL) == Some(&pool.to_string()));
        match record {
            Some(r) if trash => {
                crate::ops::branch::dispose::dispose(
                    host,
                    &name,
                    Some(&r),
                    crate::store::trash::Reason::PoolDelete,
                )?;
            }
            Some(_) => crate::ops::branch::discard::discard(host, &name)?,
            None => {}
        }
    }
    for n in numbers {
        slots::remove(dir, n)?;
    }
    std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))
}

pub fn status(host: &Host, pool: &PoolName) -> Result<PoolReport> {
    let spec = require(host, pool)?;
    let dir = pool_dir(host, pool);
    let states = slots::all(&dir)?;
    let mut rows = Vec::new();
    let mut servers: Vec<ServerRow> = Vec::new();
    for (&slot, &state) in &states {
        let name = spec.server_of(slot);
        let record = records::load(&host.layout, &name)?;
        if spec.dense.is_some() {
            match servers.last_mut() {
                Some(s) if s.branch == name.as_str() => s.slots.push(slot),
                _ => servers.push(ServerRow {
                    branch: name.to_string(),
                    port: record.as_ref().map(|r| r.port),
                    slots: vec![slot],
                    memory_bytes: record
                        .as_ref()
                        .map(|r| crate::ops::branch::budget::ceiling(host, r).total()),
                    rss_bytes: crate::ops::branch::unit::server_rss(host, &name),
                }),
            }
        }
        let lease = (state == State::Claimed)
            .then(|| slots::lease(&dir, slot))
            .flatten();
        rows.push(SlotRow {
            slot,
            branch: name.to_string(),
            state,
            port: record.map(|r| r.port),
            holder: lease.as_ref().map(|l| l.claimant()),
            lease: lease.as_ref().map(|l| match l.connection {
                Some(_) => LeaseKind::Connection,
                None => LeaseKind::Process,
            }),
            claimed_at: lease.map(|l| l.claimed_at),
            database: spec.dense.as_ref().map(|d| d.slot_database(slot)),
        });
    }
    let count = |s: State| states.values().filter(|v| **v == s).count();
    Ok(PoolReport {
        name: spec.name.clone(),
        size: spec.size,
        baseline: spec.baseline,
        ready: count(State::Ready),
        claimed: count(State::Claimed),
        recycling: count(State::Recycling),
        recycler: recycle::is_running(&dir)?,
        socket: socket_file(&dir),
        refused: Vec::new(),
        refusal: None,
        slots: rows,
        per_server: spec.dense.as_ref().map(|d| d.per_server),
        servers,
    })
}

/// Every pool, as `status` reports it.
pub fn all(host: &Host) -> Result<Vec<PoolReport>> {
    list(host)?
        .iter()
        .map(|spec| status(host, &spec.name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::claim::{claim, release, ClaimOptions, Released};
    use super::*;
    use crate::ops::create::{create, CreateOptions};
    use crate::ops::testing::sim_host;

    fn opts(name: &str, size: usize) -> PoolOptions {
        PoolOptions {
            name: name.parse().unwrap(),
            size,
            baseline: None,
            profile: None,
            buffer_pool: None,
            dense: false,
            per_server: None,
        }
    }

    fn claim_for(host: &Host, pool: &str, holder: u32) -> Result<super::super::claim::Claimed> {
        claim(
            host,
            &ClaimOptions::for_process(host, &pool.parse().unwrap(), None, holder),
        )
    }

    #[test]
    fn slots_are_protected_labelled_branches_and_a_recycler_is_started() {
        let sim = sim_host();
        let report = create_pool(&sim.host, &opts("ci", 3)).unwrap();
        assert_eq!((report.size, report.ready, report.claimed), (3, 3, 0));
        for n in 1..=3 {
            let r = records::load(&sim.host.layout, &slot_branch(&report.name, n))
                .unwrap()
                .unwrap();
            assert_eq!(r.labels.get(POOL_LABEL).map(String::as_str), Some("ci"));
            assert!(r.is_protected(sim.host.clock.now()) && r.expires_at.is_none());
        }
        let helpers = sim.services.state.lock().unwrap().helpers.clone();
        assert_eq!(helpers, vec![vec!["pool", "recycle", "ci"]]);
        helpers_started_again_when_none_runs(&sim);
        // Idempotent; another size is refused and points at resize.
        assert_eq!(create_pool(&sim.host, &opts("ci", 3)).unwrap().ready, 3);
        let e = create_pool(&sim.host, &opts("ci", 5)).unwrap_err();
        assert!(format!("{e:#}").contains("exists with 3 slot"), "{e:#}");
    }

    /// The sim starts nothing, so each pool command finds no recycler and asks again.
    fn helpers_started_again_when_none_runs(sim: &crate::ops::testing::SimHost) {
        let before = sim.services.state.lock().unwrap().helpers.len();
        status(&sim.host, &"ci".parse().unwrap()).unwrap();
        assert_eq!(
            sim.services.state.lock().unwrap().helpers.len(),
            before,
            "status starts none"
        );
    }

    #[test]
    fn each_slot_is_handed_out_once_and_an_empty_pool_refuses_with_75() {
        let sim = sim_host();
        create_pool(&sim.host, &opts("ci", 2)).unwrap();
        let me = std::process::id();
        let a = claim_for(&sim.host, "ci", me).unwrap();
        let b = claim_for(&sim.host, "ci", me).unwrap();
        assert_ne!(a.slot, b.slot);
        assert_eq!(a.record.name, slot_branch(&a.pool, a.slot));
        let e = claim_for(&sim.host, "ci", me).unwrap_err();
        assert_eq!(crate::report::exit_code(&e), 75, "{e:#}");
        assert!(format!("{e:#}").contains("2 claimed"), "{e:#}");
        // Each won claim measured itself (`metrics`); the refused one did not.
        let kept = crate::store::stats::load(&sim.host.layout).unwrap();
        assert_eq!(kept.operations["claim"].count, 2, "{kept:?}");
        let pool: PoolName = "ci".parse().unwrap();
        assert_eq!(
            release(&sim.host, &pool, a.slot).unwrap(),
            Released::Released
        );
        assert_eq!(
            release(&sim.host, &pool, a.slot).unwrap(),
            Released::NotClaimed
        );
        assert_eq!(
            crate::report::exit_code(&release(&sim.host, &pool, 9).unwrap_err()),
            2
        );
        let s = status(&sim.host, &pool).unwrap();
        assert_eq!((s.ready, s.claimed, s.recycling), (0, 1, 1));
        assert_eq!(s.slots[b.slot - 1].holder, Some(me));
        // A claim needs a live holder.
        assert!(claim_for(&sim.host, "ci", u32::MAX - 1).is_err());
    }

    #[test]
    fn the_recycler_resets_released_slots_and_takes_back_abandoned_ones() {
        let sim = sim_host();
        let pool: PoolName = "ci".parse().unwrap();
        create_pool(&sim.host, &opts("ci", 2)).unwrap();
        let mut holder = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let a = claim_for(&sim.host, "ci", std::process::id()).unwrap();
        let b = claim_for(&sim.host, "ci", holder.id()).unwrap();
        release(&sim.host, &pool, a.slot).unwrap();
        holder.kill().unwrap();
        holder.wait().unwrap();
        let resets_before = sim.services.state.lock().unwrap().kills;
        let mut resets_after = 0;
        std::thread::scope(|s| {
            let recycler = s.spawn(|| super::super::recycler::run(&sim.host, &pool));
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while status(&sim.host, &pool).unwrap().ready < 2 {
                if recycler.is_finished() {
                    panic!("the recycler stopped: {:?}", recycler.join().unwrap());
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "slots did not come back: {:?}",
                    status(&sim.host, &pool).unwrap()
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            assert!(status(&sim.host, &pool).unwrap().recycler);
            resets_after = sim.services.state.lock().unwrap().kills;
            assert!(delete_pool(&sim.host, &pool).unwrap());
            recycler.join().unwrap().unwrap();
        });
        // Both came back through a reset (a kill each), the abandoned one too.
        assert_eq!(resets_after, resets_before + 2);
        let _ = b;
        assert!(records::list(&sim.host.layout).unwrap().is_empty());
    }

    #[test]
    fn slots_the_guard_refuses_are_reported_not_skipped() {
        let sim = sim_host();
        // Room for two slots of 320 MiB (128M buffer pool + 192M allowance) above the
        // 300 MiB headroom.
        sim.memory.set_available((300 + 2 * 320 + 100) << 20);
        let report = create_pool(&sim.host, &opts("ci", 4)).unwrap();
        assert_eq!(report.ready, 2, "{report:?}");
        // Which two depends on which finished first (a starting slot counts whole).
        assert_eq!(report.refused.len(), 2, "{report:?}");
        assert_eq!(report.slots.len(), 2);
        assert!(report.refusal.unwrap().contains("memory"));
    }

    #[test]
    fn a_branch_of_the_same_name_is_not_taken_over() {
        let sim = sim_host();
        create(&sim.host, &CreateOptions::named("ci-1".parse().unwrap())).unwrap();
        let e = create_pool(&sim.host, &opts("ci", 2)).unwrap_err();
        assert!(format!("{e:#}").contains("not a slot of pool ci"), "{e:#}");
    }

    fn dense(name: &str, size: usize, per_server: usize) -> PoolOptions {
        PoolOptions {
            dense: true,
            per_server: Some(per_server),
            ..opts(name, size)
        }
    }

    #[test]
    fn dense_slots_share_servers_and_each_has_its_own_database_and_account() {
        let sim = sim_host();
        let report = create_pool(&sim.host, &dense("ci", 5, 2)).unwrap();
        assert_eq!((report.ready, report.per_server), (5, Some(2)));
        let servers: Vec<_> = report
            .servers
            .iter()
            .map(|s| (s.branch.as_str(), s.slots.clone()))
            .collect();
        assert_eq!(
            servers,
            [
                ("ci-s1", vec![1, 2]),
                ("ci-s2", vec![3, 4]),
                ("ci-s3", vec![5])
            ]
        );
        // The guard counts what each server holds: a slot's allowance for each beyond
        // its first (two slots in ci-s1 and ci-s2, one in ci-s3).
        let memory: Vec<u64> = report
            .servers
            .iter()
            .map(|s| s.memory_bytes.unwrap())
            .collect();
        assert_eq!(memory[0], memory[1]);
        assert_eq!(
            memory[0] - memory[2],
            crate::memory::DENSE_SLOT_ALLOWANCE,
            "{memory:?}"
        );
        assert_eq!(report.slots[3].database.as_deref(), Some("shop_4"));
        assert_eq!(report.slots[3].branch, "ci-s2");
        // One copy of each slot's database in its own server, and one for its spare (built
        // aside, moved in whole); each server checkpointed.
        let copies = sim.server.dense.lock().unwrap().clone();
        let s2 = sim.host.layout.socket(&"ci-s2".parse().unwrap());
        assert_eq!(
            copies[&s2]
                .iter()
                .map(|(d, n)| (d.as_str(), *n))
                .collect::<Vec<_>>(),
            [
                ("dbb_fill_3", 1),
                ("dbb_fill_4", 1),
                ("shop_3", 1),
                ("shop_4", 1)
            ]
        );
        let present = sim.server.dense_present.lock().unwrap().clone();
        assert_eq!(
            present[&s2].iter().map(String::as_str).collect::<Vec<_>>(),
            ["dbb_spare_3", "dbb_spare_4", "shop_3", "shop_4"]
        );
        let r = records::load(&sim.host.layout, &"ci-s3".parse().unwrap())
            .unwrap()
            .unwrap();
        assert!(r
            .checkpoints
            .iter()
            .any(|c| c.tag == super::super::dense::checkpoint_tag()));
        // A claim names the slot's database and account, with a password of its own.
        let a = claim_for(&sim.host, "ci", std::process::id()).unwrap();
        let b = claim_for(&sim.host, "ci", std::process::id()).unwrap();
        let (vars, url) = super::super::claim::variables(&sim.host, &a);
        let var = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        assert_eq!(var("MYSQL_USER").as_deref(), Some("dbb_slot1"));
        assert_eq!(var("DB_DATABASE").as_deref(), Some("shop_1"));
        assert!(url.ends_with("/shop_1"), "{url}");
        let (other, _) = super::super::claim::variables(&sim.host, &b);
        let pw =
            |v: &Vec<(&str, String)>| v.iter().find(|(n, _)| *n == "MYSQL_PWD").unwrap().1.clone();
        assert_ne!(pw(&vars), pw(&other));
        assert_eq!(pw(&vars).len(), 32);
        // A reset swaps that slot's spare in (no copy on the claimant's clock), then makes
        // the next spare; the neighbour is untouched; the password stays.
        let pool: PoolName = "ci".parse().unwrap();
        release(&sim.host, &pool, a.slot).unwrap();
        let spec = require(&sim.host, &pool).unwrap();
        let swaps = *sim.server.dense_swaps.lock().unwrap();
        let refill = super::super::dense::reset_slot(&sim.host, &spec, a.slot).unwrap();
        assert_eq!(*sim.server.dense_swaps.lock().unwrap(), swaps + 1);
        let s1 = sim.host.layout.socket(&"ci-s1".parse().unwrap());
        assert!(!sim.server.dense_present.lock().unwrap()[&s1].contains("dbb_spare_1"));
        refill.run().unwrap();
        let present = sim.server.dense_present.lock().unwrap()[&s1].clone();
        assert_eq!(
            present.iter().map(String::as_str).collect::<Vec<_>>(),
            ["dbb_spare_1", "dbb_spare_2", "shop_1", "shop_2"],
            "the trash dropped, a new spare made"
        );
        let copies = sim.server.dense.lock().unwrap().clone();
        assert_eq!(copies[&s1]["shop_1"], 1);
        assert_eq!(copies[&s1]["dbb_fill_1"], 2);
        assert_eq!(copies[&s1]["dbb_fill_2"], 1);
        let again = claim_for(&sim.host, "ci", std::process::id());
        let _ = again;
        let (vars2, _) = super::super::claim::variables(&sim.host, &a);
        assert_eq!(pw(&vars), pw(&vars2));
        // Dense pools do not resize in place yet, and say what to do.
        let e = resize(&sim.host, &pool, 7).unwrap_err();
        assert!(format!("{e:#}").contains("is dense"), "{e:#}");
        assert!(delete_pool(&sim.host, &pool).unwrap());
        assert!(records::list(&sim.host.layout).unwrap().is_empty());
    }

    #[test]
    fn a_dense_slot_whose_rows_can_be_put_back_keeps_its_tables_and_spare() {
        let sim = sim_host();
        create_pool(&sim.host, &dense("ci", 2, 2)).unwrap();
        *sim.server.dense_row_resets.lock().unwrap() = Some(0);
        let a = claim_for(&sim.host, "ci", std::process::id()).unwrap();
        let pool: PoolName = "ci".parse().unwrap();
        release(&sim.host, &pool, a.slot).unwrap();
        let spec = require(&sim.host, &pool).unwrap();
        let s1 = sim.host.layout.socket(&"ci-s1".parse().unwrap());
        let before = sim.server.dense_present.lock().unwrap()[&s1].clone();
        let copies = sim.server.dense.lock().unwrap()[&s1].clone();
        // Making each spare moved it in whole: those swaps are not resets.
        let swaps = *sim.server.dense_swaps.lock().unwrap();
        let refill = super::super::dense::reset_slot(&sim.host, &spec, a.slot).unwrap();
        refill.run().unwrap();
        assert_eq!(*sim.server.dense_row_resets.lock().unwrap(), Some(1));
        assert_eq!(*sim.server.dense_swaps.lock().unwrap(), swaps, "no swap");
        assert_eq!(
            sim.server.dense_present.lock().unwrap()[&s1],
            before,
            "the spare is still there, nothing was moved"
        );
        assert_eq!(
            sim.server.dense.lock().unwrap()[&s1],
            copies,
            "no copy made, before or after the reply"
        );
        // Declined: the swap, as before.
        *sim.server.dense_row_resets.lock().unwrap() = None;
        super::super::dense::reset_slot(&sim.host, &spec, a.slot)
            .unwrap()
            .run()
            .unwrap();
        // The slot's spare swapped in, the next one made and moved in whole.
        assert_eq!(*sim.server.dense_swaps.lock().unwrap(), swaps + 2);
    }

    #[test]
    fn a_template_dense_slots_cannot_copy_is_refused_and_leaves_nothing() {
        let sim = sim_host();
        *sim.server.dense_refusal.lock().unwrap() = Some("it has events".into());
        let e = create_pool(&sim.host, &dense("ci", 2, 2)).unwrap_err();
        assert_eq!(crate::report::exit_code(&e), 2, "{e:#}");
        assert!(format!("{e:#}").contains("it has events"), "{e:#}");
        assert!(records::list(&sim.host.layout).unwrap().is_empty());
        let e = create_pool(
            &sim.host,
            &PoolOptions {
                per_server: Some(2),
                ..opts("cj", 2)
            },
        )
        .unwrap_err();
        assert!(
            format!("{e:#}").contains("--per-server goes with --dense"),
            "{e:#}"
        );
    }
}
