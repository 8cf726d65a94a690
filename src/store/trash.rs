//! The trash's records: `root/trash/MILLIS-NAME/` (root's, 0700) holds `entry.json` (who
//! deleted what, when, why, until when it is kept), and once the move is complete the
//! branch's own directory (`branch/`: record, option file) and its secrets (`secrets/`:
//! password). Its storage moves into the pool's own trash (`Storage::trash_branch`).
//!
//! An entry is written first, with `complete: false`; the storage and the two directories
//! move after it, each step idempotent. An entry left incomplete by a crash is finished by
//! the next command that reads the trash (`ops::trash`), so nothing is ever in neither place.

use super::files::write_atomic;
use crate::branch::{BranchName, BranchRecord, TrashId};
use crate::layout::Layout;
use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// What sent a branch to the trash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// `delete`.
    Delete,
    /// `gc` of a branch whose TTL ran out.
    Expiry,
    /// `gc` with a selector (`--older-than`, `--idle-for`).
    Gc,
    /// `pool delete` (its slots).
    PoolDelete,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reason::Delete => "delete",
            Reason::Expiry => "expiry",
            Reason::Gc => "gc",
            Reason::PoolDelete => "pool-delete",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub id: TrashId,
    pub name: BranchName,
    pub owner: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_uid: Option<u32>,
    pub deleted_at: DateTime<Utc>,
    /// The user who ran the command (the caller, through the service).
    pub deleted_by: String,
    pub reason: Reason,
    /// When `gc` (or a pool short of space, sooner) purges it.
    pub keep_until: DateTime<Utc>,
    /// The port it had: `restore` gives it back when it is free.
    pub port: u16,
    /// When the branch was made: tells it from a later branch of the same name.
    pub created: DateTime<Utc>,
    /// The storage and the directories have all moved in.
    pub complete: bool,
}

fn entry_file(layout: &Layout, id: &TrashId) -> PathBuf {
    layout.trash_entry(id).join("entry.json")
}
/// The branch's directory as it is kept in the trash.
pub fn branch_dir(layout: &Layout, id: &TrashId) -> PathBuf {
    layout.trash_entry(id).join("branch")
}
/// The branch's secrets as they are kept in the trash.
pub fn secrets_dir(layout: &Layout, id: &TrashId) -> PathBuf {
    layout.trash_entry(id).join("secrets")
}

/// Writes the entry, making its directory (only root may enter: it holds a password).
pub fn save(layout: &Layout, entry: &Entry) -> Result<()> {
    for dir in [layout.trash_dir(), layout.trash_entry(&entry.id)] {
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(e).with_context(|| format!("creating {}", dir.display()));
            }
            _ => {}
        }
    }
    write_atomic(
        &entry_file(layout, &entry.id),
        &serde_json::to_vec_pretty(entry)?,
        0o600,
    )
}

pub fn load(layout: &Layout, id: &TrashId) -> Result<Option<Entry>> {
    super::files::read_json(&entry_file(layout, id), "trash entry")
}

/// Every entry, oldest first (ids sort by the time of deletion).
pub fn list(layout: &Layout) -> Result<Vec<Entry>> {
    let dir = layout.trash_dir();
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Ok(id) = entry.file_name().to_string_lossy().parse::<TrashId>() else {
            continue;
        };
        match load(layout, &id) {
            Ok(Some(e)) => out.push(e),
            Ok(None) => {}
            Err(e) => tracing::warn!("{e:#}"),
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// The branch record kept in entry `id` (None before the branch's directory moved in).
pub fn record(layout: &Layout, id: &TrashId) -> Result<Option<BranchRecord>> {
    super::files::read_json(&branch_dir(layout, id).join("branch.json"), "branch record")
}

/// Renames `from` to `to` unless that happened already (`from` gone); a missing `from`
/// with nothing at `to` is fine too (a branch without secrets yet).
pub fn move_dir(from: &Path, to: &Path) -> Result<()> {
    if fs::symlink_metadata(from).is_err() {
        return Ok(());
    }
    fs::rename(from, to).with_context(|| format!("moving {} to {}", from.display(), to.display()))
}

/// Removes what is left of entry `id` (its storage is gone already).
pub fn remove(layout: &Layout, id: &TrashId) -> Result<()> {
    super::files::remove_tree(&layout.trash_entry(id))
}

/// The branch's server files (socket, pid file, log, tmp) are of no use in the trash, and
/// belong to the server's OS user: they go rather than move.
pub fn drop_run_dir(layout: &Layout, name: &BranchName) -> Result<()> {
    super::files::remove_tree(&layout.run_dir(name))
}
