//! `diff A B`: what differs between two branches, checkpoints or generations, from the
//! servers' own `information_schema` (and, with `--data`, row counts and checksums).
//! A checkpoint, a generation or a stopped branch is served for the comparison by a
//! temporary branch made from it (through the memory guard like any other), removed after.

use super::create::{create, CreateOptions};
use crate::access::Need;
use crate::branch::{BranchName, BranchRef, Generation};
use crate::host::Host;
use crate::ops::branch::discard::delete;
use crate::server::schema::{Schema, TableData};
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// One side of a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Branch(BranchRef),
    Generation(Generation),
}

impl std::str::FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.starts_with("gen-") {
            return s.parse().map(Target::Generation);
        }
        s.parse().map(Target::Branch)
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Branch(b) => write!(f, "{b}"),
            Target::Generation(g) => write!(f, "{g}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// In B, not in A.
    Added,
    /// In A, not in B.
    Removed,
    Changed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    /// table, column, index, foreign key, view, routine, trigger, event
    pub kind: String,
    /// `db.table`, `db.table.column`, …
    pub object: String,
    pub change: Change,
    /// Its definition in A and in B (None where it is absent).
    pub a: Option<String>,
    pub b: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableDifference {
    pub table: String,
    pub a: Option<TableData>,
    pub b: Option<TableData>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DiffReport {
    pub a: String,
    pub b: String,
    /// Nothing differs (what was compared).
    pub same: bool,
    pub schema: Vec<Difference>,
    /// `--data`: tables whose row count or checksum differ (None without --data).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Vec<TableDifference>>,
    /// Tables compared by `--data`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tables_compared: Option<usize>,
}

/// Temporary branches made to serve a side; deleted when dropped, whatever happened.
struct Served<'a> {
    host: &'a Host,
    temporary: Vec<BranchName>,
}

impl Drop for Served<'_> {
    fn drop(&mut self) {
        for name in &self.temporary {
            if let Err(e) = delete(self.host, name, true) {
                self.host.printer.warn(format!(
                    "could not delete the temporary branch {name}: {e:#}; `db-branch delete {name} --force --yes` removes it"
                ));
            }
        }
    }
}

impl Served<'_> {
    /// The socket of a server holding `target`'s data.
    fn socket(&mut self, target: &Target, n: usize) -> Result<PathBuf> {
        let host = self.host;
        if let Target::Branch(b) = target {
            if b.checkpoint.is_none() && crate::ops::branch::unit::is_up(host, &b.name) {
                return Ok(host.layout.socket(&b.name));
            }
        }
        let name: BranchName = format!("diff-{}-{n}", std::process::id())
            .parse()
            .expect("a valid branch name");
        let mut opts = CreateOptions::named(name.clone());
        opts.labels = vec!["db-branch=diff".parse().expect("a valid label")];
        match target {
            Target::Branch(b) => opts.from = Some(b.clone()),
            Target::Generation(g) => opts.baseline = Some(*g),
        }
        host.printer.note(format!(
            "starting a temporary branch {name} to read {target}"
        ));
        self.temporary.push(name.clone());
        create(host, &opts).with_context(|| format!("serving {target} for the comparison"))?;
        Ok(host.layout.socket(&name))
    }
}

pub fn diff(host: &Host, a: &Target, b: &Target, data: bool) -> Result<DiffReport> {
    host.storage.open()?;
    // Another user's branch is theirs to compare.
    for t in [a, b] {
        if let Target::Branch(r) = t {
            let record = crate::ops::branch::record::require(host, &r.name)?;
            host.caller.check(
                &host.config.access,
                &Need::owner(&r.name),
                &r.name,
                Some(&record),
            )?;
        }
    }
    let mut served = Served {
        host,
        temporary: Vec::new(),
    };
    let sa = served.socket(a, 1)?;
    let sb = served.socket(b, 2)?;
    let schema = compare_schema(
        &host
            .server
            .schema(&sa)
            .with_context(|| format!("reading {a}"))?,
        &host
            .server
            .schema(&sb)
            .with_context(|| format!("reading {b}"))?,
    );
    let (data, compared) = if data {
        let da = host
            .server
            .table_data(&sa)
            .with_context(|| format!("reading the rows of {a}"))?;
        let db = host
            .server
            .table_data(&sb)
            .with_context(|| format!("reading the rows of {b}"))?;
        let (diffs, n) = compare_data(&da, &db);
        (Some(diffs), Some(n))
    } else {
        (None, None)
    };
    let same = schema.is_empty() && data.as_ref().is_none_or(|d| d.is_empty());
    Ok(DiffReport {
        a: a.to_string(),
        b: b.to_string(),
        same,
        schema,
        data,
        tables_compared: compared,
    })
}

/// Objects present on one side only, or defined differently, in (kind, name) order.
pub fn compare_schema(a: &Schema, b: &Schema) -> Vec<Difference> {
    let keys: BTreeSet<&(String, String)> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let (da, db) = (a.get(k), b.get(k));
            let change = match (da, db) {
                (Some(x), Some(y)) if x == y => return None,
                (Some(_), Some(_)) => Change::Changed,
                (None, Some(_)) => Change::Added,
                (Some(_), None) => Change::Removed,
                (None, None) => return None,
            };
            Some(Difference {
                kind: k.0.clone(),
                object: k.1.clone(),
                change,
                a: da.cloned(),
                b: db.cloned(),
            })
        })
        .collect()
}

/// Tables whose rows differ (count or checksum), and how many were compared.
pub fn compare_data(
    a: &BTreeMap<String, TableData>,
    b: &BTreeMap<String, TableData>,
) -> (Vec<TableDifference>, usize) {
    let tables: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let n = tables.len();
    let diffs = tables
        .into_iter()
        .filter(|t| a.get(*t) != b.get(*t))
        .map(|t| TableDifference {
            table: t.clone(),
            a: a.get(t).cloned(),
            b: b.get(t).cloned(),
        })
        .collect();
    (diffs, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(items: &[(&str, &str, &str)]) -> Schema {
        items
            .iter()
            .map(|(k, n, d)| ((k.to_string(), n.to_string()), d.to_string()))
            .collect()
    }

    #[test]
    fn added_removed_and_changed_objects_are_found_in_order() {
        let a = schema(&[
            ("column", "shop.orders.total", "decimal(10,2) NOT NULL #3"),
            (
                "index",
                "shop.orders.status_placed",
                "BTREE (status, placed)",
            ),
            ("table", "shop.orders", "InnoDB utf8mb4_general_ci"),
        ]);
        let b = schema(&[
            ("column", "shop.orders.note", "varchar(20) NULL #4"),
            ("column", "shop.orders.total", "decimal(12,2) NOT NULL #3"),
            ("table", "shop.orders", "InnoDB utf8mb4_general_ci"),
        ]);
        let d = compare_schema(&a, &b);
        let got: Vec<(&str, &str, Change)> = d
            .iter()
            .map(|x| (x.kind.as_str(), x.object.as_str(), x.change))
            .collect();
        assert_eq!(
            got,
            [
                ("column", "shop.orders.note", Change::Added),
                ("column", "shop.orders.total", Change::Changed),
                ("index", "shop.orders.status_placed", Change::Removed),
            ]
        );
        assert!(compare_schema(&a, &a).is_empty());
    }

    #[test]
    fn tables_differ_by_count_or_checksum() {
        let t = |rows, sum| TableData {
            rows,
            checksum: Some(sum),
        };
        let a: BTreeMap<String, TableData> =
            [("s.a".into(), t(1, 7)), ("s.b".into(), t(2, 8))].into();
        let b: BTreeMap<String, TableData> = [
            ("s.a".into(), t(1, 7)),
            ("s.b".into(), t(3, 9)),
            ("s.c".into(), t(0, 0)),
        ]
        .into();
        let (d, n) = compare_data(&a, &b);
        assert_eq!(n, 3);
        assert_eq!(
            d.iter().map(|x| x.table.as_str()).collect::<Vec<_>>(),
            ["s.b", "s.c"]
        );
    }

    #[test]
    fn targets_parse_as_branches_checkpoints_or_generations() {
        assert_eq!(
            "gen-000002".parse::<Target>().unwrap(),
            Target::Generation(Generation(2))
        );
        assert_eq!(
            "a@seeded".parse::<Target>().unwrap().to_string(),
            "a@seeded"
        );
        assert!("Bad".parse::<Target>().is_err());
    }
}
