use crate::cli::NameArg;
use crate::host::Host;
use crate::ops::power::{start, Started};
use anyhow::Result;

pub fn run(host: &Host, args: &NameArg) -> Result<()> {
    let (started, record) = start(host, &args.name)?;
    host.printer.note(match started {
        Started::Started => format!("started branch {}", args.name),
        Started::AlreadyRunning => format!("branch {} is already running", args.name),
    });
    host.printer
        .emit(&crate::ops::inspect::branch(host, &record))
}
