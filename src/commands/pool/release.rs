use crate::cli::PoolReleaseArgs;
use crate::host::Host;
use crate::ops::pool::claim::{release, Released};
use crate::view::pool::PoolChange;
use anyhow::Result;

pub fn run(host: &Host, args: &PoolReleaseArgs) -> Result<()> {
    let released = release(host, &args.name, args.slot)?;
    host.printer.emit(&PoolChange {
        pool: args.name.to_string(),
        slot: Some(args.slot),
        action: match released {
            Released::Released => "released",
            Released::NotClaimed => "not claimed",
        }
        .into(),
    })
}
