//! db-branch's own files under `root`: branch records (atomic writes, 0600), the host-wide
//! and per-branch locks, and memory reservations of servers being started.

use crate::branch::{BranchName, BranchRecord};
use crate::error::refused;
use crate::layout::Layout;
use anyhow::{Context, Result};
use nix::fcntl::{Flock, FlockArg};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Writes `bytes` to `path` so that readers see the old or the new content, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(bytes)?;
    f.sync_data()?;
    drop(f);
    fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))?;
    Ok(())
}

pub fn save_record(layout: &Layout, record: &BranchRecord) -> Result<()> {
    let dir = layout.branch_dir(&record.name);
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = serde_json::to_vec_pretty(record)?;
    write_atomic(&layout.record_file(&record.name), &json, 0o600)
}

pub fn load_record(layout: &Layout, name: &BranchName) -> Result<Option<BranchRecord>> {
    let path = layout.record_file(name);
    match fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("branch record {} is damaged", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

pub fn list_records(layout: &Layout) -> Result<Vec<BranchRecord>> {
    let dir = layout.branches_dir();
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    let mut records = Vec::new();
    for entry in entries {
        let entry = entry?;
        let Ok(name) = entry.file_name().to_string_lossy().parse::<BranchName>() else {
            continue;
        };
        match load_record(layout, &name) {
            Ok(Some(r)) => records.push(r),
            Ok(None) => {}
            Err(e) => tracing::warn!("{e:#}"),
        }
    }
    records.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(records)
}

/// Removes a branch's directory (record, option file, log, socket).
pub fn remove_branch_dir(layout: &Layout, name: &BranchName) -> Result<()> {
    let dir = layout.branch_dir(name);
    match fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", dir.display()))
        }
        _ => Ok(()),
    }
}

/// An exclusive `flock`, released when dropped (or when the process dies, so a crash never
/// leaves a stale lock behind).
pub struct LockGuard {
    _lock: Flock<File>,
}

/// Takes the lock at `path`, waiting up to `timeout`. While waiting, says once on stderr who
/// holds it; gives up with a refusal (exit 75) naming the holder.
pub fn lock(path: &Path, what: &str, timeout: Duration) -> Result<LockGuard> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let start = Instant::now();
    let mut told = false;
    loop {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("opening lock {}", path.display()))?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(mut lock) => {
                // Leave a note for waiters: who holds the lock.
                let note = format!(
                    "pid {} ({})",
                    std::process::id(),
                    std::env::args().collect::<Vec<_>>().join(" ")
                );
                let _ = lock.set_len(0);
                let _ = lock.rewind();
                let _ = lock.write_all(note.as_bytes());
                return Ok(LockGuard { _lock: lock });
            }
            Err((mut file, _)) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = if holder.trim().is_empty() {
                    "another db-branch".to_string()
                } else {
                    holder.trim().to_string()
                };
                if start.elapsed() >= timeout {
                    return Err(refused(format!(
                        "gave up after {timeout:?} waiting for the {what} lock ({}), held by {holder}. \
                         Try again when it finishes, or raise lock_timeout in the config.",
                        path.display()
                    )));
                }
                if !told {
                    eprintln!("waiting for the {what} lock, held by {holder}...");
                    told = true;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Memory promised to a server that is being started, visible to concurrent invocations
/// until the server is up (then the kernel's "available" figure accounts for it).
pub struct Reservation {
    path: std::path::PathBuf,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

pub fn reserve(layout: &Layout, name: &BranchName, bytes: u64) -> Result<Reservation> {
    let dir = layout.reservations_dir();
    fs::create_dir_all(&dir)?;
    let path = dir.join(name.as_str());
    write_atomic(
        &path,
        format!("{} {bytes}\n", std::process::id()).as_bytes(),
        0o600,
    )?;
    Ok(Reservation { path })
}

/// Reservation files of processes that are gone (a crash between admission and start).
pub fn stale_reservations(layout: &Layout) -> Vec<(std::path::PathBuf, i32)> {
    let Ok(entries) = fs::read_dir(layout.reservations_dir()) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let pid: i32 = fs::read_to_string(e.path())
                .ok()?
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
            (!alive).then(|| (e.path(), pid))
        })
        .collect()
}

/// Bytes reserved by live processes for branches other than `except`.
pub fn reserved_by_others(layout: &Layout, except: &BranchName) -> u64 {
    let Ok(entries) = fs::read_dir(layout.reservations_dir()) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy() != except.as_str())
        .filter_map(|e| fs::read_to_string(e.path()).ok())
        .filter_map(|text| {
            let mut it = text.split_whitespace();
            let pid: i32 = it.next()?.parse().ok()?;
            let bytes: u64 = it.next()?.parse().ok()?;
            // A reservation of a process that died is void.
            let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
            alive.then_some(bytes)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::branch::{Generation, Phase};
    use crate::values::ByteSize;

    fn record(name: &str) -> BranchRecord {
        BranchRecord {
            port: 3400,
            phase: Phase::Ready,
            ..BranchRecord::new(
                name.parse().unwrap(),
                Generation(1),
                ByteSize::mib(128),
                chrono::Utc::now(),
            )
        }
    }

    #[test]
    fn records_round_trip_and_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let r = record("a");
        save_record(&layout, &r).unwrap();
        assert_eq!(load_record(&layout, &r.name).unwrap(), Some(r.clone()));
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(layout.record_file(&r.name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(list_records(&layout).unwrap().len(), 1);
        remove_branch_dir(&layout, &r.name).unwrap();
        assert_eq!(load_record(&layout, &r.name).unwrap(), None);
    }

    #[test]
    fn damaged_record_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let name: BranchName = "a".parse().unwrap();
        fs::create_dir_all(layout.branch_dir(&name)).unwrap();
        fs::write(layout.record_file(&name), "{not json").unwrap();
        let e = load_record(&layout, &name).unwrap_err();
        assert!(format!("{e:#}").contains("damaged"));
    }

    #[test]
    fn second_lock_waits_then_refuses_naming_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.lock");
        let _held = lock(&path, "host", Duration::from_secs(1)).unwrap();
        // flock locks belong to the open file description, so a second open conflicts even
        // within one process.
        let e = lock(&path, "host", Duration::from_millis(50))
            .err()
            .unwrap();
        let s = e.to_string();
        assert!(s.contains("held by pid"), "{s}");
        assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_REFUSED);
    }

    #[test]
    fn reservations_of_others_count_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let a: BranchName = "a".parse().unwrap();
        let b: BranchName = "b".parse().unwrap();
        let r = reserve(&layout, &a, 1000).unwrap();
        assert_eq!(reserved_by_others(&layout, &b), 1000);
        assert_eq!(reserved_by_others(&layout, &a), 0);
        drop(r);
        assert_eq!(reserved_by_others(&layout, &b), 0);
    }
}
