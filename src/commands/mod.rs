//! One file per command (a folder for `baseline`): each turns its arguments into an
//! operation's options, calls the operation (`ops/`), and prints the result through the
//! printer as a view (`view/`). No command calls another command.

pub mod bake;
pub mod baseline;
pub mod checkpoint;
pub mod completions;
pub mod create;
pub mod delete;
pub mod diff;
pub mod doctor;
pub mod env;
pub mod extend;
pub mod gc;
pub mod init;
pub mod list;
pub mod migrate_check;
pub mod pool;
pub mod protect;
pub mod reset;
pub mod start;
pub mod status;
pub mod stop;
pub mod stop_idle;
pub mod unprotect;

#[cfg(test)]
mod snapshots;

use crate::cli::{BaselineCommand, Command};
use crate::host::Host;
use anyhow::Result;

/// Refuses (exit 77) what the caller may not do: another user's branch, host-wide work
/// for a non-admin, anything for someone outside the users group. Root passes.
pub fn authorize(host: &Host, command: &Command) -> Result<()> {
    let need = crate::access::need(command);
    let owner = match &need {
        crate::access::Need::Owner(name) => {
            crate::store::records::load(&host.layout, name)?.map(|r| match r.owner_uid {
                // The uid decides where it is known (a renamed user keeps their branches).
                Some(uid) if uid == host.caller.uid => host.caller.name.clone(),
                _ => r.owner,
            })
        }
        _ => None,
    };
    host.caller
        .check(&host.config.access, &need, owner.as_deref())?;
    if host.caller.role(&host.config.access) != crate::access::Role::Admin {
        if let Command::Create(a) = command {
            if let Some(o) = a.owner.as_deref().filter(|o| *o != host.caller.name) {
                return Err(crate::error::permission(format!(
                    "only an admin may make a branch for {o}; leave out --owner"
                )));
            }
        }
    }
    Ok(())
}

/// Runs a command that needs the host (all but `completions` and `doctor`).
pub fn dispatch(host: &Host, command: &Command) -> Result<()> {
    match command {
        Command::Init(a) => init::run(host, a),
        Command::Baseline(BaselineCommand::Create(a)) => baseline::create::run(host, a),
        Command::Baseline(BaselineCommand::List) => baseline::list::run(host),
        Command::Baseline(BaselineCommand::Prune) => baseline::prune::run(host),
        Command::Baseline(BaselineCommand::Push(a)) => baseline::transfer::push(host, a),
        Command::Baseline(BaselineCommand::Pull(a)) => baseline::transfer::pull(host, a),
        Command::Baseline(BaselineCommand::Receive(a)) => baseline::transfer::receive(host, a),
        Command::Baseline(BaselineCommand::Send(a)) => baseline::transfer::send(host, a),
        Command::Create(a) => create::run(host, a),
        Command::Reset(a) => reset::run(host, a),
        Command::Delete(a) => delete::run(host, a),
        Command::Start(a) => start::run(host, a),
        Command::Stop(a) => stop::run(host, a),
        Command::List(a) => list::run(host, a),
        Command::Status(a) => status::run(host, a),
        Command::Env(a) => env::run(host, a),
        Command::StopIdle(a) => stop_idle::run(host, a),
        Command::Gc(a) => gc::run(host, a),
        Command::Extend(a) => extend::run(host, a),
        Command::Protect(a) => protect::run(host, a),
        Command::Unprotect(a) => unprotect::run(host, a),
        Command::MigrateCheck(a) => migrate_check::run(host, a),
        Command::Bake(a) => bake::run(host, a),
        Command::Pool(p) => pool::dispatch(host, p),
        Command::Checkpoint(a) => checkpoint::run(host, a),
        Command::Checkpoints(a) => checkpoint::list_run(host, a),
        Command::Diff(a) => diff::run(host, a),
        Command::Doctor(_) | Command::Completions { .. } | Command::Daemon => {
            unreachable!("run without a host by lib::run")
        }
    }
}
