//! One file per command (a folder for `baseline`): each turns its arguments into an
//! operation's options, calls the operation (`ops/`), and prints the result through the
//! printer as a view (`view/`). No command calls another command.

pub mod bake;
pub mod baseline;
pub mod completions;
pub mod create;
pub mod delete;
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

/// Runs a command that needs the host (all but `completions` and `doctor`).
pub fn dispatch(host: &Host, command: &Command) -> Result<()> {
    match command {
        Command::Init(a) => init::run(host, a),
        Command::Baseline(BaselineCommand::Create(a)) => baseline::create::run(host, a),
        Command::Baseline(BaselineCommand::List) => baseline::list::run(host),
        Command::Baseline(BaselineCommand::Prune) => baseline::prune::run(host),
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
        Command::Doctor(_) | Command::Completions { .. } => {
            unreachable!("run without a host by lib::run")
        }
    }
}
