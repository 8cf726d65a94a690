use crate::cli::CreateArgs;
use crate::host::Host;
use crate::ops::create::{create, CreateOptions};
use crate::view::branch::{BranchView, CreateView};
use anyhow::Result;

pub fn run(host: &Host, args: &CreateArgs) -> Result<()> {
    let opts = CreateOptions {
        name: args.name.clone(),
        baseline: args.baseline,
        buffer_pool: args.buffer_pool,
        expiry: args.expiry.request(),
        labels: args.labels.clone(),
        owner: args.owner.clone(),
        profile: args.profile,
        server_options: Vec::new(),
    };
    let created = create(host, &opts)?;
    let name = &created.record.name;
    host.printer.note(if created.existed {
        format!("branch {name} already exists")
    } else {
        format!("created branch {name}")
    });
    host.printer.emit(&CreateView {
        existed: created.existed,
        branch: BranchView::of(host, &created.record),
    })
}
