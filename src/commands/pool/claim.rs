use crate::cli::{EnvFormat, PoolClaimArgs};
use crate::commands::env::render;
use crate::error::{Error, Kind};
use crate::host::Host;
use crate::ops::pool::claim::{check_holder, claim, variables, ClaimOptions};
use crate::ops::pool::protocol::{Client, Request};
use crate::ops::pool::{pool_dir_under, socket_file};
use crate::printer::Printer;
use anyhow::Result;
use std::path::Path;

/// The process that ran us — a test worker, or the shell of a script (`$(…)` runs a lone
/// command in the shell's own child) — looking through `sudo` (one process, or two with
/// `use_pty`), which exits as soon as we do.
/// Through db-branchd, the same seen from the caller's own `db-branch` (the bus peer): this
/// process's parent is the service manager, whose lease would never end.
fn default_holder(caller_pid: Option<u32>) -> u32 {
    let parent = caller_pid
        .and_then(parent_of)
        .unwrap_or_else(|| nix::unistd::getppid().as_raw() as u32);
    let mut pid = parent;
    for _ in 0..4 {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if !matches!(comm.trim(), "sudo" | "doas") {
            break;
        }
        match parent_of(pid) {
            Some(p) if p > 1 => pid = p,
            _ => break,
        }
    }
    pid
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

pub fn run(host: &Host, args: &PoolClaimArgs) -> Result<()> {
    let holder = match args.pid {
        Some(pid) => check_holder(&host.caller, &host.config.access, pid)?,
        None => default_holder(host.caller.pid),
    };
    let claimed = claim(
        host,
        &ClaimOptions::for_process(host, &args.name, args.wait.map(|d| d.0), holder),
    )?;
    let (vars, url) = variables(host, &claimed);
    host.printer
        .data(&render(&vars, &url, format_of(&host.printer, args)))
}

fn format_of(printer: &Printer, args: &PoolClaimArgs) -> EnvFormat {
    if printer.json {
        EnvFormat::Json
    } else {
        args.format
    }
}

/// `pool claim` through the pool's socket when its recycler listens, before anything else
/// (no host to set up, no service to go through: a user's claim is theirs, judged by the
/// recycler from the socket's credentials). Ok(false): nothing listens, or this is
/// db-branchd acting for a caller — the usual way follows.
pub fn over_socket(root: &Path, printer: &Printer, args: &PoolClaimArgs) -> Result<bool> {
    let socket = socket_file(&pool_dir_under(root, &args.name));
    let Some(mut client) = Client::connect(&socket)? else {
        return Ok(false);
    };
    let wait = args.wait.map(|d| d.0);
    client.set_timeout(wait)?;
    // The claim outlives this process: it is held by the one that ran us, or --pid's (the
    // recycler checks that it is the caller's own).
    let holder = args.pid.unwrap_or_else(|| default_holder(None));
    let reply = client.request(&Request::Claim {
        wait_ms: wait.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
        holder_pid: Some(holder),
    })?;
    if !reply.ok {
        let mut err = Error::new(
            Kind::Exited(reply.exit.unwrap_or(crate::error::EXIT_FAILURE)),
            reply
                .error
                .clone()
                .unwrap_or_else(|| "the claim failed".into()),
        );
        for h in reply.hints {
            err = err.hint(h);
        }
        return Err(err.into());
    }
    tracing::debug!(socket = %socket.display(), slot = ?reply.slot, "claimed over the pool's socket");
    printer.data(&render(&reply.env.0, reply.url(), format_of(printer, args)))?;
    Ok(true)
}
