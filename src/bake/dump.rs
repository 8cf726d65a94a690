//! The dump path: a SQL dump (plain, .gz or .zst) replayed statement by statement, with each
//! table's secondary indexes and foreign keys held back and added after its rows.

use super::copy::{add_deferred, Deferred};
use super::ddl::split_create_table;
use super::split::Statements;
use super::{check_cancel, quote, session, BakeRequest, BakeSummary, Phases, TARGET_SESSION};
use crate::server::oneoff::OneOff;
use anyhow::{Context, Result};
use mysql::prelude::Queryable;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Counts the bytes read from the file, for progress.
struct Counting<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

fn open(path: &Path, read: Arc<AtomicU64>) -> Result<Box<dyn BufRead>> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut magic = [0u8; 4];
    let n = file.read(&mut magic)?;
    drop(file);
    let counted = Counting {
        inner: std::fs::File::open(path)?,
        read,
    };
    Ok(if n >= 2 && magic[..2] == [0x1f, 0x8b] {
        Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(counted)))
    } else if n == 4 && magic == [0x28, 0xb5, 0x2f, 0xfd] {
        Box::new(BufReader::new(zstd::stream::read::Decoder::new(counted)?))
    } else {
        Box::new(BufReader::with_capacity(1 << 20, counted))
    })
}

pub fn load(
    target: &OneOff,
    path: &Path,
    req: &BakeRequest,
    phases: &mut Phases,
    summary: &mut BakeSummary,
) -> Result<()> {
    let size = std::fs::metadata(path)?.len();
    let read = Arc::new(AtomicU64::new(0));
    let input = open(path, read.clone())?;
    let mut conn = target.conn()?;
    session(&mut conn, TARGET_SESSION)?;
    // Dumps set their own character set; keep theirs rather than binary.
    conn.query_drop("SET NAMES utf8mb4")?;
    phases.start("load dump (secondary indexes deferred)", size);
    let mut current_db: Option<String> = None;
    let mut deferred = Vec::new();
    let mut reported = 0;
    for (n, stmt) in Statements::new(input).enumerate() {
        let stmt = stmt.with_context(|| format!("reading {}", path.display()))?;
        if n % 64 == 0 {
            check_cancel(req.cancel)?;
        }
        let upper: String = stmt
            .chars()
            .take(40)
            .collect::<String>()
            .to_ascii_uppercase();
        if let Some(db) = upper
            .strip_prefix("USE ")
            .map(|_| stmt[4..].trim().trim_matches('`').to_string())
        {
            current_db = Some(db);
            summary
                .databases
                .push(current_db.clone().unwrap_or_default());
        }
        let run = if upper.starts_with("CREATE TABLE") {
            let split = split_create_table(&stmt);
            let name = stmt
                .split('`')
                .nth(1)
                .map(str::to_string)
                .unwrap_or_default();
            let table = match &current_db {
                Some(db) => format!("{}.{}", quote(db), quote(&name)),
                None => quote(&name),
            };
            summary.tables += 1;
            deferred.push(Deferred {
                table,
                indexes: split.indexes,
                foreign_keys: split.foreign_keys,
            });
            split.base
        } else {
            stmt
        };
        conn.query_drop(&run).with_context(|| {
            format!(
                "statement {} of {}: {}",
                n + 1,
                path.display(),
                run.chars().take(120).collect::<String>()
            )
        })?;
        let now = read.load(Ordering::Relaxed);
        phases.progress.advance(now - reported, "");
        reported = now;
    }
    summary.path = "dump".into();
    summary.bytes = size;
    summary.databases.sort();
    summary.databases.dedup();
    add_deferred(target, &deferred, req.jobs, phases, req.cancel)
}
