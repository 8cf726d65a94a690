//! Whether the configured server may serve data another server made: a branch of a
//! generation baked by another family or release series would have its data dictionary
//! upgraded in place (or refused) at start.

use crate::branch::{BranchRecord, Generation};
use crate::flavour::Flavour;
use crate::host::Host;
use crate::server::check_may_serve;
use anyhow::Result;

/// Refuses (exit 2, naming both) what the configured server must not start
/// (`server::check_may_serve`): a release known to crash, or a datadir or generation made
/// by one or by another family or release series. Unknown origins pass.
pub fn check_server_for(host: &Host, what: &str, made_by: Option<Flavour>) -> Result<()> {
    Ok(check_may_serve(what, host.server.flavour()?, made_by)?)
}

/// Which server made generation `gen`, when it says.
pub fn generation_server(host: &Host, gen: Generation) -> Option<Flavour> {
    host.storage
        .generation_info(gen)
        .ok()
        .flatten()
        .map(|i| i.server)
}

/// Refuses (exit 2) to start a branch whose baseline another server family or release
/// series made: the configured binary would upgrade its data dictionary in place.
pub fn check_server(host: &Host, record: &BranchRecord) -> Result<()> {
    let made_by = record
        .server
        .or_else(|| generation_server(host, record.baseline));
    check_server_for(host, &format!("branch {}", record.name), made_by)
}
