//! The clone path, for a live Oracle MySQL source of the configured server's version with
//! the clone plugin: `CLONE INSTANCE` copies the whole instance, consistently, at disk and
//! network speed. A one-off recipient server (on a scratch datadir) clones into the
//! workspace; the caller then starts the cloned datadir (its first start applies the redo
//! the clone carried) to finish the baseline.

use super::session::{connect_source, redact};
use crate::flavour::{Family, Flavour};
use crate::printer::PhaseProgress;
use crate::server::binary::ServerBinary;
use crate::server::oneoff::OneOff;
use crate::sql::sql_string;
use crate::values::ByteSize;
use anyhow::{anyhow, Context, Result};
use mysql::prelude::Queryable;
use std::path::Path;

/// Why the clone path cannot serve this source (None: it can).
pub fn unusable(source: &mut mysql::Conn, target: &Flavour) -> Result<Option<String>> {
    let version: Option<String> = source.query_first("SELECT VERSION()")?;
    let Some(donor) = version.as_deref().and_then(Flavour::from_version_string) else {
        return Ok(Some("the source did not say its version".into()));
    };
    if donor.family != Family::Mysql || target.family != Family::Mysql {
        return Ok(Some(format!(
            "CLONE needs MySQL on both sides (source {donor}, this server {target})"
        )));
    }
    if donor.version < crate::flavour::Version::parse("8.0.17").expect("literal") {
        return Ok(Some(format!(
            "CLONE needs MySQL 8.0.17 or later (source {donor})"
        )));
    }
    if donor.version != target.version {
        return Ok(Some(format!(
            "CLONE needs the same server version on both sides (source {donor}, this server {target})"
        )));
    }
    let plugin: Option<String> = source.query_first(
        "SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'clone'",
    )?;
    if plugin.as_deref() != Some("ACTIVE") {
        return Ok(Some(
            "the source has no active clone plugin (INSTALL PLUGIN clone SONAME 'mysql_clone.so')"
                .into(),
        ));
    }
    let grants: Vec<String> = source.query("SHOW GRANTS")?;
    let can = grants
        .iter()
        .any(|g| g.contains("BACKUP_ADMIN") || g.contains("ALL PRIVILEGES ON *.*"));
    if !can {
        return Ok(Some(
            "the source user lacks the BACKUP_ADMIN privilege".into(),
        ));
    }
    Ok(None)
}

/// Clones the source instance into `workspace` (empty, on the pool), through a recipient
/// server running on a scratch datadir in `work`.
pub fn clone_into(
    binary: &ServerBinary,
    flavour: Flavour,
    url: &str,
    workspace: &Path,
    work: &Path,
    progress: &PhaseProgress,
) -> Result<()> {
    let opts = mysql::Opts::from_url(url)?;
    let host = opts.get_ip_or_hostname().to_string();
    let port = opts.get_tcp_port();
    let user = opts.get_user().unwrap_or("root").to_string();
    let password = opts.get_pass().unwrap_or("").to_string();
    // The source must answer first, with errors that say what to fix.
    drop(connect_source(url)?);

    let recipient_data = work.join("recipient");
    let recipient_work = work.join("recipient-run");
    crate::server::Server::prepare_runtime_dir(
        &crate::server::real::RealServer::new(
            binary.path.clone(),
            binary.user.clone(),
            String::new(),
            String::new(),
            None,
            None,
        ),
        &recipient_work,
    )?;
    std::fs::create_dir_all(&recipient_data)?;
    binary.initialize_cached(
        &recipient_data,
        &recipient_work.join("tmp"),
        work.parent().unwrap_or(work),
    )?;
    binary.give_to_server_user(&recipient_data)?;
    // The server writes the clone itself, as its own user, into a directory it creates.
    binary.give_to_server_user(workspace)?;
    let target = workspace.join("clone");
    progress.phase(&format!("clone instance from {}", redact(url)), 0);
    let recipient = OneOff::start(
        binary,
        flavour,
        &recipient_data,
        &recipient_work,
        ByteSize::mib(64),
    )?;
    recipient.run_statements(&flavour.admin_login_sql())?;
    let statements = [
        "INSTALL PLUGIN clone SONAME 'mysql_clone.so'".to_string(),
        format!(
            "SET GLOBAL clone_valid_donor_list = {}",
            sql_string(&format!("{host}:{port}"))
        ),
    ];
    recipient.run_statements(&statements)?;
    let mut conn = recipient.conn()?;
    conn.query_drop(format!(
        "CLONE INSTANCE FROM {}@{}:{port} IDENTIFIED BY {} DATA DIRECTORY = {}",
        sql_string(&user),
        sql_string(&host),
        sql_string(&password),
        sql_string(&target.display().to_string())
    ))
    .map_err(|e| anyhow!("CLONE INSTANCE FROM {}: {e}", redact(url)))?;
    drop(conn);
    recipient.stop()?;
    // The clone becomes the workspace itself.
    for entry in
        std::fs::read_dir(&target).with_context(|| format!("listing {}", target.display()))?
    {
        let entry = entry?;
        std::fs::rename(entry.path(), workspace.join(entry.file_name()))
            .with_context(|| format!("moving {} into the workspace", entry.path().display()))?;
    }
    std::fs::remove_dir(&target)?;
    let _ = std::fs::remove_dir_all(&recipient_data);
    let _ = std::fs::remove_dir_all(&recipient_work);
    Ok(())
}

/// After a clone with `--databases`: drops every other user database.
pub fn keep_only(target: &OneOff, databases: &[String]) -> Result<()> {
    let mut conn = target.conn()?;
    let all: Vec<String> = conn.query("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA")?;
    for db in databases {
        if !all.contains(db) {
            return Err(crate::error::usage(format!(
                "database {db} does not exist on the source"
            )));
        }
    }
    for db in all {
        if super::copy::SYSTEM_SCHEMAS.contains(&db.as_str()) || databases.contains(&db) {
            continue;
        }
        conn.query_drop(format!("DROP DATABASE {}", crate::sql::quote(&db)))?;
    }
    Ok(())
}
