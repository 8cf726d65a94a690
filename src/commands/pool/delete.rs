use crate::cli::PoolNameArg;
use crate::error::usage;
use crate::host::Host;
use crate::ops::pool::manage::delete_pool;
use crate::view::pool::PoolChange;
use anyhow::{Context, Result};
use std::io::IsTerminal;

pub fn run(host: &Host, args: &PoolNameArg) -> Result<()> {
    let pool = &args.name;
    if !host.assume_yes {
        if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
            return Err(usage(format!(
                "deleting pool {pool} destroys every slot, claimed ones too; there is no \
                 terminal to ask on, so pass --yes"
            )));
        }
        let ok = dialoguer::Confirm::new()
            .with_prompt(format!(
                "Delete pool {pool} and every slot, claimed ones too?"
            ))
            .default(false)
            .interact()
            .context("asking for confirmation")?;
        if !ok {
            return Err(usage("not deleted"));
        }
    }
    let deleted = delete_pool(host, pool)?;
    host.printer.note(if deleted {
        format!("deleted pool {pool}")
    } else {
        format!("pool {pool} does not exist; nothing to delete")
    });
    host.printer.emit(&PoolChange {
        pool: pool.to_string(),
        slot: None,
        action: if deleted { "deleted" } else { "not there" }.into(),
    })
}
