use crate::cli::{RestoreArgs, TrashArgs, TrashCommand};
use crate::host::Host;
use crate::ops::trash::{list, purge, restore, PurgeWhat, RestoreOptions};
use crate::view::trash::{RestoreView, TrashList, TrashPurged};
use anyhow::Result;

pub fn run(host: &Host, args: &TrashArgs) -> Result<()> {
    let Some(TrashCommand::Purge(p)) = &args.command else {
        return host.printer.emit(&TrashList(list(host)?));
    };
    let what = match (&p.what, p.all) {
        (Some(w), false) => PurgeWhat::One(w.clone()),
        _ => PurgeWhat::All,
    };
    let described = match &what {
        PurgeWhat::One(w) => format!("trash entries of {w}"),
        PurgeWhat::All => "everything in the trash".to_string(),
    };
    host.printer.confirm(
        host.assume_yes,
        &format!("Destroy {described} for good?"),
        &format!("purging {described} destroys it"),
    )?;
    let purged = purge(host, &what)?;
    host.printer.note(format!(
        "purged {} trash entr{}",
        purged.len(),
        if purged.len() == 1 { "y" } else { "ies" }
    ));
    host.printer.emit(&TrashPurged { purged })
}

pub fn restore_run(host: &Host, args: &RestoreArgs) -> Result<()> {
    let restored = restore(
        host,
        &RestoreOptions {
            what: args.what.clone(),
            as_name: args.as_name.clone(),
        },
    )?;
    let name = &restored.record.name;
    if restored.port_changed {
        host.printer.warn(format!(
            "branch {name} is back on port {}: its old port was taken meanwhile, so its \
             connection string changed (`db-branch env {name}`)",
            restored.record.port
        ));
    } else {
        host.printer.note(format!(
            "restored branch {name} on its old port {}",
            restored.record.port
        ));
    }
    host.printer.emit(&RestoreView {
        branch: crate::ops::inspect::branch(host, &restored.record),
        restored_from: restored.from,
        port_changed: restored.port_changed,
    })
}
