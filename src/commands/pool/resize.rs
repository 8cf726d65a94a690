use crate::cli::PoolResizeArgs;
use crate::host::Host;
use crate::ops::pool::manage::resize;
use anyhow::Result;

pub fn run(host: &Host, args: &PoolResizeArgs) -> Result<()> {
    let report = resize(host, &args.name, args.size)?;
    if !report.refused.is_empty() {
        host.printer.warn(format!(
            "pool {}: the memory guard refused slot(s) {:?}",
            report.name, report.refused
        ));
    }
    host.printer.emit(&report)
}
