use crate::cli::ResetArgs;
use crate::host::Host;
use crate::ops::reset::{reset, ResetOptions};
use crate::view::branch::BranchView;
use anyhow::Result;

pub fn run(host: &Host, args: &ResetArgs) -> Result<()> {
    let mut opts = ResetOptions::named(args.name.clone());
    opts.ttl = args.ttl;
    let record = reset(host, &opts)?;
    host.printer.note(format!(
        "reset branch {} to its baseline {}",
        record.name, record.baseline
    ));
    host.printer.emit(&BranchView::of(host, &record))
}
