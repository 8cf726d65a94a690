use crate::cli::CreateArgs;
use crate::host::Host;
use crate::ops::create::{create, CreateOptions};
use crate::view::branch::CreateView;
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
        from: args.from.clone(),
        clean: args.clean,
        database: args.database.clone(),
        seed: None,
        follows: None,
        dense_slots: None,
    };
    let created = create(host, &opts)?;
    let name = &created.record.name;
    host.printer
        .note(match (&created.existed, &args.from, &created.captured) {
            (true, _, _) => format!("branch {name} already exists"),
            (false, Some(from), Some(c)) => format!(
                "created branch {name} from {from} ({}{})",
                if c.clean {
                    "clean copy"
                } else {
                    "crash-consistent copy: its server ran crash recovery"
                },
                c.downtime_seconds
                    .map_or(String::new(), |d| format!("; {from} was down {d:.2} s"))
            ),
            _ => format!("created branch {name}"),
        });
    host.printer.emit(&CreateView {
        existed: created.existed,
        source_downtime_seconds: created.captured.and_then(|c| c.downtime_seconds),
        branch: crate::ops::inspect::branch(host, &created.record),
    })
}
