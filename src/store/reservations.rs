//! Memory promised to servers that are being started, visible to concurrent invocations
//! until the server is up (then the server's own resident memory accounts for it).

use crate::branch::BranchName;
use crate::layout::Layout;
use anyhow::Result;
use std::fs;

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
    super::files::write_atomic(
        &path,
        format!("{} {bytes}\n", std::process::id()).as_bytes(),
        0o600,
    )?;
    Ok(Reservation { path })
}

fn pid_alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

/// (file, owner pid, bytes) of every reservation file.
fn entries(layout: &Layout) -> Vec<(std::path::PathBuf, String, i32, u64)> {
    let Ok(dir) = fs::read_dir(layout.reservations_dir()) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| {
            let text = fs::read_to_string(e.path()).ok()?;
            let mut it = text.split_whitespace();
            let pid: i32 = it.next()?.parse().ok()?;
            let bytes: u64 = it.next().and_then(|b| b.parse().ok()).unwrap_or(0);
            Some((
                e.path(),
                e.file_name().to_string_lossy().into_owned(),
                pid,
                bytes,
            ))
        })
        .collect()
}

/// Reservation files of processes that are gone (a crash between admission and start).
pub fn stale(layout: &Layout) -> Vec<(std::path::PathBuf, i32)> {
    entries(layout)
        .into_iter()
        .filter(|(_, _, pid, _)| !pid_alive(*pid))
        .map(|(path, _, pid, _)| (path, pid))
        .collect()
}

/// Bytes reserved by live processes for branches other than `except`.
pub fn reserved_by_others(layout: &Layout, except: &BranchName) -> u64 {
    reserved_except(layout, &[except.as_str()])
}

/// Memory reserved by live processes for branches other than `except`.
pub fn reserved_except(layout: &Layout, except: &[&str]) -> u64 {
    entries(layout)
        .into_iter()
        .filter(|(_, name, pid, _)| !except.contains(&name.as_str()) && pid_alive(*pid))
        .map(|(_, _, _, bytes)| bytes)
        .fold(0, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

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
