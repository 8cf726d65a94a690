use crate::cli::ListArgs;
use crate::host::Host;
use crate::store::records;
use crate::view::branch::{BranchList, BranchView};
use anyhow::Result;

pub fn run(host: &Host, args: &ListArgs) -> Result<()> {
    host.storage.open()?;
    let views = records::list(&host.layout)?
        .iter()
        .filter(|r| r.has_labels(&args.labels))
        .map(|r| BranchView::of(host, r))
        .collect();
    host.printer.emit(&BranchList(views))
}
