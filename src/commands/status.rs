use crate::cli::NameArg;
use crate::host::Host;
use crate::ops::branch::record::require;
use crate::view::branch::Status;
use anyhow::Result;

pub fn run(host: &Host, args: &NameArg) -> Result<()> {
    host.storage.open()?;
    let record = require(host, &args.name)?;
    host.printer.emit(&Status::of(host, &record))
}
