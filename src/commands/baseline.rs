//! `baseline create` and `baseline list`. A new generation is built in a workspace, made
//! clean by a one-off server (initialise or copy, run SQL, full-purge shutdown), and only
//! then frozen read-only; a failure leaves no generation and touches no existing one.

use crate::branch::Generation;
use crate::cli::BaselineCreateArgs;
use crate::error::usage;
use crate::host::Host;
use crate::output::{table, Human, Output};
use crate::server::Preparation;
use crate::state;
use crate::undo::Undo;
use anyhow::{Context, Result};
use serde::Serialize;
use std::time::Instant;

#[derive(Debug, Serialize)]
pub struct BaselineCreated {
    pub generation: Generation,
    pub seconds: f64,
}

impl Human for BaselineCreated {
    fn human(&self) -> String {
        format!("{}\n", self.generation)
    }
}

pub fn create(host: &Host, args: &BaselineCreateArgs, out: &Output) -> Result<()> {
    let started = Instant::now();
    if let Some(dir) = &args.from_datadir {
        check_datadir(dir)?;
    }
    for file in &args.sql {
        if !file.is_file() {
            return Err(usage(format!("SQL file {} does not exist", file.display())));
        }
    }
    host.storage.prepare(false)?;
    // One baseline build at a time; branch commands are not held up by it.
    let _lock = crate::commands::baseline_lock(host)?;
    crate::commands::check_free_space(host)?;
    let generation = host
        .storage
        .baselines()?
        .last()
        .map_or(Generation(1), |g| g.next());
    out.note(format!("building baseline {generation}..."));

    let mut undo = Undo::new();
    let result = (|| -> Result<()> {
        let workspace = host.storage.begin_baseline(generation)?;
        crate::failpoint::hit("baseline:after-workspace");
        undo.push("remove the unfinished baseline", move || {
            host.storage.abandon_baseline(generation)
        });
        if let Some(dir) = &args.from_datadir {
            out.note(format!("copying {}...", dir.display()));
            host.storage.fill_from_dir(&workspace, dir)?;
        }
        out.note("starting a one-off server to make the datadir clean...");
        let prep = Preparation {
            initialize: args.empty,
            create_client_user: args.empty,
            sql_files: args.sql.clone(),
        };
        let work = host.layout.work_dir().join(generation.dir_name());
        host.server
            .prepare_baseline(&workspace, &work, &prep)
            .with_context(|| match &args.from_datadir {
                Some(d) => format!("preparing baseline {generation} from {}", d.display()),
                None => format!("preparing empty baseline {generation}"),
            })?;
        crate::failpoint::hit("baseline:after-prepare");
        host.storage.seal_baseline(generation)?;
        crate::failpoint::hit("baseline:after-seal");
        Ok(())
    })();
    match result {
        Ok(()) => undo.commit(),
        Err(e) => return Err(undo.unwind(e)),
    }
    out.note(format!(
        "baseline {generation} is ready; create a branch with `db-branch create NAME`"
    ));
    out.emit(&BaselineCreated {
        generation,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// A datadir has the system schema directory and InnoDB's system tablespace or redo log.
pub fn check_datadir(dir: &std::path::Path) -> Result<()> {
    if !dir.is_dir() {
        return Err(usage(format!("{} is not a directory", dir.display())));
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

#[derive(Debug, Serialize)]
pub struct BaselineRow {
    pub generation: Generation,
    /// Branches cloned from this generation.
    pub branches: usize,
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct BaselineList(pub Vec<BaselineRow>);

impl Human for BaselineList {
    fn human(&self) -> String {
        if self.0.is_empty() {
            return "no baselines; make one with `db-branch baseline create --empty`".into();
        }
        table(
            &["GENERATION", "BRANCHES"],
            self.0
                .iter()
                .map(|r| vec![r.generation.to_string(), r.branches.to_string()])
                .collect(),
        )
    }
}

pub fn list(host: &Host, out: &Output) -> Result<()> {
    host.storage.prepare(false)?;
    let records = state::list_records(&host.layout)?;
    let rows = host
        .storage
        .baselines()?
        .into_iter()
        .map(|g| BaselineRow {
            generation: g,
            branches: records.iter().filter(|r| r.baseline == g).count(),
        })
        .collect();
    out.emit(&BaselineList(rows))
}

#[derive(Debug, Serialize)]
pub struct PruneRow {
    pub generation: Generation,
    /// removed | kept (newest) | kept (used by …)
    pub action: String,
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct PruneReport(pub Vec<PruneRow>);

impl Human for PruneReport {
    fn human(&self) -> String {
        table(
            &["GENERATION", "ACTION"],
            self.0
                .iter()
                .map(|r| vec![r.generation.to_string(), r.action.clone()])
                .collect(),
        )
    }
}

/// Removes generations no branch was cloned from. The newest stays (new branches use it).
pub fn prune(host: &Host, out: &Output) -> Result<()> {
    host.storage.prepare(false)?;
    let _lock = crate::commands::baseline_lock(host)?;
    let records = state::list_records(&host.layout)?;
    let gens = host.storage.baselines()?;
    let newest = gens.last().copied();
    let mut rows = Vec::new();
    for g in gens {
        let users: Vec<String> = records
            .iter()
            .filter(|r| r.baseline == g)
            .map(|r| r.name.to_string())
            .collect();
        let action = if Some(g) == newest {
            "kept (newest)".to_string()
        } else if !users.is_empty() {
            format!("kept (used by {})", users.join(", "))
        } else {
            match host.storage.remove_baseline(g) {
                Ok(()) => "removed".to_string(),
                Err(e) => format!("kept: {e:#}"),
            }
        };
        rows.push(PruneRow {
            generation: g,
            action,
        });
    }
    out.emit(&PruneReport(rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::testing::{sim_host, OUT};
    use crate::storage::Storage;

    fn empty() -> BaselineCreateArgs {
        BaselineCreateArgs {
            empty: true,
            from_datadir: None,
            sql: vec![],
        }
    }

    #[test]
    fn generations_count_up() {
        let sim = sim_host();
        create(&sim.host, &empty(), &OUT).unwrap();
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
        assert!(create(&sim.host, &empty(), &OUT).is_err());
        assert_eq!(sim.storage.baselines().unwrap(), vec![Generation(1)]);
        assert!(sim.storage.with_state(|s| s.workspaces.is_empty()));
    }

    #[test]
    fn prune_keeps_the_newest_and_used_generations() {
        let sim = sim_host();
        create(&sim.host, &empty(), &OUT).unwrap();
        create(&sim.host, &empty(), &OUT).unwrap();
        let mut a = crate::cli::CreateArgs::named("a".parse().unwrap());
        a.baseline = Some(Generation(2));
        crate::commands::create::create(&sim.host, &a, &OUT).unwrap();
        prune(&sim.host, &OUT).unwrap();
        assert_eq!(
            sim.storage.baselines().unwrap(),
            vec![Generation(2), Generation(3)]
        );
    }

    #[test]
    fn not_a_datadir_is_refused_before_anything() {
        let sim = sim_host();
        let dir = tempfile::tempdir().unwrap();
        let args = BaselineCreateArgs {
            empty: false,
            from_datadir: Some(dir.path().to_path_buf()),
            sql: vec![],
        };
        let e = create(&sim.host, &args, &OUT).unwrap_err();
        assert!(e.to_string().contains("does not look like"), "{e}");
        assert!(sim.storage.with_state(|s| s.workspaces.is_empty()));
    }
}
