//! Baseline generations: building one (shared by `baseline create` and `bake`), listing
//! them, pruning unused ones. A new generation is built in a workspace and frozen
//! read-only only when complete: a failed build leaves no generation and touches no
//! existing one.

use crate::branch::Generation;
use crate::error::usage;
use crate::flavour::Flavour;
use crate::host::Host;
use crate::ops::branch::fit::{check_server_for, generation_server};
use crate::server::Preparation;
use crate::storage::GenerationInfo;
use crate::store::records;
use crate::undo::Undo;
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Builds generation N+1: takes the baseline lock, checks free space, makes a workspace,
/// lets `fill` make a clean datadir in it (given the workspace and the one-off server's
/// scratch directory; it returns the server that made it), records which server made it
/// and how (`source`), then seals it. `step` names the failpoints (`baseline`, `bake`).
pub fn build<T>(
    host: &Host,
    step: &str,
    fill: impl FnOnce(&Path, &Path, Generation) -> Result<(Flavour, String, T)>,
) -> Result<(Generation, T)> {
    build_in(host, step, |work, generation| {
        let workspace = host.storage.begin_baseline(generation)?;
        crate::failpoint::hit(&format!("{step}:after-workspace"));
        let (server, source, made) = fill(&workspace, work, generation)?;
        Ok((workspace, server, source, None, made))
    })
}

/// The number the next generation gets (read under the baseline lock).
pub(crate) fn next_generation(host: &Host) -> Result<Generation> {
    Ok(host
        .storage
        .baselines()?
        .last()
        .map_or(Generation(1), |g| g.next()))
}

/// `build` where `fill` makes the workspace itself (a promotion snapshots the branch into
/// one) and returns it with what `build`'s fill returns, and how it was cut from a
/// follower (`baseline cut`) if it was.
pub(crate) fn build_in<T>(
    host: &Host,
    step: &str,
    fill: impl FnOnce(
        &Path,
        Generation,
    ) -> Result<(PathBuf, Flavour, String, Option<crate::replication::Cut>, T)>,
) -> Result<(Generation, T)> {
    host.storage.open()?;
    // One build at a time; branch commands are not held up by it.
    let _lock = host.baseline_lock()?;
    crate::ops::trash::ensure_space(host)?;
    let generation = next_generation(host)?;
    let mut undo = Undo::new();
    let result = (|| -> Result<T> {
        // Pushed first: abandoning a workspace that was never made is a no-op.
        undo.push("remove the unfinished baseline", move || {
            host.storage.abandon_baseline(generation)
        });
        let work = host.layout.work_dir().join(generation.dir_name());
        let (workspace, server, source, followed, made) = fill(&work, generation)?;
        let info = GenerationInfo {
            server,
            created: host.clock.now(),
            source,
            origin_identity: None,
            // Read from the sealed-to-be datadir itself: the same for every way it was made.
            databases: crate::server::databases::in_datadir(&workspace).ok(),
            followed,
        };
        host.storage
            .write_generation_info(generation, &workspace, &info)?;
        crate::failpoint::hit(&format!("{step}:after-load"));
        host.storage.seal_baseline(generation)?;
        crate::failpoint::hit(&format!("{step}:after-seal"));
        Ok(made)
    })();
    match result {
        Ok(made) => {
            undo.commit();
            Ok((generation, made))
        }
        Err(e) => Err(undo.unwind(e.context(format!("building baseline {generation}")))),
    }
}

#[derive(Debug, Clone, Default)]
pub struct CreateBaselineOptions {
    /// Start from the server's initialiser (an empty server).
    pub empty: bool,
    /// Copy this cleanly shut down datadir.
    pub from_datadir: Option<PathBuf>,
    /// Run in order before freezing (seed data, masking).
    pub sql: Vec<PathBuf>,
}

/// `baseline create`: an empty server or a copy of a datadir, made clean by a one-off
/// server that also runs the SQL files.
pub fn create(host: &Host, opts: &CreateBaselineOptions) -> Result<Generation> {
    if let Some(dir) = &opts.from_datadir {
        check_datadir(dir)?;
        check_server_for(host, "the datadir", Flavour::of_datadir(dir))?;
    }
    for file in &opts.sql {
        if !file.is_file() {
            return Err(crate::error::not_found(format!(
                "SQL file {} does not exist",
                file.display()
            )));
        }
    }
    let progress = host.printer.progress().labelled("baseline");
    let (generation, ()) = build(host, "baseline", |workspace, work, generation| {
        if let Some(dir) = &opts.from_datadir {
            progress.phase(&format!("copy {}", dir.display()), 0);
            host.storage.fill_from_dir(workspace, dir)?;
        }
        let prep = Preparation {
            initialize: opts.empty,
            create_client_user: opts.empty,
            sql_files: opts.sql.clone(),
            from_follower: false,
        };
        let done = host
            .server
            .prepare_baseline(workspace, work, &prep, &progress)
            .with_context(|| match &opts.from_datadir {
                Some(d) => format!("preparing baseline {generation} from {}", d.display()),
                None => format!("preparing empty baseline {generation}"),
            });
        progress.finish();
        let source = match &opts.from_datadir {
            Some(d) => format!("datadir {}", d.display()),
            None => "empty".to_string(),
        };
        Ok((done?, source, ()))
    })?;
    Ok(generation)
}

/// `baseline create --from-branch NAME`: the branch's data as the next generation, with no
/// copy: its server is stopped cleanly, its datadir snapshotted into the workspace and the
/// server started again (if it was running); then a one-off server on the snapshot runs
/// the masking SQL and shuts down with a full purge, as for every baseline.
pub fn promote(
    host: &Host,
    name: &crate::branch::BranchName,
    sql: &[PathBuf],
) -> Result<(Generation, Option<f64>)> {
    for file in sql {
        if !file.is_file() {
            return Err(crate::error::not_found(format!(
                "SQL file {} does not exist",
                file.display()
            )));
        }
    }
    let record = crate::ops::branch::record::require(host, name)?;
    crate::ops::create::refuse_follower(&record, "a baseline by --from-branch")?;
    let made_by = record
        .server
        .or_else(|| generation_server(host, record.baseline));
    check_server_for(host, &format!("branch {name}"), made_by)?;
    let progress = host.printer.progress().labelled("baseline");
    let (generation, downtime) = build_in(host, "baseline", |work, generation| {
        let _lock = host.branch_lock(name)?;
        let mut record = crate::ops::branch::record::require(host, name)?;
        progress.phase(&format!("snapshot branch {name} (stopped cleanly)"), 0);
        let mut workspace = PathBuf::new();
        let captured = crate::ops::branch::capture::capture(host, &mut record, true, || {
            workspace = host.storage.begin_baseline_from_branch(generation, name)?;
            Ok(())
        })?;
        let prep = Preparation {
            initialize: false,
            create_client_user: false,
            sql_files: sql.to_vec(),
            from_follower: false,
        };
        let done = host
            .server
            .prepare_baseline(&workspace, work, &prep, &progress)
            .with_context(|| format!("preparing baseline {generation} from branch {name}"));
        progress.finish();
        Ok((
            workspace,
            done?,
            format!("branch {name}"),
            None,
            captured.downtime_seconds,
        ))
    })?;
    Ok((generation, downtime))
}

/// A datadir has the system schema directory and InnoDB's system tablespace or redo log.
pub fn check_datadir(dir: &Path) -> Result<()> {
    if !dir.is_dir() {
        return Err(crate::error::not_found(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    let looks_right = dir.join("mysql").is_dir()
        && (dir.join("ibdata1").exists() || dir.join("ib_logfile0").exists());
    if !looks_right {
        return Err(usage(format!(
            "{} does not look like a MySQL/MariaDB datadir (no mysql/ directory and ibdata1); \
             pass the server's datadir (see `SELECT @@datadir`)",
            dir.display()
        )));
    }
    Ok(())
}

#[derive(Debug, Clone, Serialize)]
pub struct BaselineRow {
    pub generation: Generation,
    /// Branches cloned from this generation.
    pub branches: usize,
    /// The server that made it (None: made before db-branch recorded it, and its datadir
    /// does not say).
    pub server: Option<Flavour>,
    pub created: Option<chrono::DateTime<chrono::Utc>>,
    pub source: Option<String>,
    /// What this generation is known by on every host that holds it (`baseline push/pull`
    /// send increments against a generation both sides hold with the same identity).
    pub identity: Option<String>,
    /// For a generation received as a file-level copy: its identity where it came from.
    pub origin_identity: Option<String>,
    /// Its application databases (None: its files do not tell).
    pub databases: Option<Vec<String>>,
    /// For a generation cut from a follower: the source, the GTIDs it holds, the lag and
    /// the applier's pause at the cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub followed: Option<crate::replication::Cut>,
}

pub fn list(host: &Host) -> Result<Vec<BaselineRow>> {
    host.storage.open()?;
    let records = records::list(&host.layout)?;
    Ok(host
        .storage
        .baselines()?
        .into_iter()
        .map(|g| {
            let info = host.storage.generation_info(g).ok().flatten();
            BaselineRow {
                generation: g,
                branches: records.iter().filter(|r| r.baseline == g).count(),
                server: info.as_ref().map(|i| i.server),
                created: info.as_ref().map(|i| i.created),
                origin_identity: info.as_ref().and_then(|i| i.origin_identity.clone()),
                followed: info.as_ref().and_then(|i| i.followed.clone()),
                source: info.map(|i| i.source),
                identity: host.storage.generation_identity(g).ok().flatten(),
                databases: host.storage.generation_databases(g),
            }
        })
        .collect())
}

/// What `baseline prune` did with a generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PruneAction {
    Removed,
    KeptNewest,
    KeptUsed(Vec<String>),
    KeptError(String),
}

impl std::fmt::Display for PruneAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PruneAction::Removed => f.write_str("removed"),
            PruneAction::KeptNewest => f.write_str("kept (newest)"),
            PruneAction::KeptUsed(users) => write!(f, "kept (used by {})", users.join(", ")),
            PruneAction::KeptError(e) => write!(f, "kept: {e}"),
        }
    }
}

impl Serialize for PruneAction {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PruneRow {
    pub generation: Generation,
    pub action: PruneAction,
}

/// Removes generations no branch was cloned from. The newest stays (new branches use it).
pub fn prune(host: &Host) -> Result<Vec<PruneRow>> {
    host.storage.open()?;
    let _lock = host.baseline_lock()?;
    let records = records::list(&host.layout)?;
    let gens = host.storage.baselines()?;
    let newest = gens.last().copied();
    let mut rows = Vec::new();
    // Newest first: on ZFS a newer generation can hold an older one (a promotion's chain,
    // a received increment), and goes first.
    for g in gens.into_iter().rev() {
        let users: Vec<String> = records
            .iter()
            .filter(|r| r.baseline == g)
            .map(|r| r.name.to_string())
            .collect();
        let action = if Some(g) == newest {
            PruneAction::KeptNewest
        } else if !users.is_empty() {
            PruneAction::KeptUsed(users)
        } else {
            match host.storage.remove_baseline(g) {
                Ok(()) => PruneAction::Removed,
                Err(e) => PruneAction::KeptError(format!("{e:#}")),
            }
        };
        rows.push(PruneRow {
            generation: g,
            action,
        });
    }
    rows.reverse();
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::sim_host;
    use crate::storage::Storage;

    fn empty() -> CreateBaselineOptions {
        CreateBaselineOptions {
            empty: true,
            from_datadir: None,
            sql: vec![],
        }
    }

    #[test]
    fn generations_count_up() {
        let sim = sim_host();
        create(&sim.host, &empty()).unwrap();
        assert_eq!(
            sim.storage.baselines().unwrap(),
            vec![Generation(1), Generation(2)]
        );
        assert_eq!(sim.server.prepared.lock().unwrap().len(), 1);
    }

    #[test]
    fn failed_preparation_leaves_no_generation() {
        let sim = sim_host();
        sim.storage.fail_once("seal_baseline");
        assert!(create(&sim.host, &empty()).is_err());
        assert_eq!(sim.storage.baselines().unwrap(), vec![Generation(1)]);
        assert!(sim.storage.with_state(|s| s.workspaces.is_empty()));
    }

    #[test]
    fn prune_keeps_the_newest_and_used_generations() {
        let sim = sim_host();
        create(&sim.host, &empty()).unwrap();
        create(&sim.host, &empty()).unwrap();
        let mut a = crate::ops::create::CreateOptions::named("a".parse().unwrap());
        a.baseline = Some(Generation(2));
        crate::ops::create::create(&sim.host, &a).unwrap();
        prune(&sim.host).unwrap();
        assert_eq!(
            sim.storage.baselines().unwrap(),
            vec![Generation(2), Generation(3)]
        );
    }

    #[test]
    fn not_a_datadir_is_refused_before_anything() {
        let sim = sim_host();
        let dir = tempfile::tempdir().unwrap();
        let args = CreateBaselineOptions {
            empty: false,
            from_datadir: Some(dir.path().to_path_buf()),
            sql: vec![],
        };
        let e = create(&sim.host, &args).unwrap_err();
        assert!(e.to_string().contains("does not look like"), "{e}");
        assert!(sim.storage.with_state(|s| s.workspaces.is_empty()));
    }
}
