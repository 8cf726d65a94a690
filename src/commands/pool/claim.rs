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

pub fn run(host: &Host, args: &PoolClaimArgs) -> Result<()> {
    let claimed = claim(
        host,
        &ClaimOptions {
            pool: args.name.clone(),
            wait: args.wait.map(|d| d.0),
            // By default the process that ran us: a test worker, or the shell of a script
            // (`$(…)` runs a lone command in the shell's own child).
            holder: args
                .pid
                .unwrap_or_else(|| nix::unistd::getppid().as_raw() as u32),
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
