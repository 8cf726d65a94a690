//! Bake a new baseline generation from a live server, a dump or a datadir. Built in a
//! workspace and frozen only when complete: a failed or interrupted bake leaves no
//! generation and touches no existing one.

use super::baseline::{build, check_datadir};
use crate::bake::{check_cancel, BakeRequest, BakeSource, BakeSummary};
use crate::branch::Generation;
use crate::error::usage;
use crate::host::Host;
use crate::ops::branch::fit::check_server_for;
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct BakeOptions {
    pub source: BakeSource,
    /// Empty: every user database.
    pub databases: Vec<String>,
    pub mask_sql: Option<PathBuf>,
    pub verify: bool,
    /// None: the number of CPUs.
    pub jobs: Option<usize>,
    /// Keep the source's accounts.
    pub with_users: bool,
    /// The database a single-database dump goes into.
    pub into: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Baked {
    pub generation: Generation,
    pub summary: BakeSummary,
}

fn validate(host: &Host, opts: &BakeOptions) -> Result<()> {
    match &opts.source {
        BakeSource::Datadir(dir) => {
            check_datadir(dir)?;
            check_server_for(
                host,
                "the source datadir",
                crate::flavour::Flavour::of_datadir(dir),
            )?;
            if opts.verify {
                return Err(usage(
                    "--verify compares against a live source; use it with mysql:// sources",
                ));
            }
        }
        BakeSource::Dump(_) if opts.verify => {
            return Err(usage(
                "--verify compares against a live source; use it with mysql:// sources",
            ));
        }
        _ => {}
    }
    if let Some(mask) = &opts.mask_sql {
        if !mask.is_file() {
            return Err(crate::error::not_found(format!(
                "masking SQL file {} does not exist",
                mask.display()
            )));
        }
    }
    if let Some(db) = &opts.into {
        if !matches!(opts.source, BakeSource::Dump(_)) {
            return Err(usage(
                "--into names the database of a single-database dump; use it with file: sources",
            ));
        }
        check_database_name(db)?;
    }
    if opts.jobs == Some(0) {
        return Err(usage("--jobs must be at least 1"));
    }
    Ok(())
}

/// Ctrl-C or a TERM from a CI runner: a bake stops at the next table or chunk and undoes.
pub fn cancel_on_signals() -> Result<Arc<AtomicBool>> {
    let cancel = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, cancel.clone()).context("installing signal handlers")?;
    }
    Ok(cancel)
}

/// A database name the server accepts as a directory name of its own.
fn check_database_name(db: &str) -> Result<()> {
    let bad = db.is_empty()
        || db.chars().count() > 64
        || db.ends_with(' ')
        || db
            .chars()
            .any(|c| matches!(c, '/' | '\\' | '.' | '\0') || c.is_control());
    if bad {
        return Err(usage(format!(
            "--into {db:?} is not a database name: 1 to 64 characters, without / \\ . or a \
             trailing space"
        )));
    }
    Ok(())
}

pub fn bake(host: &Host, opts: &BakeOptions) -> Result<Baked> {
    validate(host, opts)?;
    let cancel = cancel_on_signals()?;
    let progress = host.printer.progress().labelled("bake");
    let (generation, summary) = build(host, "bake", |workspace, work, generation| {
        progress.note(&format!("baking baseline {generation}..."));
        if let BakeSource::Datadir(dir) = &opts.source {
            progress.note(&format!("copying {}...", dir.display()));
            host.storage.fill_from_dir(workspace, dir)?;
        }
        let req = BakeRequest {
            source: opts.source.clone(),
            databases: opts.databases.clone(),
            mask_sql: opts.mask_sql.clone(),
            verify: opts.verify,
            jobs: opts
                .jobs
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
            datadir: workspace,
            work,
            cancel: &cancel,
            with_users: opts.with_users,
            into: opts.into.clone(),
            for_follower: false,
        };
        let summary = host.baker.bake(&req, &progress);
        progress.finish();
        let summary = summary?;
        check_cancel(&cancel)?;
        let server = match summary.server {
            Some(s) => s,
            None => host.server.flavour()?,
        };
        Ok((server, format!("bake ({})", summary.path), summary))
    })?;
    Ok(Baked {
        generation,
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::sim_host;
    use crate::storage::Storage;

    fn opts(from: &str) -> BakeOptions {
        BakeOptions {
            source: BakeSource::parse(from, None).unwrap(),
            databases: vec![],
            mask_sql: None,
            verify: false,
            jobs: None,
            with_users: false,
            into: None,
        }
    }

    #[test]
    fn a_bake_makes_the_next_generation_and_records_its_server() {
        let sim = sim_host();
        let baked = bake(&sim.host, &opts("mysql://u@127.0.0.1:1")).unwrap();
        assert_eq!(baked.generation, Generation(2));
        assert_eq!(
            sim.storage.baselines().unwrap(),
            vec![Generation(1), Generation(2)]
        );
        let info = sim.storage.generation_info(Generation(2)).unwrap().unwrap();
        assert_eq!(
            Some(info.server),
            crate::server::Server::flavour(sim.server.as_ref()).ok()
        );
        assert_eq!(info.source, "bake (sim)");
    }

    #[test]
    fn a_failed_bake_leaves_no_generation() {
        let sim = sim_host();
        sim.storage.fail_once("seal_baseline");
        assert!(bake(&sim.host, &opts("mysql://u@127.0.0.1:1")).is_err());
        assert_eq!(sim.storage.baselines().unwrap(), vec![Generation(1)]);
        assert!(sim.storage.with_state(|s| s.workspaces.is_empty()));
    }

    #[test]
    fn bad_flags_are_refused_before_anything() {
        let sim = sim_host();
        for (o, says) in [
            (
                BakeOptions {
                    verify: true,
                    source: BakeSource::Datadir("/usr".into()),
                    ..opts("mysql://u@h:1")
                },
                "does not look like",
            ),
            (
                BakeOptions {
                    jobs: Some(0),
                    ..opts("mysql://u@h:1")
                },
                "--jobs",
            ),
            (
                BakeOptions {
                    into: Some("shop".into()),
                    ..opts("mysql://u@h:1")
                },
                "file: sources",
            ),
            (
                BakeOptions {
                    into: Some("a/b".into()),
                    source: BakeSource::Dump("/etc/hostname".into()),
                    ..opts("mysql://u@h:1")
                },
                "not a database name",
            ),
            (
                BakeOptions {
                    mask_sql: Some("/nonexistent.sql".into()),
                    ..opts("mysql://u@h:1")
                },
                "masking",
            ),
        ] {
            let e = bake(&sim.host, &o).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
        assert!(sim.storage.with_state(|s| s.workspaces.is_empty()));
    }
}
