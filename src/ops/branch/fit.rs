//! Whether the configured server may serve data another server made: a branch of a
//! generation baked by another family or release series would have its data dictionary
//! upgraded in place (or refused) at start.

use crate::branch::{BranchRecord, Generation};
use crate::flavour::Flavour;
use crate::host::Host;
use crate::server::check_not_known_broken;
use anyhow::Result;

/// Refuses (exit 2, naming both) what the configured server must not start: a datadir or
/// generation made by another family or release series. Its first start would upgrade
/// the data dictionary in place. Unknown origins pass.
pub fn check_server_for(host: &Host, what: &str, made_by: Option<Flavour>) -> Result<()> {
    let binary = host.server.flavour()?;
    check_not_known_broken("the configured server", binary)?;
    let Some(made_by) = made_by else {
        return Ok(());
    };
    check_not_known_broken(what, made_by)?;
    if !binary.can_serve(&made_by) {
        return Err(crate::server::ServerError::WrongServer {
            what: what.to_string(),
            made_by,
            binary,
        }
        .into());
    }
    Ok(())
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
