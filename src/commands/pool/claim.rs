use crate::cli::{EnvFormat, PoolClaimArgs};
use crate::commands::env::render;
use crate::host::Host;
use crate::ops::branch::connection::Connection;
use crate::ops::pool::claim::{claim, ClaimOptions, Claimed};
use anyhow::Result;

/// The slot's connection variables, as `env` prints them, and which slot it is.
pub fn variables(host: &Host, claimed: &Claimed) -> (Vec<(&'static str, String)>, String) {
    let conn = Connection::of(host, &claimed.record);
    let mut vars = conn.variables(claimed.record.name.as_str());
    vars.push(("DB_BRANCH_POOL", claimed.pool.to_string()));
    vars.push(("DB_BRANCH_POOL_SLOT", claimed.slot.to_string()));
    (vars, conn.url)
}

/// The process that ran us — a test worker, or the shell of a script (`$(…)` runs a lone
/// command in the shell's own child) — looking through `sudo` (one process, or two with
/// `use_pty`), which exits as soon as we do.
/// Through db-branchd, the same seen from the caller's own `db-branch` (the bus peer): this
/// process's parent is the service manager, whose lease would never end.
fn default_holder(host: &Host) -> u32 {
    let parent = host
        .caller
        .pid
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

/// `--pid`: a process of the caller's own (an admin's may be anyone's) — a lease held by a
/// process that never ends (PID 1) would keep the slot from everyone.
fn holder_of_caller(host: &Host, pid: u32) -> Result<u32> {
    if host.caller.role(&host.config.access) == crate::access::Role::Admin {
        return Ok(pid);
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|u| u.parse::<u32>().ok());
    if uid == Some(host.caller.uid) {
        Ok(pid)
    } else {
        Err(crate::error::Error::new(
            crate::error::Kind::Permission,
            format!("--pid {pid} is not a process of {}", host.caller.name),
        )
        .hint("name one of your own processes, or leave --pid out (the caller holds it)")
        .into())
    }
}

pub fn run(host: &Host, args: &PoolClaimArgs) -> Result<()> {
    let claimed = claim(
        host,
        &ClaimOptions {
            pool: args.name.clone(),
            wait: args.wait.map(|d| d.0),
            holder: match args.pid {
                Some(pid) => holder_of_caller(host, pid)?,
                None => default_holder(host),
            },
        },
    )?;
    let (vars, url) = variables(host, &claimed);
    let format = if host.printer.json {
        EnvFormat::Json
    } else {
        args.format
    };
    host.printer.data(&render(&vars, &url, format))
}
