use crate::cli::InitArgs;
use crate::host::Host;
use crate::ops::init::{init, InitOptions};
use anyhow::Result;

pub fn run(host: &Host, args: &InitArgs) -> Result<()> {
    let done = init(
        host,
        &InitOptions {
            enable_timers: args.enable_timers,
        },
    )?;
    host.printer
        .note("this host is ready; next: `db-branch baseline create --empty`");
    host.printer.emit(&done)
}
