//! `pool run POOL -- CMD…`: claim a slot for this process, run the command with the slot's
//! connection details in its environment, release the slot whatever happened.

use super::claim::{claim, release, variables, ClaimOptions};
use super::PoolName;
use crate::error::{Error, Kind};
use crate::host::Host;
use anyhow::{Context, Result};
use std::process::Command;
use std::time::Duration;

/// Runs `command` on a claimed slot; the slot goes back even when it fails.
pub fn run_on_slot(
    host: &Host,
    pool: &PoolName,
    wait: Option<Duration>,
    command: &[String],
) -> Result<()> {
    let claimed = claim(
        host,
        &ClaimOptions::for_process(host, pool, wait, std::process::id()),
    )?;
    let (program, args) = command.split_first().expect("clap requires a command");
    let mut cmd = Command::new(program);
    cmd.args(args).envs(variables(host, &claimed).0);
    // For a user of db-branchd, the command runs as them, never as root.
    crate::access::run_as_caller(&mut cmd, &host.caller);
    let status = cmd
        .status()
        .with_context(|| format!("running `{}`", command.join(" ")));
    release(host, pool, claimed.slot)?;
    let status = status?;
    match status.code() {
        Some(0) => Ok(()),
        code => Err(Error::new(
            Kind::Exited(code.map_or(1, |c| c.clamp(1, 255) as u8)),
            format!(
                "`{}` {} (on slot {} of pool {pool}, released)",
                command.join(" "),
                code.map_or("was killed by a signal".into(), |c| format!(
                    "exited with {c}"
                )),
                claimed.slot
            ),
        )
        .into()),
    }
}
