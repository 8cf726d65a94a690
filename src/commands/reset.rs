use crate::cli::ResetArgs;
use crate::host::Host;
use crate::ops::reset::{reset, ResetOptions};
use anyhow::Result;

pub fn run(host: &Host, args: &ResetArgs) -> Result<()> {
    let mut opts = ResetOptions::named(args.name.clone());
    opts.ttl = args.ttl;
    opts.to = args.to.clone();
    let record = reset(host, &opts)?;
    host.printer.note(match &args.to {
        Some(tag) => format!("reset branch {} to its checkpoint {tag}", record.name),
        None => format!(
            "reset branch {} to its start ({})",
            record.name,
            match &record.parent {
                Some(crate::branch::Parent::Branch { name, .. }) => format!("made from {name}"),
                _ => format!("baseline {}", record.baseline),
            }
        ),
    });
    host.printer
        .emit(&crate::ops::inspect::branch(host, &record))
}
