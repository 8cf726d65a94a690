//! What `diff` compares: every schema object of the user databases as the server's own
//! `information_schema` describes it (tables, columns, indexes, foreign keys, views,
//! routines, triggers, events), and per-table row counts and checksums. No dump text.

use anyhow::{Context, Result};
use mysql::prelude::Queryable;
use serde::Serialize;
use std::collections::BTreeMap;

/// (kind, qualified name) → its definition, as one comparable line.
pub type Schema = BTreeMap<(String, String), String>;

/// Rows and checksum of one table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableData {
    pub rows: u64,
    /// `CHECKSUM TABLE` (None where the server cannot tell).
    pub checksum: Option<u64>,
}

const SYSTEM: &str = "('mysql', 'information_schema', 'performance_schema', 'sys')";

/// One query per kind: its first column is the object's qualified name, the rest its
/// definition.
fn queries() -> Vec<(&'static str, String)> {
    vec![
        (
            "table",
            format!(
                "SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME), ENGINE, TABLE_COLLATION, \
                 CREATE_OPTIONS FROM information_schema.TABLES \
                 WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN {SYSTEM}"
            ),
        ),
        (
            "column",
            format!(
                "SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME, '.', COLUMN_NAME), COLUMN_TYPE, \
                 IF(IS_NULLABLE = 'YES', 'NULL', 'NOT NULL'), \
                 CONCAT('DEFAULT ', IFNULL(COLUMN_DEFAULT, 'NULL')), EXTRA, \
                 IFNULL(COLLATION_NAME, ''), CONCAT('#', ORDINAL_POSITION) \
                 FROM information_schema.COLUMNS c WHERE TABLE_SCHEMA NOT IN {SYSTEM} \
                 AND EXISTS (SELECT 1 FROM information_schema.TABLES t \
                 WHERE t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME \
                 AND t.TABLE_TYPE = 'BASE TABLE')"
            ),
        ),
        (
            "index",
            format!(
                "SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME, '.', INDEX_NAME), \
                 IF(NON_UNIQUE = 0, 'UNIQUE', ''), INDEX_TYPE, \
                 CONCAT('(', GROUP_CONCAT(CONCAT(COLUMN_NAME, IFNULL(CONCAT('(', SUB_PART, ')'), '')) \
                 ORDER BY SEQ_IN_INDEX SEPARATOR ', '), ')') \
                 FROM information_schema.STATISTICS WHERE TABLE_SCHEMA NOT IN {SYSTEM} \
                 GROUP BY TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, NON_UNIQUE, INDEX_TYPE"
            ),
        ),
        (
            "foreign key",
            format!(
                "SELECT CONCAT(rc.CONSTRAINT_SCHEMA, '.', rc.TABLE_NAME, '.', rc.CONSTRAINT_NAME), \
                 CONCAT('(', GROUP_CONCAT(k.COLUMN_NAME ORDER BY k.ORDINAL_POSITION SEPARATOR ', '), ')'), \
                 CONCAT('REFERENCES ', rc.UNIQUE_CONSTRAINT_SCHEMA, '.', rc.REFERENCED_TABLE_NAME, \
                 ' (', GROUP_CONCAT(k.REFERENCED_COLUMN_NAME ORDER BY k.ORDINAL_POSITION SEPARATOR ', '), ')'), \
                 CONCAT('ON UPDATE ', rc.UPDATE_RULE), CONCAT('ON DELETE ', rc.DELETE_RULE) \
                 FROM information_schema.REFERENTIAL_CONSTRAINTS rc \
                 JOIN information_schema.KEY_COLUMN_USAGE k \
                 ON k.CONSTRAINT_SCHEMA = rc.CONSTRAINT_SCHEMA \
                 AND k.CONSTRAINT_NAME = rc.CONSTRAINT_NAME AND k.TABLE_NAME = rc.TABLE_NAME \
                 WHERE rc.CONSTRAINT_SCHEMA NOT IN {SYSTEM} \
                 GROUP BY rc.CONSTRAINT_SCHEMA, rc.TABLE_NAME, rc.CONSTRAINT_NAME, \
                 rc.UNIQUE_CONSTRAINT_SCHEMA, rc.REFERENCED_TABLE_NAME, rc.UPDATE_RULE, rc.DELETE_RULE"
            ),
        ),
        (
            "view",
            format!(
                "SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME), VIEW_DEFINITION \
                 FROM information_schema.VIEWS WHERE TABLE_SCHEMA NOT IN {SYSTEM}"
            ),
        ),
        (
            "routine",
            format!(
                "SELECT CONCAT(ROUTINE_SCHEMA, '.', ROUTINE_NAME), ROUTINE_TYPE, \
                 IFNULL(DTD_IDENTIFIER, ''), ROUTINE_DEFINITION \
                 FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA NOT IN {SYSTEM}"
            ),
        ),
        (
            "trigger",
            format!(
                "SELECT CONCAT(TRIGGER_SCHEMA, '.', TRIGGER_NAME), ACTION_TIMING, \
                 EVENT_MANIPULATION, CONCAT('ON ', EVENT_OBJECT_TABLE), ACTION_STATEMENT \
                 FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA NOT IN {SYSTEM}"
            ),
        ),
        (
            "event",
            format!(
                "SELECT CONCAT(EVENT_SCHEMA, '.', EVENT_NAME), EVENT_DEFINITION, \
                 IFNULL(INTERVAL_VALUE, ''), IFNULL(INTERVAL_FIELD, ''), STATUS \
                 FROM information_schema.EVENTS WHERE EVENT_SCHEMA NOT IN {SYSTEM}"
            ),
        ),
    ]
}

/// Reads every object's definition over `conn`.
pub fn read(conn: &mut mysql::Conn) -> Result<Schema> {
    // GROUP_CONCAT of wide indexes and long column lists.
    conn.query_drop("SET SESSION group_concat_max_len = 1048576")?;
    let mut schema = Schema::new();
    for (kind, sql) in queries() {
        let rows: Vec<mysql::Row> = conn
            .query(&sql)
            .with_context(|| format!("reading the {kind}s from information_schema"))?;
        for row in rows {
            let values: Vec<String> = (0..row.len())
                .map(|i| {
                    row.get_opt::<Option<String>, _>(i)
                        .and_then(|r| r.ok())
                        .flatten()
                        .unwrap_or_else(|| "NULL".into())
                })
                .collect();
            let Some((name, def)) = values.split_first() else {
                continue;
            };
            let def: Vec<&str> = def
                .iter()
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .collect();
            schema.insert((kind.to_string(), name.clone()), def.join(" "));
        }
    }
    Ok(schema)
}

/// Row count and checksum of every base table of the user databases.
pub fn data(conn: &mut mysql::Conn) -> Result<BTreeMap<String, TableData>> {
    let tables: Vec<(String, String)> = conn.query(format!(
        "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES \
         WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN {SYSTEM} \
         ORDER BY TABLE_SCHEMA, TABLE_NAME"
    ))?;
    let mut out = BTreeMap::new();
    for (db, t) in tables {
        let q = format!("`{}`.`{}`", db.replace('`', "``"), t.replace('`', "``"));
        let rows: Option<u64> = conn
            .query_first(format!("SELECT COUNT(*) FROM {q}"))
            .with_context(|| format!("counting the rows of {db}.{t}"))?;
        let checksum: Option<(String, Option<u64>)> = conn
            .query_first(format!("CHECKSUM TABLE {q}"))
            .with_context(|| format!("checksumming {db}.{t}"))?;
        out.insert(
            format!("{db}.{t}"),
            TableData {
                rows: rows.unwrap_or(0),
                checksum: checksum.and_then(|(_, c)| c),
            },
        );
    }
    Ok(out)
}
