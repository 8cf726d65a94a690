//! Connections to a live source and to the one-off target server, with the session
//! settings each side reads and writes rows under; a source URL as messages show it.

use crate::error::usage;
use anyhow::{anyhow, Context, Result};
use mysql::prelude::Queryable;

/// A source URL with its password replaced, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// Connects to a live source, with errors that say what to fix.
pub fn connect_source(url: &str) -> Result<mysql::Conn> {
    let opts = mysql::OptsBuilder::from_opts(mysql::Opts::from_url(url)?)
        .prefer_socket(false)
        .tcp_connect_timeout(Some(std::time::Duration::from_secs(10)));
    mysql::Conn::new(opts).map_err(|e| match &e {
        mysql::Error::MySqlError(m) if m.code == 1045 || m.code == 1044 => usage(format!(
            "the source refused the credentials in {}: {}; check the user and password",
            redact(url),
            m.message
        )),
        mysql::Error::MySqlError(m) if m.code == 1049 => usage(format!(
            "the source {} has no such database: {}",
            redact(url),
            m.message
        )),
        // MySQL answers an unknown user with a switch to a plugin nobody can satisfy.
        mysql::Error::DriverError(mysql::DriverError::UnknownAuthPlugin(plugin)) => usage(format!(
            "the source {} asked for the {plugin} authentication, which MySQL also asks of \
             a user it does not know; check the user and password (db-branch speaks \
             caching_sha2_password and mysql_native_password)",
            redact(url)
        )),
        mysql::Error::MySqlError(m) => anyhow!(
            "the source {} said: {} (error {})",
            redact(url),
            m.message,
            m.code
        ),
        mysql::Error::DriverError(d) => anyhow!(
            "cannot reach the source {}: {d}; check host and port, and that a MySQL or \
             MariaDB server runs there",
            redact(url)
        ),
        mysql::Error::IoError(io) => anyhow!(
            "cannot reach the source {}: {io}; check host and port, and that the server runs",
            redact(url)
        ),
        other => anyhow!(
            "cannot reach the source {}: {other}; check host and port, and that the server runs",
            redact(url)
        ),
    })
}

/// The session settings every copy connection uses: bytes passed through untouched,
/// timestamps in UTC, no per-row checks the source already made.
pub const TARGET_SESSION: &[&str] = &[
    "SET NAMES binary",
    "SET time_zone = '+00:00'",
    "SET unique_checks = 0",
    "SET foreign_key_checks = 0",
    "SET sql_mode = 'NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'",
    // Writers filling neighbouring key ranges of one table: no gap locks between them
    // (under REPEATABLE READ two such INSERTs deadlocked on a UUID-keyed table).
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
];
pub const SOURCE_SESSION: &[&str] = &["SET NAMES binary", "SET time_zone = '+00:00'"];

pub fn session(conn: &mut mysql::Conn, settings: &[&str]) -> Result<()> {
    for s in settings {
        conn.query_drop(*s).with_context(|| format!("`{s}`"))?;
    }
    Ok(())
}
