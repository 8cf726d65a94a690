//! The logical path: tables created `--jobs` at a time (big ones with their primary key
//! only), rows copied by N parallel readers over key ranges (`ranges.rs`) from one
//! consistent snapshot, then the big tables' secondary indexes and every foreign key. Also the table list. The tablespace path uses it for the tables
//! whose files cannot be imported.

use super::ddl::split_create_table_with;
use super::job::{check_cancel, BakeRequest, BakeSummary, Phases, TableSplit};
use super::ranges::{self, KeyColumn, Split};
use super::session::{session, TARGET_SESSION};
use super::workers;
use crate::error::usage;
use crate::server::oneoff::OneOff;
use crate::sql::quote;
use anyhow::{anyhow, Context, Result};
use mysql::prelude::Queryable;
use mysql::Value;
use std::collections::VecDeque;
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
/// their indexes), `--jobs` at a time; copies their rows with `readers` (transactions
/// opened at one moment: `snapshot::open`), big tables cut into key ranges; then adds the
/// big tables' other indexes and every foreign key. The databases exist already.
pub fn copy(
    target: &OneOff,
    source: &mut mysql::Conn,
    mut readers: Vec<mysql::Conn>,
    tables: &[Table],
    req: &BakeRequest,
    phases: &mut Phases,
    summary: &mut BakeSummary,
) -> Result<()> {
    let jobs = readers.len().max(1);
    phases.start("create tables", 0);
    let mut deferred = Vec::new();
    let mut creates = Vec::new();
    for t in tables {
        check_cancel(req.cancel)?;
        let split = split_create_table_with(&show_create_table(source, t)?, defers_indexes(t));
        creates.push((t, split.base));
        deferred.push(Deferred {
            table: t.qualified(),
            indexes: split.indexes,
            foreign_keys: split.foreign_keys,
        });
    }
    let progress = phases.progress;
    let ddl = workers::for_ddl(jobs);
    workers::on_target(target, ddl, &creates, req.cancel, &|conn, (t, create)| {
        conn.query_drop(format!("USE {}", quote(&t.schema)))?;
        conn.query_drop(create)
            .with_context(|| format!("creating table {}", t.label()))?;
        progress.advance(0, &t.label());
        Ok(())
    })?;
    let columns = stored_columns(source, tables)?;

    // Bounds from the readers' own moment and session (bytes as stored, UTC).
    let planner = readers
        .first_mut()
        .ok_or_else(|| anyhow!("no reader to plan the copy with"))?;
    let mut chunks: Vec<Chunk> = Vec::new();
    let mut key_of: Vec<Option<Vec<KeyColumn>>> = vec![None; tables.len()];
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
                chunks.push(Chunk {
                    table: i,
                    lo: None,
                    hi: None,
                });
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
    // Biggest tables first, so the last chunks to finish are small.
    chunks.sort_by_key(|c| std::cmp::Reverse(tables[c.table].bytes));
    let total_bytes: u64 = tables.iter().map(|t| t.bytes).sum();
    phases.start("copy rows", total_bytes);

    let queue = Mutex::new(chunks.into_iter().collect::<VecDeque<_>>());
    let rows_copied = AtomicU64::new(0);
    let bytes_copied = AtomicU64::new(0);
    std::thread::scope(|s| -> Result<()> {
        let workers: Vec<_> = readers
            .into_iter()
            .map(|mut reader| {
                let (queue, columns, key_of, rows_copied, bytes_copied) =
                    (&queue, &columns, &key_of, &rows_copied, &bytes_copied);
                s.spawn(move || -> Result<()> {
                    let mut writer = target.conn()?;
                    session(&mut writer, TARGET_SESSION)?;
                    loop {
                        let Some(chunk) = queue.lock().unwrap().pop_front() else {
                            break;
                        };
                        check_cancel(req.cancel)?;
                        let t = &tables[chunk.table];
                        let (rows, bytes) = copy_chunk(
                            &mut reader,
                            &mut writer,
                            t,
                            &columns[chunk.table],
                            key_of[chunk.table].as_deref(),
                            &chunk,
                        )
                        .with_context(|| format!("copying rows of {}", t.label()))?;
                        rows_copied.fetch_add(rows, Ordering::Relaxed);
                        bytes_copied.fetch_add(bytes, Ordering::Relaxed);
                        progress.advance(bytes, &t.label());
                    }
                    reader.query_drop("COMMIT")?;
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join().map_err(|_| anyhow!("a copy worker panicked"))??;
        }
        Ok(())
    })?;
    summary.rows += rows_copied.into_inner();
    summary.bytes += bytes_copied.into_inner();
    add_deferred(target, &deferred, jobs, phases, req.cancel)
}

/// Rows per INSERT: large enough to amortise the round trip, within the 65,535
/// placeholders a prepared statement may have.
fn rows_per_insert(columns: usize) -> usize {
    (65_535 / columns.max(1)).clamp(1, 2_000)
}

fn copy_chunk(
    reader: &mut mysql::Conn,
    writer: &mut mysql::Conn,
    t: &Table,
    columns: &[String],
    key: Option<&[KeyColumn]>,
    chunk: &Chunk,
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
    let insert = |n: usize| {
        format!(
            "INSERT INTO {} ({cols}) VALUES {}",
            t.qualified(),
            vec![row_sql.as_str(); n].join(", ")
        )
    };
    // Prepared when a first full batch is ready: most small tables never fill one, and
    // preparing an INSERT of `per` rows for each of 10,000 tables cost more than their rows.
    let mut full_stmt: Option<mysql::Statement> = None;
    let mut batch: Vec<Value> = Vec::with_capacity(per * columns.len());
    let mut in_batch = 0;
    let (mut rows, mut bytes) = (0u64, 0u64);
    let result = reader.exec_iter(sql, params)?;
    for row in result {
        let row = row?;
        for v in row.unwrap() {
            bytes += match &v {
                Value::Bytes(b) => b.len() as u64,
                _ => 8,
            };
            batch.push(v);
        }
        in_batch += 1;
        rows += 1;
        if in_batch == per {
            let stmt = match full_stmt.take() {
                Some(stmt) => stmt,
                None => writer.prep(insert(per))?,
            };
            insert_retrying(writer, &stmt, std::mem::take(&mut batch))?;
            full_stmt = Some(stmt);
            in_batch = 0;
        }
    }
    if in_batch > 0 {
        let last = writer.prep(insert(in_batch))?;
        insert_retrying(writer, &last, batch)?;
        writer.close(last)?;
    }
    Ok((rows, bytes))
}

/// Runs one batch INSERT, again when InnoDB chose it as a deadlock's victim or it waited
/// out a lock (the statement was rolled back whole, so running it again is exact).
fn insert_retrying(
    writer: &mut mysql::Conn,
    stmt: &mysql::Statement,
    rows: Vec<Value>,
) -> Result<()> {
    const ATTEMPTS: u64 = 5;
    let mut attempt = 1;
    loop {
        if attempt == ATTEMPTS {
            return Ok(writer.exec_drop(stmt, rows)?);
        }
        match writer.exec_drop(stmt, rows.clone()) {
            Err(mysql::Error::MySqlError(e)) if matches!(e.code, 1213 | 1205) => {
                std::thread::sleep(std::time::Duration::from_millis(20 * attempt));
                attempt += 1;
            }
            other => return Ok(other?),
        }
    }
}
