use crate::cli::PoolNameArg;
use crate::host::Host;
use crate::ops::pool::manage::delete_pool;
use crate::view::pool::PoolChange;
use anyhow::Result;

pub fn run(host: &Host, args: &PoolNameArg) -> Result<()> {
    let pool = &args.name;
    host.printer.confirm(
        host.assume_yes,
        &format!("Delete pool {pool} and every slot, claimed ones too?"),
        &format!("deleting pool {pool} destroys every slot, claimed ones too"),
    )?;
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
