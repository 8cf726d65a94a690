use crate::host::Host;
use crate::ops::baseline::prune;
use crate::view::baseline::PruneReport;
use anyhow::Result;

pub fn run(host: &Host) -> Result<()> {
    host.printer.emit(&PruneReport(prune(host)?))
}
