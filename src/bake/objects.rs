//! What comes along besides tables: users and grants, views, routines, triggers, events.
//! Created after the data (triggers must not fire on copied rows), users first (they are the
//! definers of the rest) when `--with-users` asks for them.

use crate::sql::quote;
use crate::sql::sql_string;
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
            recreate(source, target, &kind, db, &name)?;
        }
        let triggers: Vec<String> = source.exec(
            "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? ORDER BY ACTION_ORDER",
            (db,),
        )?;
        for name in triggers {
            recreate(source, target, "TRIGGER", db, &name)?;
        }
        let events: Vec<String> = source.exec(
            "SELECT EVENT_NAME FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ?",
            (db,),
        )?;
        for name in events {
            recreate(source, target, "EVENT", db, &name)?;
        }
    }
    Ok(())
}

/// Sequences, before the tables (a column's default may take a sequence's next value): as
/// the source defines them, continuing where the source's would.
pub fn create_sequences(
    source: &mut mysql::Conn,
    target: &mut mysql::Conn,
    sequences: &[super::copy::Table],
) -> Result<()> {
    for s in sequences {
        target.query_drop(format!("USE {}", quote(&s.schema)))?;
        recreate(source, target, "SEQUENCE", &s.schema, &s.name)?;
        let next: Option<i64> = source.query_first(format!(
            "SELECT next_not_cached_value FROM {}",
            s.qualified()
        ))?;
        if let Some(next) = next {
            target
                .query_drop(format!("SELECT SETVAL({}, {next}, 0)", s.qualified()))
                .with_context(|| format!("setting sequence {} to {next}", s.label()))?;
        }
    }
    Ok(())
}

/// What `SHOW CREATE <kind>` says of an object: its statement and the session it was
/// defined in.
struct Definition {
    statement: String,
    /// `SET SESSION …` assignments that recreate that session (as mysqldump writes them):
    /// sql_mode and time zone change what a routine or event does.
    session: Vec<String>,
}

fn show_create(
    source: &mut mysql::Conn,
    kind: &str,
    db: &str,
    name: &str,
) -> Result<Option<Definition>> {
    let row: Option<mysql::Row> =
        source.query_first(format!("SHOW CREATE {kind} {}.{}", quote(db), quote(name)))?;
    let Some(row) = row else {
        return Ok(None);
    };
    let column = |wanted: &dyn Fn(&str) -> bool| -> Option<String> {
        let i = row
            .columns_ref()
            .iter()
            .position(|c| wanted(&c.name_str()))?;
        row.get::<Option<String>, _>(i).flatten()
    };
    let Some(statement) = column(&|n| n.starts_with("Create ") || n == "SQL Original Statement")
    else {
        return Ok(None);
    };
    let mut session = Vec::new();
    if let Some(mode) = column(&|n| n == "sql_mode") {
        session.push(format!("sql_mode = {}", sql_string(&mode)));
    }
    if let Some(zone) = column(&|n| n == "time_zone") {
        session.push(format!("time_zone = {}", sql_string(&zone)));
    }
    // Our connection sends UTF-8: a character set that reads UTF-8 the same is kept, so
    // the object records the client it was made with; others would garble the text.
    if let Some(cs) = column(&|n| n == "character_set_client") {
        if ["utf8mb4", "utf8mb3", "utf8", "ascii"].contains(&cs.as_str()) {
            session.push(format!("character_set_client = {}", sql_string(&cs)));
        }
    }
    if let Some(collation) = column(&|n| n == "collation_connection") {
        session.push(format!("collation_connection = {}", sql_string(&collation)));
    }
    Ok(Some(Definition { statement, session }))
}

/// Creates an object on the target as the source defines it, in the session it was
/// defined in.
fn recreate(
    source: &mut mysql::Conn,
    target: &mut mysql::Conn,
    kind: &str,
    db: &str,
    name: &str,
) -> Result<()> {
    match show_create(source, kind, db, name)? {
        Some(def) => apply(target, &def)
            .with_context(|| format!("creating {} {db}.{name}", kind.to_lowercase())),
        None => Ok(()),
    }
}

/// Runs a definition in its session, and puts the session back.
fn apply(target: &mut mysql::Conn, def: &Definition) -> Result<()> {
    if !def.session.is_empty() {
        target.query_drop(format!("SET SESSION {}", def.session.join(", ")))?;
    }
    let created = target.query_drop(&def.statement);
    if !def.session.is_empty() {
        target.query_drop(
            "SET SESSION sql_mode = DEFAULT, time_zone = DEFAULT, \
             character_set_client = utf8mb4, collation_connection = utf8mb4_general_ci",
        )?;
    }
    Ok(created?)
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
    let mut pending: Vec<(String, Definition)> = Vec::new();
    for name in names {
        if let Some(def) = show_create(source, "VIEW", db, &name)? {
            pending.push((name, def));
        }
    }
    while !pending.is_empty() {
        let before = pending.len();
        let mut last_error = None;
        pending.retain(|(name, def)| match apply(target, def) {
            Ok(()) => false,
            Err(e) => {
                last_error = Some(format!("{db}.{name}: {}", crate::report::chain_text(&e)));
                true
            }
        });
        if pending.len() == before {
            anyhow::bail!("cannot create view {}", last_error.unwrap_or_default());
        }
    }
    Ok(())
}
