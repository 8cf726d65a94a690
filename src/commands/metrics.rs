use crate::cli::MetricsArgs;
use crate::host::Host;
use crate::ops::metrics::serve::{serve, write_textfile};
use crate::ops::metrics::{exposition, gather};
use anyhow::Result;

/// The Prometheus text format on stdout (`--json`: the same figures as a document), to a
/// textfile for node_exporter, or served over HTTP.
pub fn run(host: &Host, args: &MetricsArgs) -> Result<()> {
    if let Some(addr) = args.listen {
        let addr = addr.unwrap_or(host.config.metrics.listen);
        return serve(host, addr, &|bound| {
            host.printer
                .note(format!("serving the figures at http://{bound}/metrics"));
        });
    }
    if let Some(path) = &args.textfile {
        write_textfile(host, path)?;
        host.printer.note(format!("wrote {}", path.display()));
        return Ok(());
    }
    let m = gather(host)?;
    if host.printer.json {
        return host.printer.emit_json(&m);
    }
    host.printer.data(&exposition(&m)?)
}
