//! Memory admission: a server is started only when available memory covers its buffer pool,
//! the configured headroom, and every other server this host is starting at this moment
//! (their memory is not yet visible in "available"). An OOM killer that silently takes other
//! branches is the failure this exists to prevent.

use crate::error::refused;
use crate::values::ByteSize;
use anyhow::Result;
use std::sync::atomic::{AtomicU64, Ordering};

pub trait MemoryProbe: Send + Sync {
    /// Bytes the kernel can hand out without swapping (MemAvailable).
    fn available(&self) -> Result<u64>;
    /// Resident memory of a process, if it exists.
    fn rss(&self, pid: u32) -> Option<u64>;
}

pub struct SysinfoMemory;

impl MemoryProbe for SysinfoMemory {
    fn available(&self) -> Result<u64> {
        let mut sys = sysinfo::System::new()?;
        sys.refresh_memory();
        Ok(sys.available_memory())
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

/// A fixed amount of memory, for unit tests.
pub struct SimMemory(pub AtomicU64);

impl SimMemory {
    pub fn new(bytes: u64) -> Self {
        SimMemory(AtomicU64::new(bytes))
    }
}

impl MemoryProbe for SimMemory {
    fn available(&self) -> Result<u64> {
        Ok(self.0.load(Ordering::SeqCst))
    }
    fn rss(&self, _pid: u32) -> Option<u64> {
        Some(50 << 20)
    }
}

/// The figures behind an admission decision, shown in a refusal.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    pub branch: String,
    pub buffer_pool: u64,
    pub headroom: u64,
    /// For a RAM-backed pool: what the branch may write into RAM.
    pub pool_growth: u64,
    /// Memory promised to servers other invocations are starting right now.
    pub starting: u64,
    pub available: u64,
    pub running_branches: usize,
}

impl Admission {
    pub fn needed(&self) -> u64 {
        self.buffer_pool + self.pool_growth + self.headroom + self.starting
    }

    pub fn check(&self) -> Result<()> {
        if self.available >= self.needed() {
            return Ok(());
        }
        let mut extra = String::new();
        if self.pool_growth > 0 {
            extra += &format!(
                " + {} it may write to the RAM pool",
                ByteSize(self.pool_growth)
            );
        }
        if self.starting > 0 {
            extra += &format!(
                " + {} for servers starting right now",
                ByteSize(self.starting)
            );
        }
        Err(refused(format!(
            "not enough memory to start branch {}: needs {} (buffer pool {} + headroom {}{extra}) \
             but only {} is available; {} branch server(s) are running. Free memory with \
             `db-branch stop NAME` or `db-branch stop-idle`, or use a smaller \
             `--buffer-pool`. Nothing was changed.",
            self.branch,
            ByteSize(self.needed()),
            ByteSize(self.buffer_pool),
            ByteSize(self.headroom),
            ByteSize(self.available),
            self.running_branches,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{exit_code, EXIT_REFUSED};

    fn adm(available: u64, starting: u64) -> Admission {
        Admission {
            branch: "a".into(),
            buffer_pool: 128 << 20,
            headroom: 300 << 20,
            pool_growth: 0,
            starting,
            available,
            running_branches: 3,
        }
    }

    #[test]
    fn admits_when_covered() {
        assert!(adm(428 << 20, 0).check().is_ok());
    }

    #[test]
    fn refuses_with_figures_and_advice() {
        let e = adm(400 << 20, 0).check().unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("needs 428M") && s.contains("400M") && s.contains("3 branch"),
            "{s}"
        );
        assert!(s.contains("stop-idle"), "{s}");
        assert_eq!(exit_code(&e), EXIT_REFUSED);
    }

    #[test]
    fn servers_starting_elsewhere_count() {
        assert!(adm(500 << 20, 0).check().is_ok());
        let e = adm(500 << 20, 128 << 20).check().unwrap_err();
        assert!(e.to_string().contains("starting right now"));
    }

    #[test]
    fn ram_pool_growth_counts() {
        let mut a = adm(500 << 20, 0);
        assert!(a.check().is_ok());
        a.pool_growth = 256 << 20;
        let e = a.check().unwrap_err().to_string();
        assert!(e.contains("RAM pool"), "{e}");
    }

    #[test]
    fn real_probe_reads_something() {
        let m = SysinfoMemory;
        assert!(m.available().unwrap() > 0);
        assert!(m.rss(std::process::id()).unwrap() > 0);
    }
}
