//! Exclusive `flock(2)` locks: one per branch, one for baseline builds, one host-wide for
//! admission and port choice. The kernel releases a lock when its process dies, so a crash
//! never leaves a stale one behind.

use crate::error::{Classified, Kind};
use anyhow::{Context, Result};
use nix::fcntl::{Flock, FlockArg};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A held lock, released when dropped.
pub struct LockGuard {
    _lock: Flock<File>,
}

/// Another invocation held the lock longer than we were willing to wait.
#[derive(Debug, thiserror::Error)]
#[error(
    "gave up after {waited:?} waiting for the {what} lock ({}), held by {holder}",
    path.display()
)]
pub struct LockBusy {
    pub what: String,
    pub path: PathBuf,
    pub holder: String,
    pub waited: Duration,
}

impl Classified for LockBusy {
    fn kind(&self) -> Kind {
        Kind::Refused
    }
    fn hints(&self) -> Vec<String> {
        vec!["try again when it finishes, or raise lock_timeout in the config".into()]
    }
}

static COMMAND: OnceLock<String> = OnceLock::new();

/// The command this process runs (`create`, `baseline create`), named in the note a lock
/// leaves for waiters. Only the command name: arguments can hold secrets.
pub fn set_command(name: &str) {
    let _ = COMMAND.set(name.to_string());
}

/// Takes the lock at `path`, waiting up to `timeout`. While waiting, `waiting` is told once
/// who holds it; gives up with `LockBusy` (exit 75) naming the holder.
pub fn lock(
    path: &Path,
    what: &str,
    timeout: Duration,
    waiting: &dyn Fn(&str),
) -> Result<LockGuard> {
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
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("opening lock {}", path.display()))?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(mut lock) => {
                // Leave a note for waiters: who holds the lock.
                let note = format!(
                    "pid {} (db-branch {})",
                    std::process::id(),
                    COMMAND.get().map_or("", String::as_str)
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
                    return Err(LockBusy {
                        what: what.to_string(),
                        path: path.to_path_buf(),
                        holder,
                        waited: timeout,
                    }
                    .into());
                }
                if !told {
                    waiting(&format!("waiting for the {what} lock, held by {holder}..."));
                    told = true;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// The lock at `path` if nobody holds it right now.
pub fn try_lock(path: &Path, what: &str) -> Result<LockGuard> {
    lock(path, what, Duration::ZERO, &|_| {})
}

/// True when `err` is (or was caused by) a lock someone else holds.
pub fn is_busy(err: &anyhow::Error) -> bool {
    err.chain().any(|c| c.downcast_ref::<LockBusy>().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_waits_then_refuses_naming_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.lock");
        set_command("create");
        let _held = lock(&path, "host", Duration::from_secs(1), &|_| {}).unwrap();
        // flock locks belong to the open file description, so a second open conflicts even
        // within one process.
        let told = std::cell::RefCell::new(Vec::new());
        let e = lock(&path, "host", Duration::from_millis(50), &|m| {
            told.borrow_mut().push(m.to_string())
        })
        .err()
        .unwrap();
        let s = e.to_string();
        assert!(
            s.contains("held by pid") && s.contains("(db-branch create)"),
            "{s}"
        );
        let busy = e.downcast_ref::<LockBusy>().expect("a LockBusy");
        assert_eq!(busy.kind().exit_code(), crate::error::EXIT_REFUSED);
        assert!(is_busy(&e));
        assert_eq!(told.borrow().len(), 1, "told once: {:?}", told.borrow());
    }

    #[test]
    fn the_note_carries_no_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.lock");
        let _held = lock(&path, "x", Duration::ZERO, &|_| {}).unwrap();
        let note = fs::read_to_string(&path).unwrap();
        assert!(note.starts_with("pid ") && !note.contains("--"), "{note}");
    }
}
