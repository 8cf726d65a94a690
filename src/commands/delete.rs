//! `delete NAME`: SIGKILL the server, destroy the branch's snapshots, release its port and
//! settings. Asks first on a terminal; needs `--yes` without one. A branch that does not
//! exist is a success with a note, because CI hooks re-run.

use super::{branch_lock, launch};
use crate::branch::BranchName;
use crate::cli::NameArg;
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

pub fn run(host: &Host, args: &NameArg, out: &Output) -> Result<()> {
    let name = &args.name;
    confirm(host, name)?;
    let deleted = delete(host, name)?;
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

pub fn delete(host: &Host, name: &BranchName) -> Result<bool> {
    host.storage.prepare(false)?;
    let _lock = branch_lock(host, name)?;
    let exists = state::load_record(&host.layout, name)?.is_some()
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
    host.storage
        .destroy_branch(name)
        .with_context(|| format!("destroying the storage of branch {name}"))?;
    host.services.forget(&l)?;
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
        let args = CreateArgs {
            name: name("a"),
            baseline: None,
            buffer_pool: None,
        };
        create(&sim.host, &args, &OUT).unwrap();
        assert!(delete(&sim.host, &name("a")).unwrap());
        assert!(sim.storage.with_state(|s| s.branches.is_empty()));
        assert!(sim.services.with_state(|s| s.units.is_empty()));
        assert!(!sim.host.layout.branch_dir(&name("a")).exists());
        assert!(!delete(&sim.host, &name("a")).unwrap());
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
