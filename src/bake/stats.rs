//! The baseline's optimiser statistics: the source's own, carried as rows.
//!
//! The one-off server of a live bake keeps no persistent statistics while it fills
//! (`ONE_OFF_FLAG`): otherwise InnoDB writes every new table's rows into
//! `mysql.innodb_table_stats` and `innodb_index_stats` at its `CREATE`, and recalculates and
//! rewrites them in the background once its rows arrive — at 10,000 small tables on MySQL
//! 9.7 the baker and its server used 35.8 s of CPU with them and 30.2 s without them, the
//! source's copied afterwards included (one bench run each, docs/bake.md).
//! Afterwards the source's rows for the baked databases are written into those same
//! tables, so a branch plans with the figures the source plans with. Where the source user
//! cannot read them, the one-off server computes its own (`ANALYZE TABLE`), which is what
//! the baseline held before.

use super::job::{check_cancel, Statistics};
use super::table::Table;
use super::workers;
use crate::server::oneoff::OneOff;
use anyhow::{Context, Result};
use mysql::prelude::Queryable;
use mysql::Value;
use std::sync::atomic::AtomicBool;

/// The one-off server's option for a live bake (tablespace and logical paths).
pub const ONE_OFF_FLAG: &str = "innodb-stats-persistent=OFF";

type StatsTable = (&'static str, &'static [&'static str]);

const TABLE_STATS: StatsTable = (
    "innodb_table_stats",
    &[
        "database_name",
        "table_name",
        "last_update",
        "n_rows",
        "clustered_index_size",
        "sum_of_other_index_sizes",
    ],
);
const INDEX_STATS: StatsTable = (
    "innodb_index_stats",
    &[
        "database_name",
        "table_name",
        "index_name",
        "last_update",
        "stat_name",
        "stat_value",
        "sample_size",
        "stat_description",
    ],
);

/// Rows per `REPLACE`: 500 × 8 placeholders stays far below the protocol's 65,535.
const BATCH: usize = 500;

/// Gives the baked `databases` persistent statistics: the source's rows (written on up to
/// `jobs` connections), or, when the source user may not read them or the target refuses
/// them, the one-off server's own for `tables`. Returns which, and why when analysed.
pub fn carry(
    source: &mut mysql::Conn,
    target: &OneOff,
    jobs: usize,
    cancel: &AtomicBool,
    databases: &[String],
    tables: &[Table],
) -> Result<(Statistics, Option<String>)> {
    if databases.is_empty() {
        return Ok((Statistics::Source, None));
    }
    let mut batches = Vec::new();
    for (name, columns) in [TABLE_STATS, INDEX_STATS] {
        match read_rows(source, name, columns, databases) {
            Ok(rows) => batches.extend(rows.chunks(BATCH).map(|b| ((name, columns), b.to_vec()))),
            Err(Unreadable(why)) => {
                analyze(&mut workers::target_conn(target)?, tables)?;
                return Ok((Statistics::Analyzed, Some(why)));
            }
        }
    }
    let written = workers::on_target(target, jobs, &batches, cancel, &|conn, (table, rows)| {
        write_rows(conn, *table, rows)
    });
    match written {
        Ok(()) => Ok((Statistics::Source, None)),
        Err(e) => {
            // The target's tables may differ from the source's (another family or
            // version): its own statistics then, for every table, over what was written.
            check_cancel(cancel)?;
            analyze(&mut workers::target_conn(target)?, tables)?;
            Ok((Statistics::Analyzed, Some(format!("{e:#}"))))
        }
    }
}

/// The source's statistics could not be read: why, for the note.
struct Unreadable(String);

fn read_rows(
    source: &mut mysql::Conn,
    name: &str,
    columns: &[&str],
    databases: &[String],
) -> std::result::Result<Vec<Vec<Value>>, Unreadable> {
    // The time as seconds since the epoch: the same instant whatever either session's
    // time zone.
    let select = columns
        .iter()
        .map(|c| match *c {
            "last_update" => "UNIX_TIMESTAMP(last_update)".to_string(),
            c => c.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let marks = vec!["?"; databases.len()].join(", ");
    let sql = format!("SELECT {select} FROM mysql.{name} WHERE database_name IN ({marks})");
    source
        .exec_map(sql, databases.to_vec(), |row: mysql::Row| row.unwrap())
        .map_err(|e| Unreadable(format!("reading the source's mysql.{name}: {e}")))
}

fn write_rows(
    target: &mut mysql::Conn,
    (name, columns): StatsTable,
    rows: &[Vec<Value>],
) -> Result<()> {
    let row_marks = format!(
        "({})",
        columns
            .iter()
            .map(|c| match *c {
                "last_update" => "FROM_UNIXTIME(?)",
                _ => "?",
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    let sql = format!(
        "REPLACE INTO mysql.{name} ({}) VALUES {}",
        columns.join(", "),
        vec![row_marks.as_str(); rows.len()].join(", ")
    );
    let params: Vec<Value> = rows.iter().flatten().cloned().collect();
    let written = if crate::failpoint::fails("bake:statistics-refused") {
        Err(anyhow::anyhow!(
            "refused (failpoint bake:statistics-refused)"
        ))
    } else {
        target.exec_drop(sql, params).map_err(anyhow::Error::from)
    };
    written.with_context(|| format!("writing the source's statistics into mysql.{name}"))
}

/// The one-off server's own statistics for every table, persisted as a server with the
/// default settings would have them.
fn analyze(target: &mut mysql::Conn, tables: &[Table]) -> Result<()> {
    target.query_drop("SET GLOBAL innodb_stats_persistent = ON")?;
    for batch in tables.chunks(100) {
        let names = batch
            .iter()
            .map(Table::qualified)
            .collect::<Vec<_>>()
            .join(", ");
        // ANALYZE answers per table; a table it could not analyse is a row, not an error.
        target
            .query_drop(format!("ANALYZE TABLE {names}"))
            .with_context(|| format!("computing statistics: ANALYZE TABLE {names}"))?;
    }
    Ok(())
}
