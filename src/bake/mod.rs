//! The baker: a new baseline generation from a live server (tablespace import when its
//! files can be reached, else a parallel primary-key-range copy), a SQL dump, or a datadir.
//! Secondary indexes are added after logical loads; views, routines, triggers, events, users
//! and grants come along; masking SQL runs last; the one-off server shuts down with a full
//! purge. The caller freezes the workspace only if all of that succeeded.

pub mod copy;
pub mod ddl;
pub mod dump;
pub mod objects;
pub mod split;
pub mod tablespace;

use crate::error::usage;
use crate::printer::PhaseProgress;
use crate::server::oneoff::OneOff;
use crate::server::real::RealServer;
use crate::values::ByteSize;
use anyhow::{anyhow, Context, Result};
use mysql::prelude::Queryable;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

#[derive(Debug, Clone, PartialEq)]
pub enum BakeSource {
    /// `mysql://user:pass@host:port`; `logical` forces the row copy even when the
    /// server's files could be reached.
    Live { url: String, logical: bool },
    /// `file:PATH`, plain, .gz or .zst.
    Dump(PathBuf),
    /// `datadir:PATH`, already copied into the workspace by the storage.
    Datadir(PathBuf),
}

impl BakeSource {
    pub fn parse(s: &str, logical: bool) -> Result<BakeSource> {
        if s.starts_with("mysql://") {
            mysql::Opts::from_url(s).map_err(|e| {
                usage(format!(
                    "{} is not a valid source URL ({e}); write it like mysql://user:password@host:3306",
                    redact(s)
                ))
            })?;
            return Ok(BakeSource::Live {
                url: s.to_string(),
                logical,
            });
        }
        if logical {
            return Err(usage("--logical applies to mysql:// sources only"));
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

/// A source URL with its password replaced, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
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
}

/// Fills a workspace with a baked datadir. Real: a one-off server of the configured
/// binary; sim: records the request.
pub trait Baker: Send + Sync {
    fn bake(&self, req: &BakeRequest, progress: &PhaseProgress) -> Result<BakeSummary>;
}

pub struct RealBaker(pub std::sync::Arc<RealServer>);

impl Baker for RealBaker {
    fn bake(&self, req: &BakeRequest, progress: &PhaseProgress) -> Result<BakeSummary> {
        bake(&self.0, req, progress)
    }
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct PhaseTime {
    pub name: String,
    pub seconds: f64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct BakeSummary {
    /// tablespace | logical | dump | datadir
    pub path: String,
    pub databases: Vec<String>,
    pub tables: usize,
    pub rows: u64,
    pub bytes: u64,
    pub phases: Vec<PhaseTime>,
    /// Tables whose checksum (or row count) matched the source, with --verify.
    pub verified_tables: Option<usize>,
    pub masked: bool,
    /// The server that made the baseline.
    pub server: Option<crate::server::flavour::Flavour>,
}

/// Times phases for the summary.
pub struct Phases<'p> {
    pub progress: &'p PhaseProgress,
    done: Vec<PhaseTime>,
    current: Option<(String, Instant)>,
    bytes: u64,
}

impl<'p> Phases<'p> {
    fn new(progress: &'p PhaseProgress) -> Self {
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
    fn finish(mut self) -> Vec<PhaseTime> {
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

/// Connects to a live source, with errors that say what to fix.
pub fn connect_source(url: &str) -> Result<mysql::Conn> {
    let opts = mysql::OptsBuilder::from_opts(mysql::Opts::from_url(url)?)
        .prefer_socket(false)
        .tcp_connect_timeout(Some(std::time::Duration::from_secs(10)));
    mysql::Conn::new(opts).map_err(|e| match &e {
        mysql::Error::MySqlError(m) if m.code == 1045 || m.code == 1044 => usage(format!(
            "the source refused the credentials in {}: {}; check the user and password",
            redact(url),
            m.message
        )),
        mysql::Error::MySqlError(m) if m.code == 1049 => usage(format!(
            "the source {} has no such database: {}",
            redact(url),
            m.message
        )),
        _ => anyhow!(
            "cannot reach the source {}: {e}; check host and port, and that the server runs",
            redact(url)
        ),
    })
}

/// The session settings every copy connection uses: bytes passed through untouched,
/// timestamps in UTC, no per-row checks the source already made.
pub const TARGET_SESSION: &[&str] = &[
    "SET NAMES binary",
    "SET time_zone = '+00:00'",
    "SET unique_checks = 0",
    "SET foreign_key_checks = 0",
    "SET sql_mode = 'NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'",
];
pub const SOURCE_SESSION: &[&str] = &["SET NAMES binary", "SET time_zone = '+00:00'"];

pub fn session(conn: &mut mysql::Conn, settings: &[&str]) -> Result<()> {
    for s in settings {
        conn.query_drop(*s).with_context(|| format!("`{s}`"))?;
    }
    Ok(())
}

pub use crate::server::conn::quote;

pub fn bake(
    server: &RealServer,
    req: &BakeRequest,
    progress: &PhaseProgress,
) -> Result<BakeSummary> {
    let binary = &server.binary;
    let flavour = match &req.source {
        BakeSource::Datadir(_) => server.check_can_serve(
            "the source datadir",
            crate::server::flavour::Flavour::of_datadir(req.datadir),
        )?,
        _ => binary.flavour()?,
    };
    let _ = std::fs::remove_dir_all(req.work);
    crate::server::Server::prepare_runtime_dir(server, req.work)?;
    let mut phases = Phases::new(progress);
    let mut summary = BakeSummary::default();
    if !matches!(req.source, BakeSource::Datadir(_)) {
        phases.start("initialise", 0);
        let cache = req.work.parent().unwrap_or(req.work);
        binary.initialize_cached(req.datadir, &req.work.join("tmp"), cache)?;
    }
    binary.give_to_server_user(req.datadir)?;
    check_cancel(req.cancel)?;
    phases.start("start server", 0);
    let target = OneOff::start(binary, flavour, req.datadir, req.work, ByteSize::mib(512))?;
    if !matches!(req.source, BakeSource::Datadir(_)) {
        target.run_statements(&flavour.admin_login_sql())?;
        target.run_statements(&server.client_account_sql(&flavour))?;
    }
    match &req.source {
        BakeSource::Datadir(_) => summary.path = "datadir".into(),
        BakeSource::Dump(path) => {
            dump::load(&target, path, req, &mut phases, &mut summary)?;
        }
        BakeSource::Live { url, logical } => {
            let mut source = connect_source(url)?;
            let tables = copy::list_tables(&mut source, &req.databases)?;
            summary.databases = tables.databases.clone();
            summary.tables = tables.tables.len();
            let reach = if *logical {
                Err("--logical was given".to_string())
            } else {
                tablespace::reachable(&mut source, &tables)
            };
            match reach {
                Ok(source_datadir) => {
                    summary.path = "tablespace".into();
                    tablespace::import(
                        &target,
                        url,
                        &source_datadir,
                        &tables,
                        req,
                        &mut phases,
                        &mut summary,
                    )?;
                }
                Err(why) => {
                    progress.note(&format!("copying rows (logical path): {why}"));
                    summary.path = "logical".into();
                    copy::copy(&target, url, &tables, req, &mut phases, &mut summary)?;
                }
            }
            phases.start("views, routines, triggers, events, users", 0);
            objects::copy_objects(&mut source, &mut target.conn()?, &tables.databases)?;
            if req.verify {
                phases.start("verify", 0);
                summary.verified_tables =
                    Some(copy::verify(&mut source, &mut target.conn()?, &tables)?);
            }
        }
    }
    check_cancel(req.cancel)?;
    if let Some(mask) = &req.mask_sql {
        phases.start("mask", 0);
        target
            .run_sql_file(mask, progress)
            .context("running the masking SQL")?;
        summary.masked = true;
    }
    phases.start("clean shutdown (full purge)", 0);
    target.shutdown_clean(false)?;
    summary.phases = phases.finish();
    summary.server = Some(flavour);
    let _ = std::fs::remove_dir_all(req.work);
    Ok(summary)
}

/// A baker for unit tests: makes nothing, remembers what it was asked to fill.
#[derive(Default)]
pub struct SimBaker {
    pub baked: std::sync::Mutex<Vec<std::path::PathBuf>>,
}

impl Baker for SimBaker {
    fn bake(&self, req: &BakeRequest, _progress: &PhaseProgress) -> Result<BakeSummary> {
        check_cancel(req.cancel)?;
        self.baked.lock().unwrap().push(req.datadir.to_path_buf());
        Ok(BakeSummary {
            path: "sim".into(),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse_with_clear_errors() {
        assert_eq!(
            BakeSource::parse("mysql://u:p@127.0.0.1:3306", false).unwrap(),
            BakeSource::Live {
                url: "mysql://u:p@127.0.0.1:3306".into(),
                logical: false
            }
        );
        assert_eq!(
            BakeSource::parse("datadir:/var/lib/mysql", false).unwrap(),
            BakeSource::Datadir("/var/lib/mysql".into())
        );
        for bad in [
            "postgres://x",
            "/var/lib/mysql",
            "file:/nonexistent.sql",
            "",
        ] {
            assert!(BakeSource::parse(bad, false).is_err(), "{bad}");
        }
        assert!(BakeSource::parse("datadir:/x", true).is_err());
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("mysql://app:s3cret@db:3306"),
            "mysql://app:***@db:3306"
        );
        assert_eq!(redact("mysql://app@db"), "mysql://app@db");
    }
}
