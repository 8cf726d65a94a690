//! Delete a branch: SIGKILL its server, destroy its snapshots, release its port and
//! settings. Also the clean-up other operations use for half-made or lost branches.

use crate::branch::BranchName;
use crate::error::{Error, Kind};
use crate::host::Host;
use crate::ops::branch::unit::launch;
use crate::store::records;
use anyhow::{Context, Result};

/// What `delete` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    Deleted,
    /// There was nothing to delete (CI hooks re-run: not an error).
    NothingThere,
}

/// Deletes a branch at once (the scratch branches of `diff` and `migrate-check`; users'
/// deletes go through the trash, `ops::delete`); a protected one only with `force`.
pub fn delete(host: &Host, name: &BranchName, force: bool) -> Result<Deleted> {
    host.storage.open()?;
    let _lock = host.branch_lock(name)?;
    let record = records::load(&host.layout, name)?;
    refuse_if_protected(host, name, record.as_ref(), force)?;
    if !exists(host, name, record.as_ref())? {
        return Ok(Deleted::NothingThere);
    }
    discard(host, name)?;
    Ok(Deleted::Deleted)
}

/// A protected branch is deleted only with `force`.
pub fn refuse_if_protected(
    host: &Host,
    name: &BranchName,
    record: Option<&crate::branch::BranchRecord>,
    force: bool,
) -> Result<()> {
    if let Some(r) = record.filter(|r| r.is_protected(host.clock.now())) {
        if !force {
            let until = r
                .protection
                .as_ref()
                .and_then(|p| p.until)
                .map_or("until unprotected".to_string(), |u| {
                    format!("until {}", u.to_rfc3339())
                });
            return Err(
                Error::new(Kind::Usage, format!("branch {name} is protected ({until})"))
                    .hint(format!(
                        "run `db-branch unprotect {name}` first, or pass --force"
                    ))
                    .into(),
            );
        }
    }
    Ok(())
}

/// Whether anything of branch `name` is there to delete.
pub fn exists(
    host: &Host,
    name: &BranchName,
    record: Option<&crate::branch::BranchRecord>,
) -> Result<bool> {
    Ok(record.is_some()
        || host.layout.branch_dir(name).exists()
        || host.storage.branch_exists(name)?)
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
    crate::store::secrets::remove(&host.layout, name)?;
    // The record goes last: while it exists, the port stays reserved for this branch.
    records::remove_dir(&host.layout, name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::create::create;
    use crate::ops::create::CreateOptions;
    use crate::ops::testing::{name, sim_host};

    #[test]
    fn delete_removes_everything_and_is_idempotent() {
        let sim = sim_host();
        create(&sim.host, &CreateOptions::named(name("a"))).unwrap();
        assert_eq!(
            delete(&sim.host, &name("a"), false).unwrap(),
            Deleted::Deleted
        );
        assert!(sim.storage.with_state(|s| s.branches.is_empty()));
        assert!(sim.services.with_state(|s| s.units.is_empty()));
        assert!(!sim.host.layout.branch_dir(&name("a")).exists());
        assert_eq!(
            delete(&sim.host, &name("a"), false).unwrap(),
            Deleted::NothingThere
        );
    }

    #[test]
    fn protected_branch_needs_force() {
        let sim = sim_host();
        create(&sim.host, &CreateOptions::named(name("a"))).unwrap();
        let mut r = records::load(&sim.host.layout, &name("a"))
            .unwrap()
            .unwrap();
        r.protection = Some(crate::branch::Protection { until: None });
        records::save(&sim.host.layout, &r).unwrap();
        let e = delete(&sim.host, &name("a"), false).unwrap_err();
        assert!(crate::report::render(&e).contains("unprotect a"), "{e}");
        assert!(sim
            .storage
            .with_state(|s| s.branches.contains_key(&name("a"))));
        assert_eq!(
            delete(&sim.host, &name("a"), true).unwrap(),
            Deleted::Deleted
        );
    }
}
