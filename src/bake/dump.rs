//! The dump path: a SQL dump (plain, .gz or .zst) replayed statement by statement through
//! the server's own client (bytes untouched, as `mysql < dump` sends them), with each big
//! table's secondary indexes and every foreign key held back and added after the rows.
//! A table is big when what follows its `CREATE` in the dump before the next table (its
//! rows) outgrows `copy::DEFER_INDEXES_BYTES`; a small one is created with its indexes:
//! an `ALTER TABLE … ADD INDEX` per 20-row table cost more than the rows themselves
//! (10,000 such tables: 73 s of a 118 s MySQL bake, docs/bake.md).

use super::copy::{add_deferred, Deferred, DEFER_INDEXES_BYTES};
use super::ddl::split_create_table_with;
use super::job::{check_cancel, BakeRequest, BakeSummary, Phases};
use super::split::{Statement, Statements};
use crate::error::usage;
use crate::server::client::{ClientFailure, ClientFeed};
use crate::server::oneoff::OneOff;
use crate::sql::quote;
use anyhow::{Context, Result};
use std::collections::VecDeque;
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

/// Our marker between the statements we split: not SQL, so never inside one (clients
/// take 15 characters at most).
const DELIMITER: &str = ";;dbbranch;;";

/// What we fed for one statement, to name it when the client reports a failing line.
struct Fed {
    first_line: u64,
    last_line: u64,
    number: usize,
    line: usize,
    head: Vec<u8>,
}

/// The statements fed last (the client stops at the first error, a little behind us).
const REMEMBERED: usize = 4096;

/// Where the statements fed so far are in the client's input.
struct Feed {
    next_line: u64,
    recent: VecDeque<Fed>,
}

impl Feed {
    /// Sends one statement; false once the client stopped reading.
    fn send(&mut self, client: &mut ClientFeed, number: usize, line: usize, text: &[u8]) -> bool {
        let newlines = text.iter().filter(|&&b| b == b'\n').count() as u64;
        if self.recent.len() == REMEMBERED {
            self.recent.pop_front();
        }
        self.recent.push_back(Fed {
            first_line: self.next_line,
            last_line: self.next_line + newlines,
            number,
            line,
            head: text[..text.len().min(1024)].to_vec(),
        });
        self.next_line += newlines + 2;
        client.write(text) && client.write(format!("\n{DELIMITER}\n").as_bytes())
    }

    fn statement_at(&self, line: u64) -> Option<&Fed> {
        self.recent
            .iter()
            .find(|f| f.first_line <= line && line <= f.last_line + 1)
    }
}

/// A `CREATE TABLE` held back with what follows it until the table's size is known: the
/// next table's `CREATE`, a `USE` or the end of the dump ends a small table; more than
/// `budget` bytes after it make it big. Sent in the dump's order either way.
struct Held {
    create: Statement,
    /// The table, qualified when a database is selected.
    table: String,
    after: Vec<Statement>,
    bytes: u64,
}

impl Held {
    /// Sends the `CREATE` (with its secondary indexes when `small`) and what was held after
    /// it, remembering what is to be added later; false once the client stopped reading.
    fn send(
        self,
        small: bool,
        feed: &mut Feed,
        client: &mut ClientFeed,
        deferred: &mut Vec<Deferred>,
    ) -> bool {
        let text = String::from_utf8_lossy(&self.create.text);
        let split = split_create_table_with(&text, !small);
        deferred.push(Deferred {
            table: self.table,
            indexes: split.indexes,
            foreign_keys: split.foreign_keys,
        });
        if !feed.send(
            client,
            self.create.number,
            self.create.line,
            split.base.as_bytes(),
        ) {
            return false;
        }
        self.after
            .iter()
            .all(|s| feed.send(client, s.number, s.line, &s.text))
    }
}

/// The database a `USE` statement selects.
fn used_database(stmt: &Statement) -> String {
    let text = String::from_utf8_lossy(&stmt.text);
    // After what comes before the keyword (comments, in any script): `USE` itself is ASCII.
    let rest = super::split::skip_to_first_word(&text);
    let rest = rest.get(3..).unwrap_or_default().trim();
    let rest = rest.trim_end_matches(';').trim();
    match rest.strip_prefix('`').and_then(|r| r.strip_suffix('`')) {
        Some(quoted) => quoted.replace("``", "`"),
        None => rest.to_string(),
    }
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
    phases.start("load dump (secondary indexes deferred)", size);
    // Bytes as the dump has them, as `mysql < dump` sends them.
    let mut client = target.client(true, Some(DELIMITER))?;
    let mut feed = Feed {
        next_line: 1,
        recent: VecDeque::new(),
    };
    let mut current_db: Option<String> = None;
    let mut prelude = vec![
        "SET unique_checks = 0".to_string(),
        "SET foreign_key_checks = 0".to_string(),
    ];
    if let Some(db) = &req.into {
        // The dump does not say the database's default character set: the one dumps are
        // written in, not the server's (MariaDB's is still latin1).
        prelude.push(format!(
            "CREATE DATABASE IF NOT EXISTS {} CHARACTER SET utf8mb4",
            quote(db)
        ));
        prelude.push(format!("USE {}", quote(db)));
        current_db = Some(db.clone());
        summary.databases.push(db.clone());
    }
    for sql in &prelude {
        feed.send(&mut client, 0, 0, sql.as_bytes());
    }
    let mut deferred = Vec::new();
    let mut held: Option<Held> = None;
    let mut reported = 0;
    let mut last = 0;
    for stmt in Statements::new(input) {
        let stmt = stmt.with_context(|| format!("reading {}", path.display()))?;
        last = stmt.number;
        if stmt.number % 64 == 0 {
            check_cancel(req.cancel)?;
        }
        let head = stmt.head(2);
        // Nobody else uses the one-off server: table locks only cost, and MariaDB refuses
        // a locked table's insert whose default takes a sequence's next value (its own
        // dumps of such tables fail under `mariadb < dump`).
        if head == "LOCK TABLES" || head == "UNLOCK TABLES" {
            continue;
        }
        let selects = head == "USE" || head.starts_with("USE ");
        let creates = head == "CREATE DATABASE" || head == "CREATE SCHEMA";
        if (selects || creates) && req.into.is_some() {
            return Err(usage(format!(
                "--into is for single-database dumps, and {} chooses its own databases \
                 (statement {}, line {}: {}); bake it without --into",
                path.display(),
                stmt.number,
                stmt.line,
                stmt.excerpt(200)
            )));
        }
        if selects {
            let db = used_database(&stmt);
            summary.databases.push(db.clone());
            current_db = Some(db);
        }
        let creates_table = head == "CREATE TABLE" && std::str::from_utf8(&stmt.text).is_ok();
        // A held table ends at the next table, a change of database, or (below) when what
        // follows it outgrows the budget.
        let mut sent = true;
        if creates_table || selects || creates {
            if let Some(h) = held.take() {
                sent = h.send(true, &mut feed, &mut client, &mut deferred);
            }
        }
        if !sent {
            break; // the client stopped at an error: finish says which
        }
        let sent = if creates_table {
            let text = String::from_utf8_lossy(&stmt.text);
            let name = text.split('`').nth(1).unwrap_or_default().to_string();
            let table = match &current_db {
                Some(db) => format!("{}.{}", quote(db), quote(&name)),
                None => quote(&name),
            };
            summary.tables += 1;
            held = Some(Held {
                create: stmt,
                table,
                after: Vec::new(),
                bytes: 0,
            });
            true
        } else if let Some(h) = held.as_mut() {
            h.bytes += stmt.text.len() as u64;
            h.after.push(stmt);
            if h.bytes > DEFER_INDEXES_BYTES {
                held.take()
                    .is_some_and(|h| h.send(false, &mut feed, &mut client, &mut deferred))
            } else {
                true
            }
        } else {
            feed.send(&mut client, stmt.number, stmt.line, &stmt.text)
        };
        let now = read.load(Ordering::Relaxed);
        phases.progress.advance(now - reported, "");
        reported = now;
        if !sent {
            break; // the client stopped at an error: finish says which
        }
    }
    if let Some(h) = held.take() {
        h.send(true, &mut feed, &mut client, &mut deferred);
    }
    if let Err(failure) = client.finish(&path.display().to_string()) {
        return Err(explain(failure, &feed, path, last));
    }
    summary.path = "dump".into();
    summary.bytes = size;
    summary.databases.sort();
    summary.databases.dedup();
    add_deferred(target, &deferred, req.jobs, phases, req.cancel)
}

/// A client failure as the statement of the dump that caused it.
fn explain(failure: ClientFailure, feed: &Feed, path: &Path, last: usize) -> anyhow::Error {
    let message = failure
        .message
        .clone()
        .unwrap_or_else(|| "the client failed".into());
    let fed = failure.line.and_then(|l| feed.statement_at(l));
    let Some(fed) = fed.filter(|f| f.number > 0) else {
        return anyhow::Error::from(failure.error).context(format!(
            "loading {} (after statement {last}): {message}",
            path.display()
        ));
    };
    let excerpt = Statement {
        number: fed.number,
        line: fed.line,
        text: fed.head.clone(),
    }
    .excerpt(200);
    if message.starts_with("ERROR 1046") {
        return usage(format!(
            "{} selects no database (statement {}, line {}: {excerpt}): it is a \
             single-database dump, as `mysqldump DB > file` writes; name the database to load \
             it into with --into DB",
            path.display(),
            fed.number,
            fed.line
        ));
    }
    anyhow::Error::from(failure.error).context(format!(
        "statement {} (line {}) of {} failed: {message}\n  the statement: {excerpt}",
        fed.number,
        fed.line,
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stmt(text: &str) -> Statement {
        Statement {
            number: 1,
            line: 1,
            text: text.as_bytes().to_vec(),
        }
    }

    #[test]
    fn the_database_of_a_use_after_a_comment_is_read_after_the_comment() {
        // Sliced at a byte offset, this panicked (inside the é) or named the wrong database.
        assert_eq!(used_database(&stmt("/*é*/USE db;")), "db");
        assert_eq!(used_database(&stmt("-- déjà\nUSE `shop`")), "shop");
        assert_eq!(used_database(&stmt("  USE `we``ird`;")), "we`ird");
        assert_eq!(used_database(&stmt("/*ééé*/ USE ünï")), "ünï");
    }
}
