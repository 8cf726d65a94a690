use crate::host::Host;
use crate::ops::pool::manage::all;
use crate::view::pool::PoolList;
use anyhow::Result;

pub fn run(host: &Host) -> Result<()> {
    host.printer.emit(&PoolList(all(host)?))
}
