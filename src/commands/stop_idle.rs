use crate::cli::StopIdleArgs;
use crate::host::Host;
use crate::ops::stop_idle::{stop_idle, StopIdleOptions};
use crate::view::lifecycle::IdleReport;
use anyhow::Result;

pub fn run(host: &Host, args: &StopIdleArgs) -> Result<()> {
    let rows = stop_idle(
        host,
        &StopIdleOptions {
            idle_for: args.idle_for,
            dry_run: args.dry_run,
        },
    )?;
    host.printer.emit(&IdleReport(rows))?;
    if !args.dry_run {
        crate::ops::metrics::serve::refresh_textfile(host);
    }
    Ok(())
}
