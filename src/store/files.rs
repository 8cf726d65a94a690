//! Writing db-branch's own files safely: readers see the old or the new content, never a
//! mix, and nothing another user planted (a symlink, a file of the same name) is followed or
//! truncated.

use anyhow::{Context, Result};
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` through a new temporary file beside it (O_CREAT|O_EXCL|
/// O_NOFOLLOW, so an existing file or link of that name is never opened), then renames it
/// over `path`, its data flushed first.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    write_new_then_rename(path, bytes, mode, true)
}

/// `write_atomic` without flushing the data first: for what a crash may lose (a statistic),
/// where an fsync would cost the operation that records it more than the record is worth.
pub fn replace(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    write_new_then_rename(path, bytes, mode, false)
}

fn write_new_then_rename(path: &Path, bytes: &[u8], mode: u32, durable: bool) -> Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(
        ".{name}.tmp.{}.{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(mode)
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    let written = f
        .write_all(bytes)
        .and_then(|()| if durable { f.sync_data() } else { Ok(()) });
    drop(f);
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", tmp.display()));
    }
    fs::rename(&tmp, path).with_context(|| {
        let _ = fs::remove_file(&tmp);
        format!("replacing {}", path.display())
    })
}

/// The JSON document at `path`, None when there is no such file; `what` names it in the
/// error when it does not parse ("branch record", "trash entry").
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<Option<T>> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("{what} {} is damaged", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Removes the directory tree at `path` (never following a link in it); gone already is
/// fine.
pub fn remove_tree(path: &Path) -> Result<()> {
    match fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Removes the file at `path`; gone already is fine.
pub fn remove_file(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.json");
        write_atomic(&p, b"one", 0o600).unwrap();
        write_atomic(&p, b"two", 0o600).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_planted_link_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::write(&target, b"keep").unwrap();
        let p = dir.path().join("a.json");
        std::os::unix::fs::symlink(&target, &p).unwrap();
        write_atomic(&p, b"new", 0o600).unwrap();
        assert_eq!(
            fs::read(&target).unwrap(),
            b"keep",
            "the link target is untouched"
        );
        assert!(!fs::symlink_metadata(&p).unwrap().file_type().is_symlink());
    }
}
