//! The trash on btrfs: `trash/MILLIS-NAME/` holds a deleted branch's subvolumes — `data`
//! (its datadir, read-only while it is here), `init` and `cp-TAG` — moved there, not
//! copied, so each keeps its identity: the restored datadir is the same subvolume, and
//! its own-disk figure (`find-new` from its creation) stays true.
//!
//! btrfs refuses to move a read-only subvolume to another directory (its `..` would
//! change), so a read-only one is made writable for the rename and read-only again at
//! once; nothing writes to it meanwhile (its server is stopped and the caller holds the
//! branch's lock).

use super::BtrfsStorage;
use crate::branch::{BranchName, CheckpointTag, TrashId};
use anyhow::{anyhow, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};

const DATA: &str = "data";
const INIT: &str = "init";
const CHECKPOINT_PREFIX: &str = "cp-";

impl BtrfsStorage {
    fn trash_root(&self) -> PathBuf {
        self.pool.join("trash")
    }
    fn trash_entry(&self, id: &TrashId) -> PathBuf {
        self.trash_root().join(id.as_str())
    }

    /// Moves subvolume `from` to `to`, leaving it read-only when `read_only` says so
    /// (None: as it was). Done already (`from` gone, `to` there) is success.
    fn move_subvolume(&self, from: &Path, to: &Path, read_only: Option<bool>) -> Result<()> {
        let present = |p: &Path| fs::symlink_metadata(p).is_ok();
        if !present(from) {
            return if present(to) {
                Ok(())
            } else {
                Err(anyhow!(
                    "neither {} nor {} exists",
                    from.display(),
                    to.display()
                ))
            };
        }
        let was = libbtrfsutil::subvolume_read_only(from)
            .map_err(|e| anyhow!("reading whether {} is read-only: {e}", from.display()))?;
        if was {
            set_read_only(from, false)?;
        }
        if let Err(e) = fs::rename(from, to) {
            if was {
                let _ = set_read_only(from, true);
            }
            return Err(e)
                .with_context(|| format!("moving {} to {}", from.display(), to.display()));
        }
        let wanted = read_only.unwrap_or(was);
        if wanted {
            set_read_only(to, true)?;
        }
        Ok(())
    }

    /// The checkpoints kept in trash entry `dir`.
    fn trashed_checkpoints(dir: &Path) -> Result<Vec<CheckpointTag>> {
        let mut tags = Vec::new();
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(tags),
            Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
        };
        for entry in entries.flatten() {
            if let Some(tag) = entry
                .file_name()
                .to_string_lossy()
                .strip_prefix(CHECKPOINT_PREFIX)
                .and_then(|t| t.parse().ok())
            {
                tags.push(tag);
            }
        }
        tags.sort();
        Ok(tags)
    }

    pub(super) fn trash(&self, name: &BranchName, id: &TrashId) -> Result<()> {
        use crate::storage::Storage;
        let entry = self.trash_entry(id);
        fs::create_dir_all(&entry).with_context(|| format!("creating {}", entry.display()))?;
        for tag in self.checkpoints(name)? {
            self.move_subvolume(
                &self.checkpoint_snapshot(name, &tag),
                &entry.join(format!("{CHECKPOINT_PREFIX}{tag}")),
                None,
            )?;
        }
        let init = self.init_snapshot(name);
        if fs::symlink_metadata(&init).is_ok() {
            self.move_subvolume(&init, &entry.join(INIT), None)?;
        }
        let datadir = self.branch_datadir(name);
        if fs::symlink_metadata(&datadir).is_ok() {
            self.move_subvolume(&datadir, &entry.join(DATA), Some(true))?;
        }
        Ok(())
    }

    pub(super) fn restore(&self, id: &TrashId, name: &BranchName) -> Result<()> {
        use crate::storage::Storage;
        let entry = self.trash_entry(id);
        if !entry.is_dir() {
            return Err(anyhow!("trash entry {} does not exist", entry.display()));
        }
        for tag in Self::trashed_checkpoints(&entry)? {
            self.move_subvolume(
                &entry.join(format!("{CHECKPOINT_PREFIX}{tag}")),
                &self.checkpoint_snapshot(name, &tag),
                None,
            )?;
        }
        if fs::symlink_metadata(entry.join(INIT)).is_ok() {
            self.move_subvolume(&entry.join(INIT), &self.init_snapshot(name), None)?;
        }
        let data = entry.join(DATA);
        let datadir = self.branch_datadir(name);
        if fs::symlink_metadata(&data).is_ok() || fs::symlink_metadata(&datadir).is_err() {
            self.move_subvolume(&data, &datadir, Some(false))?;
        }
        fs::remove_dir(&entry).with_context(|| format!("removing {}", entry.display()))
    }

    pub(super) fn purge(&self, id: &TrashId) -> Result<()> {
        let entry = self.trash_entry(id);
        let mut subvolumes: Vec<PathBuf> = Self::trashed_checkpoints(&entry)?
            .iter()
            .map(|t| entry.join(format!("{CHECKPOINT_PREFIX}{t}")))
            .collect();
        subvolumes.push(entry.join(INIT));
        subvolumes.push(entry.join(DATA));
        for s in subvolumes {
            self.delete_subvolume_if_present(&s)?;
        }
        match fs::remove_dir(&entry) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", entry.display()))
            }
            _ => Ok(()),
        }
    }

    pub(super) fn trash_entries(&self) -> Result<Vec<TrashId>> {
        let dir = self.trash_root();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
        };
        let mut ids: Vec<TrashId> = entries
            .flatten()
            .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
            .collect();
        ids.sort();
        Ok(ids)
    }

    pub(super) fn trash_usage(&self, id: &TrashId) -> Result<Option<u64>> {
        let entry = self.trash_entry(id);
        if !entry.is_dir() {
            return Ok(None);
        }
        // The datadir's own blocks; `init` and checkpoints share most of theirs with it.
        let mut total = None;
        for part in std::iter::once(entry.join(DATA)).chain(
            Self::trashed_checkpoints(&entry)?
                .iter()
                .map(|t| entry.join(format!("{CHECKPOINT_PREFIX}{t}"))),
        ) {
            if let Some(b) = self.exclusive_bytes(&part)? {
                *total.get_or_insert(0) += b;
            }
        }
        Ok(total)
    }
}

fn set_read_only(path: &Path, read_only: bool) -> Result<()> {
    libbtrfsutil::set_subvolume_read_only(path, read_only).map_err(|e| {
        anyhow!(
            "making {} {} failed: {e}",
            path.display(),
            if read_only { "read-only" } else { "writable" }
        )
    })
}
