use crate::cli::GcArgs;
use crate::host::Host;
use crate::ops::gc::{gc, GcOptions};
use crate::view::lifecycle::GcReport;
use anyhow::{anyhow, Result};

pub fn run(host: &Host, args: &GcArgs) -> Result<()> {
    let rows = gc(
        host,
        &GcOptions {
            dry_run: args.dry_run,
            older_than: args.older_than,
            idle_for: args.idle_for,
            labels: args.labels.clone(),
        },
    )?;
    let failed = rows.iter().filter(|r| r.error.is_some()).count();
    host.printer.emit(&GcReport(rows))?;
    if !args.dry_run {
        crate::ops::metrics::serve::refresh_textfile(host);
    }
    if failed > 0 {
        return Err(anyhow!(
            "{failed} branch(es) could not be deleted; see above"
        ));
    }
    Ok(())
}
