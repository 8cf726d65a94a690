//! `delete NAME`: SIGKILL the server, destroy the branch's snapshots, release its port and
//! settings. Asks first on a terminal; needs `--yes` without one. A branch that does not
//! exist is a success with a note, because CI hooks re-run.

use super::{branch_lock, launch};
use crate::branch::BranchName;
use crate::cli::DeleteArgs;
use crate::error::usage;
use crate::host::Host;
use crate::output::{Human, Output};
use crate::state;
use anyhow::{Context, Result};
use serde::Serialize;
use std::io::IsTerminal;

#[derive(Debug, Serialize)]
pub struct DeleteReport {
    pub name: BranchName,
    /// false when there was nothing to delete.
    pub deleted: bool,
}

impl Human for DeleteReport {
    fn human(&self) -> String {
        String::new()
    }
}

pub fn run(host: &Host, args: &DeleteArgs, out: &Output) -> Result<()> {
    let name = &args.name;
    confirm(host, name)?;
    let deleted = delete(host, name, args.force)?;
    if deleted {
        out.note(format!("deleted branch {name}"));
    } else {
        out.note(format!("branch {name} does not exist; nothing to delete"));
    }
    out.emit(&DeleteReport {
        name: name.clone(),
        deleted,
    })
}

fn confirm(host: &Host, name: &BranchName) -> Result<()> {
    if host.assume_yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Err(usage(format!(
            "deleting branch {name} destroys its data; there is no terminal to ask on, so pass --yes"
        )));
    }
    let ok = dialoguer::Confirm::new()
        .with_prompt(format!("Delete branch {name} and all its data?"))
        .default(false)
        .interact()
        .context("asking for confirmation")?;
    if !ok {
        return Err(usage(format!("not deleting branch {name}")));
    }
    Ok(())
}

/// Deletes a branch; a protected one only with `force`. Returns whether there was one.
pub fn delete(host: &Host, name: &BranchName, force: bool) -> Result<bool> {
    host.storage.prepare(false)?;
    let _lock = branch_lock(host, name)?;
    let record = state::load_record(&host.layout, name)?;
    if let Some(r) = record.as_ref().filter(|r| r.is_protected(host.clock.now())) {
        if !force {
            let until = r
                .protection
                .as_ref()
                .and_then(|p| p.until)
                .map_or("until unprotected".to_string(), |u| {
                    format!("until {}", u.to_rfc3339())
                });
            return Err(usage(format!(
                "branch {name} is protected ({until}); run `db-branch unprotect {name}` first, or pass --force"
            )));
        }
    }
    let exists = record.is_some()
        || host.layout.branch_dir(name).exists()
        || host.storage.branch_exists(name)?;
    if !exists {
        return Ok(false);
    }
    discard(host, name)?;
    Ok(true)
}

/// Removes everything of a branch, in the order that never leaves a server running on
/// deleted storage. Each step is idempotent, so an interrupted delete can simply be re-run.
/// The caller holds the branch lock.
pub fn discard(host: &Host, name: &BranchName) -> Result<()> {
    let l = launch(host, name);
    host.services
        .kill(&l)
        .with_context(|| format!("killing the server of branch {name}"))?;
    crate::failpoint::hit("delete:after-kill");
    host.storage
        .destroy_branch(name)
        .with_context(|| format!("destroying the storage of branch {name}"))?;
    crate::failpoint::hit("delete:after-destroy");
    host.services.forget(&l)?;
    crate::failpoint::hit("delete:after-forget");
    // The record goes last: while it exists, the port stays reserved for this branch.
    state::remove_branch_dir(&host.layout, name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::CreateArgs;
    use crate::commands::create::create;
    use crate::commands::testing::{name, sim_host, OUT};

    #[test]
    fn delete_removes_everything_and_is_idempotent() {
        let sim = sim_host();
        create(&sim.host, &CreateArgs::named(name("a")), &OUT).unwrap();
        assert!(delete(&sim.host, &name("a"), false).unwrap());
        assert!(sim.storage.with_state(|s| s.branches.is_empty()));
        assert!(sim.services.with_state(|s| s.units.is_empty()));
        assert!(!sim.host.layout.branch_dir(&name("a")).exists());
        assert!(!delete(&sim.host, &name("a"), false).unwrap());
    }

    #[test]
    fn protected_branch_needs_force() {
        let sim = sim_host();
        create(&sim.host, &CreateArgs::named(name("a")), &OUT).unwrap();
        let mut r = state::load_record(&sim.host.layout, &name("a"))
            .unwrap()
            .unwrap();
        r.protection = Some(crate::branch::Protection { until: None });
        state::save_record(&sim.host.layout, &r).unwrap();
        let e = delete(&sim.host, &name("a"), false).unwrap_err();
        assert!(e.to_string().contains("unprotect a"), "{e}");
        assert!(sim
            .storage
            .with_state(|s| s.branches.contains_key(&name("a"))));
        assert!(delete(&sim.host, &name("a"), true).unwrap());
    }

    #[test]
    fn without_terminal_or_yes_it_refuses_before_touching_anything() {
        let mut sim = sim_host();
        sim.host.assume_yes = false;
        // Test runners give no terminal on stdin.
        if std::io::stdin().is_terminal() {
            return;
        }
        let e = confirm(&sim.host, &name("a")).unwrap_err();
        assert!(e.to_string().contains("--yes"));
    }
}
