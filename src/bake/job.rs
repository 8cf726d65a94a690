//! What a bake is asked (`BakeRequest`: its source, by which path, with what masking) and
//! what it reports (`BakeSummary`, phase by phase); the vocabulary every path shares.

use super::session::redact;
use crate::error::usage;
use crate::printer::PhaseProgress;
use anyhow::{anyhow, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// How rows get from a live source into the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// MySQL's CLONE INSTANCE: the whole instance at disk speed (same MySQL version, clone
    /// plugin on the source).
    Clone,
    /// The source's table files, exported and imported (its datadir on this host).
    Tablespace,
    /// Rows read in parallel over primary-key ranges, indexes built afterwards.
    Logical,
}

impl std::fmt::Display for Via {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Via::Clone => "clone",
            Via::Tablespace => "tablespace",
            Via::Logical => "logical",
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum BakeSource {
    /// `mysql://user:pass@host:port`; `via` forces a path (None: the fastest that applies).
    Live { url: String, via: Option<Via> },
    /// `file:PATH`, plain, .gz or .zst.
    Dump(PathBuf),
    /// `datadir:PATH`, already copied into the workspace by the storage.
    Datadir(PathBuf),
}

impl BakeSource {
    pub fn parse(s: &str, via: Option<Via>) -> Result<BakeSource> {
        if s.starts_with("mysql://") {
            mysql::Opts::from_url(s).map_err(|e| {
                usage(format!(
                    "{} is not a valid source URL ({e}); write it like mysql://user:password@host:3306",
                    redact(s)
                ))
            })?;
            return Ok(BakeSource::Live {
                url: s.to_string(),
                via,
            });
        }
        if let Some(via) = via {
            return Err(usage(format!(
                "--via {via} (or --logical) applies to mysql:// sources only"
            )));
        }
        if let Some(p) = s.strip_prefix("file:") {
            let path = PathBuf::from(p);
            if !path.is_file() {
                return Err(usage(format!(
                    "dump file {} does not exist",
                    path.display()
                )));
            }
            return Ok(BakeSource::Dump(path));
        }
        if let Some(p) = s.strip_prefix("datadir:") {
            return Ok(BakeSource::Datadir(PathBuf::from(p)));
        }
        Err(usage(format!(
            "source {s:?} is not one of mysql://user:pass@host:port, file:PATH, datadir:PATH"
        )))
    }
}

impl BakeSource {
    /// A live source's URL with a password given apart from it (`MYSQL_PWD`,
    /// `--password-file`), so it is never on a command line for `ps` to show.
    pub fn with_password(self, password: Option<String>) -> Result<BakeSource> {
        let Some(password) = password else {
            return Ok(self);
        };
        let BakeSource::Live { url, via } = self else {
            return Err(usage(
                "a source password (--password-file, MYSQL_PWD) applies to mysql:// sources",
            ));
        };
        let (scheme, rest) = url.split_once("://").expect("parsed as mysql://");
        let Some((user, host)) = rest.split_once('@') else {
            return Err(usage(format!(
                "{} names no user for the password; write mysql://USER@host:port",
                redact(&url)
            )));
        };
        if user.contains(':') {
            return Err(usage(
                "the source URL has a password already; give it once (in the URL, or with \
                 --password-file / MYSQL_PWD)",
            ));
        }
        let encoded =
            percent_encoding::utf8_percent_encode(&password, percent_encoding::NON_ALPHANUMERIC);
        Ok(BakeSource::Live {
            url: format!("{scheme}://{user}:{encoded}@{host}"),
            via,
        })
    }
}

pub struct BakeRequest<'a> {
    pub source: BakeSource,
    /// Databases to bake; empty = every user database.
    pub databases: Vec<String>,
    pub mask_sql: Option<PathBuf>,
    pub verify: bool,
    pub jobs: usize,
    /// The workspace that becomes the datadir of the new generation.
    pub datadir: &'a Path,
    /// Scratch directory for the one-off server.
    pub work: &'a Path,
    /// Set on SIGINT/SIGTERM: the bake stops at the next table or chunk.
    pub cancel: &'a AtomicBool,
    /// Keep the source's accounts (users and their grants) in the baseline.
    pub with_users: bool,
    /// The database a single-database dump is loaded into.
    pub into: Option<String>,
    /// The bake seeds a follower (`baseline follow`): the summary must say the GTID
    /// position of the copy (`BakeSummary::source_gtid`), and a whole-instance CLONE is
    /// preferred where it applies.
    pub for_follower: bool,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct PhaseTime {
    pub name: String,
    pub seconds: f64,
    pub bytes: u64,
}

/// How one table was read, for the summary: the ranges it was cut into and by which key,
/// or why a table big enough to split was read whole.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TableSplit {
    pub table: String,
    pub ranges: usize,
    /// The index the ranges are over (`PRIMARY`, or a unique key), with the columns cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Why one reader read it all (a table of at least 50,000 rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub whole_because: Option<String>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct BakeSummary {
    /// clone | tablespace | logical | dump | datadir
    pub path: String,
    /// Why a faster path did not apply (a live source without `--via`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_reason: Option<String>,
    pub databases: Vec<String>,
    pub tables: usize,
    pub rows: u64,
    pub bytes: u64,
    pub phases: Vec<PhaseTime>,
    /// Tables whose checksum (or row count) matched the source, with --verify.
    pub verified_tables: Option<usize>,
    /// Objects (tables, sequences, views, routines, triggers, events) whose definitions
    /// matched, with --verify.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified_objects: Option<usize>,
    /// What --verify compared: `definitions and checksums`, or `names and row counts`
    /// between servers of different families or series.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified_by: Option<String>,
    /// Tables the tablespace path copied as rows instead, with why (`db.t (FULLTEXT
    /// index)`, `db.t (partitioned)`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub copied_as_rows: Vec<String>,
    /// How many small tables the tablespace path copied as rows because that is faster than
    /// importing them (Oracle MySQL: `tablespace::SMALL_AS_ROWS_BYTES`); absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub small_as_rows: Option<usize>,
    /// Tables read as rows that were cut into key ranges for the readers, and big ones
    /// read whole with why (the logical path, and the tablespace path's rows).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub splits: Vec<TableSplit>,
    /// The tablespace path exported in this many batches under `FLUSH TABLES WITH READ
    /// LOCK` (more tables than the source's table cache holds); absent when at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub export_batches: Option<usize>,
    pub masked: bool,
    /// Where a live bake's persistent index statistics came from: `source` (its
    /// `mysql.innodb_table_stats` and `innodb_index_stats` rows) or `analyzed` (computed by
    /// the one-off server: the source user could not read them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statistics: Option<Statistics>,
    /// The server that made the baseline.
    pub server: Option<crate::flavour::Flavour>,
    /// The source's executed GTIDs at the bake's moment (MariaDB: `gtid_binlog_pos`;
    /// MySQL: `gtid_executed`), where the source keeps them and the moment was one for
    /// every table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_gtid: Option<String>,
}

/// Where a live bake's persistent index statistics came from (bake::stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Statistics {
    /// The source's `mysql.innodb_table_stats` and `innodb_index_stats` rows.
    Source,
    /// `ANALYZE TABLE` on the one-off server (the source's could not be read or written).
    Analyzed,
}

/// Times phases for the summary.
pub struct Phases<'p> {
    pub progress: &'p PhaseProgress,
    done: Vec<PhaseTime>,
    current: Option<(String, Instant)>,
    bytes: u64,
}

impl<'p> Phases<'p> {
    pub fn new(progress: &'p PhaseProgress) -> Self {
        Phases {
            progress,
            done: Vec::new(),
            current: None,
            bytes: 0,
        }
    }
    pub fn start(&mut self, name: &str, total_bytes: u64) {
        self.end();
        self.progress.phase(name, total_bytes);
        self.current = Some((name.to_string(), Instant::now()));
        self.bytes = total_bytes;
    }
    fn end(&mut self) {
        if let Some((name, t)) = self.current.take() {
            self.progress.finish();
            self.done.push(PhaseTime {
                name,
                seconds: t.elapsed().as_secs_f64(),
                bytes: self.bytes,
            });
        }
    }
    pub fn finish(mut self) -> Vec<PhaseTime> {
        self.end();
        self.done
    }
}

pub fn check_cancel(cancel: &AtomicBool) -> Result<()> {
    if cancel.load(Ordering::SeqCst) {
        return Err(anyhow!(
            "interrupted: the bake was stopped by a signal; nothing was made"
        ));
    }
    Ok(())
}
