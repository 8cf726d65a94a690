use crate::cli::PoolRunArgs;
use crate::host::Host;
use crate::ops::pool::run::run_on_slot;
use anyhow::Result;

pub fn run(host: &Host, args: &PoolRunArgs) -> Result<()> {
    run_on_slot(host, &args.name, args.wait.map(|d| d.0), &args.command)
}
