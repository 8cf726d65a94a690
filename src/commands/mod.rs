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
pub mod exec;
pub mod extend;
pub mod gc;
pub mod init;
pub mod list;
pub mod metrics;
pub mod migrate_check;
pub mod pool;
pub mod protect;
pub mod reset;
pub mod shell;
pub mod start;
pub mod status;
pub mod stop;
pub mod stop_idle;
pub mod trash;
pub mod unprotect;

#[cfg(test)]
mod snapshots;

use crate::access::{Grant, Need};
use crate::cli::{BaselineCommand, Command, PoolCommand};
use crate::host::Host;
use anyhow::Result;

/// What `command` needs of its caller (the policy of each need is `access`'s).
pub fn need(command: &Command) -> Need {
    use Command as C;
    match command {
        C::Reset(a) => Need::owner(&a.name),
        C::Delete(a) => Need::owner(&a.name),
        C::Start(a) | C::Stop(a) | C::Unprotect(a) => Need::owner(&a.name),
        C::Env(a) => Need::owner(&a.name),
        C::Extend(a) => Need::owner(&a.name),
        C::Protect(a) => Need::owner(&a.name),
        // A copy of another branch or checkpoint is a read of it (and `--clean` stops it).
        C::Create(a) => Need::Owner(
            std::iter::once(a.name.clone())
                .chain(a.from.as_ref().map(|f| f.name.clone()))
                .collect(),
        ),
        C::Checkpoint(a) => match &a.command {
            Some(crate::cli::CheckpointCommand::Delete { name, .. }) => Need::owner(name),
            None => match &a.name {
                Some(n) => Need::owner(n),
                None => Need::User,
            },
        },
        C::Checkpoints(a) => Need::owner(&a.name),
        // diff checks each side's owner itself (a side may be a generation).
        C::Diff(_) => Need::User,
        C::List(_) | C::Status(_) => Need::User,
        // Whose each entry is, is checked against the record it keeps (`authorize` first,
        // then the operation again under the entry's lock).
        C::Trash(_) | C::Restore(_) => Need::User,
        // What `list` shows, counted. Serving it or writing a file with it is the host's
        // configuration (an address to bind, a path to replace, as root).
        C::Metrics(a) if a.listen.is_some() || a.textfile.is_some() => Need::Root,
        C::Metrics(_) => Need::User,
        C::Completions { .. } => Need::Anyone,
        C::Exec(_) | C::Shell(_) => Need::OwnProcess,
        C::Baseline(BaselineCommand::List | BaselineCommand::Follower) => Need::User,
        C::Pool(PoolCommand::List | PoolCommand::Status(_)) => Need::User,
        // Who may release a slot (its claimant, or an admin) is the pool's to check.
        C::Pool(PoolCommand::Claim(_) | PoolCommand::Release(_) | PoolCommand::Run(_)) => {
            Need::User
        }
        C::MigrateCheck(a) => match &a.branch {
            Some(b) => Need::owner(b),
            None => Need::Admin,
        },
        C::Daemon => Need::Root,
        C::Init(_)
        | C::Baseline(_)
        | C::Doctor(_)
        | C::StopIdle(_)
        | C::Gc(_)
        | C::Bake(_)
        | C::Pool(_) => Need::Admin,
    }
}

/// The policy's grant for `command` from `host.caller` (exit 77 when refused): the need,
/// and for one an admin alone may ask (`create --owner` someone else).
pub fn authorize(host: &Host, command: &Command) -> Result<Grant> {
    let owner_of =
        |name: &crate::branch::BranchName| crate::store::records::load(&host.layout, name);
    let grant =
        crate::access::authorize(&host.caller, &host.config.access, need(command), &owner_of)?;
    if host.caller.role(&host.config.access) != crate::access::Role::Admin {
        if let Command::Create(a) = command {
            if let Some(o) = a.owner.as_deref().filter(|o| *o != host.caller.name) {
                return Err(crate::error::permission(format!(
                    "only an admin may make a branch for {o}; leave out --owner"
                )));
            }
        }
    }
    if let Command::Restore(crate::cli::RestoreArgs { what, .. })
    | Command::Trash(crate::cli::TrashArgs {
        command:
            Some(crate::cli::TrashCommand::Purge(crate::cli::TrashPurgeArgs {
                what: Some(what), ..
            })),
    }) = command
    {
        crate::ops::trash::check_caller_may_touch(host, what)?;
    }
    Ok(grant)
}

/// Runs a command that needs nothing of this host (`access::Route::Anywhere`).
pub fn dispatch_anywhere(
    printer: &crate::printer::Printer,
    grant: &Grant,
    command: &Command,
    globals: &[std::ffi::OsString],
) -> Result<()> {
    debug_assert_eq!(grant.need(), &need(command));
    match command {
        Command::Completions { shell } => completions::run(printer, *shell),
        Command::Exec(a) => exec::run(globals, a),
        Command::Shell(a) => shell::run(globals, a),
        _ => unreachable!("only commands that need no host run anywhere"),
    }
}

/// Runs a command the policy granted.
pub fn dispatch(host: &Host, grant: &Grant, command: &Command, config_note: &str) -> Result<()> {
    debug_assert_eq!(grant.need(), &need(command));
    match command {
        Command::Init(a) => init::run(host, a),
        Command::Baseline(BaselineCommand::Create(a)) => baseline::create::run(host, a),
        Command::Baseline(BaselineCommand::List) => baseline::list::run(host),
        Command::Baseline(BaselineCommand::Prune) => baseline::prune::run(host),
        Command::Baseline(BaselineCommand::Push(a)) => baseline::transfer::push(host, a),
        Command::Baseline(BaselineCommand::Pull(a)) => baseline::transfer::pull(host, a),
        Command::Baseline(BaselineCommand::Receive(a)) => baseline::transfer::receive(host, a),
        Command::Baseline(BaselineCommand::Send(a)) => baseline::transfer::send(host, a),
        Command::Baseline(BaselineCommand::Follow(a)) => baseline::follow::follow(host, a),
        Command::Baseline(BaselineCommand::Cut(a)) => baseline::follow::cut(host, a),
        Command::Baseline(BaselineCommand::Follower) => baseline::follow::status(host),
        Command::Baseline(BaselineCommand::Unfollow) => baseline::follow::unfollow(host),
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
        Command::Trash(a) => trash::run(host, a),
        Command::Restore(a) => trash::restore_run(host, a),
        Command::Metrics(a) => metrics::run(host, a),
        Command::Doctor(a) => doctor::run(host, a, config_note),
        Command::Daemon => crate::service::daemon::serve(
            host.config_file
                .as_deref()
                .unwrap_or(std::path::Path::new(crate::config::DEFAULT_CONFIG_PATH)),
        ),
        Command::Completions { shell } => completions::run(&host.printer, *shell),
        // They become the caller's own program; `access::decide` never routes them here.
        Command::Exec(_) | Command::Shell(_) => Err(crate::error::permission(
            "exec and shell run only in the caller's own process",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn need_of(args: &[&str]) -> Need {
        let mut argv = vec!["db-branch"];
        argv.extend(args);
        need(&crate::cli::Cli::try_parse_from(argv).unwrap().command)
    }

    #[test]
    fn branch_commands_need_the_owner_and_host_commands_an_admin() {
        let a: crate::branch::BranchName = "a".parse().unwrap();
        for args in [
            &["reset", "a"][..],
            &["delete", "a"],
            &["env", "a"],
            &["stop", "a"],
            &["start", "a"],
            &["extend", "a", "--ttl", "1h"],
            &["protect", "a"],
            &["create", "a"],
            &["checkpoints", "a"],
            &["checkpoint", "a"],
        ] {
            assert_eq!(need_of(args), Need::owner(&a), "{args:?}");
        }
        assert_eq!(
            need_of(&["create", "a", "--from", "b@c1"]),
            Need::Owner(vec![a.clone(), "b".parse().unwrap()])
        );
        for args in [&["list"][..], &["status", "a"], &["baseline", "list"]] {
            assert_eq!(need_of(args), Need::User, "{args:?}");
        }
        for args in [
            &["gc"][..],
            &["bake", "--from", "file:/x.sql"],
            &["baseline", "create", "--empty"],
            &["init"],
            &["doctor"],
            &["doctor", "--repair"],
        ] {
            assert_eq!(need_of(args), Need::Admin, "{args:?}");
        }
        assert_eq!(need_of(&["daemon"]), Need::Root);
        assert_eq!(need_of(&["metrics"]), Need::User);
        for args in [
            &["metrics", "--listen"][..],
            &["metrics", "--listen", "127.0.0.1:9469"],
            &["metrics", "--textfile", "/tmp/x.prom"],
        ] {
            assert_eq!(need_of(args), Need::Root, "{args:?}");
        }
        assert_eq!(need_of(&["completions", "bash"]), Need::Anyone);
    }
}
