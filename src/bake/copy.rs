//! The logical path: tables created on twice `--jobs` connections (big ones with their primary key
//! only), each small table's rows copied right after its `CREATE` by the same worker, big
//! tables' rows by N parallel readers over key ranges (`ranges.rs`) — all from one consistent
//! snapshot — then the big tables' secondary indexes and every foreign key. Also the table
//! list. The tablespace path uses it for the tables whose files cannot be imported (and, on
//! Oracle MySQL, the small ones).

use super::ddl::split_create_table_with;
use super::job::{check_cancel, BakeRequest, BakeSummary, Phases, TableSplit};
use super::ranges::{self, KeyColumn, Split};
use super::workers;
use crate::error::usage;
use crate::server::oneoff::OneOff;
use crate::sql::quote;
use anyhow::{anyhow, Context, Result};
use mysql::consts::ColumnType;
use mysql::prelude::Queryable;
use mysql::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

pub use super::table::Table;
pub use crate::server::databases::SYSTEM_SCHEMAS;

pub struct TableList {
    pub databases: Vec<String>,
    pub tables: Vec<Table>,
    /// MariaDB sequences: recreated with their next value, never copied as rows.
    pub sequences: Vec<Table>,
}

/// The user tables to bake; refuses what the baker cannot carry, naming the table.
pub fn list_tables(source: &mut mysql::Conn, wanted: &[String]) -> Result<TableList> {
    let all: Vec<String> = source.query("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA")?;
    let databases: Vec<String> = if wanted.is_empty() {
        all.into_iter()
            .filter(|d| !SYSTEM_SCHEMAS.contains(&d.as_str()))
            .collect()
    } else {
        for d in wanted {
            if !all.contains(d) {
                return Err(usage(format!("database {d} does not exist on the source")));
            }
        }
        wanted.to_vec()
    };
    let mut tables = Vec::new();
    let mut sequences = Vec::new();
    for db in &databases {
        let fulltext: Vec<String> = source.exec(
            "SELECT DISTINCT TABLE_NAME FROM information_schema.STATISTICS \
             WHERE TABLE_SCHEMA = ? AND INDEX_TYPE = 'FULLTEXT'",
            (db,),
        )?;
        // schema, name, engine, type, bytes, rows, options
        type Row = (
            String,
            String,
            Option<String>,
            String,
            Option<u64>,
            Option<u64>,
            Option<String>,
        );
        let rows: Vec<Row> = source.exec(
            "SELECT TABLE_SCHEMA, TABLE_NAME, ENGINE, TABLE_TYPE, DATA_LENGTH + INDEX_LENGTH, \
             TABLE_ROWS, CREATE_OPTIONS FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = ? AND TABLE_TYPE <> 'VIEW' ORDER BY TABLE_NAME",
            (db,),
        )?;
        for (schema, name, engine, kind, bytes, rows, options) in rows {
            let label = format!("{schema}.{name}");
            if kind == "SEQUENCE" {
                sequences.push(Table {
                    schema,
                    name,
                    ..Table::default()
                });
                continue;
            }
            let versioned = kind == "SYSTEM VERSIONED";
            if kind != "BASE TABLE" && !versioned {
                return Err(usage(format!(
                    "{label} is a {kind}; the baker copies InnoDB tables, sequences, views and \
                     routines only"
                )));
            }
            if !engine
                .as_deref()
                .is_some_and(|e| e.eq_ignore_ascii_case("InnoDB"))
            {
                return Err(usage(format!(
                    "table {label} uses {}; the baker copies InnoDB tables only. Convert it on the \
                     source (`ALTER TABLE {label} ENGINE=InnoDB`) or leave its database out with \
                     --databases",
                    engine.unwrap_or_else(|| "no engine".into())
                )));
            }
            tables.push(Table {
                partitioned: options
                    .as_deref()
                    .is_some_and(|o| o.contains("partitioned")),
                fulltext: fulltext.contains(&name),
                versioned,
                schema,
                name,
                bytes: bytes.unwrap_or(0),
                rows: rows.unwrap_or(0),
            });
        }
    }
    Ok(TableList {
        databases,
        tables,
        sequences,
    })
}

pub fn create_databases(
    source: &mut mysql::Conn,
    target: &mut mysql::Conn,
    dbs: &[String],
) -> Result<()> {
    for db in dbs {
        let create: Option<(String, String)> =
            source.query_first(format!("SHOW CREATE DATABASE {}", quote(db)))?;
        let (_, sql) = create.ok_or_else(|| anyhow!("no CREATE DATABASE for {db}"))?;
        target
            .query_drop(sql)
            .with_context(|| format!("creating database {db}"))?;
    }
    Ok(())
}

pub fn show_create_table(source: &mut mysql::Conn, t: &Table) -> Result<String> {
    let row: Option<(String, String)> =
        source.query_first(format!("SHOW CREATE TABLE {}", t.qualified()))?;
    Ok(row
        .ok_or_else(|| anyhow!("no CREATE TABLE for {}", t.label()))?
        .1)
}

struct Chunk {
    table: usize,
    lo: Option<Vec<Value>>,
    hi: Option<Vec<Value>>,
}

/// Rows below this are copied by one reader: planning costs more than it saves.
const SPLIT_MIN_ROWS: u64 = 50_000;

/// Tables at least this big (or with `SPLIT_MIN_ROWS` rows) get their secondary indexes
/// after their rows, built once by sorting; smaller ones are created with them.
pub(crate) const DEFER_INDEXES_BYTES: u64 = 32 << 20;

fn defers_indexes(t: &Table) -> bool {
    t.rows >= SPLIT_MIN_ROWS || t.bytes >= DEFER_INDEXES_BYTES
}

/// Columns that take values, per table of `tables`, read with one query per database:
/// generated ones are computed by the server (MySQL's `DEFAULT_GENERATED`, an expression
/// default, is an ordinary column). A versioned table's history columns come along,
/// declared or implicit.
fn stored_columns(source: &mut mysql::Conn, tables: &[Table]) -> Result<Vec<Vec<String>>> {
    let mut by_table: std::collections::HashMap<(String, String), Vec<(String, String)>> =
        std::collections::HashMap::new();
    let mut schemas: Vec<&str> = tables.iter().map(|t| t.schema.as_str()).collect();
    schemas.sort_unstable();
    schemas.dedup();
    for schema in schemas {
        let cols: Vec<(String, String, String)> = source.exec(
            "SELECT TABLE_NAME, COLUMN_NAME, EXTRA FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, ORDINAL_POSITION",
            (schema,),
        )?;
        for (table, column, extra) in cols {
            by_table
                .entry((schema.to_string(), table))
                .or_default()
                .push((column, extra));
        }
    }
    Ok(tables
        .iter()
        .map(|t| {
            let cols = by_table
                .remove(&(t.schema.clone(), t.name.clone()))
                .unwrap_or_default();
            let mut stored: Vec<String> = cols
                .iter()
                .filter(|(_, extra)| {
                    let extra = extra.to_ascii_uppercase();
                    !extra.contains("VIRTUAL GENERATED") && !extra.contains("STORED GENERATED")
                })
                .map(|(c, _)| c.clone())
                .collect();
            if t.versioned {
                for (implicit, extra) in [("ROW_START", "ROW START"), ("ROW_END", "ROW END")] {
                    if !cols
                        .iter()
                        .any(|(_, e)| e.to_ascii_uppercase().contains(extra))
                    {
                        stored.push(implicit.to_string());
                    }
                }
            }
            stored
        })
        .collect())
}

pub struct Deferred {
    pub table: String,
    pub indexes: Vec<String>,
    pub foreign_keys: Vec<String>,
}

/// Adds deferred indexes (tables in parallel), then foreign keys (in parallel too: with
/// foreign_key_checks off each is a change of metadata).
pub fn add_deferred(
    target: &OneOff,
    deferred: &[Deferred],
    jobs: usize,
    phases: &mut Phases,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<()> {
    let with_indexes: Vec<&Deferred> = deferred.iter().filter(|d| !d.indexes.is_empty()).collect();
    phases.start("add secondary indexes", 0);
    let progress = phases.progress;
    workers::on_target(target, jobs, &with_indexes, cancel, &|conn, d| {
        // InnoDB builds one FULLTEXT index per statement.
        let (fulltext, plain): (Vec<&String>, Vec<&String>) = d
            .indexes
            .iter()
            .partition(|i| i.to_ascii_uppercase().starts_with("ADD FULLTEXT"));
        let mut statements = Vec::new();
        if !plain.is_empty() {
            statements.push(
                plain
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            );
        }
        statements.extend(fulltext.into_iter().cloned());
        for clauses in statements {
            conn.query_drop(format!("ALTER TABLE {} {clauses}", d.table))
                .with_context(|| format!("adding the secondary indexes of {}", d.table))?;
        }
        progress.advance(0, &d.table);
        Ok(())
    })?;
    let with_keys: Vec<&Deferred> = deferred
        .iter()
        .filter(|d| !d.foreign_keys.is_empty())
        .collect();
    workers::on_target(target, jobs, &with_keys, cancel, &|conn, d| {
        conn.query_drop(format!(
            "ALTER TABLE {} {}",
            d.table,
            d.foreign_keys.join(", ")
        ))
        .with_context(|| format!("adding the foreign keys of {}", d.table))
    })
}

/// Creates `tables` on the target (big ones with their primary key only, small ones with
/// their indexes) and copies their rows with `readers` (transactions opened at one moment:
/// `snapshot::open`). Every reader takes tables in turn: it reads the definition, a writer
/// of its own creates the table and, for a small table, copies its rows at once — so the
/// source's work, the target's DDL and the rows overlap instead of waiting for each other
/// (10,000 small tables on Oracle MySQL: docs/bake.md). Big tables are then cut into key
/// ranges and copied by `req.jobs` of the readers; their other indexes and every foreign key
/// come last. The databases exist already.
pub fn copy(
    target: &OneOff,
    source: &mut mysql::Conn,
    mut readers: Vec<mysql::Conn>,
    tables: &[Table],
    req: &BakeRequest,
    phases: &mut Phases,
    summary: &mut BakeSummary,
) -> Result<()> {
    let jobs = req.jobs.max(1).min(readers.len().max(1));
    phases.start("plan the copy", 0);
    let columns = stored_columns(source, tables)?;

    // Bounds from the readers' own moment and session (bytes as stored, UTC).
    let planner = readers
        .first_mut()
        .ok_or_else(|| anyhow!("no reader to plan the copy with"))?;
    let mut chunks: Vec<Chunk> = Vec::new();
    let mut key_of: Vec<Option<Vec<KeyColumn>>> = vec![None; tables.len()];
    let mut at_once = vec![false; tables.len()];
    for (i, t) in tables.iter().enumerate() {
        check_cancel(req.cancel)?;
        match ranges::plan(planner, t, jobs * 4, SPLIT_MIN_ROWS)
            .with_context(|| format!("planning the copy of {}", t.label()))?
        {
            Split::Whole { why } => {
                if let Some(why) = why {
                    summary.splits.push(TableSplit {
                        table: t.label(),
                        ranges: 1,
                        by: None,
                        whole_because: Some(why),
                    });
                }
                if defers_indexes(t) {
                    chunks.push(Chunk {
                        table: i,
                        lo: None,
                        hi: None,
                    });
                } else {
                    at_once[i] = true;
                }
            }
            Split::Ranges { key, by, bounds } => {
                summary.splits.push(TableSplit {
                    table: t.label(),
                    ranges: bounds.len() + 1,
                    by: Some(format!("{by} ({})", ranges::column_names(&key))),
                    whole_because: None,
                });
                key_of[i] = Some(key);
                let mut lo = None;
                for b in bounds {
                    chunks.push(Chunk {
                        table: i,
                        lo,
                        hi: Some(b.clone()),
                    });
                    lo = Some(b);
                }
                chunks.push(Chunk {
                    table: i,
                    lo,
                    hi: None,
                });
            }
        }
    }

    let small_bytes: u64 = tables
        .iter()
        .zip(&at_once)
        .filter(|(_, small)| **small)
        .map(|(t, _)| t.bytes)
        .sum();
    if at_once.contains(&true) {
        phases.start("create tables, small ones with their rows", small_bytes);
    } else {
        phases.start("create tables", 0);
    }
    let created = create_tables(target, readers, tables, &columns, &at_once, req, phases)?;
    summary.rows += created.rows;
    summary.bytes += created.bytes;

    // Biggest tables first, so the last chunks to finish are small.
    chunks.sort_by_key(|c| std::cmp::Reverse(tables[c.table].bytes));
    let total_bytes: u64 = tables.iter().map(|t| t.bytes).sum::<u64>() - small_bytes;
    phases.start("copy rows", total_bytes);
    let progress = phases.progress;
    let rows_copied = AtomicU64::new(0);
    let bytes_copied = AtomicU64::new(0);
    // The readers past `jobs` end their transactions here: big tables go `jobs` at a time;
    // each reader gets a writer of its own with its first chunk.
    let states: Vec<(mysql::Conn, Option<mysql::Conn>)> = created
        .readers
        .into_iter()
        .take(jobs)
        .map(|reader| (reader, None))
        .collect();
    let states = workers::spread_over(states, &chunks, req.cancel, &|(reader, writer), chunk| {
        let writer = workers::opened(writer, || workers::target_conn(target))?;
        let t = &tables[chunk.table];
        let (rows, bytes) = copy_chunk(
            reader,
            writer,
            t,
            &columns[chunk.table],
            key_of[chunk.table].as_deref(),
            chunk,
            Inserts::Prepared,
        )
        .with_context(|| format!("copying rows of {}", t.label()))?;
        rows_copied.fetch_add(rows, Ordering::Relaxed);
        bytes_copied.fetch_add(bytes, Ordering::Relaxed);
        progress.advance(bytes, &t.label());
        Ok(())
    })?;
    for (mut reader, _) in states {
        reader.query_drop("COMMIT")?;
    }
    summary.rows += rows_copied.into_inner();
    summary.bytes += bytes_copied.into_inner();
    add_deferred(target, &created.deferred, jobs, phases, req.cancel)
}

/// What `create_tables` leaves: the readers (their transactions still open), what is
/// added after the rows, and the rows and bytes of the small tables it copied.
struct Created {
    readers: Vec<mysql::Conn>,
    deferred: Vec<Deferred>,
    rows: u64,
    bytes: u64,
}

/// One `create_tables` thread's connections: its reader, its writer (opened with its first
/// table) and the database the writer is in.
struct Creator {
    reader: mysql::Conn,
    writer: Option<mysql::Conn>,
    schema: Option<String>,
}

/// Every table created, one reader and a writer of its own per thread; the tables marked
/// `at_once` are copied whole right after their `CREATE`, from the reader's transaction.
/// The first error stops the other threads at their next table and is returned.
fn create_tables(
    target: &OneOff,
    readers: Vec<mysql::Conn>,
    tables: &[Table],
    columns: &[Vec<String>],
    at_once: &[bool],
    req: &BakeRequest,
    phases: &Phases,
) -> Result<Created> {
    let progress = phases.progress;
    let deferred: Mutex<Vec<Option<Deferred>>> = Mutex::new(tables.iter().map(|_| None).collect());
    let rows = AtomicU64::new(0);
    let bytes = AtomicU64::new(0);
    let states: Vec<Creator> = readers
        .into_iter()
        .map(|reader| Creator {
            reader,
            writer: None,
            schema: None,
        })
        .collect();
    let order: Vec<usize> = (0..tables.len()).collect();
    let states = workers::spread_over(states, &order, req.cancel, &|c, &i| {
        let t = &tables[i];
        let split =
            split_create_table_with(&show_create_table(&mut c.reader, t)?, defers_indexes(t));
        let writer = workers::opened(&mut c.writer, || workers::target_conn(target))?;
        if c.schema.as_deref() != Some(t.schema.as_str()) {
            writer.query_drop(format!("USE {}", quote(&t.schema)))?;
            c.schema = Some(t.schema.clone());
        }
        writer
            .query_drop(&split.base)
            .with_context(|| format!("creating table {}", t.label()))?;
        let mut copied = 0;
        if at_once[i] {
            let whole = Chunk {
                table: i,
                lo: None,
                hi: None,
            };
            let (r, b) = copy_chunk(
                &mut c.reader,
                writer,
                t,
                &columns[i],
                None,
                &whole,
                Inserts::Text,
            )
            .with_context(|| format!("copying rows of {}", t.label()))?;
            rows.fetch_add(r, Ordering::Relaxed);
            bytes.fetch_add(b, Ordering::Relaxed);
            copied = b;
        }
        deferred.lock().unwrap()[i] = Some(Deferred {
            table: t.qualified(),
            indexes: split.indexes,
            foreign_keys: split.foreign_keys,
        });
        progress.advance(copied, &t.label());
        Ok(())
    })?;
    Ok(Created {
        readers: states.into_iter().map(|c| c.reader).collect(),
        deferred: deferred
            .into_inner()
            .unwrap()
            .into_iter()
            .flatten()
            .collect(),
        rows: rows.into_inner(),
        bytes: bytes.into_inner(),
    })
}

/// Rows per INSERT: large enough to amortise the round trip, within the 65,535
/// placeholders a prepared statement may have.
fn rows_per_insert(columns: usize) -> usize {
    (65_535 / columns.max(1)).clamp(1, 2_000)
}

/// How a chunk's rows are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inserts {
    /// Prepared INSERTs of `rows_per_insert` rows, the statement reused: for big tables.
    Prepared,
    /// INSERTs with the values written out: for a small table, one statement sent once
    /// instead of a prepare, an execution and a close on the target for every table.
    Text,
}

/// A text INSERT is sent once it holds this much: well within the target's
/// max_allowed_packet (64 MiB by default).
const TEXT_INSERT_BYTES: usize = 4 << 20;

/// `v` as an SQL literal for a session with `SET NAMES binary` and backslash escapes (the
/// target session's sql_mode): bytes are written as they are, numbers so they read back
/// exactly (a FLOAT as the double it equals).
fn literal(v: &Value) -> String {
    match v {
        Value::Float(f) => format!("{:e}", f64::from(*f)),
        Value::Double(d) => format!("{d:e}"),
        other => other.as_sql(false),
    }
}

fn copy_chunk(
    reader: &mut mysql::Conn,
    writer: &mut mysql::Conn,
    t: &Table,
    columns: &[String],
    key: Option<&[KeyColumn]>,
    chunk: &Chunk,
    inserts: Inserts,
) -> Result<(u64, u64)> {
    let cols = columns
        .iter()
        .map(|c| quote(c))
        .collect::<Vec<_>>()
        .join(", ");
    let history = if t.versioned {
        // Every version, with the times it was current (kept by insert_history below).
        writer.query_drop("SET system_versioning_insert_history = 1")?;
        " FOR SYSTEM_TIME ALL"
    } else {
        ""
    };
    let mut sql = format!("SELECT {cols} FROM {}{history}", t.qualified());
    let mut params = Vec::new();
    if let Some((filter, p)) =
        key.and_then(|k| ranges::predicate(k, chunk.lo.as_deref(), chunk.hi.as_deref()))
    {
        sql += &format!(" WHERE {filter}");
        params = p;
    }
    let per = rows_per_insert(columns.len());
    let row_sql = format!("({})", vec!["?"; columns.len()].join(", "));
    let head = format!("INSERT INTO {} ({cols}) VALUES ", t.qualified());
    let insert = |n: usize| format!("{head}{}", vec![row_sql.as_str(); n].join(", "));
    // Prepared when a first full batch is ready: most small tables never fill one, and
    // preparing an INSERT of `per` rows for each of 10,000 tables cost more than their rows.
    let mut full_stmt: Option<mysql::Statement> = None;
    let mut batch: Vec<Value> = Vec::with_capacity(per * columns.len());
    let mut text = String::new();
    // Per column, whether it is MySQL's JSON (read from the first row's metadata).
    let mut json: Option<Vec<bool>> = None;
    let mut in_batch = 0;
    let (mut rows, mut bytes) = (0u64, 0u64);
    let result = reader.exec_iter(sql, params)?;
    for row in result {
        let row = row?;
        match inserts {
            Inserts::Prepared => {
                for v in row.unwrap() {
                    bytes += value_bytes(&v);
                    batch.push(v);
                }
            }
            Inserts::Text => {
                let json = json.get_or_insert_with(|| {
                    row.columns_ref()
                        .iter()
                        .map(|c| c.column_type() == ColumnType::MYSQL_TYPE_JSON)
                        .collect()
                });
                text.push_str(if in_batch == 0 { &head } else { ", " });
                for (n, v) in row.unwrap().iter().enumerate() {
                    bytes += value_bytes(v);
                    text.push_str(if n == 0 { "(" } else { ", " });
                    // MySQL makes no JSON value of a binary string (error 3144), and
                    // under `SET NAMES binary` every plain literal is one: JSON text is
                    // UTF-8, so it is written as such.
                    if json.get(n) == Some(&true) && matches!(v, Value::Bytes(_)) {
                        text.push_str("_utf8mb4");
                    }
                    text.push_str(&literal(v));
                }
                text.push(')');
            }
        }
        in_batch += 1;
        rows += 1;
        match inserts {
            Inserts::Prepared if in_batch == per => {
                let stmt = match full_stmt.take() {
                    Some(stmt) => stmt,
                    None => writer.prep(insert(per))?,
                };
                retrying(|| writer.exec_drop(&stmt, batch.clone()))?;
                batch.clear();
                full_stmt = Some(stmt);
                in_batch = 0;
            }
            Inserts::Text if in_batch == per || text.len() >= TEXT_INSERT_BYTES => {
                retrying(|| writer.query_drop(&text))?;
                text.clear();
                in_batch = 0;
            }
            _ => {}
        }
    }
    if in_batch > 0 {
        match inserts {
            Inserts::Prepared => {
                let last = writer.prep(insert(in_batch))?;
                retrying(|| writer.exec_drop(&last, batch.clone()))?;
                writer.close(last)?;
            }
            Inserts::Text => retrying(|| writer.query_drop(&text))?,
        }
    }
    Ok((rows, bytes))
}

/// A value's share of the bytes the progress bar counts.
fn value_bytes(v: &Value) -> u64 {
    match v {
        Value::Bytes(b) => b.len() as u64,
        _ => 8,
    }
}

/// Runs one batch INSERT, again when InnoDB chose it as a deadlock's victim or it waited
/// out a lock (the statement was rolled back whole, so running it again is exact).
fn retrying(mut insert: impl FnMut() -> mysql::Result<()>) -> Result<()> {
    const ATTEMPTS: u64 = 5;
    let mut attempt = 1;
    loop {
        if attempt == ATTEMPTS {
            return Ok(insert()?);
        }
        match insert() {
            Err(mysql::Error::MySqlError(e)) if matches!(e.code, 1213 | 1205) => {
                std::thread::sleep(std::time::Duration::from_millis(20 * attempt));
                attempt += 1;
            }
            other => return Ok(other?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_read_back_as_the_values_they_were() {
        // A FLOAT's value as the double it equals: parsed as a double and stored in a
        // FLOAT column, it is that float again.
        let f = 0.1f32;
        let text = literal(&Value::Float(f));
        assert_eq!(text.parse::<f64>().unwrap() as f32, f, "{text}");
        for d in [0.1f64, 1e300, -2.5e-300, 123456789.0] {
            let text = literal(&Value::Double(d));
            assert!(
                text.contains('e'),
                "exponent form, never 300 digits: {text}"
            );
            assert_eq!(text.parse::<f64>().unwrap(), d, "{text}");
        }
        assert_eq!(literal(&Value::NULL), "NULL");
        assert_eq!(literal(&Value::Int(-7)), "-7");
        assert_eq!(
            literal(&Value::Bytes(b"it's a \\ \0 test".to_vec())),
            r"'it\'s a \\ \0 test'"
        );
        // Bytes that are not UTF-8 go as a hex literal: a binary string, byte for byte.
        assert_eq!(literal(&Value::Bytes(vec![0xff, 0x00, 0x41])), "0xFF0041");
        assert_eq!(
            literal(&Value::Date(2026, 12, 6, 23, 5, 1, 42)),
            "'2026-12-06 23:05:01.000042'"
        );
    }
}
