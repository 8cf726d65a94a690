use crate::cli::ResetArgs;
use crate::host::Host;
use crate::ops::reset::{reset_keeping, ResetOptions};
use anyhow::Result;

pub fn run(host: &Host, args: &ResetArgs) -> Result<()> {
    let mut opts = ResetOptions::named(args.name.clone());
    opts.ttl = args.ttl;
    opts.to = args.to.clone();
    opts.keep = !args.no_keep && (args.keep || host.config.lifecycle.keep_before_reset);
    let done = reset_keeping(host, &opts)?;
    if let Some(tag) = &done.kept {
        host.printer.note(format!(
            "kept its state before the reset as checkpoint {tag} (for {}): `db-branch reset {} --to {tag}` brings it back",
            host.config.lifecycle.keep_deleted, done.record.name
        ));
    }
    let record = done.record;
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
