//! btrfs storage through libbtrfsutil: subvolumes and snapshots on a mounted btrfs, or on an
//! embedded sparse image file that this module creates, formats and loop-mounts.
//!
//! On-disk layout under the pool directory:
//! `baselines/gen-NNNNNN` (read-only), `baselines/building-gen-NNNNNN` (being built; not a
//! hidden name: MySQL cannot start a datadir below a directory whose name starts with `.`),
//! `branches/NAME` (writable datadir), `branches/NAME@init` (read-only, clean),
//! `branches/NAME@cp-TAG` (checkpoints), `trash/MILLIS-NAME/` (deleted branches: trash.rs).

mod transfer;
mod trash;

use super::StorageError;
use super::{PoolInfo, Storage};
use crate::branch::{BranchName, CheckpointTag, Generation, TrashId};
use crate::check::Check;
use crate::exec;
use anyhow::{anyhow, Context, Result};
use libbtrfsutil::{CreateSnapshotOptions, DeleteSubvolumeOptions};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A generation being built: `building-gen-NNNNNN`.
const WORKSPACE_PREFIX: &str = "building-";
/// What earlier versions named it (found and removed by `doctor --repair`).
const LEGACY_WORKSPACE_PREFIX: &str = ".work-";

pub struct BtrfsStorage {
    pool: PathBuf,
    /// `Some((image, size))` for the embedded pool; None when `btrfs.path` is configured.
    image: Option<(PathBuf, u64)>,
    /// On disk: send streams of every baseline, for a pool that lives in RAM.
    streams: PathBuf,
}

impl BtrfsStorage {
    pub fn embedded(image: PathBuf, mount: PathBuf, size: u64, streams: PathBuf) -> Self {
        BtrfsStorage {
            pool: mount,
            image: Some((image, size)),
            streams,
        }
    }

    pub fn at_path(path: PathBuf, streams: PathBuf) -> Self {
        BtrfsStorage {
            pool: path,
            image: None,
            streams,
        }
    }

    /// The image sits on a tmpfs or ramfs.
    fn image_in_ram(&self) -> bool {
        let Some((image, _)) = &self.image else {
            return false;
        };
        image.parent().is_some_and(|dir| {
            nix::sys::statfs::statfs(dir).is_ok_and(|s| {
                let t = s.filesystem_type();
                // tmpfs, or ramfs (0x858458f6, which nix does not name).
                t == nix::sys::statfs::TMPFS_MAGIC || t.0 == 0x858458f6
            })
        })
    }

    /// Where a RAM pool keeps generation `gen` on disk.
    fn stream_file(&self, gen: Generation) -> PathBuf {
        self.streams.join(format!("{}.btrfs", gen.dir_name()))
    }

    /// Keeps a RAM pool's new generation on disk as a btrfs send stream.
    fn save_stream(&self, gen: Generation) -> Result<()> {
        fs::create_dir_all(&self.streams)
            .with_context(|| format!("creating {}", self.streams.display()))?;
        let dest = self.stream_file(gen);
        let partial = dest.with_extension("btrfs.partial");
        exec::run(
            Command::new("btrfs")
                .args(["send", "-q", "-f"])
                .arg(&partial)
                .arg(self.generation_dir(gen)),
        )
        .context("keeping the new baseline on disk (btrfs send)")?;
        fs::rename(&partial, &dest)?;
        Ok(())
    }

    /// Puts the baselines kept on disk back into a freshly made RAM pool.
    fn restore_streams(&self) -> Result<()> {
        let Ok(entries) = fs::read_dir(&self.streams) else {
            return Ok(());
        };
        let mut streams: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "btrfs"))
            .collect();
        streams.sort();
        for stream in streams {
            exec::run(
                Command::new("btrfs")
                    .args(["receive", "-q", "-f"])
                    .arg(&stream)
                    .arg(self.baselines_dir()),
            )
            .with_context(|| format!("restoring baseline {}", stream.display()))?;
        }
        Ok(())
    }

    fn baselines_dir(&self) -> PathBuf {
        self.pool.join("baselines")
    }
    fn branches_dir(&self) -> PathBuf {
        self.pool.join("branches")
    }
    fn workspace(&self, gen: Generation) -> PathBuf {
        self.baselines_dir()
            .join(format!("{WORKSPACE_PREFIX}{}", gen.dir_name()))
    }
    fn init_snapshot(&self, name: &BranchName) -> PathBuf {
        self.branches_dir().join(format!("{name}@init"))
    }
    fn checkpoint_snapshot(&self, name: &BranchName, tag: &CheckpointTag) -> PathBuf {
        self.branches_dir().join(format!("{name}@cp-{tag}"))
    }
    /// Branch `name` from `source` (a generation, a branch or a checkpoint): one read-only
    /// snapshot of it is the branch's `@init` (the moment), the datadir a writable copy of
    /// that. Returns the datadir.
    fn new_branch_from(&self, source: &Path, name: &BranchName) -> Result<PathBuf> {
        let init = self.init_snapshot(name);
        let datadir = self.branch_datadir(name);
        self.snapshot(source, &init, true)?;
        if let Err(e) = self.snapshot(&init, &datadir, false) {
            // Undo our own half: the caller only knows about whole clones.
            if let Err(undo) = self.delete_subvolume_if_present(&init) {
                return Err(e.context(format!(
                    "and removing {} failed too: {undo:#}",
                    init.display()
                )));
            }
            return Err(e);
        }
        Ok(datadir)
    }
    /// Replaces the branch's datadir with a writable copy of `snapshot` (reset).
    fn restore_datadir(&self, name: &BranchName, snapshot: &Path) -> Result<()> {
        let datadir = self.branch_datadir(name);
        self.delete_subvolume_if_present(&datadir)?;
        self.snapshot(snapshot, &datadir, false)
    }
    /// `du` of a subvolume: the bytes no other snapshot shares.
    fn exclusive_bytes(&self, path: &Path) -> Result<Option<u64>> {
        if !path.is_dir() {
            return Ok(None);
        }
        let out = exec::run(
            Command::new("btrfs")
                .args(["filesystem", "du", "-s", "--raw"])
                .arg(path),
        )?;
        Ok(parse_du_exclusive(&String::from_utf8_lossy(&out.stdout)))
    }

    /// `exclusive_bytes` of a writable snapshot, walking only the files written since it
    /// was made: the others still share every extent with the snapshot it came from, so
    /// they hold nothing of their own. With 10,000 tables a walk of every file took
    /// 0.3–0.46 s (docs/startup.md); `find-new` lists the written ones in milliseconds. It
    /// reads the live tree, so it also lists files whose data is not yet on disk (which
    /// no walk counts either).
    fn written_exclusive_bytes(&self, path: &Path) -> Result<Option<u64>> {
        /// Beyond this many files a single walk is as cheap as naming them all.
        const MAX_NAMED: usize = 512;
        if !path.is_dir() {
            return Ok(None);
        }
        let Ok(info) = libbtrfsutil::subvolume_info(path) else {
            return self.exclusive_bytes(path);
        };
        let Ok(out) = exec::run(
            Command::new("btrfs")
                .args(["subvolume", "find-new"])
                .arg(path)
                .arg(info.otransid().to_string()),
        ) else {
            return self.exclusive_bytes(path);
        };
        let files = parse_find_new(&String::from_utf8_lossy(&out.stdout));
        if files.len() > MAX_NAMED {
            return self.exclusive_bytes(path);
        }
        // A file removed since it was written is no longer the branch's.
        let present: Vec<PathBuf> = files
            .iter()
            .map(|f| path.join(f))
            .filter(|f| fs::symlink_metadata(f).is_ok_and(|m| m.is_file()))
            .collect();
        if present.is_empty() {
            return Ok(Some(0));
        }
        match exec::run(
            Command::new("btrfs")
                .args(["filesystem", "du", "-s", "--raw"])
                .args(&present),
        ) {
            Ok(out) => Ok(Some(sum_du_exclusive(&String::from_utf8_lossy(
                &out.stdout,
            )))),
            // One was removed between the check and the walk: walk the whole subvolume.
            Err(_) => self.exclusive_bytes(path),
        }
    }

    fn is_btrfs(path: &Path) -> bool {
        nix::sys::statfs::statfs(path)
            .map(|s| s.filesystem_type() == nix::sys::statfs::BTRFS_SUPER_MAGIC)
            .unwrap_or(false)
    }

    fn is_mount_point(path: &Path) -> bool {
        let (Ok(me), Some(parent)) = (fs::metadata(path), path.parent()) else {
            return false;
        };
        fs::metadata(parent)
            .map(|p| p.dev() != me.dev())
            .unwrap_or(false)
    }

    /// Mounts the embedded pool; returns true when it had to make a new image.
    fn mount_embedded(&self, image: &Path, create: bool, size: u64) -> Result<bool> {
        if Self::is_mount_point(&self.pool) && Self::is_btrfs(&self.pool) {
            return Ok(false);
        }
        let mut made = false;
        if !image.exists() {
            if !create {
                let hint = if self.image_in_ram() && self.streams.is_dir() {
                    " (a RAM pool does not survive a reboot; `db-branch init` rebuilds it \
                     from the baselines kept on disk)"
                } else {
                    ""
                };
                return Err(StorageError::NotReady(format!(
                    "the embedded pool image {} does not exist{hint}",
                    image.display()
                ))
                .into());
            }
            made = true;
            // Build the image under a temporary name so a crash never leaves a half-formatted
            // pool.img that later commands would try to mount.
            let tmp = image.with_extension("img.partial");
            let _ = fs::remove_file(&tmp);
            let file = fs::File::create(&tmp)
                .with_context(|| format!("creating pool image {}", tmp.display()))?;
            file.set_len(size)
                .with_context(|| format!("sizing pool image {} to {size} bytes", tmp.display()))?;
            drop(file);
            exec::run(Command::new("mkfs.btrfs").arg("-q").arg(&tmp))
                .context("formatting the embedded pool (is btrfs-progs installed?)")?;
            fs::rename(&tmp, image)?;
        }
        fs::create_dir_all(&self.pool)?;
        // In RAM, blocks btrfs frees (a reset or delete) must go back to the tmpfs soon:
        // synchronous discard punches them out of the image file when the cleaner frees
        // them, and a 5 s commit interval makes that happen within seconds.
        let options = if self.image_in_ram() {
            "loop,noatime,discard=sync,commit=5"
        } else {
            "loop,noatime"
        };
        exec::run(
            Command::new("mount")
                .args(["-t", "btrfs", "-o", options])
                .arg(image)
                .arg(&self.pool),
        )
        .with_context(|| format!("mounting the embedded pool {}", image.display()))?;
        Ok(made)
    }

    fn snapshot(&self, source: &Path, dest: &Path, readonly: bool) -> Result<()> {
        CreateSnapshotOptions::new()
            .readonly(readonly)
            .create(source, dest)
            .map_err(|e| {
                anyhow!(
                    "btrfs snapshot {} -> {} failed: {e}",
                    source.display(),
                    dest.display()
                )
            })
    }

    fn delete_subvolume_if_present(&self, path: &Path) -> Result<()> {
        if fs::symlink_metadata(path).is_err() {
            return Ok(());
        }
        DeleteSubvolumeOptions::new()
            .delete(path)
            .map_err(|e| anyhow!("deleting btrfs subvolume {} failed: {e}", path.display()))
    }

    /// `open` (`create` false) or `init` (`create` true).
    fn prepare_pool(&self, create: bool) -> Result<bool> {
        let made = match &self.image {
            Some((image, size)) => self.mount_embedded(image, create, *size)?,
            None => {
                if !self.pool.is_dir() {
                    return Err(StorageError::Misconfigured(format!(
                        "btrfs.path {} does not exist or is not a directory; mount a btrfs \
                         filesystem there, or leave btrfs.path empty for the embedded pool",
                        self.pool.display()
                    ))
                    .into());
                }
                if !Self::is_btrfs(&self.pool) {
                    return Err(StorageError::Misconfigured(format!(
                        "btrfs.path {} is not on a btrfs filesystem (check with `stat -f -c %T {}`); \
                         mount btrfs there, or leave btrfs.path empty for the embedded pool",
                        self.pool.display(),
                        self.pool.display()
                    ))
                    .into());
                }
                false
            }
        };
        for dir in [self.baselines_dir(), self.branches_dir()] {
            if !dir.is_dir() {
                if !create {
                    return Err(StorageError::NotReady(format!(
                        "the pool at {} is not initialised ({} is missing)",
                        self.pool.display(),
                        dir.display()
                    ))
                    .into());
                }
                fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            }
        }
        if made && self.image_in_ram() {
            self.restore_streams()?;
        }
        Ok(made)
    }
}

impl Storage for BtrfsStorage {
    fn ram_backed(&self) -> bool {
        self.image_in_ram()
    }

    fn open(&self) -> Result<()> {
        self.prepare_pool(false).map(|_| ())
    }

    fn init(&self) -> Result<bool> {
        self.prepare_pool(true)
    }

    fn info(&self) -> Result<PoolInfo> {
        let st = nix::sys::statvfs::statvfs(&self.pool)
            .with_context(|| format!("statvfs {}", self.pool.display()))?;
        Ok(PoolInfo {
            kind: "btrfs".into(),
            path: self.pool.clone(),
            total_bytes: st.blocks() * st.fragment_size(),
            free_bytes: st.blocks_available() * st.fragment_size(),
            ram_backed: self.image_in_ram(),
            ram_bytes: self
                .image
                .as_ref()
                .filter(|_| self.image_in_ram())
                .and_then(|(image, _)| fs::metadata(image).ok())
                .map(|m| m.blocks() * 512),
        })
    }

    fn baselines(&self) -> Result<Vec<Generation>> {
        let mut gens = Vec::new();
        let dir = self.baselines_dir();
        for entry in fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
            let entry = entry?;
            if let Some(gen) = entry
                .file_name()
                .to_str()
                .and_then(Generation::from_dir_name)
            {
                // A writable one is a receive under way or interrupted (transfer.rs).
                if libbtrfsutil::subvolume_read_only(entry.path()).unwrap_or(true) {
                    gens.push(gen);
                }
            }
        }
        gens.sort();
        Ok(gens)
    }

    fn begin_baseline(&self, gen: Generation) -> Result<PathBuf> {
        let ws = self.workspace(gen);
        self.delete_subvolume_if_present(&ws)?;
        libbtrfsutil::create_subvolume(&ws)
            .map_err(|e| anyhow!("creating btrfs subvolume {} failed: {e}", ws.display()))?;
        Ok(ws)
    }

    fn fill_from_dir(&self, workspace: &Path, source: &Path) -> Result<()> {
        let mut src = source.as_os_str().to_owned();
        src.push("/.");
        exec::run(
            Command::new("cp")
                .args(["-a", "--reflink=auto"])
                .arg(src)
                .arg(workspace),
        )
        .with_context(|| format!("copying {} into the new baseline", source.display()))?;
        Ok(())
    }

    fn generation_dir(&self, gen: Generation) -> PathBuf {
        self.baselines_dir().join(gen.dir_name())
    }

    fn seal_baseline(&self, gen: Generation) -> Result<()> {
        let ws = self.workspace(gen);
        let dest = self.generation_dir(gen);
        if dest.exists() {
            return Err(anyhow!(
                "baseline {gen} already exists at {}; it was not replaced",
                dest.display()
            ));
        }
        self.snapshot(&ws, &dest, true)?;
        if self.image_in_ram() {
            if let Err(e) = self.save_stream(gen) {
                // A RAM generation that could not be kept on disk would vanish at reboot.
                let _ = self.delete_subvolume_if_present(&dest);
                return Err(e);
            }
        }
        self.delete_subvolume_if_present(&ws)
    }

    fn workspaces(&self) -> Result<Vec<Generation>> {
        let mut gens = Vec::new();
        let dir = self.baselines_dir();
        for entry in fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
            let name = entry?.file_name();
            if let Some(gen) = name
                .to_str()
                .and_then(|n| {
                    n.strip_prefix(WORKSPACE_PREFIX)
                        .or_else(|| n.strip_prefix(LEGACY_WORKSPACE_PREFIX))
                })
                .and_then(Generation::from_dir_name)
            {
                gens.push(gen);
            }
        }
        gens.sort();
        Ok(gens)
    }

    fn abandon_baseline(&self, gen: Generation) -> Result<()> {
        self.delete_subvolume_if_present(&self.workspace(gen))?;
        self.delete_subvolume_if_present(
            &self
                .baselines_dir()
                .join(format!("{LEGACY_WORKSPACE_PREFIX}{}", gen.dir_name())),
        )
    }

    fn clone_branch(&self, gen: Generation, name: &BranchName) -> Result<PathBuf> {
        let source = self.generation_dir(gen);
        if !source.is_dir() {
            return Err(StorageError::NoSuchGeneration(gen).into());
        }
        self.new_branch_from(&source, name)
    }

    fn rollback_branch(&self, name: &BranchName) -> Result<()> {
        let init = self.init_snapshot(name);
        if !init.is_dir() {
            return Err(anyhow!(
                "branch {name} has no clean snapshot at {}; it cannot be reset (delete and create it again)",
                init.display()
            ));
        }
        self.restore_datadir(name, &init)
    }

    fn destroy_branch(&self, name: &BranchName) -> Result<()> {
        for tag in self.checkpoints(name)? {
            self.delete_subvolume_if_present(&self.checkpoint_snapshot(name, &tag))?;
        }
        self.delete_subvolume_if_present(&self.branch_datadir(name))?;
        self.delete_subvolume_if_present(&self.init_snapshot(name))
    }

    fn clone_from_branch(
        &self,
        source: &BranchName,
        tag: Option<&CheckpointTag>,
        name: &BranchName,
    ) -> Result<PathBuf> {
        let from = match tag {
            Some(t) => self.checkpoint_snapshot(source, t),
            None => self.branch_datadir(source),
        };
        if !from.is_dir() {
            return Err(anyhow!("{} does not exist", from.display()));
        }
        self.new_branch_from(&from, name)
    }

    fn checkpoint_branch(&self, name: &BranchName, tag: &CheckpointTag) -> Result<()> {
        let dest = self.checkpoint_snapshot(name, tag);
        if dest.exists() {
            return Err(anyhow!("checkpoint {name}@{tag} already exists"));
        }
        self.snapshot(&self.branch_datadir(name), &dest, true)
    }

    fn rollback_to_checkpoint(&self, name: &BranchName, tag: &CheckpointTag) -> Result<()> {
        let cp = self.checkpoint_snapshot(name, tag);
        if !cp.is_dir() {
            return Err(anyhow!(
                "checkpoint {name}@{tag} does not exist at {}",
                cp.display()
            ));
        }
        self.restore_datadir(name, &cp)
    }

    fn remove_checkpoint(&self, name: &BranchName, tag: &CheckpointTag) -> Result<()> {
        self.delete_subvolume_if_present(&self.checkpoint_snapshot(name, tag))
    }

    fn checkpoints(&self, name: &BranchName) -> Result<Vec<CheckpointTag>> {
        let prefix = format!("{name}@cp-");
        let dir = self.branches_dir();
        let mut tags: Vec<CheckpointTag> = match fs::read_dir(&dir) {
            Ok(entries) => entries
                .flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .strip_prefix(&prefix)?
                        .parse()
                        .ok()
                })
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
        };
        tags.sort();
        Ok(tags)
    }

    fn checkpoint_usage(&self, name: &BranchName, tag: &CheckpointTag) -> Result<Option<u64>> {
        self.exclusive_bytes(&self.checkpoint_snapshot(name, tag))
    }

    fn has_trash(&self) -> bool {
        true
    }

    fn trash_branch(&self, name: &BranchName, id: &TrashId) -> Result<()> {
        self.trash(name, id)
    }

    fn restore_trashed(&self, id: &TrashId, name: &BranchName) -> Result<()> {
        self.restore(id, name)
    }

    fn purge_trashed(&self, id: &TrashId) -> Result<()> {
        self.purge(id)
    }

    fn trashed(&self) -> Result<Vec<TrashId>> {
        self.trash_entries()
    }

    fn reclaim(&self) -> Result<()> {
        // The cleaner drops deleted subvolumes' extents; they count as free only once the
        // transaction after that commits (up to 30 s later on its own).
        exec::run(
            Command::new("btrfs")
                .args(["subvolume", "sync"])
                .arg(&self.pool),
        )
        .context("waiting for btrfs to free deleted subvolumes")?;
        libbtrfsutil::sync(&self.pool).map_err(|e| {
            anyhow!(
                "committing btrfs's transaction on {}: {e}",
                self.pool.display()
            )
        })
    }

    fn trashed_usage(&self, id: &TrashId) -> Result<Option<u64>> {
        self.trash_usage(id)
    }

    fn branch_from_workspace(&self, gen: Generation, name: &BranchName) -> Result<PathBuf> {
        let ws = self.workspace(gen);
        if !ws.is_dir() {
            return Err(anyhow!("no unsealed workspace at {}", ws.display()));
        }
        let datadir = self.new_branch_from(&ws, name)?;
        self.delete_subvolume_if_present(&ws)?;
        Ok(datadir)
    }

    fn begin_baseline_from_branch(&self, gen: Generation, name: &BranchName) -> Result<PathBuf> {
        let ws = self.workspace(gen);
        self.delete_subvolume_if_present(&ws)?;
        self.snapshot(&self.branch_datadir(name), &ws, false)?;
        Ok(ws)
    }

    fn branch_exists(&self, name: &BranchName) -> Result<bool> {
        Ok(fs::symlink_metadata(self.branch_datadir(name)).is_ok()
            || fs::symlink_metadata(self.init_snapshot(name)).is_ok())
    }

    fn branch_datadir(&self, name: &BranchName) -> PathBuf {
        self.branches_dir().join(name.as_str())
    }

    fn branch_usage(&self, name: &BranchName) -> Result<Option<u64>> {
        self.written_exclusive_bytes(&self.branch_datadir(name))
    }

    fn branches(&self) -> Result<Vec<BranchName>> {
        let mut names = Vec::new();
        let dir = self.branches_dir();
        for entry in fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
            let file = entry?.file_name();
            let s = file.to_string_lossy();
            let base = s.strip_suffix("@init").unwrap_or(&s);
            if let Ok(name) = base.parse::<BranchName>() {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        names.sort();
        Ok(names)
    }

    fn remove_baseline(&self, gen: Generation) -> Result<()> {
        // btrfs snapshots do not depend on their source: branches keep their data.
        self.delete_subvolume_if_present(&self.generation_dir(gen))?;
        // A RAM pool's copy on disk goes too, or it would come back at the next boot.
        let stream = self.stream_file(gen);
        match fs::remove_file(&stream) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", stream.display()))
            }
            _ => Ok(()),
        }
    }

    fn readiness(&self) -> Vec<Check> {
        let mut checks = Vec::new();
        let kernel = fs::read_to_string("/proc/filesystems").unwrap_or_default();
        checks.push(if kernel.lines().any(|l| l.trim_end().ends_with("btrfs")) {
            Check::ok("btrfs kernel support", "btrfs is in /proc/filesystems")
        } else {
            Check::fail(
                "btrfs kernel support",
                "btrfs is not in /proc/filesystems; load the module (`modprobe btrfs`)",
            )
        });
        checks.push(match exec::run(Command::new("btrfs").arg("--version")) {
            Ok(out) => Check::ok("btrfs-progs", String::from_utf8_lossy(&out.stdout).trim()),
            Err(_) => Check::fail(
                "btrfs-progs",
                "`btrfs` not found; apt-get install btrfs-progs",
            ),
        });
        let mounted = Self::is_btrfs(&self.pool)
            && (self.image.is_none() || Self::is_mount_point(&self.pool));
        checks.push(match (&self.image, mounted) {
            (_, true) => match self.info() {
                Ok(i) => Check::ok(
                    "pool",
                    format!(
                        "{} ({} free of {})",
                        self.pool.display(),
                        crate::values::ByteSize(i.free_bytes),
                        crate::values::ByteSize(i.total_bytes)
                    ),
                ),
                Err(e) => Check::fail("pool", format!("{e:#}")),
            },
            (Some((image, _)), false) if image.exists() => Check::warn(
                "pool",
                format!(
                    "{} is not mounted; the next command mounts it",
                    image.display()
                ),
            ),
            (Some(_), false) => Check::fail("pool", "no embedded pool yet; run `db-branch init`"),
            (None, false) => Check::fail(
                "pool",
                format!("{} is not a btrfs filesystem", self.pool.display()),
            ),
        });
        checks
    }
}

/// `btrfs filesystem du -s --raw` prints a header and one line: total, exclusive, set shared,
/// path. Exclusive is what the branch alone holds.
fn parse_du_exclusive(out: &str) -> Option<u64> {
    out.lines()
        .find(|l| !l.trim_start().starts_with("Total"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
}

/// The files `btrfs subvolume find-new` lists (paths inside the subvolume, each once):
/// lines `inode N file offset N len N disk start N offset N gen N flags F NAME`, then
/// `transid marker was N`.
fn parse_find_new(out: &str) -> Vec<String> {
    let mut files: Vec<String> = out
        .lines()
        .filter(|l| l.starts_with("inode "))
        .filter_map(|l| {
            let (_, rest) = l.split_once(" flags ")?;
            let (_, name) = rest.split_once(' ')?;
            (!name.is_empty()).then(|| name.to_string())
        })
        .collect();
    files.sort_unstable();
    files.dedup();
    files
}

/// The sum of the Exclusive column of `btrfs filesystem du -s --raw A B …`.
fn sum_du_exclusive(out: &str) -> u64 {
    out.lines()
        .filter(|l| !l.trim_start().starts_with("Total"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_new_output_is_parsed() {
        let out = "inode 258 file offset 0 len 1048576 disk start 0 offset 0 gen 12 flags NONE f3\n\
                   inode 258 file offset 1048576 len 4096 disk start 0 offset 0 gen 12 flags PREALLOC f3\n\
                   inode 300 file offset 0 len 8192 disk start 0 offset 0 gen 13 flags INLINE shop/a b.ibd\n\
                   transid marker was 14\n";
        assert_eq!(parse_find_new(out), ["f3", "shop/a b.ibd"]);
        assert!(parse_find_new("transid marker was 9\n").is_empty());
        let du = "     Total   Exclusive  Set shared  Filename\n   1048576     1048576           0  /p/f3\n     Total   Exclusive  Set shared  Filename\n      8192        4096        4096  /p/x\n";
        assert_eq!(sum_du_exclusive(du), 1052672);
    }

    #[test]
    fn du_output_is_parsed() {
        let out = "     Total   Exclusive  Set shared  Filename\n 734003200     12582912   721420288  /p/branches/a\n";
        assert_eq!(parse_du_exclusive(out), Some(12582912));
        assert_eq!(parse_du_exclusive("garbage"), None);
    }
}
