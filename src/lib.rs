//! db-branch: a real MySQL/MariaDB server per developer, branch and pull request, cloned
//! from a copy-on-write baseline. `run` is the whole program; `main.rs` only maps its result
//! to an exit code.
//!
//! Layers, each using only the ones below it: `cli` (clap types) → `commands` (one per verb:
//! arguments → options, result → view) → `ops` (the operations) → the host's traits
//! (`storage`, `supervisor`, `server`, `bake`, `memory`, `ports`, `clock`) and `store`
//! (db-branch's own files). `view` and `printer` are the only way out to the terminal.

pub mod access;
pub mod argv;
pub mod bake;
pub mod branch;
pub mod check;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod config;
pub mod error;
pub mod exec;
pub mod failpoint;
pub mod flavour;
pub mod handoff;
pub mod host;
pub mod layout;
pub mod memory;
pub mod names;
pub mod ops;
pub mod ports;
pub mod printer;
pub mod replication;
pub mod report;
pub mod server;
pub mod service;
pub mod sql;
pub mod storage;
pub mod store;
pub mod supervisor;
#[cfg(feature = "testing")]
pub mod testkit;
pub mod transfer;
pub mod undo;
pub mod values;
pub mod view;

use anyhow::Result;
use clap::CommandFactory;
use cli::Cli;
use printer::Printer;

pub fn run(cli: Cli, printer: Printer) -> Result<()> {
    // Who asks and what the command needs decide everything else, before anything happens.
    let origin = access::Origin::detect()?;
    let need = commands::need(&cli.command);
    let globals = access::Globals {
        config: cli.config.is_some(),
        host: cli.host.is_some(),
    };
    let route = access::decide(&origin, globals, &need)?;
    if route == access::Route::Anywhere {
        let nobody = |_: &branch::BranchName| Ok(None);
        let grant = access::authorize(
            &access::Caller::current(),
            &config::AccessConfig::default(),
            need,
            &nobody,
        )?;
        return commands::dispatch_anywhere(&printer, &grant, &cli.command, &nested_globals(&cli));
    }
    store::locks::set_command(cli.command.name());
    let env = std::env::var(config::CONFIG_ENV).ok();
    let (path, must_exist) = config::locate(cli.config.as_deref(), env.as_deref());
    if let Some(done) = claim_over_socket(&cli, &origin, &route, &path, must_exist, &printer) {
        return done;
    }
    match route {
        access::Route::Ssh => {
            // The whole command runs there, as this user: nothing of it happens here.
            let config = config::load(&path, must_exist)?;
            let target = cli.host.clone().expect("Route::Ssh comes with --host");
            let ssh = transfer::ssh::Ssh::new(target, &config.fleet)?;
            return match transfer::ssh::forward(&ssh, &args_without_host())? {
                0 => Ok(()),
                code => Err(error::Error::new(error::Kind::Exited(code), "").into()),
            };
        }
        access::Route::Service => {
            // Users without root act through the db-branchd service, with the same command;
            // the config goes separately (the service serves only its own).
            let args = service::client::forwarded_args(std::env::args().skip(1));
            return match service::client::forward(args, &path)? {
                0 => Ok(()),
                code => Err(error::Error::new(error::Kind::Exited(code), "").into()),
            };
        }
        access::Route::Here | access::Route::Anywhere => {}
    }
    let config = config::load(&path, must_exist)?;
    let note = if path.exists() {
        format!("{} (valid)", path.display())
    } else {
        format!("{} missing: every key takes its default", path.display())
    };
    // The timers' services must read the same config file as this invocation.
    let explicit = (path != std::path::Path::new(config::DEFAULT_CONFIG_PATH))
        .then(|| std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone()));
    let caller = match origin {
        access::Origin::Service(c) => c,
        _ => access::Caller::current(),
    };
    let mut host = host::Host::real(config, explicit.as_deref(), printer, caller)?;
    host.assume_yes = cli.yes;
    let grant = commands::authorize(&host, &cli.command)?;
    commands::dispatch(&host, &grant, &cli.command, &note)
}

/// `pool claim` through the pool's socket, when its recycler listens: a claim in a
/// millisecond, with no host to set up and no service to go through (the recycler judges
/// the caller by the socket's credentials). None: the usual way.
fn claim_over_socket(
    cli: &Cli,
    origin: &access::Origin,
    route: &access::Route,
    config: &std::path::Path,
    must_exist: bool,
    printer: &Printer,
) -> Option<Result<()>> {
    let cli::Command::Pool(cli::PoolCommand::Claim(args)) = &cli.command else {
        return None;
    };
    // db-branchd acting for a caller claims in the caller's name, the usual way.
    let direct = !matches!(origin, access::Origin::Service(_));
    if !direct || !matches!(route, access::Route::Here | access::Route::Service) {
        return None;
    }
    // A config this user cannot read, or a broken one, is reported by the usual way.
    let config = config::load(config, must_exist).ok()?;
    match commands::pool::claim::over_socket(&config.root, printer, args) {
        Ok(true) => Some(Ok(())),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    }
}

/// The global flags a nested invocation repeats (`exec` and `shell` run `env` so).
fn nested_globals(cli: &Cli) -> Vec<std::ffi::OsString> {
    let mut out = Vec::new();
    if let Some(c) = &cli.config {
        out.push("--config".into());
        out.push(c.clone().into_os_string());
    }
    if let Some(h) = &cli.host {
        out.push("--host".into());
        out.push(h.to_string().into());
    }
    out
}

/// This invocation's arguments without `--host` (it is what the far side runs).
fn args_without_host() -> Vec<String> {
    strip_host(std::env::args().skip(1))
}

fn strip_host(args: impl Iterator<Item = String>) -> Vec<String> {
    argv::without_flag(args, "host")
}

/// Completion scripts, for the packaging tests and `completions`.
pub fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    commands::completions::script(shell)
}

/// Man pages generated from the clap definition: `db-branch.1` and one per subcommand
/// (`db-branch-create.1`, `db-branch-baseline-create.1`, …), as (file name, roff) pairs.
pub fn man_pages() -> Vec<(String, Vec<u8>)> {
    fn walk(cmd: &clap::Command, name: String, out: &mut Vec<(String, Vec<u8>)>) {
        let cmd = cmd
            .clone()
            .name(name.clone())
            .bin_name(name.replace('-', " "));
        let mut buf = Vec::new();
        clap_mangen::Man::new(cmd.clone())
            .render(&mut buf)
            .expect("rendering to memory cannot fail");
        out.push((format!("{name}.1"), buf));
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            walk(sub, format!("{name}-{}", sub.get_name()), out);
        }
    }
    let mut out = Vec::new();
    walk(&Cli::command(), "db-branch".into(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn host_is_taken_out_of_what_runs_there() {
        let args = |v: &[&str]| {
            v.iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .into_iter()
        };
        assert_eq!(
            strip_host(args(&[
                "--host",
                "ssh://h",
                "create",
                "a",
                "--host=ssh://x",
                "--json"
            ])),
            ["create", "a", "--json"]
        );
        assert_eq!(
            strip_host(args(&["pool", "run", "p", "--", "cmd", "--host", "y"])),
            ["pool", "run", "p", "--", "cmd", "--host", "y"]
        );
    }

    #[test]
    fn command_names_are_what_people_type() {
        for (args, want) in [
            (vec!["db-branch", "create", "a"], "create"),
            (vec!["db-branch", "stop-idle"], "stop-idle"),
            (
                vec!["db-branch", "migrate-check", "--", "true"],
                "migrate-check",
            ),
            (
                vec!["db-branch", "baseline", "create", "--empty"],
                "baseline create",
            ),
            (vec!["db-branch", "pool", "claim", "p"], "pool claim"),
            (vec!["db-branch", "checkpoints", "a"], "checkpoints"),
            (vec!["db-branch", "unprotect", "a"], "unprotect"),
        ] {
            let cli = Cli::try_parse_from(args).unwrap();
            assert_eq!(cli.command.name(), want);
        }
    }
}
