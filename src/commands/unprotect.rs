use crate::cli::NameArg;
use crate::host::Host;
use crate::ops::branch::expiry::unprotect;
use anyhow::Result;

pub fn run(host: &Host, args: &NameArg) -> Result<()> {
    let record = unprotect(host, &args.name)?;
    host.printer
        .note(format!("branch {} is no longer protected", args.name));
    host.printer
        .emit(&crate::ops::inspect::branch(host, &record))
}
