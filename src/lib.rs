//! db-branch: a real MySQL/MariaDB server per developer, branch and pull request, cloned
//! from a copy-on-write baseline. `run` is the whole program; `main.rs` only maps its result
//! to an exit code.

pub mod branch;
pub mod check;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod config;
pub mod error;
pub mod exec;
pub mod failpoint;
pub mod host;
pub mod layout;
pub mod memory;
pub mod output;
pub mod ports;
pub mod server;
pub mod service;
pub mod state;
pub mod storage;
pub mod undo;
pub mod values;

use anyhow::Result;
use clap::CommandFactory;
use cli::{BaselineCommand, Cli, Command};
use output::Output;

pub fn run(cli: Cli) -> Result<()> {
    let out = Output {
        json: cli.json,
        quiet: cli.quiet,
    };
    if let Command::Completions { shell } = &cli.command {
        return print_completions(*shell);
    }
    let env = std::env::var(config::CONFIG_ENV).ok();
    let (path, must_exist) = config::locate(cli.config.as_deref(), env.as_deref());
    let config = config::load(&path, must_exist)?;
    // The timers' services must read the same config file as this invocation.
    let explicit = (path != std::path::Path::new(config::DEFAULT_CONFIG_PATH))
        .then(|| std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone()));
    if let Command::Doctor(args) = &cli.command {
        let note = if path.exists() {
            format!("{} (valid)", path.display())
        } else {
            format!("{} missing: every key takes its default", path.display())
        };
        let host = host::Host::real(config, explicit.as_deref())?;
        return commands::doctor::run(&host, args, &note, &out);
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(error::usage(
            "db-branch must run as root: it mounts filesystems, owns branch data and manages \
             services. Run it with sudo.",
        ));
    }
    let mut host = host::Host::real(config, explicit.as_deref())?;
    host.assume_yes = cli.yes;
    let h = &host;
    match &cli.command {
        Command::Init(a) => commands::init::run(h, a, &out),
        Command::Baseline(BaselineCommand::Create(a)) => commands::baseline::create(h, a, &out),
        Command::Baseline(BaselineCommand::List) => commands::baseline::list(h, &out),
        Command::Baseline(BaselineCommand::Prune) => commands::baseline::prune(h, &out),
        Command::Create(a) => commands::create::run(h, a, &out),
        Command::Reset(a) => commands::reset::run(h, a, &out),
        Command::Delete(a) => commands::delete::run(h, a, &out),
        Command::Start(a) => commands::power::start(h, a, &out),
        Command::Stop(a) => commands::power::stop(h, a, &out),
        Command::List(a) => commands::list::list(h, a, &out),
        Command::StopIdle(a) => commands::stop_idle::run(h, a, &out),
        Command::Gc(a) => commands::gc::run(h, a, &out),
        Command::Extend(a) => commands::expiry::extend(h, a, &out),
        Command::Protect(a) => commands::expiry::protect(h, a, &out),
        Command::Unprotect(a) => commands::expiry::unprotect(h, a, &out),
        Command::MigrateCheck(a) => commands::migrate_check::run(h, a, &out),
        Command::Bake(a) => commands::bake::run(h, a, &out),
        Command::Status(a) => commands::list::status(h, a, &out),
        Command::Env(a) => commands::env::run(h, a, &out),
        Command::Completions { .. } | Command::Doctor(_) => unreachable!("handled above"),
    }
}

/// Completion scripts are built in memory first: `clap_complete::generate` panics when
/// stdout is a closed pipe (`| head`).
pub fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "db-branch", &mut buf);
    buf
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

fn print_completions(shell: clap_complete::Shell) -> Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&completions(shell)) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}
