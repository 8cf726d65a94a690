//! Copy-on-write storage for baselines and branches, behind one trait.
//!
//! A baseline generation is a read-only snapshot of a cleanly shut down datadir. A branch is
//! a writable snapshot of one generation plus a read-only `@init` snapshot taken at the same
//! moment, so `reset` can roll back to a clean state without crash recovery.

pub mod btrfs;
pub mod file_copy;
#[cfg(any(test, feature = "testing"))]
pub mod sim;
pub mod zfs;

use crate::branch::{BranchName, CheckpointTag, Generation, TrashId};
use crate::check::Check;
use crate::error::{Classified, Kind};
use crate::flavour::Flavour;
use anyhow::Result;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What can be wrong with the pool before any branch is touched.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The pool is missing or not set up: `db-branch init` makes it.
    #[error("{0}")]
    NotReady(String),
    /// The config names something that is not a usable pool.
    #[error("{0}")]
    Misconfigured(String),
    #[error("baseline {0} does not exist")]
    NoSuchGeneration(Generation),
    /// Something still depends on what was to be removed.
    #[error("{0}")]
    InUse(String),
}

impl Classified for StorageError {
    fn kind(&self) -> Kind {
        match self {
            StorageError::NoSuchGeneration(_) => Kind::NotFound,
            _ => Kind::Usage,
        }
    }
    fn hints(&self) -> Vec<String> {
        match self {
            StorageError::NotReady(_) => vec!["run `db-branch init`".into()],
            StorageError::NoSuchGeneration(_) => vec!["see `db-branch baseline list`".into()],
            _ => Vec::new(),
        }
    }
}

/// The file in a generation's datadir that says which server made it and when.
pub const GENERATION_INFO: &str = "db-branch-generation.json";

#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct GenerationInfo {
    pub server: Flavour,
    pub created: chrono::DateTime<chrono::Utc>,
    /// `empty`, `datadir`, `bake (tablespace)`, …
    pub source: String,
    /// For a generation received as a file-level copy: the identity it has where it was
    /// sent from (it has its own here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_identity: Option<String>,
    /// Its application databases (the system schemas left out), as the datadir held them
    /// when it was sealed. None: made before db-branch recorded them (read from the
    /// generation's files instead, `Storage::generation_databases`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub databases: Option<Vec<String>>,
    /// Cut from a follower (`baseline cut`): the source and the GTIDs it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub followed: Option<crate::replication::Cut>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PoolInfo {
    pub kind: String,
    pub path: PathBuf,
    pub total_bytes: u64,
    pub free_bytes: u64,
    /// The pool lives in RAM (its image is on a tmpfs).
    pub ram_backed: bool,
    /// RAM the pool holds now (the image's allocated size), for a RAM-backed pool.
    pub ram_bytes: Option<u64>,
}

pub trait Storage: Transfer + Send + Sync {
    /// Makes the pool usable: mounts the embedded image if it is not mounted (after a
    /// reboot), checks a configured path really is the right filesystem. Fails with
    /// `StorageError::NotReady` when `init` never ran.
    fn open(&self) -> Result<()>;
    /// `init`: `open`, making the embedded image, the datasets and the directory skeleton
    /// where missing. Returns true when it made a new pool (a RAM pool after a reboot is
    /// rebuilt from the baselines kept on disk).
    fn init(&self) -> Result<bool>;
    /// The pool lives in RAM: its growth is memory.
    fn ram_backed(&self) -> bool;
    fn info(&self) -> Result<PoolInfo>;

    /// Generations present, oldest first.
    fn baselines(&self) -> Result<Vec<Generation>>;
    /// A writable, empty workspace for building generation `gen`.
    fn begin_baseline(&self, gen: Generation) -> Result<PathBuf>;
    /// Copies a directory tree into a workspace (reflinks where the filesystem allows).
    fn fill_from_dir(&self, workspace: &Path, source: &Path) -> Result<()>;
    /// Where generation `gen`'s files can be read (read-only).
    fn generation_dir(&self, gen: Generation) -> PathBuf;
    /// Which server made generation `gen`: its `GENERATION_INFO` file, else what its
    /// datadir says (generations made before the file existed). None when neither tells.
    fn generation_info(&self, gen: Generation) -> Result<Option<GenerationInfo>> {
        let dir = self.generation_dir(gen);
        if let Ok(text) = std::fs::read_to_string(dir.join(GENERATION_INFO)) {
            if let Ok(info) = serde_json::from_str(&text) {
                return Ok(Some(info));
            }
        }
        Ok(Flavour::of_datadir(&dir).map(|server| GenerationInfo {
            server,
            created: std::fs::metadata(&dir)
                .and_then(|m| m.modified())
                .map(Into::into)
                .unwrap_or_default(),
            source: "unknown".into(),
            origin_identity: None,
            databases: None,
            followed: None,
        }))
    }
    /// Generation `gen`'s application databases: as recorded when it was sealed, else as
    /// its datadir holds them. None when neither tells (no such files).
    fn generation_databases(&self, gen: Generation) -> Option<Vec<String>> {
        match self.generation_info(gen).ok().flatten() {
            Some(GenerationInfo {
                databases: Some(d), ..
            }) => Some(d),
            _ => crate::server::databases::in_datadir(&self.generation_dir(gen)).ok(),
        }
    }
    /// What a workspace's `GENERATION_INFO` file says (None when it has none).
    fn generation_info_in(&self, workspace: &Path) -> Result<Option<GenerationInfo>> {
        match std::fs::read_to_string(workspace.join(GENERATION_INFO)) {
            Ok(text) => Ok(serde_json::from_str(&text).ok()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
    /// Records in the workspace of generation `gen` which server made it (before sealing).
    fn write_generation_info(
        &self,
        _gen: Generation,
        workspace: &Path,
        info: &GenerationInfo,
    ) -> Result<()> {
        crate::store::files::write_atomic(
            &workspace.join(GENERATION_INFO),
            &serde_json::to_vec_pretty(info)?,
            0o644,
        )
    }
    /// A file-level copy of generation `gen` (storage/file_copy.rs) to `out`: the same
    /// for every backend, built on the generation's directory and a workspace.
    fn send_files(&self, gen: Generation, out: &mut dyn std::io::Write) -> Result<()> {
        file_copy::send(&self.generation_dir(gen), gen, out)
    }
    /// Unpacks a file-level copy into a new workspace for `gen`; the caller seals it
    /// (`seal_baseline`) once verified, or abandons it.
    fn receive_files(&self, gen: Generation, input: &mut dyn std::io::Read) -> Result<PathBuf> {
        let workspace = self.begin_baseline(gen)?;
        file_copy::receive(&workspace, gen, input)?;
        Ok(workspace)
    }
    /// Freezes the workspace as read-only generation `gen`.
    fn seal_baseline(&self, gen: Generation) -> Result<()>;
    /// Removes a workspace that will not become a generation. Idempotent.
    fn abandon_baseline(&self, gen: Generation) -> Result<()>;
    /// Workspaces present (left by a baseline build that did not finish, or in progress).
    fn workspaces(&self) -> Result<Vec<Generation>>;

    /// Writable clone of `gen` plus its read-only `@init`; returns the datadir.
    fn clone_branch(&self, gen: Generation, name: &BranchName) -> Result<PathBuf>;
    /// Replaces the datadir with a fresh writable copy of `@init`.
    fn rollback_branch(&self, name: &BranchName) -> Result<()>;
    /// Removes the datadir and `@init`. Idempotent.
    fn destroy_branch(&self, name: &BranchName) -> Result<()>;
    fn branch_exists(&self, name: &BranchName) -> Result<bool>;
    fn branch_datadir(&self, name: &BranchName) -> PathBuf;
    /// Bytes this branch holds that nobody else shares (None when it cannot be told).
    fn branch_usage(&self, name: &BranchName) -> Result<Option<u64>>;
    /// Branch names that have storage, whatever the metadata says.
    fn branches(&self) -> Result<Vec<BranchName>>;
    /// What this backend needs on the host (kernel support, tools, the pool), for `doctor`.
    fn readiness(&self) -> Vec<Check>;
    /// Removes generation `gen`; refuses, naming them, while branches depend on it.
    fn remove_baseline(&self, gen: Generation) -> Result<()>;
    /// Space figures of a branch (ZFS: used, referenced, written); empty where unknown.
    fn branch_space(&self, _name: &BranchName) -> Result<BTreeMap<String, u64>> {
        Ok(BTreeMap::new())
    }
    /// Keeps a branch's metadata with its storage (ZFS user properties), so the pool alone
    /// can rebuild db-branch's records. A no-op where the storage cannot hold it.
    fn set_branch_metadata(
        &self,
        _name: &BranchName,
        _meta: &BTreeMap<String, String>,
    ) -> Result<()> {
        Ok(())
    }
    fn get_branch_metadata(&self, _name: &BranchName) -> Result<BTreeMap<String, String>> {
        Ok(BTreeMap::new())
    }

    /// Writable copy of branch `source`'s datadir as it is now — or of its checkpoint
    /// `tag` — as branch `name`, plus `name`'s `@init` of that state; returns the datadir.
    /// A running source gives a crash-consistent copy.
    fn clone_from_branch(
        &self,
        _source: &BranchName,
        _tag: Option<&CheckpointTag>,
        _name: &BranchName,
    ) -> Result<PathBuf> {
        Err(not_here("branches made from branches"))
    }
    /// A read-only snapshot of the branch's datadir now, kept as its checkpoint `tag`.
    fn checkpoint_branch(&self, _name: &BranchName, _tag: &CheckpointTag) -> Result<()> {
        Err(not_here("checkpoints"))
    }
    /// Replaces the datadir with a fresh writable copy of checkpoint `tag`.
    fn rollback_to_checkpoint(&self, _name: &BranchName, _tag: &CheckpointTag) -> Result<()> {
        Err(not_here("checkpoints"))
    }
    /// Removes checkpoint `tag`. Idempotent.
    fn remove_checkpoint(&self, _name: &BranchName, _tag: &CheckpointTag) -> Result<()> {
        Err(not_here("checkpoints"))
    }
    /// Checkpoints present (whatever the record says).
    fn checkpoints(&self, _name: &BranchName) -> Result<Vec<CheckpointTag>> {
        Ok(Vec::new())
    }
    /// Bytes only this checkpoint holds (None when it cannot be told).
    fn checkpoint_usage(&self, _name: &BranchName, _tag: &CheckpointTag) -> Result<Option<u64>> {
        Ok(None)
    }
    /// Moves branch `name`'s storage — its datadir (read-only from then on), `@init` and
    /// checkpoints — into the trash as entry `id`; its server is stopped. Idempotent: a
    /// re-run after a crash half-way finishes the move.
    /// Whether `trash_branch` and the rest of the trash work here (where not, a delete
    /// destroys at once).
    fn has_trash(&self) -> bool {
        false
    }
    fn trash_branch(&self, _name: &BranchName, _id: &TrashId) -> Result<()> {
        Err(not_here("the trash"))
    }
    /// Brings trash entry `id` back as branch `name`, writable again, with its `@init`
    /// and checkpoints. Idempotent like `trash_branch`.
    fn restore_trashed(&self, _id: &TrashId, _name: &BranchName) -> Result<()> {
        Err(not_here("the trash"))
    }
    /// Destroys trash entry `id` and frees its space. Idempotent.
    fn purge_trashed(&self, _id: &TrashId) -> Result<()> {
        Err(not_here("the trash"))
    }
    /// Waits until the space of what was destroyed is free again (btrfs frees a deleted
    /// subvolume's blocks in the background).
    fn reclaim(&self) -> Result<()> {
        Ok(())
    }
    /// Trash entries that hold storage, whatever the trash's records say.
    fn trashed(&self) -> Result<Vec<TrashId>> {
        Ok(Vec::new())
    }
    /// Bytes trash entry `id` holds that nothing else shares (None when it cannot be told).
    fn trashed_usage(&self, _id: &TrashId) -> Result<Option<u64>> {
        Ok(None)
    }
    /// A workspace for generation `gen` holding the branch's datadir as it is now (the
    /// server stopped cleanly first): promotes a branch without copying it.
    /// Makes branch `name` (datadir and `@init`) from the unsealed workspace of `gen`,
    /// which is then removed: a follower's seed (`baseline follow`) becomes its datadir
    /// without ever being a generation branches could be made from.
    fn branch_from_workspace(&self, _gen: Generation, _name: &BranchName) -> Result<PathBuf> {
        Err(not_here("followers (baseline follow)"))
    }
    fn begin_baseline_from_branch(&self, _gen: Generation, _name: &BranchName) -> Result<PathBuf> {
        Err(not_here("baselines promoted from branches"))
    }
}

/// Baselines moving between hosts as send streams (`baseline push/pull`): generations keep
/// their number, and an increment applies where both sides hold its parent.
pub trait Transfer {
    /// The format `send_generation` writes: "btrfs" or "zfs".
    fn stream_format(&self) -> &'static str;
    /// What generation `gen` is known by on every host that holds it (btrfs: the UUID it
    /// was received as, or its own where it was made; ZFS: the snapshot's guid, which a
    /// send keeps). Two hosts' generations with one identity hold the same data.
    fn generation_identity(&self, gen: Generation) -> Result<Option<String>>;
    /// Whether `gen` can be sent as an increment on `parent` (ZFS: only along one lineage).
    fn can_send_incremental(&self, _gen: Generation, _parent: Generation) -> bool {
        true
    }
    /// An estimate of the stream's size, for progress (None when unknown).
    fn estimate_send(&self, _gen: Generation, _parent: Option<Generation>) -> Option<u64> {
        None
    }
    /// Writes generation `gen` to `out` as this backend's send stream, as an increment on
    /// `parent` when given.
    fn send_generation(
        &self,
        gen: Generation,
        parent: Option<Generation>,
        out: &mut dyn std::io::Write,
    ) -> Result<()>;
    /// Receives a send stream as generation `gen` into a place no command sees yet (the
    /// caller commits it once the stream's checksum was verified, or aborts).
    fn receive_generation(
        &self,
        gen: Generation,
        parent: Option<Generation>,
        input: &mut dyn std::io::Read,
    ) -> Result<()>;
    /// Makes a received generation visible.
    fn commit_received(&self, gen: Generation) -> Result<()>;
    /// Removes whatever a receive left (this one's or an interrupted earlier one's).
    /// Idempotent.
    fn abort_received(&self) -> Result<()>;
    /// What receives that did not finish left (paths or datasets), for `doctor`.
    fn partial_receives(&self) -> Result<Vec<String>>;
}

/// What this backend cannot do yet, as a usage error naming the backend that can.
fn not_here(what: &str) -> anyhow::Error {
    StorageError::Misconfigured(format!(
        "{what} are not available on this storage backend yet; use backend = \"btrfs\""
    ))
    .into()
}
