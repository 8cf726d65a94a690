//! Branches from branches, checkpoints, resets to any of them and promoted generations on
//! ZFS, where clones depend on their origin snapshots (lineage.rs: the rules).

use super::lineage::{
    next_seq, parse_listing, plan_prune, snapshots_of, Destroy, Listed, Names, Owner,
    CHECKPOINT_PREFIX, FROM_PREFIX, GONE_PREFIX, PROMOTE_PREFIX,
};
use super::{zfs, ZfsStorage};
use crate::branch::{BranchName, CheckpointTag, Generation};
use crate::storage::Storage;
use anyhow::{anyhow, Context, Result};
use std::path::PathBuf;

impl ZfsStorage {
    pub(super) fn names(&self) -> Names<'_> {
        Names {
            root: &self.dataset,
        }
    }
    pub(super) fn held_root(&self) -> String {
        self.names().held_root()
    }
    pub(super) fn generations_root(&self) -> String {
        format!("{}/generations", self.dataset)
    }
    pub(super) fn generation_ds(&self, gen: Generation) -> String {
        format!("{}/{}", self.generations_root(), gen.dir_name())
    }
    pub(super) fn generation_ds_dir(&self, gen: Generation) -> PathBuf {
        self.mount_root.join("generations").join(gen.dir_name())
    }

    /// Every branch dataset, everything held aside, and their snapshots: one `zfs list`.
    pub(super) fn listing(&self) -> Result<Vec<Listed>> {
        Ok(parse_listing(&zfs(&[
            "list",
            "-H",
            "-p",
            "-t",
            "filesystem,snapshot",
            "-o",
            "name,clones,createtxg",
            "-r",
            &self.branches_ds(),
            &self.held_root(),
        ])?))
    }

    /// Destroys what nothing needs any longer (with `forget`, that branch's own state too).
    pub(super) fn prune(&self, forget: Option<&BranchName>) -> Result<()> {
        let listing = self.listing()?;
        for step in plan_prune(self.names(), &listing, forget.map(BranchName::as_str)) {
            match &step {
                Destroy::Dataset(ds) => self.destroy(ds)?,
                Destroy::Snapshots { .. } => {
                    zfs(&["destroy", &step.target()])?;
                }
            }
        }
        Ok(())
    }

    /// A dataset busy for a moment right after its server was killed.
    fn retry(&self, what: impl Fn() -> Result<String>) -> Result<()> {
        let mut last = None;
        for _ in 0..50 {
            match what() {
                Ok(_) => return Ok(()),
                Err(e) => last = Some(e),
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Err(last.unwrap_or_else(|| anyhow!("zfs failed")))
    }

    /// The branch's datadir becomes its snapshot `snap` (`init`, `cp-TAG`), keeping every
    /// other snapshot of the branch. The datadir's newest snapshot is a plain rollback;
    /// any other is a new clone, with the old datadir held aside when it holds snapshots.
    pub(super) fn reset_to_snapshot(&self, name: &BranchName, snap: &str) -> Result<()> {
        let names = self.names();
        let listing = self.listing()?;
        let datadir = names.datadir(name.as_str());
        let target = names.find(&listing, name.as_str(), snap).ok_or_else(|| {
            anyhow!("branch {name} has no snapshot @{snap} in ZFS (zfs list -t snapshot -r {datadir} {})", self.held_root())
        })?;
        let own = snapshots_of(&listing, &datadir);
        if own.last().map(|l| &l.name) == Some(&target.name) {
            zfs(&["rollback", &target.name])
                .with_context(|| format!("rolling back branch {name}"))?;
            return Ok(());
        }
        let mut origin = target.name.clone();
        let listed = listing.iter().any(|l| l.name == datadir);
        let mut held = None;
        if listed && own.is_empty() {
            // Nothing on it to keep (a datadir cloned at an earlier reset).
            self.destroy(&datadir)?;
        } else if listed {
            let aside = names.held(name.as_str(), next_seq(&listing));
            self.retry(|| zfs(&["rename", &datadir, &aside]))
                .with_context(|| format!("holding the datadir of branch {name} aside"))?;
            if let Some((ds, s)) = origin.split_once('@') {
                if ds == datadir {
                    origin = format!("{aside}@{s}");
                }
            }
            // The old datadir's writes since its newest snapshot are of no use to anyone.
            if let Some(newest) = own.last().and_then(|l| l.name.split_once('@')) {
                let _ = zfs(&["rollback", &format!("{aside}@{}", newest.1)]);
            }
            held = Some(aside);
        }
        if let Err(e) = zfs(&["clone", &origin, &datadir]) {
            if let Some(aside) = held {
                if let Err(undo) = zfs(&["rename", &aside, &datadir]) {
                    return Err(e.context(format!(
                        "and moving {aside} back to {datadir} failed too: {undo:#}"
                    )));
                }
            }
            return Err(e.context(format!("resetting branch {name} to @{snap}")));
        }
        Ok(())
    }

    /// `create NAME --from SOURCE[@TAG]`: a clone of the checkpoint, or of a snapshot of
    /// the source's datadir taken now, with its own `@init`.
    pub(super) fn branch_from_branch(
        &self,
        source: &BranchName,
        tag: Option<&CheckpointTag>,
        name: &BranchName,
    ) -> Result<PathBuf> {
        let names = self.names();
        let listing = self.listing()?;
        let (origin, made) = match tag {
            Some(t) => {
                let snap = format!("{CHECKPOINT_PREFIX}{t}");
                let found = names
                    .find(&listing, source.as_str(), &snap)
                    .ok_or_else(|| anyhow!("checkpoint {source}@{t} has no snapshot in ZFS"))?;
                (found.name.clone(), false)
            }
            None => {
                let snap = format!(
                    "{}@{FROM_PREFIX}{name}:{}",
                    names.datadir(source.as_str()),
                    next_seq(&listing)
                );
                zfs(&["snapshot", &snap])
                    .with_context(|| format!("snapshotting branch {source}"))?;
                (snap, true)
            }
        };
        let datadir = names.datadir(name.as_str());
        let undo_snapshot = |e: anyhow::Error| -> anyhow::Error {
            if !made {
                return e;
            }
            match zfs(&["destroy", &origin]) {
                Ok(_) => e,
                Err(undo) => e.context(format!("and destroying {origin} failed too: {undo:#}")),
            }
        };
        if let Err(e) = zfs(&["clone", &origin, &datadir]) {
            return Err(undo_snapshot(e.context(format!("cloning {origin}"))));
        }
        if let Err(e) = zfs(&["snapshot", &format!("{datadir}@init")]) {
            if let Err(undo) = self.destroy(&datadir) {
                return Err(e.context(format!("and destroying {datadir} failed too: {undo:#}")));
            }
            return Err(undo_snapshot(e));
        }
        Ok(self.branch_datadir(name))
    }

    /// Deletes a branch: its datadir, `@init`, checkpoints and what it held aside, except
    /// what others are cloned from, which is kept aside as `held/gone:N` until they go.
    pub(super) fn delete_branch(&self, name: &BranchName) -> Result<()> {
        self.prune(Some(name))?;
        let names = self.names();
        let listing = self.listing()?;
        for (seq, ds) in (next_seq(&listing)..).zip(names.datasets_of(&listing, name.as_str())) {
            let gone = names.gone(seq);
            self.retry(|| zfs(&["rename", ds, &gone]))
                .with_context(|| format!("keeping {ds} aside for the datasets cloned from it"))?;
        }
        Ok(())
    }

    /// Deletes checkpoint `tag`; one something is cloned from is renamed out of the way
    /// (`@gone:N`) and goes with the last clone.
    pub(super) fn delete_checkpoint(&self, name: &BranchName, tag: &CheckpointTag) -> Result<()> {
        let listing = self.listing()?;
        let snap = format!("{CHECKPOINT_PREFIX}{tag}");
        let Some(found) = self.names().find(&listing, name.as_str(), &snap) else {
            return Ok(());
        };
        if found.clones.is_empty() {
            zfs(&["destroy", &found.name])?;
        } else {
            let (ds, _) = found.name.split_once('@').expect("a snapshot");
            zfs(&[
                "rename",
                &found.name,
                &format!("{ds}@{GONE_PREFIX}{}", next_seq(&listing)),
            ])?;
        }
        // A dataset held aside may hold nothing now.
        self.prune(None)
    }

    pub(super) fn checkpoint_tags(&self, name: &BranchName) -> Result<Vec<CheckpointTag>> {
        let listing = self.listing()?;
        Ok(self
            .names()
            .checkpoints(&listing, name.as_str())
            .iter()
            .filter_map(|t| t.parse().ok())
            .collect())
    }

    pub(super) fn checkpoint_bytes(
        &self,
        name: &BranchName,
        tag: &CheckpointTag,
    ) -> Result<Option<u64>> {
        let listing = self.listing()?;
        let Some(found) = self.names().find(
            &listing,
            name.as_str(),
            &format!("{CHECKPOINT_PREFIX}{tag}"),
        ) else {
            return Ok(None);
        };
        Ok(self
            .props(&found.name, "used")?
            .get("used")
            .and_then(|v| v.parse().ok()))
    }

    /// A workspace for generation `gen` that is the branch's datadir now: a clone of a
    /// snapshot of it, under `generations/` (the server was stopped cleanly by the caller).
    pub(super) fn promote_workspace(&self, gen: Generation, name: &BranchName) -> Result<PathBuf> {
        let ws = self.generation_ds(gen);
        if self.exists(&ws)? {
            self.destroy(&ws)?;
        }
        let snap = format!(
            "{}@{PROMOTE_PREFIX}{}",
            self.names().datadir(name.as_str()),
            gen.dir_name()
        );
        if self.exists(&snap)? {
            zfs(&["destroy", &snap])?;
        }
        zfs(&["snapshot", &snap]).with_context(|| format!("snapshotting branch {name}"))?;
        if let Err(e) = zfs(&["clone", &snap, &ws]) {
            let _ = zfs(&["destroy", &snap]);
            return Err(e.context(format!("cloning {snap} for baseline {gen}")));
        }
        Ok(self.generation_ds_dir(gen))
    }

    /// The snapshot generation `gen` is: one in a dataset of its own (promoted or received), or the baseline workspace's.
    pub(super) fn generation_snapshot(&self, gen: Generation) -> Result<String> {
        let promoted = self.generation_ds(gen);
        Ok(if self.exists(&promoted)? {
            format!("{promoted}@{}", gen.dir_name())
        } else {
            format!("{}@{}", self.baseline(), gen.dir_name())
        })
    }

    /// Who holds a snapshot, in words: branch names, or what a deleted branch left.
    pub(super) fn holders(&self, clones: &[String]) -> Vec<String> {
        let names = self.names();
        let mut out: Vec<String> = clones
            .iter()
            .map(|c| match names.owner(c) {
                Some(Owner::Datadir(b)) | Some(Owner::Held(b)) => b.to_string(),
                Some(Owner::Gone) => {
                    "a deleted branch's snapshots that other branches were made from".into()
                }
                None => c.clone(),
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }
}
