//! Ending a branch the way the user asked for: into the trash for `lifecycle.keep_deleted`
//! (stopped, its storage read-only, with its record, password and checkpoints), or at once
//! where nothing is to be kept (`keep_deleted = "0s"`, or storage without a trash). Also the
//! steps that finish a move into the trash a crash interrupted, and that destroy an entry.

use crate::branch::{BranchName, BranchRecord, TrashId};
use crate::host::Host;
use crate::ops::branch::discard::discard;
use crate::ops::branch::unit::launch;
use crate::store::trash::{self, Entry, Reason};
use anyhow::{Context, Result};

/// What became of a branch.
#[derive(Debug, Clone, PartialEq)]
pub enum Disposed {
    /// In the trash as this entry, until `keep_until`.
    Trashed(Entry),
    /// Destroyed at once.
    Destroyed,
}

/// Whether deletes keep anything on this host.
pub fn keeps(host: &Host) -> bool {
    !host.config.lifecycle.keep_deleted.0.is_zero() && host.storage.has_trash()
}

/// Sends branch `name` (whose record is `record`) to the trash, or destroys it where
/// nothing is kept. The caller holds the branch's lock.
pub fn dispose(
    host: &Host,
    name: &BranchName,
    record: Option<&BranchRecord>,
    reason: Reason,
) -> Result<Disposed> {
    // A branch without a record (half made, or lost) has nothing a restore could bring back.
    let Some(record) = record.filter(|_| keeps(host)) else {
        discard(host, name)?;
        return Ok(Disposed::Destroyed);
    };
    // A delete of this very branch that a crash interrupted: finish that one.
    if let Some(mut entry) = trash::list(&host.layout)?
        .into_iter()
        .find(|e| !e.complete && &e.name == name && e.created == record.created)
    {
        stop(host, name)?;
        finish(host, &mut entry)?;
        return Ok(Disposed::Trashed(entry));
    }
    let now = host.clock.now();
    let keep = chrono::Duration::from_std(host.config.lifecycle.keep_deleted.0)
        .unwrap_or(chrono::Duration::MAX);
    let mut entry = Entry {
        id: TrashId::new(now, name),
        name: name.clone(),
        owner: record.owner.clone(),
        owner_uid: record.owner_uid,
        deleted_at: now,
        deleted_by: host.caller.name.clone(),
        reason,
        keep_until: now.checked_add_signed(keep).unwrap_or(now),
        port: record.port,
        created: record.created,
        complete: false,
    };
    if trash::load(&host.layout, &entry.id)?.is_some() {
        // Two deletes of one name in one millisecond: the second waits for the next.
        std::thread::sleep(std::time::Duration::from_millis(2));
        return dispose(host, name, Some(record), reason);
    }
    trash::save(&host.layout, &entry)?;
    crate::failpoint::hit("trash:after-entry");
    stop(host, name)?;
    finish(host, &mut entry)?;
    Ok(Disposed::Trashed(entry))
}

/// A clean shutdown, so a restore starts without crash recovery; a server that will not
/// stop is killed (its data is then crash-consistent, as a power cut leaves it).
fn stop(host: &Host, name: &BranchName) -> Result<()> {
    let l = launch(host, name);
    if let Err(e) = host.services.stop(&l) {
        host.printer.warn(format!(
            "the server of branch {name} did not stop cleanly ({e:#}); killing it"
        ));
        host.services
            .kill(&l)
            .with_context(|| format!("killing the server of branch {name}"))?;
    }
    Ok(())
}

/// The moves of a trash entry after its record was written, each done only if not done
/// yet: the storage, then the secrets, then the branch's directory (whose record, while it
/// is in place, keeps the name and port reserved). Re-run on an entry a crash left
/// incomplete; the caller holds the lock of the entry's branch.
pub fn finish(host: &Host, entry: &mut Entry) -> Result<()> {
    let name = &entry.name;
    let kept_dir = trash::branch_dir(&host.layout, &entry.id);
    if !kept_dir.exists() {
        // Until the branch's directory moves, nobody could have made a new branch of this
        // name: what is under the name is still this one.
        host.storage
            .trash_branch(name, &entry.id)
            .with_context(|| format!("moving the storage of branch {name} to the trash"))?;
        crate::failpoint::hit("trash:after-storage");
        host.services.forget(&launch(host, name))?;
        trash::move_dir(
            &host.layout.secrets_dir(name),
            &trash::secrets_dir(&host.layout, &entry.id),
        )?;
        trash::drop_run_dir(&host.layout, name)?;
        trash::move_dir(&host.layout.branch_dir(name), &kept_dir)?;
    }
    entry.complete = true;
    trash::save(&host.layout, entry)
}

/// Brings an entry a crash left incomplete to a state that can be listed, restored or
/// purged. Its branch still in place and nothing of it moved yet: the delete never began,
/// the entry goes and the branch stays. Something moved: the delete is finished. The
/// branch's name taken by a later branch: kept as it is for an admin, if it holds storage,
/// else dropped. The caller holds the lock of the entry's branch. Returns whether the
/// entry remains.
pub fn recover(host: &Host, entry: &mut Entry) -> Result<bool> {
    if entry.complete {
        return Ok(true);
    }
    if trash::branch_dir(&host.layout, &entry.id).exists() {
        entry.complete = true;
        trash::save(&host.layout, entry)?;
        return Ok(true);
    }
    let moving = host.storage.trashed()?.contains(&entry.id);
    let same = crate::store::records::load(&host.layout, &entry.name)?
        .is_some_and(|r| r.created == entry.created);
    if same && moving {
        stop(host, &entry.name)?;
        finish(host, entry)?;
        return Ok(true);
    }
    if moving {
        return Ok(true);
    }
    trash::remove(&host.layout, &entry.id)?;
    Ok(false)
}

/// Destroys trash entry `id`: its storage, then its records. The caller holds the entry's
/// lock.
pub fn purge(host: &Host, id: &TrashId) -> Result<()> {
    host.storage
        .purge_trashed(id)
        .with_context(|| format!("destroying the storage of trash entry {id}"))?;
    trash::remove(&host.layout, id)
}
