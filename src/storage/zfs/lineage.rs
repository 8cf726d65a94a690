//! What ZFS's clone dependencies mean for git-style history, as pure functions over one
//! `zfs list` of the pool.
//!
//! A ZFS clone depends on its origin snapshot: the snapshot cannot be destroyed while the
//! clone exists, nor the dataset holding it; and `zfs rollback` to any snapshot but the
//! newest destroys the newer ones. So db-branch never destroys a snapshot something still
//! needs — it moves datasets aside instead:
//! - a branch's datadir is `DS/branches/NAME`; its `@init` and its checkpoints (`@cp-TAG`)
//!   are snapshots of whichever datadir they were taken of;
//! - a reset to a snapshot that is not the datadir's newest gives the branch a new datadir,
//!   a clone of that snapshot; the old datadir, when it holds snapshots, moves to
//!   `DS/held/NAME:N` (never mounted), where those snapshots stay usable;
//! - a deleted branch whose snapshots other datasets were cloned from (branches made
//!   `--from` it, promoted generations) moves to `DS/held/gone:N`, and is destroyed with the
//!   last clone that needs it;
//! - snapshots made only to clone from (`@from:NAME:N`, `@promote:gen-N`) and deleted
//!   checkpoints that something is still cloned from (`@gone:N`) go as soon as nothing
//!   depends on them.
//!
//! `plan_prune` works out what can go, in an order ZFS accepts.

use std::collections::BTreeSet;

/// One dataset or snapshot of `zfs list -H -p -o name,clones,createtxg`.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub name: String,
    /// Datasets cloned from this snapshot (empty for a dataset).
    pub clones: Vec<String>,
    pub createtxg: u64,
}

impl Listed {
    fn snapshot(&self) -> Option<(&str, &str)> {
        self.name.split_once('@')
    }
}

/// `zfs list -H -p -t filesystem,snapshot -o name,clones,createtxg …`.
pub fn parse_listing(out: &str) -> Vec<Listed> {
    out.lines()
        .filter_map(|l| {
            let mut it = l.split('\t');
            let name = it.next()?.trim();
            if name.is_empty() {
                return None;
            }
            let clones = it
                .next()
                .unwrap_or("-")
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty() && *c != "-")
                .map(str::to_string)
                .collect();
            let createtxg = it.next().and_then(|t| t.trim().parse().ok()).unwrap_or(0);
            Some(Listed {
                name: name.to_string(),
                clones,
                createtxg,
            })
        })
        .collect()
}

/// Names of db-branch's datasets and snapshots under the configured dataset.
#[derive(Debug, Clone, Copy)]
pub struct Names<'a> {
    pub root: &'a str,
}

/// Whose a dataset is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner<'a> {
    /// `DS/branches/NAME`: the branch's datadir now.
    Datadir(&'a str),
    /// `DS/held/NAME:N`: an earlier datadir of the branch, kept for its snapshots.
    Held(&'a str),
    /// `DS/held/gone:N`: a deleted branch's, kept for what was cloned from it.
    Gone,
}

/// Snapshot names db-branch makes only to clone from: they may go once unused.
pub const FROM_PREFIX: &str = "from:";
pub const PROMOTE_PREFIX: &str = "promote:";
pub const GONE_PREFIX: &str = "gone:";
pub const CHECKPOINT_PREFIX: &str = "cp-";
pub const INIT: &str = "init";

fn internal(snapshot: &str) -> bool {
    [FROM_PREFIX, PROMOTE_PREFIX, GONE_PREFIX]
        .iter()
        .any(|p| snapshot.starts_with(p))
}

impl<'a> Names<'a> {
    pub fn datadir(&self, branch: &str) -> String {
        format!("{}/branches/{branch}", self.root)
    }
    pub fn held_root(&self) -> String {
        format!("{}/held", self.root)
    }
    pub fn held(&self, branch: &str, seq: u64) -> String {
        format!("{}/held/{branch}:{seq}", self.root)
    }
    pub fn gone(&self, seq: u64) -> String {
        format!("{}/held/gone:{seq}", self.root)
    }

    pub fn owner<'n>(&self, dataset: &'n str) -> Option<Owner<'n>> {
        let rest = dataset.strip_prefix(self.root)?.strip_prefix('/')?;
        if let Some(name) = rest.strip_prefix("branches/") {
            return (!name.contains('/')).then_some(Owner::Datadir(name));
        }
        let held = rest.strip_prefix("held/")?;
        let (who, seq) = held.rsplit_once(':')?;
        seq.parse::<u64>().ok()?;
        Some(if who == "gone" {
            Owner::Gone
        } else {
            Owner::Held(who)
        })
    }

    /// The datasets of `branch`: its datadir (if listed) first, then what it holds aside.
    pub fn datasets_of<'l>(&self, listing: &'l [Listed], branch: &str) -> Vec<&'l str> {
        let mut out: Vec<&str> = listing
            .iter()
            .filter(|l| l.snapshot().is_none())
            .map(|l| l.name.as_str())
            .filter(|n| matches!(self.owner(n), Some(Owner::Datadir(b)) if b == branch))
            .collect();
        out.extend(
            listing
                .iter()
                .filter(|l| l.snapshot().is_none())
                .map(|l| l.name.as_str())
                .filter(|n| matches!(self.owner(n), Some(Owner::Held(b)) if b == branch)),
        );
        out
    }

    /// Where the branch's snapshot `snap` is (`DATASET@snap`): on its datadir, or on a
    /// dataset it holds aside.
    pub fn find<'l>(&self, listing: &'l [Listed], branch: &str, snap: &str) -> Option<&'l Listed> {
        let datasets = self.datasets_of(listing, branch);
        datasets
            .iter()
            .find_map(|ds| listing.iter().find(|l| l.snapshot() == Some((ds, snap))))
    }

    /// The branch's checkpoint tags, wherever their snapshots are.
    pub fn checkpoints<'l>(&self, listing: &'l [Listed], branch: &str) -> Vec<&'l str> {
        let datasets = self.datasets_of(listing, branch);
        let mut tags: Vec<&str> = listing
            .iter()
            .filter_map(|l| {
                let (ds, snap) = l.snapshot()?;
                datasets.contains(&ds).then_some(())?;
                snap.strip_prefix(CHECKPOINT_PREFIX)
            })
            .collect();
        tags.sort();
        tags
    }
}

/// The snapshots of `dataset`, oldest first.
pub fn snapshots_of<'l>(listing: &'l [Listed], dataset: &str) -> Vec<&'l Listed> {
    let mut snaps: Vec<&Listed> = listing
        .iter()
        .filter(|l| l.snapshot().is_some_and(|(ds, _)| ds == dataset))
        .collect();
    snaps.sort_by_key(|l| l.createtxg);
    snaps
}

/// A number no `:N` name in the listing has yet.
pub fn next_seq(listing: &[Listed]) -> u64 {
    listing
        .iter()
        .filter_map(|l| l.name.rsplit_once(':')?.1.parse::<u64>().ok())
        .max()
        .map_or(1, |n| n + 1)
}

/// One `zfs destroy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destroy {
    /// The dataset and its (unneeded) snapshots: `zfs destroy -r DATASET`.
    Dataset(String),
    /// Some snapshots of a dataset that stays: `zfs destroy DATASET@a,b`.
    Snapshots { dataset: String, names: Vec<String> },
}

impl Destroy {
    pub fn target(&self) -> String {
        match self {
            Destroy::Dataset(d) => d.clone(),
            Destroy::Snapshots { dataset, names } => format!("{dataset}@{}", names.join(",")),
        }
    }
}

/// What can be destroyed now, in order: datasets held aside whose snapshots nothing needs
/// any longer, and snapshots made only to clone from that nothing is cloned from now.
/// With `forget`, that branch is being deleted: its datadir and what it held aside go too,
/// except what others are still cloned from (the caller moves that to `gone`).
pub fn plan_prune(names: Names, listing: &[Listed], forget: Option<&str>) -> Vec<Destroy> {
    let forgotten = |b: &str| forget == Some(b);
    let mut destroyed: BTreeSet<String> = BTreeSet::new();
    let mut plan = Vec::new();
    // A snapshot a live branch keeps as its own state (its @init, a checkpoint, or one
    // db-branch did not make) stays however unused.
    let kept = |ds: &str, snap: &str| match names.owner(ds) {
        Some(Owner::Datadir(b)) | Some(Owner::Held(b)) if !forgotten(b) => !internal(snap),
        Some(_) => false,
        // Not ours (a generation, a promoted baseline): never touched here.
        None => true,
    };
    let removable_dataset = |ds: &str| match names.owner(ds) {
        Some(Owner::Held(_)) | Some(Owner::Gone) => true,
        Some(Owner::Datadir(b)) => forgotten(b),
        None => false,
    };
    let needed = |l: &Listed, destroyed: &BTreeSet<String>| {
        let (ds, snap) = l.snapshot().expect("a snapshot");
        kept(ds, snap) || l.clones.iter().any(|c| !destroyed.contains(c))
    };
    // Datasets first, until none more can go: destroying one may free the snapshot it was
    // cloned from, and so the dataset holding that.
    let mut progress = true;
    while progress {
        progress = false;
        for ds in listing.iter().filter(|l| l.snapshot().is_none()) {
            if destroyed.contains(&ds.name) || !removable_dataset(&ds.name) {
                continue;
            }
            let snaps = snapshots_of(listing, &ds.name);
            if snaps.iter().all(|s| !needed(s, &destroyed)) {
                destroyed.insert(ds.name.clone());
                destroyed.extend(snaps.iter().map(|s| s.name.clone()));
                plan.push(Destroy::Dataset(ds.name.clone()));
                progress = true;
            }
        }
    }
    // Then single snapshots of the datasets that stay (no clone depends on a snapshot, so
    // this frees nothing further).
    for ds in listing.iter().filter(|l| l.snapshot().is_none()) {
        if destroyed.contains(&ds.name) {
            continue;
        }
        let unneeded: Vec<String> = snapshots_of(listing, &ds.name)
            .into_iter()
            .filter(|s| !needed(s, &destroyed))
            .map(|s| s.snapshot().expect("a snapshot").1.to_string())
            .collect();
        if !unneeded.is_empty() {
            plan.push(Destroy::Snapshots {
                dataset: ds.name.clone(),
                names: unneeded,
            });
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: Names = Names { root: "tank/dbb" };

    fn ds(name: &str) -> Listed {
        Listed {
            name: format!("tank/dbb/{name}"),
            clones: vec![],
            createtxg: 0,
        }
    }
    fn snap(name: &str, txg: u64, clones: &[&str]) -> Listed {
        Listed {
            name: format!("tank/dbb/{name}"),
            clones: clones.iter().map(|c| format!("tank/dbb/{c}")).collect(),
            createtxg: txg,
        }
    }
    fn targets(plan: &[Destroy]) -> Vec<String> {
        plan.iter()
            .map(|d| d.target().replace("tank/dbb/", ""))
            .collect()
    }

    #[test]
    fn listing_is_parsed() {
        let out = "tank/dbb/branches/a\t-\t10\ntank/dbb/branches/a@init\ttank/dbb/branches/b,tank/dbb/held/x:2\t11\n";
        let l = parse_listing(out);
        assert_eq!(l.len(), 2);
        assert!(l[0].clones.is_empty());
        assert_eq!(l[1].clones, ["tank/dbb/branches/b", "tank/dbb/held/x:2"]);
        assert_eq!(l[1].createtxg, 11);
    }

    #[test]
    fn owners_and_lookups() {
        assert_eq!(
            NAMES.owner("tank/dbb/branches/pr-1"),
            Some(Owner::Datadir("pr-1"))
        );
        assert_eq!(
            NAMES.owner("tank/dbb/held/pr-1:3"),
            Some(Owner::Held("pr-1"))
        );
        assert_eq!(NAMES.owner("tank/dbb/held/gone:7"), Some(Owner::Gone));
        assert_eq!(NAMES.owner("tank/dbb/baseline"), None);
        assert_eq!(NAMES.owner("tank/dbb/held/junk"), None);
        let listing = vec![
            ds("branches/a"),
            snap("branches/a@cp-late", 5, &[]),
            ds("held/a:1"),
            snap("held/a:1@init", 1, &["branches/a"]),
            snap("held/a:1@cp-early", 2, &[]),
            ds("held/ab:2"),
            snap("held/ab:2@cp-other", 3, &[]),
        ];
        assert_eq!(
            NAMES.find(&listing, "a", "init").map(|l| l.name.as_str()),
            Some("tank/dbb/held/a:1@init")
        );
        assert_eq!(NAMES.checkpoints(&listing, "a"), ["early", "late"]);
        assert_eq!(next_seq(&listing), 3);
    }

    #[test]
    fn nothing_goes_while_a_live_branch_keeps_it() {
        let listing = vec![
            ds("branches/a"),
            snap("branches/a@init", 1, &[]),
            snap("branches/a@cp-x", 2, &[]),
            ds("held/a:1"),
            snap("held/a:1@cp-y", 3, &[]),
        ];
        assert!(plan_prune(NAMES, &listing, None).is_empty());
    }

    #[test]
    fn unused_clone_sources_and_empty_holders_go() {
        let listing = vec![
            ds("branches/a"),
            snap("branches/a@init", 1, &[]),
            snap("branches/a@from:b:4", 2, &[]),
            snap("branches/a@from:c:5", 3, &["branches/c"]),
            ds("held/a:1"),
            snap("held/a:1@gone:6", 4, &[]),
            ds("branches/c"),
        ];
        assert_eq!(
            targets(&plan_prune(NAMES, &listing, None)),
            ["held/a:1", "branches/a@from:b:4"]
        );
    }

    #[test]
    fn deleting_a_branch_keeps_only_what_others_are_cloned_from() {
        // a was reset to its checkpoint (datadir cloned from held/a:1@cp-x); b was made
        // from a's held @init. Deleting a: the datadir goes, held/a:1 stays for b.
        let listing = vec![
            ds("branches/a"),
            snap("branches/a@cp-z", 9, &[]),
            ds("held/a:1"),
            snap("held/a:1@init", 1, &["branches/b"]),
            snap("held/a:1@cp-x", 2, &["branches/a"]),
            ds("branches/b"),
            snap("branches/b@init", 3, &[]),
        ];
        assert_eq!(
            targets(&plan_prune(NAMES, &listing, Some("a"))),
            ["branches/a", "held/a:1@cp-x"]
        );
        // Once b is gone too, the chain unwinds in one plan.
        let listing = vec![
            ds("held/gone:3"),
            snap("held/gone:3@init", 1, &["branches/b"]),
            ds("branches/b"),
            snap("branches/b@init", 3, &[]),
            snap("branches/b@from:c:4", 4, &["held/gone:5"]),
            ds("held/gone:5"),
            snap("held/gone:5@init", 5, &[]),
        ];
        assert_eq!(
            targets(&plan_prune(NAMES, &listing, Some("b"))),
            ["held/gone:5", "branches/b", "held/gone:3"]
        );
    }

    #[test]
    fn clones_from_outside_are_respected() {
        // A promoted generation is cloned from the branch's snapshot: kept while it is.
        let listing = vec![
            ds("branches/a"),
            snap(
                "branches/a@promote:gen-000002",
                1,
                &["generations/gen-000002"],
            ),
        ];
        assert_eq!(
            targets(&plan_prune(NAMES, &listing, Some("a"))),
            Vec::<String>::new()
        );
    }
}
