//! The tablespace path, for a source whose files this host can read and whose server can
//! exchange tablespaces with ours (same family and series, same page size): each table is
//! created with all its indexes, its tablespace discarded, and the source's `.ibd` and
//! `.cfg` files — every table exported at one moment — copied (reflinked on the same
//! filesystem) and imported in its place. Creates and imports run on `--jobs` connections.
//!
//! The moment: when the tables fit the source's table cache, one `FLUSH TABLES … FOR EXPORT`
//! of all of them (writes to other tables go on). Past that, holding them all open at once
//! costs the source memory it may not have (a branch server holding 10,000 was OOM-killed),
//! so a coordinator takes `FLUSH TABLES WITH READ LOCK` — no table on the source changes
//! from then on — and the tables are exported in batches within the cache, each batch's
//! files copied before the next; the global lock goes once the last batch is copied. Every
//! file, and the transactions that read the rest, come from the moment the lock was taken.
//!
//! Tables whose files do not carry everything are copied as rows instead, from
//! transactions opened at that same moment, and the summary names them: FULLTEXT indexes
//! live in auxiliary tablespaces that an import does not bring, and each partition of a
//! partitioned table is a file of its own. On Oracle MySQL small tables are copied as rows
//! too (`SMALL_AS_ROWS_BYTES`), and the summary counts them: there every `CREATE`,
//! `DISCARD` and `IMPORT` is a data-dictionary transaction, and the two an import adds
//! cost more than a small table's rows.

use super::copy::{show_create_table, Table, TableList};
use super::job::{check_cancel, BakeRequest, BakeSummary, Phases};
use super::snapshot::{self, Freeze, Snapshot};
use super::workers;
use crate::flavour::Flavour;
use crate::server::oneoff::OneOff;
use crate::sql::quote;
use anyhow::{anyhow, Context, Result};
use mysql::prelude::Queryable;
use std::os::unix::fs::chown;
use std::path::{Path, PathBuf};

/// InnoDB's page size when nothing sets another; the one-off server uses it.
const DEFAULT_PAGE_SIZE: u64 = 16384;

/// The source's datadir when its table files can be read here and imported into a server
/// of flavour `ours`; otherwise why not.
pub fn reachable(
    source: &mut mysql::Conn,
    list: &TableList,
    ours: &Flavour,
) -> std::result::Result<PathBuf, String> {
    let version: Option<String> = source
        .query_first("SELECT VERSION()")
        .map_err(|e| format!("cannot read the source's version: {e}"))?;
    let theirs = version
        .as_deref()
        .and_then(Flavour::from_version_string)
        .ok_or("the source did not say its version")?;
    if theirs.family != ours.family || theirs.series() != ours.series() {
        return Err(format!(
            "tablespaces move only between servers of one family and series (source \
             {theirs}, this server {ours})"
        ));
    }
    let page: Option<u64> = source
        .query_first("SELECT @@innodb_page_size")
        .map_err(|e| e.to_string())?;
    if page != Some(DEFAULT_PAGE_SIZE) {
        return Err(format!(
            "the source's innodb_page_size is {}, this server's {DEFAULT_PAGE_SIZE}",
            page.unwrap_or(0)
        ));
    }
    let datadir: Option<String> = source
        .query_first("SELECT @@datadir")
        .map_err(|e| format!("cannot read the source's datadir: {e}"))?;
    let datadir = PathBuf::from(datadir.unwrap_or_default());
    if !datadir.is_dir() {
        return Err(format!(
            "the source's datadir {} is not on this host",
            datadir.display()
        ));
    }
    let per_table: Option<String> = source
        .query_first("SELECT @@innodb_file_per_table")
        .map_err(|e| e.to_string())?;
    if per_table.as_deref() != Some("1") && per_table.as_deref() != Some("ON") {
        return Err("the source does not use innodb_file_per_table".into());
    }
    for t in list.tables.iter().filter(|t| by_file(t).is_ok()) {
        if !ibd(&datadir, t).is_file() {
            return Err(format!(
                "{} has no readable {} (another server's datadir at the same path?)",
                t.label(),
                ibd(&datadir, t).display()
            ));
        }
    }
    Ok(datadir)
}

/// On Oracle MySQL, a table of at most this many bytes (data and indexes, as the source
/// reports them) is copied as rows: its `CREATE` with its indexes and one `INSERT` cost less
/// than `CREATE`, `DISCARD TABLESPACE` and `IMPORT TABLESPACE`, each a data-dictionary
/// transaction (10,000 tables of 20 rows on MySQL 9.7: the logical bake 30.4 s, the
/// tablespace bake 51.6 s, docs/bake.md). MariaDB's DDL is cheap enough that importing
/// keeps up (21.2 s against 23.6 s), so there every table goes by file.
pub const SMALL_AS_ROWS_BYTES: u64 = 1 << 20;

/// Whether `t` goes as rows on a target of `flavour` because it is small.
fn small_as_rows(flavour: &Flavour, t: &Table) -> bool {
    flavour.is_mysql() && t.bytes <= SMALL_AS_ROWS_BYTES
}

/// Whether a table's files carry all of it; if not, why it is copied as rows.
pub fn by_file(t: &Table) -> std::result::Result<(), &'static str> {
    if t.partitioned {
        Err("partitioned")
    } else if t.fulltext {
        Err("FULLTEXT index")
    } else {
        Ok(())
    }
}

fn ibd(datadir: &Path, t: &Table) -> PathBuf {
    datadir.join(&t.schema).join(format!("{}.ibd", t.name))
}

/// Imports what can be imported and copies the rest as rows. Returns the `--verify`
/// connection, its transaction opened at the moment of the export.
#[allow(clippy::too_many_arguments)]
pub fn import(
    target: &OneOff,
    source: &mut mysql::Conn,
    url: &str,
    source_datadir: &Path,
    list: &TableList,
    req: &BakeRequest,
    phases: &mut Phases,
    summary: &mut BakeSummary,
) -> Result<Option<mysql::Conn>> {
    let flavour = target.spec.flavour;
    let (files, rows): (Vec<&Table>, Vec<&Table>) = list
        .tables
        .iter()
        .partition(|t| by_file(t).is_ok() && !small_as_rows(&flavour, t));
    phases.start("create tables", 0);
    let progress = phases.progress;
    // Each worker reads a definition from the source while the others create theirs.
    workers::on_target_and_source(
        target,
        url,
        workers::for_ddl(req.jobs),
        &files,
        req.cancel,
        &|conn, source, t| {
            let create = show_create_table(source, t)?;
            conn.query_drop(format!("USE {}", quote(&t.schema)))?;
            conn.query_drop(create)
                .with_context(|| format!("creating table {}", t.label()))?;
            conn.query_drop(format!("ALTER TABLE {} DISCARD TABLESPACE", t.qualified()))
                .with_context(|| format!("discarding the new tablespace of {}", t.label()))?;
            progress.advance(0, &t.label());
            Ok(())
        },
    )?;
    let total: u64 = files
        .iter()
        .map(|t| std::fs::metadata(ibd(source_datadir, t)).map_or(0, |m| m.len()))
        .sum();

    phases.start("export and copy tablespaces", total);
    let snapshot = if list.tables.is_empty() {
        None
    } else {
        // As many as the DDL has connections: each reader also reads definitions and
        // copies small tables whole while its writer creates them (copy::copy).
        let readers = if rows.is_empty() {
            0
        } else {
            workers::for_ddl(req.jobs)
        };
        let batch = export_batch(source)?;
        let copy = |tables: &[&Table]| {
            copy_files(
                source_datadir,
                req.datadir,
                tables,
                &target.spec.user,
                phases,
            )
        };
        Some(if list.tables.len() <= batch {
            export_at_once(source, url, list, &files, readers, req, copy)?
        } else {
            summary.export_batches = Some(files.len().div_ceil(batch)).filter(|n| *n > 0);
            phases.progress.note(&format!(
                "{} tables are more than the source keeps open at once (table_open_cache): \
                 exporting them {batch} at a time under FLUSH TABLES WITH READ LOCK",
                list.tables.len()
            ));
            export_in_batches(source, url, &files, batch, readers, req, copy)?
        })
    };

    phases.start("import tablespaces", total);
    import_all(target, &files, req, phases)?;
    summary.bytes += total;
    summary.rows += files.iter().map(|t| t.rows).sum::<u64>();

    let Some(snapshot) = snapshot else {
        return Ok(None);
    };
    summary.source_gtid = snapshot.gtid.clone();
    if !rows.is_empty() {
        summary.copied_as_rows = rows
            .iter()
            .filter_map(|t| by_file(t).err().map(|why| format!("{} ({why})", t.label())))
            .collect();
        let small = rows.len() - summary.copied_as_rows.len();
        if small > 0 {
            summary.small_as_rows = Some(small);
            phases.progress.note(&format!(
                "copying {small} small table(s) as rows, from the same moment: on {flavour} \
                 that is faster than importing them"
            ));
        }
        if !summary.copied_as_rows.is_empty() {
            phases.progress.note(&format!(
                "copying {} table(s) as rows, from the same moment: {}",
                summary.copied_as_rows.len(),
                summary.copied_as_rows.join(", ")
            ));
        }
        let rows: Vec<Table> = rows.into_iter().cloned().collect();
        super::copy::copy(
            target,
            source,
            snapshot.readers,
            &rows,
            req,
            phases,
            summary,
        )?;
    }
    Ok(snapshot.verifier)
}

/// Copies the exported files; `copy_file_range` makes a reflink where the filesystem can.
fn copy_files(
    from: &Path,
    to: &Path,
    tables: &[&Table],
    user: &str,
    phases: &Phases,
) -> Result<()> {
    let owner = nix::unistd::User::from_name(user)
        .ok()
        .flatten()
        .ok_or_else(|| anyhow!("no user {user} to own the imported files"))?;
    for t in tables {
        for ext in ["ibd", "cfg"] {
            let src = from.join(&t.schema).join(format!("{}.{ext}", t.name));
            let dst = to.join(&t.schema).join(format!("{}.{ext}", t.name));
            std::fs::copy(&src, &dst)
                .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
            chown(&dst, Some(owner.uid.as_raw()), Some(owner.gid.as_raw()))
                .with_context(|| format!("giving {} to {user}", dst.display()))?;
        }
        let size = std::fs::metadata(ibd(to, t)).map_or(0, |m| m.len());
        phases.progress.advance(size, &t.label());
    }
    Ok(())
}

/// How many tables one `FLUSH TABLES … FOR EXPORT` may hold open on the source: half its
/// table cache (the rest is its other users'), at most 1,000 (about 40 MB on MariaDB 10.11).
fn export_batch(source: &mut mysql::Conn) -> Result<usize> {
    let open_cache: Option<u64> = source.query_first("SELECT @@table_open_cache")?;
    Ok((open_cache.unwrap_or(0) / 2).clamp(1, 1000) as usize)
}

/// One `FLUSH TABLES … FOR EXPORT` of every table (those copied as rows too, so nothing
/// changes while their transactions open); the files copied; the tables released.
fn export_at_once(
    source: &mut mysql::Conn,
    url: &str,
    list: &TableList,
    files: &[&Table],
    readers: usize,
    req: &BakeRequest,
    copy: impl Fn(&[&Table]) -> Result<()>,
) -> Result<Snapshot> {
    let everything: Vec<String> = list.tables.iter().map(Table::qualified).collect();
    source
        .query_drop(format!("FLUSH TABLES {} FOR EXPORT", everything.join(", ")))
        .with_context(|| {
            format!(
                "FLUSH TABLES … FOR EXPORT of {} table(s) on the source",
                everything.len()
            )
        })?;
    let held = (|| -> Result<Snapshot> {
        let snap = snapshot::open(url, readers, req.verify, Freeze::Held)?;
        copy(files)?;
        Ok(snap)
    })();
    // Release the source as soon as the files are copied, whatever happened.
    source.query_drop("UNLOCK TABLES")?;
    held
}

/// `FLUSH TABLES WITH READ LOCK` on a coordinator for the whole export, the transactions
/// opened under it, then `batch` tables at a time exported, copied and released.
fn export_in_batches(
    source: &mut mysql::Conn,
    url: &str,
    files: &[&Table],
    batch: usize,
    readers: usize,
    req: &BakeRequest,
    copy: impl Fn(&[&Table]) -> Result<()>,
) -> Result<Snapshot> {
    let mut coordinator = super::session::connect_source(url)?;
    coordinator
        .query_drop("FLUSH TABLES WITH READ LOCK")
        .map_err(|e| {
            crate::error::usage(format!(
                "FLUSH TABLES WITH READ LOCK on the source failed: {e}. With more tables than \
                 the source's table_open_cache the tablespace path exports them in batches \
                 under that lock, which needs the RELOAD privilege; grant it, raise \
                 table_open_cache, or use --via logical"
            ))
        })?;
    let held = (|| -> Result<Snapshot> {
        let snap = snapshot::open(url, readers, req.verify, Freeze::Held)?;
        for part in files.chunks(batch) {
            check_cancel(req.cancel)?;
            let names: Vec<String> = part.iter().map(|t| t.qualified()).collect();
            source
                .query_drop(format!("FLUSH TABLES {} FOR EXPORT", names.join(", ")))
                .with_context(|| {
                    format!(
                        "FLUSH TABLES … FOR EXPORT of {} table(s) on the source",
                        part.len()
                    )
                })?;
            let copied = copy(part);
            source.query_drop("UNLOCK TABLES")?;
            copied?;
        }
        Ok(snap)
    })();
    // Writes resume once every file is copied, whatever happened.
    coordinator.query_drop("UNLOCK TABLES")?;
    held
}

/// `IMPORT TABLESPACE` for every table, `jobs` at a time (an import reads and rewrites
/// every page: CPU and I/O that parallel connections share out).
fn import_all(
    target: &OneOff,
    tables: &[&Table],
    req: &BakeRequest,
    phases: &Phases,
) -> Result<()> {
    let progress = phases.progress;
    workers::on_target(
        target,
        workers::for_ddl(req.jobs),
        tables,
        req.cancel,
        &|conn, t| {
            conn.query_drop(format!("ALTER TABLE {} IMPORT TABLESPACE", t.qualified()))
                .with_context(|| format!("importing the tablespace of {}", t.label()))?;
            let cfg = req.datadir.join(&t.schema).join(format!("{}.cfg", t.name));
            let _ = std::fs::remove_file(cfg);
            let size = std::fs::metadata(ibd(req.datadir, t)).map_or(0, |m| m.len());
            progress.advance(size, &t.label());
            Ok(())
        },
    )
}
