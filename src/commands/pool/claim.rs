use crate::cli::{EnvFormat, PoolClaimArgs};
use crate::commands::env::render;
use crate::host::Host;
use crate::ops::connection::Connection;
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
fn default_holder() -> u32 {
    let mut pid = nix::unistd::getppid().as_raw() as u32;
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
    let claimed = claim(
        host,
        &ClaimOptions {
            pool: args.name.clone(),
            wait: args.wait.map(|d| d.0),
            holder: args.pid.unwrap_or_else(default_holder),
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
