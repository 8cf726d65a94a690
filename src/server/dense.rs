//! Dense pool slots inside one server: an application database copied under another name
//! (its tables created, their tablespaces discarded, the template's `.ibd`/`.cfg` files —
//! exported by `FLUSH TABLES … FOR EXPORT` — reflinked in and imported), and an account
//! that reaches only that copy. The template is the generation's own database in the same
//! server, which no slot account can reach, so it stays as the generation made it.

use super::conn;
use crate::error::{Error, Kind};
use crate::sql::{quote, sql_string};
use anyhow::{Context, Result};
use mysql::prelude::Queryable;
use std::os::unix::fs::{chown, MetadataExt};
use std::path::Path;

/// An application database as dense slots copy it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenseTemplate {
    pub database: String,
    pub charset: String,
    pub collation: String,
    /// Its base tables, by name.
    pub tables: Vec<TemplateTable>,
    /// Whether its tables have foreign keys (among themselves: others are refused).
    pub foreign_keys: bool,
}

/// One table of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateTable {
    pub name: String,
    /// Its `CREATE TABLE` statement (`SHOW CREATE TABLE`, with its AUTO_INCREMENT counter).
    pub create: String,
    /// The columns a copy by `INSERT … SELECT` writes: all but generated ones, which the
    /// server computes again (invisible ones are named, so they are copied too).
    pub columns: Vec<String>,
}

/// A table whose tablespace file is at most this big is copied by `INSERT … SELECT`
/// rather than imported: an import is three DDL statements (`CREATE`, `DISCARD`, `IMPORT`)
/// and a file copy, each a data-dictionary transaction on MySQL, where a small table's rows
/// copy in well under a millisecond. A new InnoDB file is 64–112 KiB, so 1 MiB holds the
/// tables of a few thousand small rows.
pub const LOGICAL_COPY_BYTES: u64 = 1 << 20;

/// How a copy makes each of the template's tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyPlan<'a> {
    /// Created and filled by `INSERT … SELECT` from the template.
    pub logical: Vec<&'a TemplateTable>,
    /// Created, their tablespaces discarded, the template's files copied in and imported.
    pub imported: Vec<&'a TemplateTable>,
}

/// Splits the template's tables by the size of their tablespace files (`size` of a table's
/// `.ibd`; a table whose size cannot be read is imported, which is right whatever it holds).
pub fn plan<'a>(template: &'a DenseTemplate, size: impl Fn(&str) -> Option<u64>) -> CopyPlan<'a> {
    let (logical, imported) = template
        .tables
        .iter()
        .partition(|t| size(&t.name).is_some_and(|b| b <= LOGICAL_COPY_BYTES));
    CopyPlan { logical, imported }
}

/// `plan` by the sizes of the template's files under `datadir`.
fn plan_in<'a>(datadir: &Path, template: &'a DenseTemplate) -> CopyPlan<'a> {
    let from = datadir.join(&template.database);
    plan(template, |name| {
        std::fs::symlink_metadata(from.join(format!("{name}.ibd")))
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len())
    })
}

/// One slot's copy: its database and the account that reaches only it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenseSlot {
    pub database: String,
    pub user: String,
    pub password: String,
}

/// Names whose file names are the names themselves (the server encodes others), so the
/// template's files can be found by name and a grant's pattern escaped exactly.
pub fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
}

/// Refuses a template a copy inside the same server cannot make exact (Kind::Usage).
fn refuse(database: &str, why: String) -> anyhow::Error {
    Error::new(
        Kind::Usage,
        format!("database {database} cannot be copied into dense slots: {why}"),
    )
    .hint("make the pool without --dense (a server per slot copies everything)")
    .into()
}

pub fn template(socket: &Path, database: &str) -> Result<DenseTemplate> {
    if !plain_name(database) {
        return Err(refuse(
            database,
            "its name has characters the server encodes in file names (letters, digits, `_` \
             and `$` only)"
                .into(),
        ));
    }
    let mut c = conn::admin(socket)?;
    let schema: Option<(String, String)> = c
        .exec_first(
            "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME \
             FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
            (database,),
        )
        .context("reading the template database")?;
    let Some((charset, collation)) = schema else {
        return Err(Error::new(
            Kind::NotFound,
            format!("the generation has no database {database}"),
        )
        .into());
    };
    let checks: [(&str, &str); 7] = [
        (
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = ? AND TABLE_TYPE NOT IN ('BASE TABLE', 'VIEW')",
            "it has system-versioned tables or sequences, whose history and state dense \
             slots do not copy",
        ),
        (
            "SELECT COUNT(*) FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ?",
            "it has events, which the event scheduler would run on it alone, never on a \
             slot's copy",
        ),
        (
            "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ?",
            "it has stored routines; dense slots copy tables only",
        ),
        (
            "SELECT COUNT(*) FROM information_schema.VIEWS WHERE TABLE_SCHEMA = ?",
            "it has views, whose definitions name the database; dense slots copy tables only",
        ),
        (
            "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?",
            "it has triggers; dense slots copy tables only",
        ),
        (
            "SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS \
             WHERE (CONSTRAINT_SCHEMA = ? OR UNIQUE_CONSTRAINT_SCHEMA = ?) \
             AND CONSTRAINT_SCHEMA <> UNIQUE_CONSTRAINT_SCHEMA",
            "foreign keys cross between it and another database, which a slot's copy \
             would still point at",
        ),
        (
            "SELECT COUNT(*) FROM information_schema.STATISTICS \
             WHERE TABLE_SCHEMA = ? AND INDEX_TYPE = 'FULLTEXT'",
            "it has FULLTEXT indexes, whose auxiliary tablespaces an import does not bring",
        ),
    ];
    for (sql, why) in checks {
        let params: Vec<mysql::Value> = sql.matches('?').map(|_| database.into()).collect();
        let n: u64 = c
            .exec_first(sql, params)
            .with_context(|| format!("checking {database}: {sql}"))?
            .unwrap_or(0);
        if n > 0 {
            return Err(refuse(database, why.to_string()));
        }
    }
    let rows: Vec<(String, Option<String>, Option<String>)> = c
        .exec(
            "SELECT TABLE_NAME, ENGINE, CREATE_OPTIONS FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME",
            (database,),
        )
        .context("listing the template's tables")?;
    let mut tables = Vec::new();
    for (name, engine, options) in rows {
        if !engine
            .as_deref()
            .is_some_and(|e| e.eq_ignore_ascii_case("InnoDB"))
        {
            return Err(refuse(
                database,
                format!(
                    "table {name} is {}, not InnoDB: only InnoDB tablespaces can be imported",
                    engine.unwrap_or_else(|| "of no engine".into())
                ),
            ));
        }
        if options.unwrap_or_default().contains("partitioned") {
            return Err(refuse(
                database,
                format!("table {name} is partitioned (a file per partition)"),
            ));
        }
        if !plain_name(&name) {
            return Err(refuse(
                database,
                format!("table {name:?} has characters the server encodes in file names"),
            ));
        }
        let create: Option<(String, String)> = c
            .query_first(format!(
                "SHOW CREATE TABLE {}.{}",
                quote(database),
                quote(&name)
            ))
            .with_context(|| format!("reading the definition of {database}.{name}"))?;
        let create = create.map(|(_, s)| s).unwrap_or_default();
        let columns: Vec<String> = c
            .exec(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? \
                 AND COALESCE(GENERATION_EXPRESSION, '') = '' ORDER BY ORDINAL_POSITION",
                (database, &name),
            )
            .with_context(|| format!("listing the columns of {database}.{name}"))?;
        tables.push(TemplateTable {
            name,
            create,
            columns,
        });
    }
    let foreign_keys: u64 = c
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS \
             WHERE CONSTRAINT_SCHEMA = ?",
            (database,),
        )
        .context("counting the template's foreign keys")?
        .unwrap_or(0);
    Ok(DenseTemplate {
        database: database.to_string(),
        charset,
        collation,
        tables,
        foreign_keys: foreign_keys > 0,
    })
}

/// `%` and `_` are wildcards in a database grant: escaped, the grant names one database.
fn grant_pattern(database: &str) -> String {
    quote(&database.replace('_', "\\_").replace('%', "\\%"))
}

/// The statements that give `slot`'s account (from loopback and the socket) every privilege
/// on its database and nothing else.
fn account_sql(slot: &DenseSlot) -> Vec<String> {
    let u = sql_string(&slot.user);
    let p = sql_string(&slot.password);
    let mut sql = Vec::new();
    for host in ["127.0.0.1", "::1", "localhost"] {
        let account = format!("{u}@'{host}'");
        sql.push(format!(
            "CREATE USER IF NOT EXISTS {account} IDENTIFIED BY {p}"
        ));
        sql.push(format!("ALTER USER {account} IDENTIFIED BY {p}"));
        sql.push(format!(
            "GRANT ALL PRIVILEGES ON {}.* TO {account}",
            grant_pattern(&slot.database)
        ));
    }
    sql
}

/// What `swap` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Swap {
    /// The spare's tables are the slot's now; the slot's old ones are in the trash.
    Swapped,
    /// No complete spare to swap in.
    NoSpare,
    /// The slot's database holds what a RENAME cannot move (views, routines, triggers,
    /// events), or foreign keys — the template's or a test's — which a move between
    /// databases must not be trusted to carry.
    CannotMove,
}

fn run(c: &mut mysql::Conn, what: &str, sql: String) -> Result<()> {
    c.query_drop(&sql).with_context(|| format!("{what}: {sql}"))
}

fn base_tables(c: &mut mysql::Conn, database: &str) -> Result<Vec<String>> {
    c.exec(
        "SELECT TABLE_NAME FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME",
        (database,),
    )
    .with_context(|| format!("listing the tables of {database}"))
}

/// Ends the sessions of `user`: they would hold locks on the slot's tables (and see them
/// vanish).
pub fn end_sessions(socket: &Path, user: &str) -> Result<()> {
    let mut c = conn::admin(socket)?;
    let sessions: Vec<u64> = c
        .exec(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?",
            (user,),
        )
        .context("listing the slot account's sessions")?;
    for id in sessions {
        // Gone already is as good.
        let _ = c.query_drop(format!("KILL {id}"));
    }
    Ok(())
}

pub fn account(socket: &Path, slot: &DenseSlot) -> Result<()> {
    let mut c = conn::admin(socket)?;
    for sql in account_sql(slot) {
        run(
            &mut c,
            &format!("making the account of {}", slot.database),
            sql,
        )?;
    }
    Ok(())
}

pub fn drop_database(socket: &Path, database: &str) -> Result<()> {
    let mut c = conn::admin(socket)?;
    run(
        &mut c,
        "dropping a dense slot's database",
        format!("DROP DATABASE IF EXISTS {}", quote(database)),
    )
}

/// One RENAME: every table of `slot`'s database to `trash` (made empty first), every
/// table of `spare` to `slot`'s database — atomic on both servers, and a metadata change
/// only, so it takes milliseconds whatever the tables hold.
pub fn swap(
    socket: &Path,
    template: &DenseTemplate,
    slot: &DenseSlot,
    spare: &str,
    trash: &str,
) -> Result<Swap> {
    if template.foreign_keys {
        return Ok(Swap::CannotMove);
    }
    let mut c = conn::admin(socket)?;
    let spare_tables = base_tables(&mut c, spare)?;
    let wanted: Vec<&String> = template.tables.iter().map(|t| &t.name).collect();
    if spare_tables.iter().collect::<Vec<_>>() != wanted {
        return Ok(Swap::NoSpare);
    }
    // What a test made in the slot's database that RENAME cannot carry. Foreign keys only
    // from the slot's own tables: no other database can name them (the slot account's
    // grant is its database alone, and the template and spares are never given any), and
    // filtering REFERENTIAL_CONSTRAINTS by the referenced side opens every table of the
    // server — milliseconds per slot it holds.
    let immovable: u64 = c
        .exec_first(
            "SELECT (SELECT COUNT(*) FROM information_schema.VIEWS WHERE TABLE_SCHEMA = ?) \
             + (SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ?) \
             + (SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?) \
             + (SELECT COUNT(*) FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ?) \
             + (SELECT COUNT(*) FROM information_schema.TABLE_CONSTRAINTS \
                WHERE TABLE_SCHEMA = ? AND CONSTRAINT_TYPE = 'FOREIGN KEY')",
            vec![mysql::Value::from(&slot.database); 5],
        )
        .context("checking what the slot's database holds")?
        .unwrap_or(0);
    if immovable > 0 {
        return Ok(Swap::CannotMove);
    }
    let what = format!("resetting slot database {}", slot.database);
    let db = quote(&slot.database);
    let current = base_tables(&mut c, &slot.database)?;
    run(
        &mut c,
        &what,
        format!("DROP DATABASE IF EXISTS {}", quote(trash)),
    )?;
    run(&mut c, &what, format!("CREATE DATABASE {}", quote(trash)))?;
    run(
        &mut c,
        &what,
        format!(
            "CREATE DATABASE IF NOT EXISTS {db} CHARACTER SET {} COLLATE {}",
            template.charset, template.collation
        ),
    )?;
    let moves: Vec<String> = current
        .iter()
        .map(|t| format!("{db}.{} TO {}.{}", quote(t), quote(trash), quote(t)))
        .chain(
            wanted
                .iter()
                .map(|t| format!("{}.{} TO {db}.{}", quote(spare), quote(t), quote(t))),
        )
        .collect();
    run(&mut c, &what, format!("RENAME TABLE {}", moves.join(", ")))?;
    Ok(Swap::Swapped)
}

/// A session's settings for copying rows: no foreign-key or unique checks (rows come from
/// the template as they are), and NO_AUTO_VALUE_ON_ZERO: a row whose AUTO_INCREMENT key is
/// 0 is copied as 0, not given the next number (as mysqldump's files say too).
fn copying_session(c: &mut mysql::Conn, what: &str) -> Result<()> {
    run(
        c,
        what,
        "SET SESSION foreign_key_checks = 0, SESSION unique_checks = 0, \
         SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO'"
            .into(),
    )
}

/// `INSERT … SELECT` of template table `t`'s rows into the table of that name in
/// `database`: every column but generated ones, which the server computes again.
fn fill_sql(template: &DenseTemplate, t: &TemplateTable, database: &str) -> String {
    let columns = t
        .columns
        .iter()
        .map(|col| quote(col))
        .collect::<Vec<_>>()
        .join(", ");
    let table = quote(&t.name);
    format!(
        "INSERT INTO {}.{table} ({columns}) SELECT {columns} FROM {}.{table}",
        quote(database),
        quote(&template.database)
    )
}

/// What `reset_rows` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowReset {
    /// The slot's tables hold the template's rows again, their counters set back.
    Done,
    /// Not done, and why: the slot needs a swap or a copy (nothing was changed).
    Declined(String),
}

/// The `AUTO_INCREMENT=N` table option of a `SHOW CREATE TABLE` text, and the text
/// without it. Table options follow the line that closes the column list (`\n) `), and
/// the counter comes before any table comment, so text in a column's or the table's
/// comment is never taken for it.
fn split_counter(create: &str) -> (String, Option<u64>) {
    let Some(options) = create.rfind("\n) ") else {
        return (create.to_string(), None);
    };
    const KEY: &str = " AUTO_INCREMENT=";
    let Some(at) = create[options..].find(KEY).map(|i| options + i) else {
        return (create.to_string(), None);
    };
    let digits = &create[at + KEY.len()..];
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    let counter = digits[..end].parse().ok();
    let rest = format!("{}{}", &create[..at], &digits[end..]);
    (rest, counter)
}

/// Puts `slot`'s rows back as the template holds them, in place, where that is exact:
/// the template's tables are all small (`LOGICAL_COPY_BYTES`: rewriting big ones costs
/// more than a swap), and the slot's database still holds just those tables with the
/// template's definitions (counters aside), its character set, and no view, routine,
/// trigger or event. Then every table's rows are replaced by the template's in one
/// transaction (foreign-key checks off, so the order does not matter) and the counters a
/// test moved are set back — no DDL but those, where a swap is a `DROP`/`CREATE DATABASE`
/// and a `RENAME` of every table, each a data-dictionary transaction on MySQL. A decline
/// changes nothing; an error rolls back.
pub fn reset_rows(
    socket: &Path,
    datadir: &Path,
    template: &DenseTemplate,
    slot: &DenseSlot,
) -> Result<RowReset> {
    let declined = |why: &str| Ok(RowReset::Declined(why.to_string()));
    if !plan_in(datadir, template).imported.is_empty() {
        return declined("the template has tables over 1 MiB");
    }
    let mut c = conn::admin(socket)?;
    let what = format!("resetting the rows of {}", slot.database);
    let state: Option<(String, String, u64)> = c
        .exec_first(
            "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME, \
             (SELECT COUNT(*) FROM information_schema.TABLES \
              WHERE TABLE_SCHEMA = ? AND TABLE_TYPE <> 'BASE TABLE') \
             + (SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ?) \
             + (SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?) \
             + (SELECT COUNT(*) FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ?) \
             FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
            vec![mysql::Value::from(&slot.database); 5],
        )
        .with_context(|| format!("{what}: reading what the database holds"))?;
    let Some((charset, collation, others)) = state else {
        return declined("the slot's database is gone");
    };
    if (charset.as_str(), collation.as_str())
        != (template.charset.as_str(), template.collation.as_str())
    {
        return declined("the database's character set changed");
    }
    if others > 0 {
        return declined("the database holds views, routines, triggers or events");
    }
    let names: Vec<String> = template.tables.iter().map(|t| t.name.clone()).collect();
    if base_tables(&mut c, &slot.database)? != names {
        return declined("tables were made, dropped or renamed");
    }
    let db = quote(&slot.database);
    let mut counters = Vec::new();
    for t in &template.tables {
        let now: Option<(String, String)> = c
            .query_first(format!("SHOW CREATE TABLE {db}.{}", quote(&t.name)))
            .with_context(|| format!("{what}: reading the definition of {}", t.name))?;
        let (now, now_counter) = split_counter(&now.map(|(_, s)| s).unwrap_or_default());
        let (then, then_counter) = split_counter(&t.create);
        if now != then {
            return declined("a table's definition changed");
        }
        if now_counter != then_counter {
            counters.push((&t.name, then_counter.unwrap_or(1)));
        }
    }
    copying_session(&mut c, &what)?;
    // Read committed: the template's rows are read without locking them, so slots of the
    // same server reset at once do not wait on each other.
    run(
        &mut c,
        &what,
        "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED".into(),
    )?;
    run(&mut c, &what, "START TRANSACTION".into())?;
    for t in &template.tables {
        run(
            &mut c,
            &what,
            format!("DELETE FROM {db}.{}", quote(&t.name)),
        )?;
        run(&mut c, &what, fill_sql(template, t, &slot.database))?;
    }
    run(&mut c, &what, "COMMIT".into())?;
    for (name, counter) in counters {
        run(
            &mut c,
            &what,
            format!(
                "ALTER TABLE {db}.{} AUTO_INCREMENT = {counter}",
                quote(name)
            ),
        )?;
    }
    Ok(RowReset::Done)
}

/// Makes `database` a pristine copy of the template, whatever it held: small tables by
/// `INSERT … SELECT`, the others by importing the template's tablespace files (`plan`).
pub fn copy(socket: &Path, datadir: &Path, template: &DenseTemplate, database: &str) -> Result<()> {
    let mut c = conn::admin(socket)?;
    let db = quote(database);
    let what = format!("making dense slot database {database}");
    copying_session(&mut c, &what)?;
    run(&mut c, &what, format!("DROP DATABASE IF EXISTS {db}"))?;
    run(
        &mut c,
        &what,
        format!(
            "CREATE DATABASE {db} CHARACTER SET {} COLLATE {}",
            template.charset, template.collation
        ),
    )?;
    run(&mut c, &what, format!("USE {db}"))?;
    let plan = plan_in(datadir, template);
    for t in &plan.logical {
        run(&mut c, &what, t.create.clone())?;
        run(&mut c, &what, fill_sql(template, t, database))?;
    }
    if plan.imported.is_empty() {
        return Ok(());
    }
    for t in &plan.imported {
        run(&mut c, &what, t.create.clone())?;
        run(
            &mut c,
            &what,
            format!("ALTER TABLE {} DISCARD TABLESPACE", quote(&t.name)),
        )?;
    }
    let all: Vec<String> = plan
        .imported
        .iter()
        .map(|t| format!("{}.{}", quote(&template.database), quote(&t.name)))
        .collect();
    run(
        &mut c,
        &what,
        format!("FLUSH TABLES {} FOR EXPORT", all.join(", ")),
    )?;
    let copied = copy_files(datadir, template, &plan.imported, database);
    run(&mut c, &what, "UNLOCK TABLES".into())?;
    copied?;
    for t in &plan.imported {
        run(
            &mut c,
            &what,
            format!("ALTER TABLE {} IMPORT TABLESPACE", quote(&t.name)),
        )?;
        // MariaDB leaves the copied `.cfg` behind: it would stay in the directory when
        // the table moves away (a swap), and keep DROP DATABASE from removing it.
        let cfg = datadir.join(database).join(format!("{}.cfg", t.name));
        match std::fs::remove_file(&cfg) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", cfg.display()))
            }
            _ => {}
        }
    }
    Ok(())
}

/// The exported files of the template's `tables` into the slot's database directory,
/// owned as the template's are (the server's OS user); reflinks where the filesystem can.
fn copy_files(
    datadir: &Path,
    template: &DenseTemplate,
    tables: &[&TemplateTable],
    database: &str,
) -> Result<()> {
    let from = datadir.join(&template.database);
    let to = datadir.join(database);
    for t in tables {
        for ext in ["ibd", "cfg"] {
            let src = from.join(format!("{}.{ext}", t.name));
            let dst = to.join(format!("{}.{ext}", t.name));
            let meta = std::fs::symlink_metadata(&src)
                .with_context(|| format!("reading {}", src.display()))?;
            if !meta.is_file() {
                anyhow::bail!("{} is not a regular file", src.display());
            }
            std::fs::copy(&src, &dst)
                .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
            chown(&dst, Some(meta.uid()), Some(meta.gid()))
                .with_context(|| format!("chown {}", dst.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_name_one_database_and_names_stay_plain() {
        assert_eq!(grant_pattern("shop_1"), "`shop\\_1`");
        assert!(plain_name("shop_12"));
        assert!(!plain_name("my-db"));
        assert!(!plain_name(""));
        let sql = account_sql(&DenseSlot {
            database: "shop_3".into(),
            user: "dbb_slot3".into(),
            password: "pw".into(),
        });
        assert!(sql.iter().all(|s| !s.contains("*.*")), "{sql:?}");
        assert_eq!(sql.len(), 9);
    }

    fn table(name: &str) -> TemplateTable {
        TemplateTable {
            name: name.into(),
            create: format!("CREATE TABLE `{name}` (id INT PRIMARY KEY)"),
            columns: vec!["id".into()],
        }
    }

    #[test]
    fn the_counter_is_the_table_option_not_a_comment() {
        let create = "CREATE TABLE `t` (\n  `id` int NOT NULL AUTO_INCREMENT COMMENT 'x AUTO_INCREMENT=7',\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB AUTO_INCREMENT=1000 DEFAULT CHARSET=utf8mb4 COMMENT=' AUTO_INCREMENT=9'";
        let (rest, counter) = split_counter(create);
        assert_eq!(counter, Some(1000));
        assert_eq!(
            rest,
            create.replace(" AUTO_INCREMENT=1000", ""),
            "only the option goes"
        );
        let plain =
            "CREATE TABLE `t` (\n  `id` int NOT NULL\n) ENGINE=InnoDB DEFAULT CHARSET=latin1";
        assert_eq!(split_counter(plain), (plain.to_string(), None));
        // Definitions that differ only in their counters compare equal without them.
        assert_eq!(
            split_counter(&create.replace("=1000", "=1004")).0,
            split_counter(create).0
        );
    }

    #[test]
    fn small_tables_are_copied_by_rows_and_big_or_unknown_ones_imported() {
        let template = DenseTemplate {
            database: "shop".into(),
            charset: "utf8mb4".into(),
            collation: "utf8mb4_general_ci".into(),
            tables: vec![table("big"), table("edge"), table("gone"), table("small")],
            foreign_keys: false,
        };
        let plan = plan(&template, |name| match name {
            "big" => Some(LOGICAL_COPY_BYTES + 1),
            "edge" => Some(LOGICAL_COPY_BYTES),
            "small" => Some(112 << 10),
            _ => None,
        });
        let names = |v: &[&TemplateTable]| v.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&plan.logical), ["edge", "small"]);
        assert_eq!(names(&plan.imported), ["big", "gone"]);
    }
}
