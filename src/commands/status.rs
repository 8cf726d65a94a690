use crate::cli::NameArg;
use crate::host::Host;
use crate::ops::branch::record::require;
use anyhow::Result;

pub fn run(host: &Host, args: &NameArg) -> Result<()> {
    host.storage.open()?;
    let record = require(host, &args.name)?;
    host.printer
        .emit(&crate::ops::inspect::status(host, &record))
}
