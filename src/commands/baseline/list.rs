use crate::host::Host;
use crate::ops::baseline::list;
use crate::view::baseline::BaselineList;
use anyhow::Result;

pub fn run(host: &Host) -> Result<()> {
    host.printer.emit(&BaselineList(list(host)?))
}
