use crate::cli::MetricsArgs;
use crate::host::Host;
use crate::ops::metrics::{exposition, gather};
use anyhow::Result;

/// The Prometheus text format on stdout (`--json`: the same figures as a document). For
/// node_exporter's textfile collector: `db-branch metrics > DIR/db-branch.prom.$$ && mv …`.
pub fn run(host: &Host, _args: &MetricsArgs) -> Result<()> {
    let m = gather(host)?;
    if host.printer.json {
        return host.printer.emit_json(&m);
    }
    host.printer.data(&exposition(&m)?)
}
