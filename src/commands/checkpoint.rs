use crate::cli::{CheckpointArgs, CheckpointCommand, NameArg};
use crate::host::Host;
use crate::ops::checkpoint::{delete, list, make};
use crate::view::history::{CheckpointDeleted, CheckpointList, CheckpointMade};
use anyhow::Result;
use std::time::Instant;

pub fn run(host: &Host, args: &CheckpointArgs) -> Result<()> {
    if let Some(CheckpointCommand::Delete { name, tag }) = &args.command {
        let deleted = delete(host, name, tag)?;
        return host.printer.emit(&CheckpointDeleted {
            branch: name.clone(),
            tag: tag.clone(),
            deleted,
        });
    }
    let name = args
        .name
        .as_ref()
        .expect("clap requires NAME without a subcommand");
    let started = Instant::now();
    let made = make(host, name, args.tag.clone(), args.clean)?;
    host.printer.note(format!(
        "checkpoint {name}@{} taken ({}); `db-branch reset {name} --to {}` goes back to it",
        made.checkpoint.tag,
        if made.captured.clean {
            "clean"
        } else {
            "crash-consistent: a reset to it runs crash recovery"
        },
        made.checkpoint.tag
    ));
    host.printer.emit(&CheckpointMade {
        branch: name.clone(),
        checkpoint: made.checkpoint,
        downtime_seconds: made.captured.downtime_seconds,
        seconds: started.elapsed().as_secs_f64(),
    })
}

pub fn list_run(host: &Host, args: &NameArg) -> Result<()> {
    host.printer.emit(&CheckpointList(list(host, &args.name)?))
}
