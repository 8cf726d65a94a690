use crate::cli::PoolNameArg;
use crate::host::Host;
use anyhow::Result;

pub fn run(host: &Host, args: &PoolNameArg) -> Result<()> {
    crate::ops::pool::recycler::run(host, &args.name)
}
