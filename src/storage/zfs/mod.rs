//! ZFS storage through the `zfs` and `zpool` commands (the stable interface DBLab, zrepl and
//! sanoid use), parsing their `-H -p` output; no ZFS library is linked (libzetta has no
//! clone, rollback or mount, and would tie every build to libzfs_core and libnvpair).
//!
//! Layout under the configured dataset (mounted under `root/zfs`):
//! `DATASET/baseline` holds one snapshot per generation (`@gen-NNNNNN`) and is the workspace
//! a new generation is built in; `DATASET/generations/gen-NNNNNN` is a generation in a
//! dataset of its own — promoted from a branch (a clone of the branch's snapshot) or
//! received from another host — with its own `@gen-NNNNNN`;
//! `DATASET/branches/NAME` is a clone of a generation with its own `@init`; checkpoints are
//! `@cp-TAG` snapshots; `DATASET/held` keeps, unmounted, earlier datadirs whose snapshots
//! are still needed (lineage.rs says why and when they go). Datasets use recordsize=16K
//! (InnoDB's page), lz4 and atime=off.

mod history;
pub mod lineage;
mod transfer;

use super::StorageError;
use super::{PoolInfo, Storage};
use crate::branch::{BranchName, CheckpointTag, Generation};
use crate::check::Check;
use crate::exec;
use anyhow::{anyhow, Context, Result};
use lineage::INIT;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Properties for datasets holding InnoDB datadirs: 16K records match InnoDB's page size
/// (no read-modify-write of larger records), lz4 is cheaper than the I/O it saves, atime
/// writes are pure overhead.
pub const DATASET_PROPERTIES: &[(&str, &str)] = &[
    ("recordsize", "16K"),
    ("compression", "lz4"),
    ("atime", "off"),
];

/// User properties that let the pool alone describe a branch.
pub const META_PREFIX: &str = "db-branch:";

pub struct ZfsStorage {
    dataset: String,
    mount_root: PathBuf,
}

fn zfs(args: &[&str]) -> Result<String> {
    let out = exec::run(Command::new("zfs").args(args))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `zfs list -H -p -o name …` output: one name per line.
pub fn parse_names(out: &str) -> Vec<String> {
    out.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// `zfs get -H -p -o property,value a,b DATASET`: property → value.
pub fn parse_props(out: &str) -> BTreeMap<String, String> {
    out.lines()
        .filter_map(|l| {
            let mut it = l.split('\t');
            Some((it.next()?.to_string(), it.next()?.to_string()))
        })
        .collect()
}

/// Generations from `zfs list -H -p -t snapshot -o name DATASET/baseline`.
pub fn parse_generations(out: &str) -> Vec<Generation> {
    let mut gens: Vec<Generation> = parse_names(out)
        .iter()
        .filter_map(|n| n.rsplit_once('@'))
        .filter_map(|(_, snap)| Generation::from_dir_name(snap))
        .collect();
    gens.sort();
    gens
}

impl ZfsStorage {
    pub fn new(dataset: String, root: &Path) -> Self {
        ZfsStorage {
            dataset,
            mount_root: root.join("zfs"),
        }
    }

    fn baseline(&self) -> String {
        format!("{}/baseline", self.dataset)
    }
    fn branches_ds(&self) -> String {
        format!("{}/branches", self.dataset)
    }
    fn branch_ds(&self, name: &BranchName) -> String {
        format!("{}/branches/{name}", self.dataset)
    }
    fn workspace(&self) -> PathBuf {
        self.mount_root.join("baseline")
    }

    /// Generations built in the baseline workspace (not promoted from a branch).
    fn own_baselines(&self) -> Result<Vec<Generation>> {
        Ok(parse_generations(&zfs(&[
            "list",
            "-H",
            "-p",
            "-t",
            "snapshot",
            "-o",
            "name",
            "-d",
            "1",
            &self.baseline(),
        ])?))
    }

    fn exists(&self, ds: &str) -> Result<bool> {
        let out = Command::new("zfs")
            .args(["list", "-H", "-o", "name", ds])
            .output()
            .context("running `zfs` (is zfsutils-linux installed?)")?;
        Ok(out.status.success())
    }

    fn props(&self, ds: &str, names: &str) -> Result<BTreeMap<String, String>> {
        Ok(parse_props(&zfs(&[
            "get",
            "-H",
            "-p",
            "-o",
            "property,value",
            names,
            ds,
        ])?))
    }

    /// Empties the workspace for a new build (the previous generation lives on in its
    /// snapshot).
    fn empty_workspace(&self) -> Result<()> {
        let ws = self.workspace();
        for entry in fs::read_dir(&ws).with_context(|| format!("listing {}", ws.display()))? {
            let p = entry?.path();
            if p.is_dir() {
                fs::remove_dir_all(&p)
            } else {
                fs::remove_file(&p)
            }
            .with_context(|| format!("emptying {}", p.display()))?;
        }
        Ok(())
    }

    /// `zfs destroy` right after a kill can find the dataset busy for a moment.
    fn destroy(&self, ds: &str) -> Result<()> {
        let mut last = None;
        for _ in 0..50 {
            if !self.exists(ds)? {
                return Ok(());
            }
            match zfs(&["destroy", "-r", ds]) {
                Ok(_) => return Ok(()),
                Err(e) => last = Some(e),
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Err(last.unwrap_or_else(|| anyhow!("zfs destroy {ds} failed")))
    }

    /// Branch metadata kept as user properties on its dataset.
    pub fn branch_metadata(&self, name: &BranchName) -> Result<BTreeMap<String, String>> {
        let out = zfs(&[
            "get",
            "-H",
            "-p",
            "-o",
            "property,value,source",
            "all",
            &self.branch_ds(name),
        ])?;
        Ok(out
            .lines()
            .filter_map(|l| {
                let mut it = l.split('\t');
                let (p, v, source) = (it.next()?, it.next()?, it.next()?);
                (p.starts_with(META_PREFIX) && source == "local")
                    .then(|| (p[META_PREFIX.len()..].to_string(), v.to_string()))
            })
            .collect())
    }

    /// `open` (`create` false) or `init` (`create` true).
    fn prepare_pool(&self, create: bool) -> Result<bool> {
        let mut made = false;
        if !self.exists(&self.dataset)? {
            if !create {
                return Err(StorageError::NotReady(format!(
                    "ZFS dataset {} does not exist (its pool must exist: `zpool list`)",
                    self.dataset
                ))
                .into());
            }
            let mut args = vec!["create".to_string(), "-p".to_string()];
            for (k, v) in DATASET_PROPERTIES {
                args.push("-o".into());
                args.push(format!("{k}={v}"));
            }
            args.push("-o".into());
            args.push(format!("mountpoint={}", self.mount_root.display()));
            args.push(self.dataset.clone());
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            zfs(&args).with_context(|| format!("creating ZFS dataset {}", self.dataset))?;
            made = true;
        }
        for ds in [self.baseline(), self.branches_ds()] {
            if !self.exists(&ds)? {
                if !create {
                    return Err(
                        StorageError::NotReady(format!("ZFS dataset {ds} is missing")).into(),
                    );
                }
                zfs(&["create", &ds])?;
            }
        }
        // Added after the first release: made on any open of an older pool. `held` keeps
        // datasets that are never mounted (lineage.rs).
        if !self.exists(&self.held_root())? {
            zfs(&[
                "create",
                "-o",
                "mountpoint=none",
                "-o",
                "canmount=off",
                &self.held_root(),
            ])?;
        }
        if !self.exists(&self.generations_root())? {
            zfs(&["create", &self.generations_root()])?;
        }
        // After a reboot without automatic mounting: one listing, and a mount of each
        // dataset that should be mounted and is not (parents come first in the listing).
        let out = zfs(&[
            "list",
            "-H",
            "-o",
            "name,mounted,canmount,mountpoint",
            "-t",
            "filesystem",
            "-r",
            &self.dataset,
        ])?;
        for line in out.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            if let [ds, "no", "on", mountpoint] = f[..] {
                if mountpoint != "none" && mountpoint != "legacy" {
                    zfs(&["mount", ds]).with_context(|| format!("mounting {ds}"))?;
                }
            }
        }
        Ok(made)
    }
}

impl Storage for ZfsStorage {
    fn open(&self) -> Result<()> {
        self.prepare_pool(false).map(|_| ())
    }

    fn init(&self) -> Result<bool> {
        self.prepare_pool(true)
    }

    fn ram_backed(&self) -> bool {
        false
    }

    fn info(&self) -> Result<PoolInfo> {
        let p = self.props(&self.dataset, "used,available")?;
        let get = |k: &str| p.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        Ok(PoolInfo {
            kind: "zfs".into(),
            path: self.mount_root.clone(),
            total_bytes: get("used") + get("available"),
            free_bytes: get("available"),
            ram_backed: false,
            ram_bytes: None,
        })
    }

    fn baselines(&self) -> Result<Vec<Generation>> {
        let mut gens = parse_generations(&zfs(&[
            "list",
            "-H",
            "-p",
            "-t",
            "snapshot",
            "-o",
            "name",
            "-r",
            &self.baseline(),
            &self.generations_root(),
        ])?);
        gens.dedup();
        Ok(gens)
    }

    fn begin_baseline(&self, _gen: Generation) -> Result<PathBuf> {
        self.empty_workspace()?;
        Ok(self.workspace())
    }

    fn fill_from_dir(&self, workspace: &Path, source: &Path) -> Result<()> {
        let mut src = source.as_os_str().to_owned();
        src.push("/.");
        exec::run(Command::new("cp").arg("-a").arg(src).arg(workspace))
            .with_context(|| format!("copying {} into the new baseline", source.display()))?;
        Ok(())
    }

    fn generation_dir(&self, gen: Generation) -> PathBuf {
        let promoted = self.generation_ds_dir(gen);
        if promoted.is_dir() {
            return promoted.join(".zfs/snapshot").join(gen.dir_name());
        }
        self.workspace().join(".zfs/snapshot").join(gen.dir_name())
    }

    fn seal_baseline(&self, gen: Generation) -> Result<()> {
        let promoted = self.generation_ds(gen);
        let dataset = if self.exists(&promoted)? {
            promoted
        } else {
            self.baseline()
        };
        zfs(&["snapshot", &format!("{dataset}@{}", gen.dir_name())])
            .with_context(|| format!("freezing baseline {gen}"))?;
        Ok(())
    }

    fn abandon_baseline(&self, gen: Generation) -> Result<()> {
        let promoted = self.generation_ds(gen);
        if self.exists(&promoted)? {
            // A promotion that did not finish: its clone, then the snapshot it came from.
            self.destroy(&promoted)?;
            return self.prune(None);
        }
        // Back to the newest generation's state, or empty when there is none.
        match self.own_baselines()?.last() {
            Some(g) => {
                zfs(&["rollback", &format!("{}@{}", self.baseline(), g.dir_name())])?;
                Ok(())
            }
            None => self.empty_workspace(),
        }
    }

    fn workspaces(&self) -> Result<Vec<Generation>> {
        // Changes since the workspace's newest snapshot are an unfinished build.
        let written: u64 = self
            .props(&self.baseline(), "written")?
            .get("written")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let gens = self.baselines()?;
        let mut out = Vec::new();
        // With no snapshot of its own to compare with (a host whose generations were all
        // received, or none yet), `written` counts the empty dataset itself: any file in
        // the workspace is then a build's.
        let unfinished = if self.own_baselines()?.is_empty() {
            std::fs::read_dir(self.workspace())
                .map(|mut d| d.next().is_some())
                .unwrap_or(false)
        } else {
            written > 0
        };
        if unfinished {
            out.push(gens.last().map_or(Generation(1), |g| g.next()));
        }
        // A promoted workspace without its generation snapshot.
        let promoted = zfs(&[
            "list",
            "-H",
            "-o",
            "name",
            "-t",
            "filesystem",
            "-d",
            "1",
            &self.generations_root(),
        ])?;
        let prefix = format!("{}/", self.generations_root());
        for gen in parse_names(&promoted)
            .iter()
            .filter_map(|n| Generation::from_dir_name(n.strip_prefix(&prefix)?))
        {
            if !gens.contains(&gen) && !out.contains(&gen) {
                out.push(gen);
            }
        }
        out.sort();
        Ok(out)
    }

    fn remove_baseline(&self, gen: Generation) -> Result<()> {
        let snap = self.generation_snapshot(gen)?;
        let clones = self
            .props(&snap, "clones")?
            .get("clones")
            .cloned()
            .unwrap_or_default();
        let clones: Vec<String> = clones
            .split(',')
            .filter(|c| !c.is_empty() && *c != "-")
            .map(str::to_string)
            .collect();
        if !clones.is_empty() {
            return Err(StorageError::InUse(format!(
                "baseline {gen} is held by the branches cloned from it: {}",
                self.holders(&clones).join(", ")
            ))
            .into());
        }
        let promoted = self.generation_ds(gen);
        if self.exists(&promoted)? {
            self.destroy(&promoted)?;
            // The branch's snapshot it was promoted from goes too, when unused.
            return self.prune(None);
        }
        zfs(&["destroy", &snap])?;
        Ok(())
    }

    fn clone_branch(&self, gen: Generation, name: &BranchName) -> Result<PathBuf> {
        let snap = self.generation_snapshot(gen)?;
        let ds = self.branch_ds(name);
        zfs(&["clone", &snap, &ds]).with_context(|| format!("cloning {snap}"))?;
        if let Err(e) = zfs(&["snapshot", &format!("{ds}@init")]) {
            if let Err(undo) = self.destroy(&ds) {
                return Err(e.context(format!("and destroying {ds} failed too: {undo:#}")));
            }
            return Err(e);
        }
        Ok(self.branch_datadir(name))
    }

    fn rollback_branch(&self, name: &BranchName) -> Result<()> {
        // The common case in one command: `@init` is the datadir's newest snapshot. (Never
        // `rollback -r`: it would destroy checkpoints and what other branches came from.)
        if zfs(&["rollback", &format!("{}@{INIT}", self.branch_ds(name))]).is_ok() {
            return Ok(());
        }
        self.reset_to_snapshot(name, INIT)
    }

    fn destroy_branch(&self, name: &BranchName) -> Result<()> {
        self.delete_branch(name)
    }

    fn clone_from_branch(
        &self,
        source: &BranchName,
        tag: Option<&CheckpointTag>,
        name: &BranchName,
    ) -> Result<PathBuf> {
        self.branch_from_branch(source, tag, name)
    }

    fn checkpoint_branch(&self, name: &BranchName, tag: &CheckpointTag) -> Result<()> {
        let snap = format!(
            "{}@{}{tag}",
            self.branch_ds(name),
            lineage::CHECKPOINT_PREFIX
        );
        zfs(&["snapshot", &snap]).with_context(|| format!("taking checkpoint {name}@{tag}"))?;
        Ok(())
    }

    fn rollback_to_checkpoint(&self, name: &BranchName, tag: &CheckpointTag) -> Result<()> {
        self.reset_to_snapshot(name, &format!("{}{tag}", lineage::CHECKPOINT_PREFIX))
    }

    fn remove_checkpoint(&self, name: &BranchName, tag: &CheckpointTag) -> Result<()> {
        self.delete_checkpoint(name, tag)
    }

    fn checkpoints(&self, name: &BranchName) -> Result<Vec<CheckpointTag>> {
        self.checkpoint_tags(name)
    }

    fn checkpoint_usage(&self, name: &BranchName, tag: &CheckpointTag) -> Result<Option<u64>> {
        self.checkpoint_bytes(name, tag)
    }

    fn begin_baseline_from_branch(&self, gen: Generation, name: &BranchName) -> Result<PathBuf> {
        self.promote_workspace(gen, name)
    }

    fn branch_exists(&self, name: &BranchName) -> Result<bool> {
        self.exists(&self.branch_ds(name))
    }

    fn branch_datadir(&self, name: &BranchName) -> PathBuf {
        self.mount_root.join("branches").join(name.as_str())
    }

    fn branch_usage(&self, name: &BranchName) -> Result<Option<u64>> {
        if !self.branch_exists(name)? {
            return Ok(None);
        }
        Ok(self
            .props(&self.branch_ds(name), "used")?
            .get("used")
            .and_then(|v| v.parse().ok()))
    }

    fn branch_space(&self, name: &BranchName) -> Result<BTreeMap<String, u64>> {
        if !self.branch_exists(name)? {
            return Ok(BTreeMap::new());
        }
        Ok(self
            .props(&self.branch_ds(name), "used,referenced,written")?
            .into_iter()
            .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
            .collect())
    }

    fn set_branch_metadata(
        &self,
        name: &BranchName,
        meta: &BTreeMap<String, String>,
    ) -> Result<()> {
        let ds = self.branch_ds(name);
        let mut args = vec!["set".to_string()];
        for (k, v) in meta {
            args.push(format!("{META_PREFIX}{k}={v}"));
        }
        args.push(ds);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        zfs(&args)?;
        Ok(())
    }

    fn get_branch_metadata(&self, name: &BranchName) -> Result<BTreeMap<String, String>> {
        self.branch_metadata(name)
    }

    fn branches(&self) -> Result<Vec<BranchName>> {
        let out = zfs(&["list", "-H", "-o", "name", "-d", "1", &self.branches_ds()])?;
        let prefix = format!("{}/", self.branches_ds());
        let mut names: Vec<BranchName> = parse_names(&out)
            .iter()
            .filter_map(|n| n.strip_prefix(&prefix)?.parse().ok())
            .collect();
        names.sort();
        Ok(names)
    }

    fn readiness(&self) -> Vec<Check> {
        let mut checks = Vec::new();
        checks.push(match exec::run(Command::new("zfs").arg("version")) {
            Ok(out) => Check::ok(
                "zfs",
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string(),
            ),
            Err(_) => Check::fail(
                "zfs",
                "`zfs` not found or no ZFS module: install zfsutils-linux",
            ),
        });
        let pool = self.dataset.split('/').next().unwrap_or("").to_string();
        checks.push(
            match exec::run(Command::new("zpool").args(["list", "-H", "-o", "health", &pool])) {
                Ok(out) => {
                    let health = String::from_utf8_lossy(&out.stdout).trim().to_string();
                    if health == "ONLINE" {
                        Check::ok("pool", format!("zpool {pool} ONLINE"))
                    } else {
                        Check::warn("pool", format!("zpool {pool} is {health}"))
                    }
                }
                Err(e) => Check::fail("pool", format!("zpool {pool}: {e:#}")),
            },
        );
        checks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_lists_give_generations() {
        let out = "tank/dbb/baseline@gen-000002\ntank/dbb/baseline@gen-000001\ntank/dbb/baseline@manual\n";
        assert_eq!(parse_generations(out), vec![Generation(1), Generation(2)]);
    }

    #[test]
    fn get_output_is_parsed() {
        let out = "used\t12582912\nreferenced\t734003200\nwritten\t4096\n";
        let p = parse_props(out);
        assert_eq!(p["used"], "12582912");
        assert_eq!(p["written"], "4096");
        assert_eq!(parse_names("tank/a\n\ntank/b\n"), ["tank/a", "tank/b"]);
    }
}
