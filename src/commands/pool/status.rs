use crate::cli::PoolNameArg;
use crate::host::Host;
use crate::ops::pool::manage::status;
use anyhow::Result;

pub fn run(host: &Host, args: &PoolNameArg) -> Result<()> {
    host.printer.emit(&status(host, &args.name)?)
}
