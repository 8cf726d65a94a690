//! What `baseline follow` must know of a live source before it seeds a follower: its
//! flavour, whether it keeps a binary log with GTIDs, its server id, and the address,
//! user and password the follower connects with.

use super::session::{connect_source, redact};
use crate::error::usage;
use crate::flavour::Flavour;
use anyhow::{Context, Result};
use mysql::prelude::Queryable;

#[derive(Debug, Clone, PartialEq)]
pub struct SourceFacts {
    pub flavour: Flavour,
    pub server_id: u32,
    /// Why it cannot be followed (None: it can).
    pub refusal: Option<String>,
}

pub fn facts(url: &str) -> Result<SourceFacts> {
    let mut c = connect_source(url)?;
    let version: String = c
        .query_first("SELECT VERSION()")?
        .context("the source did not say its version")?;
    let flavour = Flavour::from_version_string(&version).with_context(|| {
        format!(
            "the source {} answered an unknown version {version:?}",
            redact(url)
        )
    })?;
    let (log_bin, server_id): (u8, u32) = c
        .query_first("SELECT @@GLOBAL.log_bin, @@GLOBAL.server_id")?
        .unwrap_or((0, 0));
    let gtid_mode: Option<String> = if flavour.is_mysql() {
        c.query_first("SELECT @@GLOBAL.gtid_mode")?
    } else {
        None
    };
    let refusal =
        crate::replication::unfollowable(flavour.family, log_bin == 1, gtid_mode.as_deref())
            .or_else(|| {
                (server_id == 0).then(|| {
                    "its server_id is 0, which a source of replication may not have; set server_id"
                        .to_string()
                })
            });
    Ok(SourceFacts {
        flavour,
        server_id,
        refusal,
    })
}

/// The host, port, user and password a follower connects to `url` with.
pub fn endpoint(url: &str) -> Result<(String, u16, String, String)> {
    let opts = mysql::Opts::from_url(url).map_err(|e| {
        usage(format!(
            "{} is not a valid source URL ({e}); write it like mysql://user:password@host:3306",
            redact(url)
        ))
    })?;
    let user = opts.get_user().unwrap_or_default().to_string();
    if user.is_empty() {
        return Err(usage(format!(
            "{} names no user; a follower logs in to its source as a user with REPLICATION \
             SLAVE (and what a bake needs)",
            redact(url)
        )));
    }
    Ok((
        opts.get_ip_or_hostname().to_string(),
        opts.get_tcp_port(),
        user,
        opts.get_pass().unwrap_or_default().to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_comes_from_the_url_with_the_password_decoded() {
        assert_eq!(
            endpoint("mysql://repl:p%40ss@127.0.0.1:3407").unwrap(),
            ("127.0.0.1".into(), 3407, "repl".into(), "p@ss".into())
        );
        assert!(endpoint("mysql://127.0.0.1:3407").is_err());
    }
}
