//! Memory admission. A server is started only when it fits once every admitted branch is
//! warm: each running branch has a ceiling (buffer pool + a measured per-server allowance,
//! which its cgroup enforces), and what it may still take — its ceiling minus what it holds
//! now — is not free, even if the kernel counts it as available today. The OOM killer
//! silently taking other branches is the failure this exists to prevent.

use crate::config::Profile;
use crate::error::{Error, Kind};
use crate::flavour::Family;
use anyhow::Result;
use serde::Serialize;
#[cfg(any(test, feature = "testing"))]
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(any(test, feature = "testing"))]
use std::sync::Mutex;

pub trait MemoryProbe: Send + Sync {
    /// Bytes the kernel can hand out without swapping (MemAvailable).
    fn available(&self) -> Result<u64>;
    /// What the cgroups db-branch runs in still allow (the tightest `memory.max` or
    /// `memory.limit_in_bytes` minus usage, reclaimable page cache counted free); None when
    /// no cgroup limits memory.
    fn cgroup_room(&self) -> Option<u64>;
    /// Resident memory of a process, if it exists.
    fn rss(&self, pid: u32) -> Option<u64>;
}

/// How far beyond its buffer pool a server grows, measured with a 128M buffer pool
/// (docs/memory.md), in the heavier of two workloads: reading tables larger than the pool,
/// and restoring a 184 MB `mysqldump`/`mariadb-dump` (extended inserts) into it. The
/// restore is the heavier everywhere — MariaDB 10.11 and 11.8 held 243–249 MB of anonymous
/// memory (121 MB over the pool) in either profile, MySQL 9.7 304 MB in the test profile
/// (176 MB over) and 360 MB in the durable one (232 MB over) — and what it takes stays
/// taken. Each allowance adds 64 MB to that for clients sending larger statements.
/// What each slot of a dense pool's server beyond the first adds to the server's ceiling:
/// a slot is a client of its own, with its sessions, sorts and temporary tables. Measured
/// (docs/memory.md): 16 slots of the seed schema on one server, each running a test-like
/// loop at once (groupings, a sorted join, a temporary table, updates and inserts) for
/// 20 s, took 4.4 MiB (MariaDB 10.11) and 7.0 MiB (MySQL 9.7) more per slot at their
/// peak than one slot did; twice the larger.
pub const DENSE_SLOT_ALLOWANCE: u64 = 16 << 20;

pub fn measured_allowance(family: Family, profile: Profile) -> u64 {
    match (family, profile) {
        (Family::Mariadb, _) => 192 << 20,
        (Family::Mysql, Profile::Test) => 240 << 20,
        (Family::Mysql, Profile::Durable) => 296 << 20,
    }
}

pub struct SysinfoMemory;

impl MemoryProbe for SysinfoMemory {
    fn available(&self) -> Result<u64> {
        let mut sys = sysinfo::System::new()?;
        sys.refresh_memory();
        Ok(sys.available_memory())
    }

    fn cgroup_room(&self) -> Option<u64> {
        cgroup_room_of_self()
    }

    fn rss(&self, pid: u32) -> Option<u64> {
        let mut sys = sysinfo::System::new().ok()?;
        let pid = sysinfo::Pid::from_u32(pid);
        sys.refresh_processes_specifics(
            sysinfo::ProcessesToUpdate::Some(&[pid]),
            true,
            sysinfo::ProcessRefreshKind::nothing().with_memory(),
        );
        sys.process(pid).map(|p| p.memory())
    }
}

/// The room left under the tightest memory limit among this process's cgroup and its
/// ancestors, v2 or v1.
fn cgroup_room_of_self() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut best: Option<u64> = None;
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let (base, files) = if controllers.is_empty() {
            (
                std::path::PathBuf::from("/sys/fs/cgroup"),
                ("memory.max", "memory.current", "inactive_file "),
            )
        } else if controllers.split(',').any(|c| c == "memory") {
            (
                std::path::PathBuf::from("/sys/fs/cgroup/memory"),
                (
                    "memory.limit_in_bytes",
                    "memory.usage_in_bytes",
                    "total_inactive_file ",
                ),
            )
        } else {
            continue;
        };
        let mut dir = base.join(path.trim_start_matches('/'));
        loop {
            let limit = std::fs::read_to_string(dir.join(files.0))
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok());
            // v1 says "no limit" with a huge number, v2 with "max".
            if let Some(limit) = limit.filter(|l| *l < (1u64 << 60)) {
                let usage = std::fs::read_to_string(dir.join(files.1))
                    .ok()
                    .and_then(|t| t.trim().parse::<u64>().ok())
                    .unwrap_or(0);
                let reclaimable = std::fs::read_to_string(dir.join("memory.stat"))
                    .ok()
                    .and_then(|t| {
                        t.lines()
                            .find_map(|l| l.strip_prefix(files.2))
                            .and_then(|n| n.trim().parse::<u64>().ok())
                    })
                    .unwrap_or(0);
                let room = limit.saturating_sub(usage.saturating_sub(reclaimable));
                best = Some(best.map_or(room, |b| b.min(room)));
            }
            if dir == base || !dir.pop() {
                break;
            }
        }
    }
    best
}

#[cfg(any(test, feature = "testing"))]
/// Fixed figures, for unit tests.
pub struct SimMemory {
    pub available: AtomicU64,
    /// Resident memory every simulated server reports.
    pub rss: AtomicU64,
    pub cgroup_room: Mutex<Option<u64>>,
}

#[cfg(any(test, feature = "testing"))]
impl SimMemory {
    pub fn new(bytes: u64) -> Self {
        SimMemory {
            available: AtomicU64::new(bytes),
            rss: AtomicU64::new(50 << 20),
            cgroup_room: Mutex::new(None),
        }
    }
    pub fn set_available(&self, bytes: u64) {
        self.available.store(bytes, Ordering::SeqCst);
    }
}

#[cfg(any(test, feature = "testing"))]
impl MemoryProbe for SimMemory {
    fn available(&self) -> Result<u64> {
        Ok(self.available.load(Ordering::SeqCst))
    }
    fn cgroup_room(&self) -> Option<u64> {
        *self.cgroup_room.lock().unwrap()
    }
    fn rss(&self, _pid: u32) -> Option<u64> {
        Some(self.rss.load(Ordering::SeqCst))
    }
}

/// A running branch's claim on memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Commitment {
    pub branch: String,
    /// Buffer pool + allowance (+ instrumentation, + RAM-pool growth): the most it may use.
    pub ceiling_bytes: u64,
    /// What its server holds now.
    pub rss_bytes: u64,
}

impl Commitment {
    /// What it may still take.
    pub fn owed(&self) -> u64 {
        self.ceiling_bytes.saturating_sub(self.rss_bytes)
    }
}

/// The figures behind an admission decision; shown in a refusal, `doctor` and `status`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Admission {
    /// The branch asking to start, and the most it may use once warm.
    pub branch: String,
    pub ceiling_bytes: u64,
    /// Of it: the buffer pool and the allowance (the rest is instrumentation or RAM pool).
    pub buffer_pool_bytes: u64,
    pub allowance_bytes: u64,
    /// MemAvailable, plus what this operation frees first (a reset's old server).
    pub available_bytes: u64,
    /// What the enclosing cgroups still allow, when they limit memory.
    pub cgroup_room_bytes: Option<u64>,
    /// Every other running branch.
    pub running: Vec<Commitment>,
    /// Share of what they still owe that counts as taken (`memory.owed_fraction`).
    pub owed_fraction: f64,
    /// Promised to servers other invocations are starting right now.
    pub starting_bytes: u64,
    pub headroom_bytes: u64,
}

/// Bytes as MiB with one decimal: refusals must not round two different figures to one.
pub fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
}

impl Admission {
    pub fn free(&self) -> u64 {
        self.cgroup_room_bytes
            .map_or(self.available_bytes, |c| c.min(self.available_bytes))
    }

    pub fn owed(&self) -> u64 {
        let owed = self
            .running
            .iter()
            .map(Commitment::owed)
            .fold(0u64, u64::saturating_add);
        (owed as f64 * self.owed_fraction) as u64
    }

    /// What is left for new branches once the running ones are warm.
    pub fn left(&self) -> u64 {
        self.free()
            .saturating_sub(self.owed())
            .saturating_sub(self.starting_bytes)
            .saturating_sub(self.headroom_bytes)
    }

    pub fn fits(&self) -> bool {
        self.left() >= self.ceiling_bytes
    }

    /// How many more branches of this ceiling fit, one after another.
    pub fn more_that_fit(&self) -> u64 {
        self.left().checked_div(self.ceiling_bytes).unwrap_or(0)
    }

    pub fn check(&self) -> Result<()> {
        if self.fits() {
            return Ok(());
        }
        let free_from = match self.cgroup_room_bytes {
            Some(c) if c < self.available_bytes => "what its cgroup's memory limit allows",
            _ => "MemAvailable",
        };
        let extra = self
            .ceiling_bytes
            .saturating_sub(self.buffer_pool_bytes)
            .saturating_sub(self.allowance_bytes);
        let extra = if extra > 0 {
            format!(" + {} instrumentation or RAM pool", mib(extra))
        } else {
            String::new()
        };
        // Never "needs 176.0 MiB, leaves 176.0 MiB": exact bytes when the two round alike.
        let (needs, leaves) = if mib(self.ceiling_bytes) == mib(self.left()) {
            (
                format!("{} bytes", self.ceiling_bytes),
                format!("{} bytes", self.left()),
            )
        } else {
            (mib(self.ceiling_bytes), mib(self.left()))
        };
        let mut error = Error::new(
            Kind::Refused,
            format!(
                "not enough memory to start branch {}: once warm it may use {needs} (buffer \
                 pool {} + allowance {}{extra}); of {} free ({free_from}), {} is owed to {} \
                 running branch(es) that may still grow to their ceilings{}, {} is promised to \
                 servers starting now and {} is kept as headroom, which leaves {leaves}. \
                 Nothing was changed.",
                self.branch,
                mib(self.buffer_pool_bytes),
                mib(self.allowance_bytes),
                mib(self.free()),
                mib(self.owed()),
                self.running.len(),
                if self.owed_fraction < 1.0 {
                    format!(" (counted at {:.0}%)", self.owed_fraction * 100.0)
                } else {
                    String::new()
                },
                mib(self.starting_bytes),
                mib(self.headroom_bytes),
            ),
        );
        let mut by_ceiling = self.running.clone();
        by_ceiling.sort_by_key(|c| std::cmp::Reverse(c.ceiling_bytes));
        if !by_ceiling.is_empty() {
            let top: Vec<String> = by_ceiling
                .iter()
                .take(5)
                .map(|c| {
                    format!(
                        "{} (ceiling {}, holds {})",
                        c.branch,
                        mib(c.ceiling_bytes),
                        mib(c.rss_bytes)
                    )
                })
                .collect();
            error = error.hint(format!(
                "the largest running branches: {}{}",
                top.join(", "),
                if by_ceiling.len() > 5 { ", …" } else { "" }
            ));
            error = error.hint(format!(
                "stop branches nobody uses with `db-branch stop-idle`, or one of them with \
                 `db-branch stop {}`",
                by_ceiling[0].branch
            ));
        }
        if self.headroom_bytes >= self.free() {
            error = error.hint(format!(
                "memory.headroom ({}) alone is more than is free: lower it in the config",
                mib(self.headroom_bytes)
            ));
        }
        error = error.hint(
            "or give this branch a smaller `--buffer-pool`; memory.owed_fraction below 1.0 \
             admits more on purpose, at the risk of the OOM killer",
        );
        Err(error.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::EXIT_REFUSED;
    use crate::report::exit_code;

    const M: u64 = 1 << 20;

    fn adm(available: u64, running: Vec<(u64, u64)>) -> Admission {
        Admission {
            branch: "new".into(),
            ceiling_bytes: 176 * M,
            buffer_pool_bytes: 128 * M,
            allowance_bytes: 48 * M, // fixed figures: the arithmetic, not the measurement
            available_bytes: available,
            cgroup_room_bytes: None,
            running: running
                .into_iter()
                .enumerate()
                .map(|(i, (ceiling, rss))| Commitment {
                    branch: format!("b{i}"),
                    ceiling_bytes: ceiling,
                    rss_bytes: rss,
                })
                .collect(),
            owed_fraction: 1.0,
            starting_bytes: 0,
            headroom_bytes: 300 * M,
        }
    }

    proptest::proptest! {
        /// Whatever sizes users type, the admission arithmetic neither panics nor wraps: a
        /// bigger ceiling, more owed or less free never turns a refusal into an admission.
        #[test]
        fn the_admission_sum_never_wraps(
            ceiling in proptest::prelude::any::<u64>(),
            available in proptest::prelude::any::<u64>(),
            headroom in proptest::prelude::any::<u64>(),
            starting in proptest::prelude::any::<u64>(),
            running in proptest::collection::vec(
                (proptest::prelude::any::<u64>(), proptest::prelude::any::<u64>()), 0..6),
        ) {
            let mut a = adm(available, running);
            a.ceiling_bytes = ceiling;
            a.buffer_pool_bytes = ceiling;
            a.headroom_bytes = headroom;
            a.starting_bytes = starting;
            let fits = a.fits();
            proptest::prop_assert!(a.left() <= a.free());
            if fits {
                proptest::prop_assert!(ceiling <= available);
            } else {
                proptest::prop_assert!(a.check().is_err());
            }
            // Monotone: more asked never fits where less did not.
            let mut bigger = a.clone();
            bigger.ceiling_bytes = ceiling.saturating_add(1);
            proptest::prop_assert!(!bigger.fits() || fits);
            let _ = a.more_that_fit();
        }
    }

    #[test]
    fn what_idle_branches_will_take_back_is_not_free() {
        // 1 GiB available, headroom 300M: room for 4 warm branches of 176M.
        assert_eq!(adm(1024 * M, vec![]).more_that_fit(), 4);
        // Three idle branches hold 55M each but may grow to 176M: two more fit, not four,
        // although the kernel says 1 GiB is available.
        let a = adm(1024 * M, vec![(176 * M, 55 * M); 3]);
        assert_eq!(a.owed(), 3 * 121 * M);
        assert_eq!(a.more_that_fit(), 2);
        assert!(adm(1024 * M, vec![(176 * M, 55 * M); 4]).fits());
        assert!(!adm(1024 * M, vec![(176 * M, 55 * M); 5]).fits());
        // Warm branches owe nothing more.
        assert!(adm(1024 * M, vec![(176 * M, 176 * M); 3]).fits());
    }

    #[test]
    fn owed_fraction_admits_more_on_purpose() {
        let mut a = adm(1024 * M, vec![(176 * M, 55 * M); 5]);
        assert!(!a.fits());
        a.owed_fraction = 0.5;
        assert!(a.fits());
    }

    #[test]
    fn a_cgroup_limit_is_the_budget_when_tighter() {
        let mut a = adm(20 << 30, vec![]);
        a.cgroup_room_bytes = Some(512 * M);
        assert_eq!(a.free(), 512 * M);
        assert_eq!(a.more_that_fit(), 1);
        let e = adm(300 * M, vec![]).check().unwrap_err();
        assert_eq!(exit_code(&e), EXIT_REFUSED);
        a.cgroup_room_bytes = Some(400 * M);
        let text = crate::report::render(&a.check().unwrap_err());
        assert!(text.contains("cgroup"), "{text}");
    }

    #[test]
    fn the_refusal_names_the_figures_without_rounding_them_together() {
        // One byte short: the figures must still differ in the message.
        let a = adm(176 * M + 300 * M - 1, vec![]);
        let text = crate::report::render(&a.check().unwrap_err());
        assert!(
            text.contains(&format!("may use {} bytes", 176 * M))
                && text.contains(&format!("leaves {} bytes", 176 * M - 1)),
            "{text}"
        );
        // What is owed, by whom, and what to stop.
        let a = adm(700 * M, vec![(400 * M, 100 * M), (200 * M, 190 * M)]);
        let text = crate::report::render(&a.check().unwrap_err());
        assert!(text.contains("may use 176.0 MiB"), "{text}");
        assert!(text.contains("310.0 MiB is owed to 2 running"), "{text}");
        assert!(text.contains("leaves 90.0 MiB"), "{text}");
        assert!(
            text.contains("b0 (ceiling 400.0 MiB, holds 100.0 MiB)"),
            "{text}"
        );
        assert!(text.contains("db-branch stop b0"), "{text}");
    }

    #[test]
    fn allowances_differ_by_family_and_profile() {
        assert!(
            measured_allowance(Family::Mysql, Profile::Durable)
                > measured_allowance(Family::Mysql, Profile::Test)
        );
        assert!(
            measured_allowance(Family::Mysql, Profile::Test)
                > measured_allowance(Family::Mariadb, Profile::Test)
        );
    }

    #[test]
    fn real_probe_reads_something() {
        let m = SysinfoMemory;
        assert!(m.available().unwrap() > 0);
        assert!(m.rss(std::process::id()).unwrap() > 0);
    }
}
