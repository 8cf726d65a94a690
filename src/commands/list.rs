use crate::cli::ListArgs;
use crate::host::Host;
use crate::store::records;
use crate::view::branch::BranchList;
use anyhow::Result;

pub fn run(host: &Host, args: &ListArgs) -> Result<()> {
    host.storage.open()?;
    if args.tree {
        let records: Vec<_> = records::list(&host.layout)?
            .into_iter()
            .filter(|r| r.has_labels(&args.labels))
            .collect();
        let tree = crate::view::history::Tree::of(&host.storage.baselines()?, &records);
        return host.printer.emit(&tree);
    }
    let views = records::list(&host.layout)?
        .iter()
        .filter(|r| r.has_labels(&args.labels))
        .map(|r| crate::ops::inspect::branch(host, r))
        .collect();
    host.printer.emit(&BranchList(views))
}
