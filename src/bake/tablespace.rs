//! The tablespace path, for a source whose files this host can read and whose server can
//! exchange tablespaces with ours (same family and series, same page size): each table is
//! created with all its indexes, its tablespace discarded, and the source's `.ibd` and
//! `.cfg` files — every table exported at one moment by a single `FLUSH TABLES … FOR
//! EXPORT` — copied (reflinked on the same filesystem) and imported in its place.
//!
//! Tables whose files do not carry everything are copied as rows instead, from
//! transactions opened at that same moment, and the summary names them: FULLTEXT indexes
//! live in auxiliary tablespaces that an import does not bring, and each partition of a
//! partitioned table is a file of its own.

use super::copy::{show_create_table, Table, TableList};
use super::job::{check_cancel, BakeRequest, BakeSummary, Phases};
use super::session::{session, TARGET_SESSION};
use super::snapshot::{self, Freeze, Snapshot};
use crate::flavour::Flavour;
use crate::server::oneoff::OneOff;
use crate::sql::quote;
use anyhow::{anyhow, Context, Result};
use mysql::prelude::Queryable;
use std::collections::VecDeque;
use std::os::unix::fs::chown;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

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
    // One FLUSH TABLES … FOR EXPORT holds every table open at once, and each costs the
    // source memory (about 40 KB per table on MariaDB 10.11, measured: a branch server
    // holding 10,000 was OOM-killed at its 320 MiB ceiling). Past the number of tables the
    // source is set to keep open, the logical path reads them from one snapshot instead.
    let open_cache: Option<u64> = source
        .query_first("SELECT @@table_open_cache")
        .map_err(|e| e.to_string())?;
    let open_cache = open_cache.unwrap_or(0);
    if list.tables.len() as u64 > open_cache {
        return Err(format!(
            "{} tables are more than the source keeps open (table_open_cache = {open_cache}) \
             to hold at one moment under FLUSH TABLES … FOR EXPORT; raise it on the source to \
             use this path",
            list.tables.len()
        ));
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
    let (files, rows): (Vec<&Table>, Vec<&Table>) =
        list.tables.iter().partition(|t| by_file(t).is_ok());
    let mut tconn = target.conn()?;
    session(&mut tconn, TARGET_SESSION)?;
    phases.start("create tables", 0);
    for t in &files {
        check_cancel(req.cancel)?;
        let create = show_create_table(source, t)?;
        tconn.query_drop(format!("USE {}", quote(&t.schema)))?;
        tconn
            .query_drop(&create)
            .with_context(|| format!("creating table {}", t.label()))?;
        tconn.query_drop(format!("ALTER TABLE {} DISCARD TABLESPACE", t.qualified()))?;
    }
    let total: u64 = files
        .iter()
        .map(|t| std::fs::metadata(ibd(source_datadir, t)).map_or(0, |m| m.len()))
        .sum();

    phases.start("export and copy tablespaces", total);
    // One moment for every table: none can change while the files are copied, and the
    // transactions that read the others (and --verify's) open now.
    let everything: Vec<String> = list.tables.iter().map(Table::qualified).collect();
    let snapshot = if everything.is_empty() {
        None
    } else {
        source
            .query_drop(format!("FLUSH TABLES {} FOR EXPORT", everything.join(", ")))
            .with_context(|| {
                format!(
                    "FLUSH TABLES … FOR EXPORT of {} table(s) on the source",
                    everything.len()
                )
            })?;
        let held = (|| -> Result<Snapshot> {
            let readers = if rows.is_empty() { 0 } else { req.jobs.max(1) };
            let snap = snapshot::open(url, readers, req.verify, Freeze::Held)?;
            copy_files(
                source_datadir,
                req.datadir,
                &files,
                &target.spec.user,
                phases,
            )?;
            Ok(snap)
        })();
        // Release the source as soon as the files are copied, whatever happened.
        source.query_drop("UNLOCK TABLES")?;
        Some(held?)
    };

    phases.start("import tablespaces", total);
    import_all(target, &files, req, phases)?;
    summary.bytes += total;
    summary.rows += files.iter().map(|t| t.rows).sum::<u64>();

    let Some(snapshot) = snapshot else {
        return Ok(None);
    };
    if !rows.is_empty() {
        summary.copied_as_rows = rows
            .iter()
            .map(|t| format!("{} ({})", t.label(), by_file(t).unwrap_err()))
            .collect();
        phases.progress.note(&format!(
            "copying {} table(s) as rows, from the same moment: {}",
            rows.len(),
            summary.copied_as_rows.join(", ")
        ));
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

/// `IMPORT TABLESPACE` for every table, `jobs` at a time (an import reads and rewrites
/// every page: CPU and I/O that parallel connections share out).
fn import_all(
    target: &OneOff,
    tables: &[&Table],
    req: &BakeRequest,
    phases: &Phases,
) -> Result<()> {
    let queue = Mutex::new(tables.iter().copied().collect::<VecDeque<_>>());
    let progress = phases.progress;
    std::thread::scope(|s| -> Result<()> {
        let workers: Vec<_> = (0..req.jobs.max(1).min(tables.len().max(1)))
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    let mut conn = target.conn()?;
                    session(&mut conn, TARGET_SESSION)?;
                    while let Some(t) = queue.lock().unwrap().pop_front() {
                        check_cancel(req.cancel)?;
                        conn.query_drop(format!("ALTER TABLE {} IMPORT TABLESPACE", t.qualified()))
                            .with_context(|| {
                                format!("importing the tablespace of {}", t.label())
                            })?;
                        let cfg = req.datadir.join(&t.schema).join(format!("{}.cfg", t.name));
                        let _ = std::fs::remove_file(cfg);
                        let size = std::fs::metadata(ibd(req.datadir, t)).map_or(0, |m| m.len());
                        progress.advance(size, &t.label());
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join()
                .map_err(|_| anyhow!("an import worker panicked"))??;
        }
        Ok(())
    })
}
