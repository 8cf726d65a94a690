use crate::cli::NameArg;
use crate::host::Host;
use crate::ops::power::stop;
use anyhow::Result;

pub fn run(host: &Host, args: &NameArg) -> Result<()> {
    let record = stop(host, &args.name)?;
    host.printer
        .note(format!("stopped branch {}; its data is kept", args.name));
    // With -q a stop prints nothing but errors; --json still gets the branch.
    if host.printer.quiet && !host.printer.json {
        return Ok(());
    }
    host.printer
        .emit(&crate::ops::inspect::branch(host, &record))
}
