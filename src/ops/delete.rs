//! `delete NAME`: a protected branch only with `--force`; into the trash for
//! `lifecycle.keep_deleted` (restorable), or destroyed at once where nothing is kept.

use crate::branch::BranchName;
use crate::host::Host;
use crate::ops::branch::discard::{exists, refuse_if_protected};
use crate::ops::branch::dispose::{dispose, Disposed};
use crate::store::records;
use crate::store::trash::{Entry, Reason};
use anyhow::Result;

/// What `delete` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Trashed(Entry),
    Destroyed,
    /// There was nothing to delete (CI hooks re-run: not an error).
    NothingThere,
}

pub fn delete(host: &Host, name: &BranchName, force: bool, reason: Reason) -> Result<Outcome> {
    host.storage.open()?;
    let _lock = host.branch_lock(name)?;
    let record = records::load(&host.layout, name)?;
    if let Some(source) = record.as_ref().and_then(|r| r.follows.as_ref()) {
        return Err(crate::error::Error::new(
            crate::error::Kind::Usage,
            format!("branch {name} follows {source}; it is not deleted as a branch is"),
        )
        .hint("stop following (and remove it) with `db-branch baseline unfollow`")
        .into());
    }
    refuse_if_protected(host, name, record.as_ref(), force)?;
    if !exists(host, name, record.as_ref())? {
        return Ok(Outcome::NothingThere);
    }
    Ok(match dispose(host, name, record.as_ref(), reason)? {
        Disposed::Trashed(e) => Outcome::Trashed(e),
        Disposed::Destroyed => Outcome::Destroyed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::create::{create, CreateOptions};
    use crate::ops::testing::{name, sim_host};

    #[test]
    fn a_delete_keeps_the_branch_in_the_trash_and_frees_its_name() {
        let sim = sim_host();
        create(&sim.host, &CreateOptions::named(name("a"))).unwrap();
        let Outcome::Trashed(entry) = delete(&sim.host, &name("a"), false, Reason::Delete).unwrap()
        else {
            panic!("not trashed")
        };
        assert!(entry.complete);
        assert!(sim.storage.with_state(|s| s.branches.is_empty()));
        assert!(sim.storage.with_state(|s| s.trash.contains_key(&entry.id)));
        assert!(records::load(&sim.host.layout, &name("a"))
            .unwrap()
            .is_none());
        assert!(crate::store::trash::record(&sim.host.layout, &entry.id)
            .unwrap()
            .is_some());
        assert_eq!(
            delete(&sim.host, &name("a"), false, Reason::Delete).unwrap(),
            Outcome::NothingThere
        );
    }

    #[test]
    fn keep_deleted_zero_destroys_at_once() {
        let mut sim = sim_host();
        sim.host.config.lifecycle.keep_deleted = "0s".parse().unwrap();
        create(&sim.host, &CreateOptions::named(name("a"))).unwrap();
        assert_eq!(
            delete(&sim.host, &name("a"), false, Reason::Delete).unwrap(),
            Outcome::Destroyed
        );
        assert!(sim.storage.with_state(|s| s.trash.is_empty()));
        assert!(crate::store::trash::list(&sim.host.layout)
            .unwrap()
            .is_empty());
    }
}
