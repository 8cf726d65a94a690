//! What comes along besides tables: users and grants, views, routines, triggers, events.
//! Created after the data (triggers must not fire on copied rows), users first (they are the
//! definers of the rest) when `--with-users` asks for them.

use super::quote;
use anyhow::{Context, Result};
use mysql::prelude::Queryable;

/// Accounts the server makes for itself, and the baseline's own client accounts.
const SYSTEM_USERS: &[&str] = &[
    "root",
    "mariadb.sys",
    "mysql.sys",
    "mysql.session",
    "mysql.infoschema",
    "",
];

pub fn copy_objects(
    source: &mut mysql::Conn,
    target: &mut mysql::Conn,
    dbs: &[String],
    with_users: bool,
) -> Result<()> {
    target.query_drop("SET foreign_key_checks = 0")?;
    if with_users {
        copy_users(source, target)?;
    }
    for db in dbs {
        target.query_drop(format!("USE {}", quote(db)))?;
        copy_views(source, target, db)?;
        let routines: Vec<(String, String)> = source.exec(
            "SELECT ROUTINE_NAME, ROUTINE_TYPE FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ?",
            (db,),
        )?;
        for (name, kind) in routines {
            recreate(source, target, &kind, db, &name, 2)?;
        }
        let triggers: Vec<String> = source.exec(
            "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? ORDER BY ACTION_ORDER",
            (db,),
        )?;
        for name in triggers {
            recreate(source, target, "TRIGGER", db, &name, 2)?;
        }
        let events: Vec<String> = source.exec(
            "SELECT EVENT_NAME FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ?",
            (db,),
        )?;
        for name in events {
            recreate(source, target, "EVENT", db, &name, 3)?;
        }
    }
    Ok(())
}

/// The statement `SHOW CREATE <kind>` gives for an object (in result column `column`).
fn show_create(
    source: &mut mysql::Conn,
    kind: &str,
    db: &str,
    name: &str,
    column: usize,
) -> Result<Option<String>> {
    let row: Option<mysql::Row> =
        source.query_first(format!("SHOW CREATE {kind} {}.{}", quote(db), quote(name)))?;
    Ok(row
        .and_then(|r| r.get::<Option<String>, _>(column))
        .flatten())
}

/// Creates an object on the target as the source defines it.
fn recreate(
    source: &mut mysql::Conn,
    target: &mut mysql::Conn,
    kind: &str,
    db: &str,
    name: &str,
    column: usize,
) -> Result<()> {
    if let Some(sql) = show_create(source, kind, db, name, column)? {
        target
            .query_drop(sql)
            .with_context(|| format!("creating {} {db}.{name}", kind.to_lowercase()))?;
    }
    Ok(())
}

fn copy_users(source: &mut mysql::Conn, target: &mut mysql::Conn) -> Result<()> {
    let users: Vec<(String, String)> = source.query("SELECT User, Host FROM mysql.user")?;
    for (user, host) in users {
        if SYSTEM_USERS.contains(&user.as_str()) || user.starts_with("mysql.") {
            continue;
        }
        let account = format!(
            "'{}'@'{}'",
            user.replace('\'', "''"),
            host.replace('\'', "''")
        );
        let create: Option<String> = source.query_first(format!("SHOW CREATE USER {account}"))?;
        if let Some(sql) = create {
            target
                .query_drop(sql.replacen("CREATE USER", "CREATE USER IF NOT EXISTS", 1))
                .with_context(|| format!("creating user {account}"))?;
        }
        let grants: Vec<String> = source.query(format!("SHOW GRANTS FOR {account}"))?;
        for g in grants {
            target
                .query_drop(&g)
                .with_context(|| format!("granting to {account}: {g}"))?;
        }
    }
    Ok(())
}

/// Views may use views: create them in rounds until every one exists.
fn copy_views(source: &mut mysql::Conn, target: &mut mysql::Conn, db: &str) -> Result<()> {
    let names: Vec<String> = source.exec(
        "SELECT TABLE_NAME FROM information_schema.VIEWS WHERE TABLE_SCHEMA = ?",
        (db,),
    )?;
    let mut pending: Vec<(String, String)> = Vec::new();
    for name in names {
        if let Some(sql) = show_create(source, "VIEW", db, &name, 1)? {
            pending.push((name, sql));
        }
    }
    while !pending.is_empty() {
        let before = pending.len();
        let mut last_error = None;
        pending.retain(|(name, sql)| match target.query_drop(sql) {
            Ok(()) => false,
            Err(e) => {
                last_error = Some(format!("{db}.{name}: {e}"));
                true
            }
        });
        if pending.len() == before {
            anyhow::bail!("cannot create view {}", last_error.unwrap_or_default());
        }
    }
    Ok(())
}
