//! `--verify`: the baked copy against the source, at the moment the bake copied (the source
//! side is a transaction opened then: `snapshot::open`). Definitions of every object
//! (`SHOW CREATE`, key order and AUTO_INCREMENT counters aside) and a checksum of every
//! table's rows (count and an order-free sum of row hashes, history included) between
//! servers of one family and series; names and row counts between others, whose SQL
//! spellings differ.

use super::copy::{Table, TableList};
use crate::sql::quote;
use anyhow::{anyhow, Result};
use mysql::prelude::Queryable;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Verified {
    pub tables: usize,
    /// Tables, sequences, views, routines, triggers and events compared.
    pub objects: usize,
    /// `definitions and checksums`, or `names and row counts` across families.
    pub by: String,
}

/// What the differences are measured against, for the failure message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// The source side is the bake's own snapshot.
    Same,
    /// Nothing held writes off: the source may have moved on since its rows were read.
    Later,
}

/// `8.4`, `11.8`: the series a version string belongs to, and whether it is MariaDB.
fn series(conn: &mut mysql::Conn) -> Result<(bool, String)> {
    let v: Option<String> = conn.query_first("SELECT VERSION()")?;
    let v = v.unwrap_or_default();
    let series = v.split('.').take(2).collect::<Vec<_>>().join(".");
    Ok((v.contains("MariaDB"), series))
}

pub fn verify(
    source: &mut mysql::Conn,
    target: &mut mysql::Conn,
    list: &TableList,
    moment: Moment,
) -> Result<Verified> {
    let alike = series(source)? == series(target)?;
    let mut differ = Vec::new();

    let want = definitions(source, list)?;
    let got = definitions(target, list)?;
    for (name, def) in &want {
        match got.get(name) {
            None => differ.push(format!("{name} is missing")),
            Some(d) if alike && d != def => differ.push(format!("{name} is defined differently")),
            Some(_) => {}
        }
    }
    for name in got.keys().filter(|n| !want.contains_key(*n)) {
        differ.push(format!("{name} is not in the source"));
    }

    for t in &list.tables {
        let columns = columns(source, t)?;
        let q = checksum_query(t, &columns, alike);
        let a: Option<(String, String)> = source.query_first(&q)?;
        let b: Option<(String, String)> = target.query_first(&q)?;
        if a != b {
            let (a, b) = (a.unwrap_or_default(), b.unwrap_or_default());
            differ.push(if a.0 != b.0 {
                format!("{} has {} rows, the source {}", t.label(), b.0, a.0)
            } else {
                format!("{} has other row contents (checksum)", t.label())
            });
        }
    }
    for s in &list.sequences {
        let q = format!("SELECT next_not_cached_value FROM {}", s.qualified());
        let a: Option<String> = source.query_first(&q)?;
        let b: Option<String> = target.query_first(&q)?;
        if a != b {
            differ.push(format!("sequence {} is at another value", s.label()));
        }
    }

    if !differ.is_empty() {
        let shown: Vec<&str> = differ.iter().take(10).map(String::as_str).collect();
        let more = differ.len().saturating_sub(shown.len());
        let when = match moment {
            Moment::Same => "",
            Moment::Later => {
                " (the source could not be held still while the bake read it — its user lacks \
                 RELOAD — so writes made meanwhile also count as differences)"
            }
        };
        return Err(anyhow!(
            "verification failed: {} difference(s) from the source{when}: {}{}. Nothing was made.",
            differ.len(),
            shown.join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        ));
    }
    Ok(Verified {
        tables: list.tables.len(),
        objects: want.len(),
        by: if alike {
            "definitions and checksums".into()
        } else {
            "names and row counts".into()
        },
    })
}

/// Every column, in order, for the checksum (a versioned table's history columns too).
fn columns(conn: &mut mysql::Conn, t: &Table) -> Result<Vec<String>> {
    let mut cols: Vec<String> = conn.exec(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
        (&t.schema, &t.name),
    )?;
    if t.versioned {
        let declared: Vec<String> = conn.exec(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? \
             AND TABLE_NAME = ? AND EXTRA LIKE '%ROW %'",
            (&t.schema, &t.name),
        )?;
        if declared.is_empty() {
            cols.extend(["ROW_START".to_string(), "ROW_END".to_string()]);
        }
    }
    Ok(cols)
}

/// `count, sum of row hashes`; values as bytes (no collation mixing), NULL told apart
/// from an empty string by a marker per column.
fn checksum_query(t: &Table, columns: &[String], with_hash: bool) -> String {
    let history = if t.versioned {
        " FOR SYSTEM_TIME ALL"
    } else {
        ""
    };
    if !with_hash || columns.is_empty() {
        return format!("SELECT COUNT(*), '' FROM {}{history}", t.qualified());
    }
    let values: Vec<String> = columns
        .iter()
        .map(|c| format!("CAST({} AS BINARY)", quote(c)))
        .collect();
    let nulls: Vec<String> = columns
        .iter()
        .map(|c| format!("ISNULL({})", quote(c)))
        .collect();
    format!(
        "SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS(0x1f, {}, CONCAT({})))), 0) FROM {}{history}",
        values.join(", "),
        nulls.join(", "),
        t.qualified()
    )
}

/// `kind db.name` → its definition, for every object of the bake's databases.
fn definitions(conn: &mut mysql::Conn, list: &TableList) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for db in &list.databases {
        let tables: Vec<(String, String)> = conn.exec(
            "SELECT TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?",
            (db,),
        )?;
        for (name, kind) in tables {
            let (label, show) = match kind.as_str() {
                "VIEW" => ("view", "VIEW"),
                "SEQUENCE" => ("sequence", "SEQUENCE"),
                _ => ("table", "TABLE"),
            };
            let def = show_create(conn, show, db, &name, 1)?;
            out.insert(format!("{label} {db}.{name}"), normalise(&def));
        }
        let routines: Vec<(String, String)> = conn.exec(
            "SELECT ROUTINE_NAME, ROUTINE_TYPE FROM information_schema.ROUTINES \
             WHERE ROUTINE_SCHEMA = ?",
            (db,),
        )?;
        for (name, kind) in routines {
            let def = show_create(conn, &kind, db, &name, 2)?;
            out.insert(format!("{} {db}.{name}", kind.to_lowercase()), def);
        }
        let triggers: Vec<String> = conn.exec(
            "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?",
            (db,),
        )?;
        for name in triggers {
            let def = show_create(conn, "TRIGGER", db, &name, 2)?;
            out.insert(format!("trigger {db}.{name}"), def);
        }
        let events: Vec<String> = conn.exec(
            "SELECT EVENT_NAME FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ?",
            (db,),
        )?;
        for name in events {
            let def = show_create(conn, "EVENT", db, &name, 3)?;
            out.insert(format!("event {db}.{name}"), def);
        }
    }
    Ok(out)
}

fn show_create(
    conn: &mut mysql::Conn,
    kind: &str,
    db: &str,
    name: &str,
    col: usize,
) -> Result<String> {
    let row: Option<mysql::Row> =
        conn.query_first(format!("SHOW CREATE {kind} {}.{}", quote(db), quote(name)))?;
    Ok(row
        .and_then(|r| r.get::<Option<String>, _>(col))
        .flatten()
        .unwrap_or_default())
}

/// A table definition without what a faithful copy may change: the AUTO_INCREMENT
/// counter (InnoDB recomputes it) and the order of keys (indexes added after the rows).
fn normalise(def: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    for line in def.lines() {
        let trimmed = line.trim_start();
        let is_key = [
            "PRIMARY KEY",
            "UNIQUE KEY",
            "KEY ",
            "FULLTEXT KEY",
            "SPATIAL KEY",
            "CONSTRAINT ",
        ]
        .iter()
        .any(|p| trimmed.starts_with(p));
        if is_key {
            keys.push(trimmed.trim_end_matches(',').to_string());
            continue;
        }
        if !keys.is_empty() && trimmed.starts_with(')') {
            keys.sort();
            out.append(&mut keys);
        }
        out.push(without_redundant_charset(&without_auto_increment(line)));
    }
    out.append(&mut keys);
    out.join("\n")
}

/// `CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci` as `COLLATE utf8mb4_unicode_ci`: the
/// same column. MySQL shows the character set once a definition names the collation, so
/// a table recreated from its own `SHOW CREATE TABLE` (or a dump) shows it where the
/// original did not.
pub fn without_redundant_charset(line: &str) -> String {
    const CS: &str = " CHARACTER SET ";
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find(CS) {
        let after = &rest[at + CS.len()..];
        let charset: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let tail = &after[charset.len()..];
        out.push_str(&rest[..at]);
        if !charset.is_empty() && tail.starts_with(&format!(" COLLATE {charset}_")) {
            rest = tail;
        } else {
            out.push_str(CS);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

fn without_auto_increment(line: &str) -> String {
    let Some(at) = line.find(" AUTO_INCREMENT=") else {
        return line.to_string();
    };
    let rest = &line[at + " AUTO_INCREMENT=".len()..];
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    format!("{}{}", &line[..at], &rest[digits..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_and_counters_do_not_count_as_differences() {
        let a = "CREATE TABLE `t` (\n  `id` int NOT NULL AUTO_INCREMENT,\n  `a` int,\n  PRIMARY KEY (`id`),\n  KEY `x` (`a`),\n  FULLTEXT KEY `f` (`b`)\n) ENGINE=InnoDB AUTO_INCREMENT=1000 DEFAULT CHARSET=utf8mb4";
        let b = "CREATE TABLE `t` (\n  `id` int NOT NULL AUTO_INCREMENT,\n  `a` int,\n  PRIMARY KEY (`id`),\n  FULLTEXT KEY `f` (`b`),\n  KEY `x` (`a`)\n) ENGINE=InnoDB AUTO_INCREMENT=4 DEFAULT CHARSET=utf8mb4";
        assert_eq!(normalise(a), normalise(b));
        // The column AUTO_INCREMENT attribute stays; only the counter goes.
        assert!(normalise(a).contains("NOT NULL AUTO_INCREMENT,"));
        assert!(normalise(a).ends_with(") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"));
        // Column order does count.
        let c = a.replace(
            "`id` int NOT NULL AUTO_INCREMENT,\n  `a` int,",
            "`a` int,\n  `id` int NOT NULL AUTO_INCREMENT,",
        );
        assert_ne!(normalise(a), normalise(&c));
    }

    #[test]
    fn a_character_set_its_collation_implies_is_the_same_column() {
        assert_eq!(
            without_redundant_charset(
                "  `w` varchar(5) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL,"
            ),
            "  `w` varchar(5) COLLATE utf8mb4_unicode_ci NOT NULL,"
        );
        let other = "  `w` varchar(5) CHARACTER SET latin1 NOT NULL,";
        assert_eq!(without_redundant_charset(other), other);
        let mixed = "  `w` varchar(5) CHARACTER SET latin1 COLLATE utf8mb4_bin";
        assert_eq!(without_redundant_charset(mixed), mixed);
    }

    #[test]
    fn checksums_mark_nulls_and_read_history() {
        let t = Table {
            schema: "s".into(),
            name: "p".into(),
            versioned: true,
            ..Table::default()
        };
        let q = checksum_query(&t, &["id".into(), "ROW_START".into()], true);
        assert!(
            q.contains("CAST(`id` AS BINARY)") && q.contains("ISNULL(`ROW_START`)"),
            "{q}"
        );
        assert!(q.ends_with("FROM `s`.`p` FOR SYSTEM_TIME ALL"), "{q}");
        assert_eq!(
            checksum_query(&t, &["id".into()], false),
            "SELECT COUNT(*), '' FROM `s`.`p` FOR SYSTEM_TIME ALL"
        );
    }
}
