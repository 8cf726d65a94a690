//! Dense pools (`pool create --dense`): a slot is a copy of the generation's application
//! database inside a server shared by up to `per_server` slots, with an account of its own
//! that reaches only that copy. Server K of pool P is the branch `P-sK`; it keeps the
//! generation's database untouched as the template (no slot account reaches it), and its
//! checkpoint `dense` holds every slot's copy pristine, so a server that died comes back
//! whole with one `reset --to dense`. Recycling a slot remakes its copy alone
//! (server::dense): the other slots of the server keep serving.

pub use super::dense_spec::*;

use super::make::make_branch;
use super::{pool_dir, PoolSpec};
use crate::branch::BranchName;
use crate::host::Host;
use crate::ops::branch::unit::launch;
use crate::ops::reset::{reset, ResetOptions};
use crate::server::dense::{DenseSlot, DenseTemplate, Swap};
use crate::store::{locks, records};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

fn secrets_dir(dir: &Path) -> PathBuf {
    dir.join("dense")
}

/// Slot `slot`'s account: made the first time, the same password from then on (a slot's
/// connection string never changes).
pub fn account(dir: &Path, d: &DenseSpec, slot: usize) -> Result<DenseSlot> {
    let file = secrets_dir(dir).join(format!("{slot}.password"));
    let password = match crate::store::secrets::read_password_file(&file)? {
        Some(p) => p,
        None => {
            let p = crate::store::secrets::generate_password()?;
            std::fs::create_dir_all(secrets_dir(dir))
                .with_context(|| format!("creating {}", secrets_dir(dir).display()))?;
            crate::store::files::write_atomic(&file, p.as_bytes(), 0o600)?;
            p
        }
    };
    Ok(DenseSlot {
        database: d.slot_database(slot),
        user: slot_user(slot),
        password,
    })
}

/// Templates by server socket: a server's template database never changes (no slot
/// account reaches it), so the recycler reads it once per server, not once per reset.
static TEMPLATES: std::sync::Mutex<std::collections::BTreeMap<PathBuf, DenseTemplate>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

fn template(host: &Host, d: &DenseSpec, name: &BranchName) -> Result<DenseTemplate> {
    let socket = host.layout.socket(name);
    if let Some(t) = TEMPLATES.lock().unwrap().get(&socket) {
        return Ok(t.clone());
    }
    let t = host.server.dense_template(&socket, &d.database)?;
    TEMPLATES.lock().unwrap().insert(socket, t.clone());
    Ok(t)
}

/// A server made again or rolled back reads its template afresh.
fn forget_template(host: &Host, name: &BranchName) {
    TEMPLATES.lock().unwrap().remove(&host.layout.socket(name));
}

/// Slot `slot`'s pristine spare, swapped in at its next reset (no slot account reaches it).
fn spare_database(slot: usize) -> String {
    format!("dbb_spare_{slot}")
}

/// Where the next spare is built; complete, its tables move to the spare in one RENAME, so
/// a spare is whole or absent, never half-imported.
fn fill_database(slot: usize) -> String {
    format!("dbb_fill_{slot}")
}

/// Where a reset moves the slot's used tables, dropped after the reply.
fn trash_database(slot: usize) -> String {
    format!("dbb_trash_{slot}")
}

/// Dense server `name`: its socket and datadir.
struct Server<'a> {
    host: &'a Host,
    name: BranchName,
    socket: PathBuf,
    datadir: PathBuf,
}

impl<'a> Server<'a> {
    fn of(host: &'a Host, spec: &PoolSpec, k: usize) -> Server<'a> {
        let name = server_branch(&spec.name, k);
        Server {
            host,
            socket: host.layout.socket(&name),
            datadir: host.storage.branch_datadir(&name),
            name,
        }
    }

    fn copy(&self, template: &DenseTemplate, database: &str) -> Result<()> {
        self.host
            .server
            .dense_copy(&self.socket, &self.datadir, template, database)
            .with_context(|| format!("making database {database} in {}", self.name))
    }

    /// A new spare for `slot`: built aside, then moved under the spare's name whole (one
    /// RENAME), so a spare is complete or absent. None are kept for a template with foreign
    /// keys: its slots are always remade in place.
    fn make_spare(&self, template: &DenseTemplate, slot: usize) -> Result<()> {
        if template.foreign_keys {
            return Ok(());
        }
        let (fill, spare, trash) = (
            fill_database(slot),
            spare_database(slot),
            trash_database(slot),
        );
        self.copy(template, &fill)?;
        let server = &self.host.server;
        server.dense_drop(&self.socket, &spare)?;
        let target = DenseSlot {
            database: spare,
            user: String::new(),
            password: String::new(),
        };
        match server.dense_swap(&self.socket, template, &target, &fill, &trash)? {
            Swap::Swapped => {}
            other => anyhow::bail!(
                "moving the new spare of slot {slot} in {} failed: {other:?}",
                self.name
            ),
        }
        server.dense_drop(&self.socket, &fill)?;
        server.dense_drop(&self.socket, &trash)
    }
}

/// Holds server `k`'s lock: one copy, swap or recovery at a time per server.
fn server_lock(host: &Host, spec: &PoolSpec, k: usize) -> Result<locks::LockGuard> {
    let path = secrets_dir(&pool_dir(host, &spec.name)).join(format!("s{k}.lock"));
    locks::lock(
        &path,
        "dense server",
        host.config.lock_timeout.0,
        &|holder| {
            host.printer
                .note(format!("waiting for {holder} (server {k})"))
        },
    )
}

/// Makes dense server `k`: its branch, every slot's copy, account and spare in it, and the
/// `dense` checkpoint holding them pristine. A template the copies cannot be exact for is
/// refused before any slot is made (and the server's branch goes again).
pub fn make_server(host: &Host, spec: &PoolSpec, k: usize) -> Result<()> {
    let d = spec.dense.as_ref().expect("a dense pool");
    let _lock = server_lock(host, spec, k)?;
    let name = server_branch(&spec.name, k);
    let fresh = records::load(&host.layout, &name)?.is_none();
    let slots = u32::try_from(d.slots_of(k, spec.size).count()).unwrap_or(u32::MAX);
    make_branch(host, spec, &name, Some(slots))?;
    forget_template(host, &name);
    let template = match template(host, d, &name) {
        Ok(t) => t,
        Err(e) => {
            if fresh {
                let _lock = host.branch_lock(&name)?;
                if let Err(undo) = crate::ops::branch::discard::discard(host, &name) {
                    return Err(e.context(format!(
                        "and removing server {name} again failed: {}",
                        crate::report::chain_text(&undo)
                    )));
                }
            }
            return Err(e);
        }
    };
    let server = Server::of(host, spec, k);
    let dir = pool_dir(host, &spec.name);
    for slot in d.slots_of(k, spec.size) {
        let account = account(&dir, d, slot)?;
        server.copy(&template, &account.database)?;
        host.server
            .dense_account(&server.socket, &account)
            .with_context(|| format!("making slot {slot}'s account in {name}"))?;
        server.make_spare(&template, slot)?;
    }
    let tag = checkpoint_tag();
    let record = crate::ops::branch::record::require(host, &name)?;
    if record.checkpoints.iter().any(|c| c.tag == tag) {
        crate::ops::checkpoint::delete(host, &name, &tag)?;
    }
    crate::ops::checkpoint::make(host, &name, Some(tag), true)
        .with_context(|| format!("keeping the pristine slots of {name}"))?;
    Ok(())
}

/// What is left to do after a slot's reset, off the claimant's clock: the used tables
/// dropped and a new spare made.
#[must_use = "without it the slot's next reset has no spare and remakes it in place"]
pub struct Refill<'a> {
    host: &'a Host,
    spec: PoolSpec,
    slot: usize,
    /// The slot's used tables went to its trash database.
    trash: bool,
    /// The slot's spare was used up.
    spare: bool,
}

impl Refill<'_> {
    pub fn run(self) -> Result<()> {
        if !self.trash && !self.spare {
            return Ok(());
        }
        let d = self.spec.dense.as_ref().expect("a dense pool");
        let k = d.server_index(self.slot);
        let _lock = server_lock(self.host, &self.spec, k)?;
        let server = Server::of(self.host, &self.spec, k);
        if self.trash {
            self.host
                .server
                .dense_drop(&server.socket, &trash_database(self.slot))?;
        }
        if self.spare {
            let template = template(self.host, d, &server.name)?;
            server.make_spare(&template, self.slot)?;
        }
        Ok(())
    }
}

/// Slot `slot` pristine again, its server's other slots untouched: its account's sessions
/// ended, then its rows put back in place where that is exact (small tables, schema
/// unchanged: `server::dense::reset_rows`), else its spare swapped in (one RENAME), else
/// its copy remade in place. A server that is not up is first brought back to its `dense`
/// checkpoint; one that is gone is made again. The returned `Refill` drops what a swap
/// moved out and makes the next spare.
pub fn reset_slot<'a>(host: &'a Host, spec: &PoolSpec, slot: usize) -> Result<Refill<'a>> {
    let d = spec.dense.as_ref().expect("a dense pool");
    let k = d.server_index(slot);
    let name = server_branch(&spec.name, k);
    let refill = |spare| Refill {
        host,
        spec: spec.clone(),
        slot,
        trash: true,
        spare,
    };
    if records::load(&host.layout, &name)?.is_none() {
        host.printer.note(format!(
            "server {name} of pool {} is gone: making it again",
            spec.name
        ));
        make_server(host, spec, k)?;
        return Ok(refill(false));
    }
    let _lock = server_lock(host, spec, k)?;
    if !host.services.state(&launch(host, &name))?.is_up() {
        host.printer.note(format!(
            "server {name} of pool {} is not running: back to its pristine checkpoint",
            spec.name
        ));
        reset(
            host,
            &ResetOptions {
                to: Some(checkpoint_tag()),
                ..ResetOptions::named(name.clone())
            },
        )?;
        forget_template(host, &name);
    }
    let template = template(host, d, &name)?;
    let server = Server::of(host, spec, k);
    let account = account(&pool_dir(host, &spec.name), d, slot)?;
    host.server
        .dense_end_sessions(&server.socket, &account.user)
        .with_context(|| format!("ending the sessions of slot {slot} in {name}"))?;
    // An error here rolled back: the swap below starts from the slot as the test left it.
    match host
        .server
        .dense_reset_rows(&server.socket, &server.datadir, &template, &account)
    {
        Ok(crate::server::dense::RowReset::Done) => {
            return Ok(Refill {
                host,
                spec: spec.clone(),
                slot,
                trash: false,
                spare: false,
            })
        }
        Ok(crate::server::dense::RowReset::Declined(_)) => {}
        Err(e) => host.printer.warn(format!(
            "slot {slot} of pool {}: putting its rows back failed, swapping in its spare: {}",
            spec.name,
            crate::report::chain_text(&e)
        )),
    }
    let swapped = host.server.dense_swap(
        &server.socket,
        &template,
        &account,
        &spare_database(slot),
        &trash_database(slot),
    )?;
    match swapped {
        Swap::Swapped => Ok(refill(true)),
        Swap::NoSpare | Swap::CannotMove => {
            server.copy(&template, &account.database)?;
            Ok(refill(swapped == Swap::NoSpare))
        }
    }
}
