use crate::host::Host;
use crate::ops::baseline::list;
use crate::view::baseline::BaselineList;
use anyhow::Result;

pub fn run(host: &Host) -> Result<()> {
    host.printer.emit(&BaselineList(list(host)?))?;
    // What the next generation will come from, when a follower makes them.
    match crate::ops::follow::status(host) {
        Ok(Some(v)) => host.printer.note(crate::view::follow::follower_line(&v)),
        Ok(None) => {}
        Err(e) => host.printer.warn(format!(
            "cannot read what is followed: {}",
            crate::report::chain_text(&e)
        )),
    }
    Ok(())
}
