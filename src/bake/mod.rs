//! The baker: a new baseline generation from a live server (tablespace import when its
//! files can be reached, else a parallel primary-key-range copy), a SQL dump, or a datadir.
//! Secondary indexes are added after logical loads; views, routines, triggers, events, users
//! and grants come along; masking SQL runs last; the one-off server shuts down with a full
//! purge. The caller freezes the workspace only if all of that succeeded.

pub mod clone;
pub mod copy;
pub mod ddl;
pub mod dump;
pub mod job;
pub mod objects;
pub mod ranges;
pub mod session;
pub mod snapshot;
pub mod source;
pub mod split;
pub mod stats;
pub mod table;
pub mod tablespace;
pub mod verify;
pub mod workers;

use crate::error::usage;
use crate::printer::PhaseProgress;
use crate::server::oneoff::OneOff;
use crate::server::real::RealServer;
use crate::values::ByteSize;
use anyhow::{anyhow, Context, Result};
use mysql::prelude::Queryable;

pub use job::{check_cancel, BakeRequest, BakeSource, BakeSummary, PhaseTime, Phases, Via};
pub use session::{connect_source, redact, session, SOURCE_SESSION, TARGET_SESSION};

/// Fills a workspace with a baked datadir. Real: a one-off server of the configured
/// binary; sim: records the request.
pub trait Baker: Send + Sync {
    fn bake(&self, req: &BakeRequest, progress: &PhaseProgress) -> Result<BakeSummary>;
    /// What a live source is, for `baseline follow` (connects and reads its variables).
    fn follow_source(&self, url: &str) -> Result<source::SourceFacts>;
}

pub struct RealBaker(pub std::sync::Arc<RealServer>);

impl Baker for RealBaker {
    fn bake(&self, req: &BakeRequest, progress: &PhaseProgress) -> Result<BakeSummary> {
        bake(&self.0, req, progress)
    }
    fn follow_source(&self, url: &str) -> Result<source::SourceFacts> {
        source::facts(url)
    }
}

/// Where a baked datadir came from: made here by the initialiser, or made elsewhere (a
/// clone, a copied datadir) with accounts db-branch does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Fresh,
    Foreign,
}

/// The path a live source takes, and why a faster one did not apply.
fn choose_path(
    source: &mut mysql::Conn,
    flavour: &crate::flavour::Flavour,
    via: Option<Via>,
    listing: &Result<copy::TableList>,
) -> Result<(Via, Option<String>)> {
    let clone_block = clone::unusable(source, flavour)?;
    // The listing's own error, kind and hints kept (a MyISAM table is a usage error).
    let tables = || listing_or_err(listing);
    match via {
        Some(Via::Clone) => match clone_block {
            None => Ok((Via::Clone, None)),
            Some(why) => Err(usage(format!("--via clone cannot be used: {why}"))),
        },
        Some(Via::Tablespace) => match tablespace::reachable(source, tables()?, flavour) {
            Ok(_) => Ok((Via::Tablespace, None)),
            Err(why) => Err(usage(format!("--via tablespace cannot be used: {why}"))),
        },
        Some(Via::Logical) => Ok((Via::Logical, Some("--via logical".into()))),
        None => {
            let tablespace_block = match listing {
                Ok(list) => tablespace::reachable(source, list, flavour).err(),
                Err(e) => Some(format!("{e:#}")),
            };
            match (tablespace_block, clone_block) {
                (None, _) => Ok((Via::Tablespace, None)),
                (Some(t), None) => Ok((Via::Clone, Some(format!("not by tablespace: {t}")))),
                (Some(t), Some(c)) => {
                    // The logical path needs the table list: its refusal is the answer.
                    tables()?;
                    Ok((
                        Via::Logical,
                        Some(format!("not by tablespace: {t}; not by clone: {c}")),
                    ))
                }
            }
        }
    }
}

/// A listing's table list, or its own error (kind and hints kept).
fn listing_or_err(listing: &Result<copy::TableList>) -> Result<&copy::TableList> {
    listing.as_ref().map_err(|e| {
        let (kind, hints) = crate::report::classify(e);
        anyhow::Error::from(crate::error::Error {
            kind,
            message: format!("{e:#}"),
            hints,
        })
    })
}

/// Drops the accounts a datadir made elsewhere brought along (all but the server's own).
fn drop_foreign_accounts(target: &OneOff) -> Result<usize> {
    let mut conn = target.conn()?;
    let users: Vec<(String, String)> = conn.query("SELECT User, Host FROM mysql.user")?;
    let mut dropped = 0;
    for (user, host) in users {
        if crate::flavour::Flavour::is_system_account(&user) {
            continue;
        }
        conn.query_drop(format!(
            "DROP USER {}@{}",
            crate::sql::sql_string(&user),
            crate::sql::sql_string(&host)
        ))?;
        dropped += 1;
    }
    Ok(dropped)
}

pub fn bake(
    server: &RealServer,
    req: &BakeRequest,
    progress: &PhaseProgress,
) -> Result<BakeSummary> {
    let binary = &server.binary;
    let flavour = binary.flavour()?;
    let _ = std::fs::remove_dir_all(req.work);
    crate::server::Server::prepare_runtime_dir(server, req.work)?;
    let mut phases = Phases::new(progress);
    let mut summary = BakeSummary::default();
    let live = look_at_source(req, &flavour, progress, &mut summary)?;
    let origin = fill_workspace(server, req, live.as_ref(), &mut phases, &mut summary)?;
    binary.give_to_server_user(req.datadir)?;
    check_cancel(req.cancel)?;
    phases.start("start server", 0);
    let target = start_target(server, req, origin, progress)?;
    if req.for_follower && summary.path == Via::Clone.to_string() {
        // A clone carries the donor's GTIDs in its mysql.gtid_executed table (InnoDB
        // writes them at commit): what this copy holds, read from the copy itself.
        let held: Option<String> = target
            .conn()?
            .query_first("SELECT @@GLOBAL.gtid_executed")
            .context("reading the GTIDs the clone holds")?;
        if let Some(g) = held.filter(|g| !g.trim().is_empty()) {
            summary.source_gtid = Some(g);
        }
    }
    target.run_statements(&server.client_account_sql(&flavour))?;
    match (&req.source, live) {
        (BakeSource::Datadir(_), _) => {}
        (BakeSource::Dump(path), _) => {
            dump::load(&target, path, req, &mut phases, &mut summary)?;
        }
        (BakeSource::Live { .. }, Some(live)) => {
            carry_live(
                &target,
                req,
                live,
                &flavour,
                &mut phases,
                &mut summary,
                progress,
            )?;
        }
        (BakeSource::Live { .. }, None) => unreachable!("a live source was looked at first"),
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
    // A clone's first start applies the redo it carried: that recovery is expected.
    target.shutdown_clean(summary.path == "clone")?;
    summary.phases = phases.finish();
    summary.server = Some(flavour);
    let _ = std::fs::remove_dir_all(req.work);
    Ok(summary)
}

/// A live source as the bake found it: connected, its tables listed, its path chosen.
struct Live {
    url: String,
    source: mysql::Conn,
    path: Via,
    listing: Result<copy::TableList>,
}

/// Which path a live source takes, decided before anything is made (None: not live).
fn look_at_source(
    req: &BakeRequest,
    flavour: &crate::flavour::Flavour,
    progress: &PhaseProgress,
    summary: &mut BakeSummary,
) -> Result<Option<Live>> {
    let BakeSource::Live { url, via } = &req.source else {
        return Ok(None);
    };
    let mut source = connect_source(url)?;
    let listing = copy::list_tables(&mut source, &req.databases);
    let (path, reason) = if req.for_follower && via.is_none() {
        // A follower's seed is the whole instance where CLONE applies (it reports the
        // GTIDs of its copy), else the tablespace path, else the logical one; each reads
        // its GTID position at its consistent moment.
        match clone::unusable(&mut source, flavour)? {
            None => (Via::Clone, None),
            Some(no_clone) => {
                match tablespace::reachable(&mut source, listing_or_err(&listing)?, flavour) {
                    Ok(_) => (Via::Tablespace, Some(format!("not by clone: {no_clone}"))),
                    Err(why) => (
                        Via::Logical,
                        Some(format!(
                            "not by clone: {no_clone}; not by tablespace: {why}"
                        )),
                    ),
                }
            }
        }
    } else {
        choose_path(&mut source, flavour, *via, &listing)?
    };
    if let Some(r) = &reason {
        progress.note(&format!("baking by the {path} path ({r})"));
    }
    summary.path = path.to_string();
    summary.path_reason = reason;
    Ok(Some(Live {
        url: url.clone(),
        source,
        path,
        listing,
    }))
}

/// The workspace's datadir: the copied one (checked), a clone of the source instance, or a
/// freshly initialised one; and whose accounts it holds.
fn fill_workspace(
    server: &RealServer,
    req: &BakeRequest,
    live: Option<&Live>,
    phases: &mut Phases,
    summary: &mut BakeSummary,
) -> Result<Origin> {
    let binary = &server.binary;
    if let BakeSource::Datadir(_) = &req.source {
        server.check_can_serve(
            "the source datadir",
            crate::flavour::Flavour::of_datadir(req.datadir),
        )?;
        summary.path = "datadir".into();
        return Ok(Origin::Foreign);
    }
    if let Some(live) = live.filter(|l| l.path == Via::Clone) {
        phases.start("clone instance", 0);
        clone::clone_into(
            binary,
            binary.flavour()?,
            &live.url,
            req.datadir,
            req.work,
            phases.progress,
        )?;
        return Ok(Origin::Foreign);
    }
    phases.start("initialise", 0);
    let cache = req.work.parent().unwrap_or(req.work);
    binary.initialize_cached(req.datadir, &req.work.join("tmp"), cache)?;
    Ok(Origin::Fresh)
}

/// The one-off server on the workspace, with db-branch's login: made on a fresh datadir;
/// taken over (and the source's accounts dropped unless `--with-users`) on a foreign one.
fn start_target<'s>(
    server: &'s RealServer,
    req: &BakeRequest,
    origin: Origin,
    progress: &PhaseProgress,
) -> Result<OneOff<'s>> {
    let binary = &server.binary;
    let flavour = binary.flavour()?;
    let extra: &[&str] = match (origin, &req.source) {
        // Its accounts are the source's: db-branch takes over root@localhost first.
        (Origin::Foreign, _) => &["skip-grant-tables"],
        // A live source's statistics are carried afterwards (stats::carry); a dump's are
        // the one-off server's own.
        (Origin::Fresh, BakeSource::Live { .. }) => &[stats::ONE_OFF_FLAG],
        (Origin::Fresh, _) => &[],
    };
    let t = OneOff::start_with(
        binary,
        flavour,
        req.datadir,
        req.work,
        ByteSize::mib(512),
        extra,
    )?;
    match origin {
        Origin::Fresh => t.run_statements(&flavour.admin_login_sql())?,
        Origin::Foreign => {
            t.run_statements(&flavour.take_over_admin_sql())
                .context("giving db-branch its login in the source's datadir")?;
            if !req.with_users {
                let n = drop_foreign_accounts(&t)?;
                if n > 0 {
                    progress.note(&format!(
                        "dropped the source's {n} account(s); --with-users keeps them"
                    ));
                }
            }
        }
    }
    Ok(t)
}

/// A live source's data into the target: kept from the clone, or its databases made and
/// its rows carried (tablespaces or the parallel copy), its objects after; then `--verify`.
fn carry_live(
    target: &OneOff,
    req: &BakeRequest,
    live: Live,
    flavour: &crate::flavour::Flavour,
    phases: &mut Phases,
    summary: &mut BakeSummary,
    progress: &PhaseProgress,
) -> Result<()> {
    let Live {
        url,
        mut source,
        path,
        listing,
    } = live;
    let mut verifier = None;
    let mut moment = verify::Moment::Same;
    let tables = if path == Via::Clone {
        if !req.databases.is_empty() {
            clone::keep_only(target, &req.databases)?;
        }
        summary.databases = req.databases.clone();
        if req.verify {
            // CLONE's moment is its own: compare with the source as it is now.
            moment = verify::Moment::Later;
            verifier = snapshot::open(&url, 0, true, snapshot::Freeze::GlobalReadLock)?.verifier;
            Some(listing?)
        } else {
            None
        }
    } else {
        let tables = listing?;
        summary.databases = tables.databases.clone();
        summary.tables = tables.tables.len();
        let mut tconn = workers::target_conn(target)?;
        copy::create_databases(&mut source, &mut tconn, &tables.databases)?;
        objects::create_sequences(&mut source, &mut tconn, &tables.sequences)?;
        if path == Via::Tablespace {
            let source_datadir = tablespace::reachable(&mut source, &tables, flavour)
                .map_err(|why| anyhow!("the tablespace path no longer applies: {why}"))?;
            verifier = tablespace::import(
                target,
                &mut source,
                &url,
                &source_datadir,
                &tables,
                req,
                phases,
                summary,
            )?;
        } else {
            // As many as the DDL has connections: each also reads definitions and copies
            // small tables whole while its writer creates them (copy::copy).
            let snap = snapshot::open(
                &url,
                workers::for_ddl(req.jobs),
                req.verify,
                snapshot::Freeze::GlobalReadLock,
            )?;
            if !snap.consistent {
                progress.note(
                    "the source user lacks RELOAD: each reader has its own moment, and \
                     tables written during the bake may not match each other",
                );
                moment = verify::Moment::Later;
            }
            verifier = snap.verifier;
            summary.source_gtid = snap.gtid;
            copy::copy(
                target,
                &mut source,
                snap.readers,
                &tables.tables,
                req,
                phases,
                summary,
            )?;
        }
        phases.start("index statistics", 0);
        let (from, why) = stats::carry(
            &mut source,
            target,
            workers::for_ddl(req.jobs),
            req.cancel,
            &tables.databases,
            &tables.tables,
        )?;
        if let Some(why) = why {
            progress.note(&format!(
                "the baseline's index statistics were computed here, not copied: {why}"
            ));
        }
        summary.statistics = Some(from);
        phases.start("views, routines, triggers, events", 0);
        objects::copy_objects(
            &mut source,
            &mut target.conn()?,
            &tables.databases,
            req.with_users,
        )?;
        Some(tables)
    };
    if let (Some(mut verifier), Some(tables)) = (verifier, tables) {
        phases.start("verify", 0);
        // Tests prove --verify can fail: SQL that spoils the copy first.
        #[cfg(feature = "testing")]
        if let Ok(spoil) = std::env::var("DB_BRANCH_TEST_BEFORE_VERIFY") {
            target.run_statements(&[spoil])?;
        }
        let v = verify::verify(&mut verifier, &mut target.conn()?, &tables, moment)?;
        summary.verified_tables = Some(v.tables);
        summary.verified_objects = Some(v.objects);
        summary.verified_by = Some(v.by);
    }
    Ok(())
}

#[cfg(any(test, feature = "testing"))]
/// A baker for unit tests: makes nothing, remembers what it was asked to fill.
#[derive(Default)]
pub struct SimBaker {
    pub baked: std::sync::Mutex<Vec<std::path::PathBuf>>,
    /// What `follow_source` answers (None: a MariaDB 10.11 source that can be followed).
    pub source: std::sync::Mutex<Option<source::SourceFacts>>,
}

#[cfg(any(test, feature = "testing"))]
impl Baker for SimBaker {
    fn follow_source(&self, _url: &str) -> Result<source::SourceFacts> {
        Ok(self
            .source
            .lock()
            .unwrap()
            .clone()
            .unwrap_or(source::SourceFacts {
                flavour: crate::flavour::Flavour::new(crate::flavour::Family::Mariadb, 10, 11, 19),
                server_id: 1,
                refusal: None,
            }))
    }
    fn bake(&self, req: &BakeRequest, _progress: &PhaseProgress) -> Result<BakeSummary> {
        check_cancel(req.cancel)?;
        self.baked.lock().unwrap().push(req.datadir.to_path_buf());
        // One table of each kind the summary reports, so the snapshots guard their shape.
        Ok(BakeSummary {
            path: "sim".into(),
            splits: vec![
                job::TableSplit {
                    table: "shop.events".into(),
                    ranges: 9,
                    by: Some("PRIMARY (id)".into()),
                    whole_because: None,
                },
                job::TableSplit {
                    table: "shop.log".into(),
                    ranges: 1,
                    by: None,
                    whole_because: Some("no primary key or unique key of NOT NULL columns".into()),
                },
            ],
            source_gtid: req.for_follower.then(|| "0-1-42".to_string()),
            small_as_rows: Some(3),
            statistics: Some(job::Statistics::Source),
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
            BakeSource::parse("mysql://u:p@127.0.0.1:3306", None).unwrap(),
            BakeSource::Live {
                url: "mysql://u:p@127.0.0.1:3306".into(),
                via: None
            }
        );
        assert_eq!(
            BakeSource::parse("datadir:/var/lib/mysql", None).unwrap(),
            BakeSource::Datadir("/var/lib/mysql".into())
        );
        for bad in [
            "postgres://x",
            "/var/lib/mysql",
            "file:/nonexistent.sql",
            "",
        ] {
            assert!(BakeSource::parse(bad, None).is_err(), "{bad}");
        }
        assert!(BakeSource::parse("datadir:/x", Some(Via::Logical)).is_err());
    }

    #[test]
    fn a_password_given_apart_joins_the_url_encoded() {
        let live = BakeSource::parse("mysql://app@db:3306", None).unwrap();
        let BakeSource::Live { url, .. } = live.with_password(Some("p@ss:w/rd".into())).unwrap()
        else {
            panic!("live")
        };
        assert_eq!(url, "mysql://app:p%40ss%3Aw%2Frd@db:3306");
        let opts = mysql::Opts::from_url(&url).unwrap();
        assert_eq!(opts.get_pass(), Some("p@ss:w/rd"));
        for bad in ["mysql://app:x@db:3306", "mysql://db:3306"] {
            let s = BakeSource::parse(bad, None).unwrap();
            assert!(s.with_password(Some("p".into())).is_err(), "{bad}");
        }
        assert!(BakeSource::Datadir("/x".into())
            .with_password(Some("p".into()))
            .is_err());
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
