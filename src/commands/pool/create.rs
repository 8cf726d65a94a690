use crate::cli::PoolCreateArgs;
use crate::host::Host;
use crate::ops::pool::manage::{create_pool, PoolOptions};
use anyhow::Result;

pub fn run(host: &Host, args: &PoolCreateArgs) -> Result<()> {
    let report = create_pool(
        host,
        &PoolOptions {
            name: args.name.clone(),
            size: args.size,
            baseline: args.baseline,
            profile: args.profile,
            buffer_pool: args.buffer_pool,
            dense: args.dense,
            per_server: args.per_server,
        },
    )?;
    if !report.refused.is_empty() {
        host.printer.warn(format!(
            "pool {}: {} of {} slot(s) made; the memory guard refused the rest",
            report.name,
            report.size - report.refused.len(),
            report.size
        ));
    }
    host.printer.emit(&report)
}
