//! The trash: deleted branches kept for `lifecycle.keep_deleted` — listed (`trash`),
//! brought back (`restore`), emptied (`trash purge`, `gc` past retention, and oldest first
//! when the pool runs short of space, before anything is refused for it).

use crate::access::Need;
use crate::branch::{BranchName, BranchRecord, CheckpointTag, TrashId};
use crate::error::{Error, Kind};
use crate::host::Host;
use crate::ops::branch::budget::admit_locked;
use crate::ops::branch::dispose::{purge as purge_entry, recover};
use crate::ops::branch::launch;
use crate::ports;
use crate::store::locks::LockGuard;
use crate::store::records;
use crate::store::trash::{self, Entry, Reason};
use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;

/// One entry as `trash` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct TrashRow {
    pub id: TrashId,
    pub name: BranchName,
    pub owner: String,
    pub deleted_at: DateTime<Utc>,
    pub deleted_by: String,
    pub reason: Reason,
    pub keep_until: DateTime<Utc>,
    pub port: u16,
    pub checkpoints: Vec<CheckpointTag>,
    /// Bytes only this entry holds: what purging it frees (None where it cannot be told).
    pub own_bytes: Option<u64>,
    /// False for an entry a crash left half-moved that could not be finished (see doctor).
    pub complete: bool,
}

fn entry_lock(host: &Host, id: &TrashId) -> Result<LockGuard> {
    host.trash_lock(id)
}

/// Every entry, oldest first, each finished first if a crash left it half-moved.
fn entries(host: &Host) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    for mut e in trash::list(&host.layout)? {
        if !e.complete {
            let _branch = host.branch_lock_for_host(&e.name)?;
            let _entry = entry_lock(host, &e.id)?;
            if !recover(host, &mut e)? {
                continue;
            }
        }
        out.push(e);
    }
    Ok(out)
}

fn row(host: &Host, e: Entry) -> Result<TrashRow> {
    let checkpoints = trash::record(&host.layout, &e.id)?
        .map(|r| r.checkpoints.into_iter().map(|c| c.tag).collect())
        .unwrap_or_default();
    Ok(TrashRow {
        own_bytes: host.storage.trashed_usage(&e.id)?,
        id: e.id,
        name: e.name,
        owner: e.owner,
        deleted_at: e.deleted_at,
        deleted_by: e.deleted_by,
        reason: e.reason,
        keep_until: e.keep_until,
        port: e.port,
        checkpoints,
        complete: e.complete,
    })
}

/// `trash`: what the trash holds, oldest first.
pub fn list(host: &Host) -> Result<Vec<TrashRow>> {
    host.storage.open()?;
    entries(host)?.into_iter().map(|e| row(host, e)).collect()
}

/// The entry `what` names: an id, else the newest entry of that branch name.
fn find(host: &Host, what: &str) -> Result<Entry> {
    let all = entries(host)?;
    if let Some(e) = all.iter().find(|e| e.id.as_str() == what) {
        return Ok(e.clone());
    }
    all.into_iter()
        .rev()
        .find(|e| e.name.as_str() == what)
        .ok_or_else(|| {
            Error::new(
                Kind::NotFound,
                format!("the trash holds no branch {what}"),
            )
            .hint("`db-branch trash` lists what it holds; past lifecycle.keep_deleted an entry is gone for good")
            .into()
        })
}

/// Refuses (exit 77) an entry that is not the caller's, as the branch itself would be.
fn check_owner(host: &Host, entry: &Entry, record: &BranchRecord) -> Result<()> {
    host.caller.check(
        &host.config.access,
        &Need::owner(&entry.name),
        &entry.name,
        Some(record),
    )
}

/// Refuses (exit 77) before anything happens when the caller may not restore or purge
/// what `what` names: an entry kept of someone else's branch. Nothing found is left to the
/// operation to report.
pub fn check_caller_may_touch(host: &Host, what: &str) -> Result<()> {
    if host.caller.role(&host.config.access) == crate::access::Role::Admin {
        return Ok(());
    }
    for e in trash::list(&host.layout)?
        .into_iter()
        .filter(|e| e.id.as_str() == what || e.name.as_str() == what)
    {
        match trash::record(&host.layout, &e.id)? {
            Some(r) => check_owner(host, &e, &r)?,
            None => {
                return Err(crate::error::permission(format!(
                    "trash entry {} is half-moved; only an admin may act on it",
                    e.id
                )))
            }
        }
    }
    Ok(())
}

#[derive(Debug, Clone)]
pub struct RestoreOptions {
    /// A branch name (its newest entry) or an entry's id.
    pub what: String,
    /// Restore under another name.
    pub as_name: Option<BranchName>,
}

/// What `restore` brought back.
#[derive(Debug, Clone)]
pub struct Restored {
    pub record: BranchRecord,
    pub from: TrashId,
    /// It had to take another port: its old one was taken meanwhile.
    pub port_changed: bool,
}

/// `restore NAME [--as NEW]`: the branch back with its data, checkpoints, password, and
/// port when that is free, then started (the memory guard admits it like any start).
pub fn restore(host: &Host, opts: &RestoreOptions) -> Result<Restored> {
    host.storage.open()?;
    let entry = find(host, &opts.what)?;
    let target = opts.as_name.clone().unwrap_or_else(|| entry.name.clone());
    let _branch = host.branch_lock_for_host(&target)?;
    let _entry = entry_lock(host, &entry.id)?;
    // Read again under the locks: another restore or a purge may have taken it.
    let entry = trash::load(&host.layout, &entry.id)?
        .filter(|e| e.complete)
        .ok_or_else(|| crate::error::not_found(format!("trash entry {} is gone", entry.id)))?;
    let mut record = trash::record(&host.layout, &entry.id)?.ok_or_else(|| {
        crate::error::not_found(format!(
            "trash entry {} holds no branch record ({})",
            entry.id,
            trash::branch_dir(&host.layout, &entry.id).display()
        ))
    })?;
    check_owner(host, &entry, &record)?;
    if crate::ops::branch::discard::exists(
        host,
        &target,
        records::load(&host.layout, &target)?.as_ref(),
    )? {
        return Err(
            Error::new(Kind::Usage, format!("a branch {target} exists already"))
                .hint(format!(
                    "restore it under another name: `db-branch restore {} --as {target}-restored`",
                    opts.what
                ))
                .into(),
        );
    }
    crate::ops::branch::fit::check_server(host, &record)?;
    host.check_socket_path(&target)?;
    let renamed = target != entry.name;
    record.name = target.clone();
    if record.is_expired(host.clock.now()) {
        // Brought back on purpose: not to be taken again by the next gc.
        record.expires_at = crate::branch::after(
            host.clock.now(),
            host.config.lifecycle.default_ttl,
            "lifecycle.default_ttl",
        )
        .ok()
        .filter(|_| !host.config.lifecycle.default_ttl.0.is_zero());
    }
    // The memory the guard admitted stays promised until the server is up.
    let (_reservation, port_changed) = {
        let _host = host.host_lock()?;
        let reservation = admit_locked(host, &record, 0)?;
        let held = records::held_ports(&host.layout)?;
        let free = host.config.ports.iter().any(|p| p == entry.port)
            && !held.contains(&entry.port)
            && host.ports.is_free(host.config.bind_address, entry.port);
        if !free {
            record.port = ports::allocate(
                host.config.ports,
                host.config.bind_address,
                &held,
                host.ports.as_ref(),
            )?;
        }
        move_back(host, &entry, &target)?;
        records::save(&host.layout, &record)
            .with_context(|| format!("writing the record of restored branch {target}"))?;
        (reservation, !free)
    };
    // Restored: the entry is done with, whether or not the server comes up.
    trash::remove(&host.layout, &entry.id)?;
    launch::start_and_wait(host, &mut record).with_context(|| {
        format!("branch {target} is restored but its server did not come up; try `db-branch start {target}`")
    })?;
    records::save(&host.layout, &record)?;
    if renamed {
        host.printer
            .note(format!("restored branch {} as {target}", entry.name));
    }
    Ok(Restored {
        record,
        from: entry.id,
        port_changed,
    })
}

/// Storage, secrets and directory back under `target`; undone if a later step fails.
fn move_back(host: &Host, entry: &Entry, target: &BranchName) -> Result<()> {
    host.storage
        .restore_trashed(&entry.id, target)
        .with_context(|| format!("bringing the storage of trash entry {} back", entry.id))?;
    let steps = || -> Result<()> {
        trash::move_dir(
            &trash::secrets_dir(&host.layout, &entry.id),
            &host.layout.secrets_dir(target),
        )?;
        trash::move_dir(
            &trash::branch_dir(&host.layout, &entry.id),
            &host.layout.branch_dir(target),
        )
    };
    if let Err(e) = steps() {
        let undo = (|| -> Result<()> {
            trash::move_dir(
                &host.layout.secrets_dir(target),
                &trash::secrets_dir(&host.layout, &entry.id),
            )?;
            host.storage.trash_branch(target, &entry.id)
        })();
        return Err(match undo {
            Ok(()) => e,
            Err(u) => e.context(format!(
                "and putting trash entry {} back failed too: {u:#}",
                entry.id
            )),
        });
    }
    Ok(())
}

/// What `trash purge` takes.
#[derive(Debug, Clone)]
pub enum PurgeWhat {
    /// A branch name (all its entries) or one entry's id.
    One(String),
    /// Everything (admins; a user's `--all` is everything of theirs).
    All,
}

/// `trash purge`: destroys entries for good. Returns the ids purged.
pub fn purge(host: &Host, what: &PurgeWhat) -> Result<Vec<TrashId>> {
    host.storage.open()?;
    let all = entries(host)?;
    let chosen: Vec<Entry> = match what {
        PurgeWhat::All => all
            .into_iter()
            .filter(|e| {
                host.caller.role(&host.config.access) == crate::access::Role::Admin
                    || trash::record(&host.layout, &e.id)
                        .ok()
                        .flatten()
                        .is_some_and(|r| host.caller.owns(&r))
            })
            .collect(),
        PurgeWhat::One(w) => {
            let picked: Vec<Entry> = all
                .into_iter()
                .filter(|e| e.id.as_str() == w || e.name.as_str() == w)
                .collect();
            if picked.is_empty() {
                return Err(
                    Error::new(Kind::NotFound, format!("the trash holds no branch {w}"))
                        .hint("`db-branch trash` lists what it holds")
                        .into(),
                );
            }
            picked
        }
    };
    let mut purged = Vec::new();
    for e in chosen {
        let _entry = entry_lock(host, &e.id)?;
        if let Some(r) = trash::record(&host.layout, &e.id)? {
            check_owner(host, &e, &r)?;
        }
        purge_entry(host, &e.id)?;
        purged.push(e.id);
    }
    Ok(purged)
}

/// Entries past `keep_until` at `now`, destroyed (`gc`). Returns the ids purged and the
/// failures.
pub fn purge_expired(host: &Host) -> Result<Vec<(TrashId, Option<String>)>> {
    let now = host.clock.now();
    let mut out = Vec::new();
    for e in entries(host)?.into_iter().filter(|e| e.keep_until <= now) {
        let done = entry_lock(host, &e.id).and_then(|_lock| purge_entry(host, &e.id));
        out.push((e.id, done.err().map(|err| format!("{err:#}"))));
    }
    Ok(out)
}

/// Before an operation that needs `btrfs.min_free` of the pool: while the pool has less,
/// the trash is emptied oldest first (a note names each entry). Then the usual check,
/// which refuses (exit 75) if that was not enough.
pub fn ensure_space(host: &Host) -> Result<()> {
    let min = host.config.btrfs.min_free.bytes();
    if host.storage.info()?.free_bytes < min {
        // Complete entries only: finishing a half-moved one needs its branch's lock, which
        // the caller may hold.
        for e in trash::list(&host.layout)?
            .into_iter()
            .filter(|e| e.complete)
        {
            if host.storage.info()?.free_bytes >= min {
                break;
            }
            let _lock = entry_lock(host, &e.id)?;
            purge_entry(host, &e.id)?;
            host.storage.reclaim()?;
            host.printer.note(format!(
                "the pool is short of space: purged branch {} (deleted {}) from the trash",
                e.name,
                e.deleted_at.to_rfc3339()
            ));
        }
    }
    host.check_free_space()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::create::{create, CreateOptions};
    use crate::ops::delete::{delete, Outcome};
    use crate::ops::testing::{name, sim_host, SimHost};
    use crate::storage::Storage;

    fn trashed(sim: &SimHost, n: &str) -> Entry {
        match delete(&sim.host, &name(n), false, Reason::Delete).unwrap() {
            Outcome::Trashed(e) => e,
            other => panic!("{other:?}"),
        }
    }

    fn restore_named(sim: &SimHost, what: &str, as_name: Option<&str>) -> Result<Restored> {
        restore(
            &sim.host,
            &RestoreOptions {
                what: what.into(),
                as_name: as_name.map(name),
            },
        )
    }

    #[test]
    fn restore_brings_back_data_port_password_and_checkpoints() {
        let sim = sim_host();
        let made = create(&sim.host, &CreateOptions::named(name("a"))).unwrap();
        sim.storage
            .with_state(|s| s.branches.get_mut(&name("a")).unwrap().1 = true);
        crate::ops::checkpoint::make(&sim.host, &name("a"), None, false).unwrap();
        let password = crate::store::secrets::password(&sim.host.layout, &name("a"))
            .unwrap()
            .unwrap();
        let entry = trashed(&sim, "a");
        let rows = list(&sim.host).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].name, name("a"));
        assert_eq!(rows[0].reason, Reason::Delete);
        assert_eq!(rows[0].checkpoints.len(), 1);
        assert_eq!(
            rows[0].keep_until - rows[0].deleted_at,
            chrono::Duration::hours(24)
        );

        let back = restore_named(&sim, "a", None).unwrap();
        assert_eq!(back.from, entry.id);
        assert!(!back.port_changed);
        assert_eq!(back.record.port, made.record.port);
        assert!(
            sim.storage.with_state(|s| s.branches[&name("a")].1),
            "its writes"
        );
        assert_eq!(
            sim.storage.checkpoints(&name("a")).unwrap(),
            ["c1".parse().unwrap()]
        );
        assert_eq!(
            crate::store::secrets::password(&sim.host.layout, &name("a"))
                .unwrap()
                .unwrap(),
            password
        );
        assert!(list(&sim.host).unwrap().is_empty());
        assert_eq!(
            sim.services
                .with_state(|s| s.units.get(&name("a")).copied()),
            Some(crate::supervisor::ServiceState::Running)
        );
    }

    #[test]
    fn a_taken_name_needs_as_and_a_taken_port_moves() {
        let sim = sim_host();
        let first = create(&sim.host, &CreateOptions::named(name("a"))).unwrap();
        trashed(&sim, "a");
        // The name and the port are taken again meanwhile.
        let again = create(&sim.host, &CreateOptions::named(name("a"))).unwrap();
        assert_eq!(again.record.port, first.record.port);
        let e = restore_named(&sim, "a", None).unwrap_err();
        assert_eq!(crate::report::exit_code(&e), crate::error::EXIT_USAGE);
        assert!(crate::report::render(&e).contains("--as"), "{e}");
        let back = restore_named(&sim, "a", Some("a-old")).unwrap();
        assert_eq!(back.record.name, name("a-old"));
        assert!(back.port_changed);
        assert_ne!(back.record.port, first.record.port);
        assert!(records::load(&sim.host.layout, &name("a"))
            .unwrap()
            .is_some());
    }

    #[test]
    fn another_user_may_not_restore_or_purge_it() {
        let mut sim = sim_host();
        let mut opts = CreateOptions::named(name("a"));
        opts.owner = Some("alice".into());
        create(&sim.host, &opts).unwrap();
        trashed(&sim, "a");
        // A member of the users group who is not alice.
        let root_group = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(0))
            .unwrap()
            .unwrap()
            .name;
        sim.host.config.access.users_group = root_group;
        sim.host.config.access.admins_group = "no-such-group-dbb-admin".into();
        sim.host.caller = crate::access::Caller {
            uid: 4242,
            gids: vec![0],
            name: "mallory".into(),
            cwd: None,
            pid: None,
        };
        for e in [
            check_caller_may_touch(&sim.host, "a").unwrap_err(),
            restore_named(&sim, "a", Some("mine")).unwrap_err(),
            purge(&sim.host, &PurgeWhat::One("a".into())).unwrap_err(),
        ] {
            assert_eq!(
                crate::report::exit_code(&e),
                crate::error::EXIT_PERMISSION,
                "{e:#}"
            );
        }
        // `--all` is everything of theirs: nothing.
        assert!(purge(&sim.host, &PurgeWhat::All).unwrap().is_empty());
        assert_eq!(trash::list(&sim.host.layout).unwrap().len(), 1);
    }

    #[test]
    fn gc_purges_what_is_past_retention_and_keeps_the_rest() {
        let sim = sim_host();
        create(&sim.host, &CreateOptions::named(name("old"))).unwrap();
        trashed(&sim, "old");
        sim.advance(chrono::Duration::hours(23));
        create(&sim.host, &CreateOptions::named(name("new"))).unwrap();
        trashed(&sim, "new");
        sim.advance(chrono::Duration::hours(2));
        let rows = crate::ops::gc::gc(&sim.host, &Default::default()).unwrap();
        let purged: Vec<_> = rows
            .iter()
            .filter(|r| r.action == crate::ops::gc::GcAction::Purged)
            .collect();
        assert_eq!(purged.len(), 1, "{rows:?}");
        assert!(purged[0].name.ends_with("-old"));
        let left: Vec<_> = list(&sim.host)
            .unwrap()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(left, [name("new")]);
        assert_eq!(sim.storage.with_state(|s| s.trash.len()), 1);
    }

    #[test]
    fn a_pool_short_of_space_empties_the_trash_oldest_first_before_refusing() {
        let mut sim = sim_host();
        sim.host.config.btrfs.min_free = "100M".parse().unwrap();
        for n in ["a", "b", "c"] {
            create(&sim.host, &CreateOptions::named(name(n))).unwrap();
            let e = trashed(&sim, n);
            sim.storage
                .with_state(|s| s.trash_bytes.insert(e.id, 40 << 20));
            sim.advance(chrono::Duration::minutes(1));
        }
        // 30 MiB free: the two oldest entries give 80 more, enough.
        sim.storage.with_state(|s| s.free_bytes = Some(30 << 20));
        create(&sim.host, &CreateOptions::named(name("d"))).unwrap();
        let left: Vec<_> = list(&sim.host)
            .unwrap()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(left, [name("c")]);
        // Nothing left to purge and still short: refused, with the reason.
        sim.storage.with_state(|s| s.free_bytes = Some(10 << 20));
        sim.storage.with_state(|s| s.trash_bytes.clear());
        let e = create(&sim.host, &CreateOptions::named(name("e"))).unwrap_err();
        assert_eq!(crate::report::exit_code(&e), crate::error::EXIT_REFUSED);
        assert!(e.to_string().contains("full"), "{e}");
        assert!(list(&sim.host).unwrap().is_empty());
    }

    #[test]
    fn reset_keep_makes_a_checkpoint_to_go_back_to_and_gc_ends_it() {
        let sim = sim_host();
        create(&sim.host, &CreateOptions::named(name("a"))).unwrap();
        sim.storage
            .with_state(|s| s.branches.get_mut(&name("a")).unwrap().1 = true);
        let mut opts = crate::ops::reset::ResetOptions::named(name("a"));
        opts.keep = true;
        let done = crate::ops::reset::reset_keeping(&sim.host, &opts).unwrap();
        let tag = done.kept.unwrap();
        assert_eq!(tag.as_str(), "before-reset-1");
        assert!(sim.storage.with_state(|s| !s.branches[&name("a")].1));
        let again = crate::ops::reset::reset_keeping(&sim.host, &opts).unwrap();
        assert_eq!(again.kept.unwrap().as_str(), "before-reset-2");
        let mut back = crate::ops::reset::ResetOptions::named(name("a"));
        back.to = Some(tag);
        crate::ops::reset::reset(&sim.host, &back).unwrap();
        assert!(
            sim.storage.with_state(|s| s.branches[&name("a")].1),
            "the written state is back"
        );
        sim.advance(chrono::Duration::hours(25));
        crate::ops::gc::gc(&sim.host, &Default::default()).unwrap();
        assert!(sim.storage.checkpoints(&name("a")).unwrap().is_empty());
    }

    #[test]
    fn a_delete_that_crashed_before_moving_anything_leaves_the_branch() {
        let sim = sim_host();
        let made = create(&sim.host, &CreateOptions::named(name("a"))).unwrap();
        // What `trash:after-entry` leaves: the entry, nothing moved.
        let entry = Entry {
            id: TrashId::new(sim.host.clock.now(), &name("a")),
            name: name("a"),
            owner: made.record.owner.clone(),
            owner_uid: None,
            deleted_at: sim.host.clock.now(),
            deleted_by: "root".into(),
            reason: Reason::Delete,
            keep_until: sim.host.clock.now(),
            port: made.record.port,
            created: made.record.created,
            complete: false,
        };
        trash::save(&sim.host.layout, &entry).unwrap();
        assert!(list(&sim.host).unwrap().is_empty());
        assert!(records::load(&sim.host.layout, &name("a"))
            .unwrap()
            .is_some());
        assert!(sim
            .storage
            .with_state(|s| s.branches.contains_key(&name("a"))));
    }
}
