//! `checkpoint`, `checkpoints`, `checkpoint delete`, `diff`, `list --tree`.

use crate::branch::{BranchName, BranchRecord, Checkpoint, CheckpointTag, Generation, Parent};
use crate::ops::checkpoint::CheckpointInfo;
use crate::ops::diff::{Change, DiffReport};
use crate::printer::{bytes, table, Human};
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct CheckpointMade {
    pub branch: BranchName,
    #[serde(flatten)]
    pub checkpoint: Checkpoint,
    /// How long the server was down for a `--clean` checkpoint.
    pub downtime_seconds: Option<f64>,
    pub seconds: f64,
}

impl Human for CheckpointMade {
    fn human(&self) -> String {
        format!("{}@{}\n", self.branch, self.checkpoint.tag)
    }
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct CheckpointList(pub Vec<CheckpointInfo>);

impl Human for CheckpointList {
    fn human(&self) -> String {
        if self.0.is_empty() {
            return "no checkpoints; take one with `db-branch checkpoint NAME [TAG]`".into();
        }
        table(
            &["TAG", "CREATED", "AGE", "CLEAN", "OWN DISK"],
            self.0
                .iter()
                .map(|c| {
                    vec![
                        c.tag.to_string(),
                        c.created.format("%Y-%m-%d %H:%M:%S").to_string(),
                        humantime::format_duration(std::time::Duration::from_secs(
                            c.age_seconds as u64,
                        ))
                        .to_string(),
                        if c.clean {
                            "yes"
                        } else {
                            "no (crash-consistent)"
                        }
                        .to_string(),
                        bytes(c.own_bytes),
                    ]
                })
                .collect(),
        )
    }
}

#[derive(Debug, Serialize)]
pub struct CheckpointDeleted {
    pub branch: BranchName,
    pub tag: CheckpointTag,
    /// False: there was no such checkpoint (not an error: scripts re-run).
    pub deleted: bool,
}

impl Human for CheckpointDeleted {
    fn human(&self) -> String {
        if self.deleted {
            format!("deleted checkpoint {}@{}\n", self.branch, self.tag)
        } else {
            format!("no checkpoint {}@{}\n", self.branch, self.tag)
        }
    }
}

impl Human for DiffReport {
    fn human(&self) -> String {
        let mut out = String::new();
        if self.same {
            out.push_str(&format!("{} and {} are the same", self.a, self.b));
            if let Some(n) = self.tables_compared {
                out.push_str(&format!(" (schema, and the rows of {n} tables)"));
            } else {
                out.push_str(" (schema)");
            }
            out.push('\n');
            return out;
        }
        out.push_str(&format!("--- {}\n+++ {}\n", self.a, self.b));
        for d in &self.schema {
            match d.change {
                Change::Added => out.push_str(&format!(
                    "+ {} {}: {}\n",
                    d.kind,
                    d.object,
                    d.b.as_deref().unwrap_or("")
                )),
                Change::Removed => out.push_str(&format!(
                    "- {} {}: {}\n",
                    d.kind,
                    d.object,
                    d.a.as_deref().unwrap_or("")
                )),
                Change::Changed => out.push_str(&format!(
                    "~ {} {}:\n    - {}\n    + {}\n",
                    d.kind,
                    d.object,
                    d.a.as_deref().unwrap_or(""),
                    d.b.as_deref().unwrap_or("")
                )),
            }
        }
        if let Some(data) = &self.data {
            for t in data {
                let side = |x: &Option<crate::server::schema::TableData>| match x {
                    Some(d) => format!(
                        "{} rows, checksum {}",
                        d.rows,
                        d.checksum.map_or("-".into(), |c| c.to_string())
                    ),
                    None => "absent".into(),
                };
                out.push_str(&format!(
                    "~ rows {}: {} → {}\n",
                    t.table,
                    side(&t.a),
                    side(&t.b)
                ));
            }
        }
        out
    }
}

/// `list --tree`: each generation with the branches made from it, and theirs.
#[derive(Debug, Serialize)]
pub struct Tree {
    pub generations: Vec<TreeNode>,
}

#[derive(Debug, Serialize)]
pub struct TreeNode {
    /// `gen-000003` or a branch name.
    pub name: String,
    /// For a branch made from another's checkpoint: which.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_checkpoint: Option<CheckpointTag>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<CheckpointTag>,
    pub children: Vec<TreeNode>,
}

impl Tree {
    /// Branches under the branch they were made from; the others under their generation.
    /// A branch whose source is gone hangs under the source's generation.
    pub fn of(generations: &[Generation], records: &[BranchRecord]) -> Tree {
        fn node(
            name: &BranchName,
            from: Option<CheckpointTag>,
            records: &[BranchRecord],
        ) -> TreeNode {
            let me = records.iter().find(|r| &r.name == name);
            TreeNode {
                name: name.to_string(),
                from_checkpoint: from,
                checkpoints: me
                    .map(|r| r.checkpoints.iter().map(|c| c.tag.clone()).collect())
                    .unwrap_or_default(),
                children: records
                    .iter()
                    .filter_map(|r| match &r.parent {
                        Some(Parent::Branch {
                            name: p,
                            checkpoint,
                            ..
                        }) if p == name => Some(node(&r.name, checkpoint.clone(), records)),
                        _ => None,
                    })
                    .collect(),
            }
        }
        let parent_alive = |r: &BranchRecord| match &r.parent {
            Some(Parent::Branch { name, .. }) => records.iter().any(|x| &x.name == name),
            _ => false,
        };
        let mut gens: Vec<Generation> = generations.to_vec();
        // A follower is no generation's branch (`Generation::NONE`), nor anyone's.
        let branched = || records.iter().filter(|r| r.follows.is_none());
        for r in branched() {
            if !gens.contains(&r.baseline) {
                gens.push(r.baseline);
            }
        }
        gens.sort();
        Tree {
            generations: gens
                .into_iter()
                .map(|g| TreeNode {
                    name: g.to_string(),
                    from_checkpoint: None,
                    checkpoints: Vec::new(),
                    children: branched()
                        .filter(|r| r.baseline == g && !parent_alive(r))
                        .map(|r| node(&r.name, None, records))
                        .collect(),
                })
                .collect(),
        }
    }
}

impl Human for Tree {
    fn human(&self) -> String {
        fn walk(n: &TreeNode, prefix: &str, last: bool, out: &mut String) {
            let mut label = n.name.clone();
            if let Some(c) = &n.from_checkpoint {
                label.push_str(&format!(" (from @{c})"));
            }
            if !n.checkpoints.is_empty() {
                let tags: Vec<String> = n.checkpoints.iter().map(|t| format!("@{t}")).collect();
                label.push_str(&format!("  [{}]", tags.join(" ")));
            }
            out.push_str(&format!(
                "{prefix}{}{label}\n",
                if last { "└── " } else { "├── " }
            ));
            let next = format!("{prefix}{}", if last { "    " } else { "│   " });
            for (i, c) in n.children.iter().enumerate() {
                walk(c, &next, i + 1 == n.children.len(), out);
            }
        }
        let mut out = String::new();
        for g in &self.generations {
            out.push_str(&format!("{}\n", g.name));
            for (i, c) in g.children.iter().enumerate() {
                walk(c, "", i + 1 == g.children.len(), &mut out);
            }
        }
        if out.is_empty() {
            out.push_str("no baselines\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::ByteSize;

    fn rec(name: &str, parent: Option<&str>) -> BranchRecord {
        let mut r = BranchRecord::new(
            name.parse().unwrap(),
            Generation(1),
            ByteSize::mib(128),
            chrono::Utc::now(),
        );
        r.parent = parent.map(|p| Parent::Branch {
            name: p.parse().unwrap(),
            checkpoint: None,
            clean: false,
        });
        r
    }

    #[test]
    fn branches_hang_under_their_source_or_its_generation() {
        let records = [
            rec("a", None),
            rec("b", Some("a")),
            rec("c", Some("b")),
            rec("d", Some("gone")),
        ];
        let tree = Tree::of(&[Generation(1), Generation(2)], &records);
        assert_eq!(
            tree.human(),
            "gen-000001\n├── a\n│   └── b\n│       └── c\n└── d\ngen-000002\n"
        );
    }
}
