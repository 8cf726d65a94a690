//! Run a project's migrations on a production-sized branch with statement instrumentation
//! on, and report per DDL/DML statement its duration, lock time, rows, whether the table
//! was rebuilt or copied, and its size.

use super::create::{create, CreateOptions};
use super::reset::{reset, ResetOptions};
use crate::branch::{BranchName, Generation};
use crate::error::usage;
use crate::host::Host;
use crate::ops::branch::connection::Connection;
use crate::ops::branch::discard::delete;
use crate::ops::branch::record::require;
use crate::server::{StatementEvent, StatementHistory, TableInfo};
use crate::store::records;
use anyhow::{anyhow, Context, Result};
use serde::Serialize;
use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

/// Statement kinds (performance_schema `statement/sql/…`) that change schema or data.
const CHECKED_KINDS: &[&str] = &[
    "alter_table",
    "create_table",
    "drop_table",
    "rename_table",
    "truncate",
    "create_index",
    "drop_index",
    "optimize",
    "insert",
    "insert_select",
    "replace",
    "replace_select",
    "update",
    "update_multi",
    "delete",
    "delete_multi",
    "load",
];

const ALTER_KINDS: &[&str] = &["alter_table", "create_index", "drop_index", "optimize"];

#[derive(Debug, Clone, Serialize)]
pub struct StatementReport {
    pub seq: usize,
    pub statement: String,
    pub kind: String,
    pub table: Option<String>,
    pub duration_ms: f64,
    /// Time spent holding or waiting for table locks (performance_schema LOCK_TIME).
    pub lock_ms: f64,
    pub rows_examined: u64,
    pub rows_affected: u64,
    /// For ALTERs: instant | in place (index build) | rebuild | copy.
    pub change: String,
    /// The table's data + index size after the migration (before, if it was dropped).
    pub table_bytes: Option<u64>,
    pub table_rows: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub violations: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct MigrateReport {
    pub branch: String,
    pub baseline: Generation,
    pub command: Vec<String>,
    pub exit_code: Option<i32>,
    pub seconds: f64,
    pub statements: Vec<StatementReport>,
    /// Tables that got a new InnoDB table id: rebuilt or copied by the migration.
    pub rebuilt_tables: Vec<String>,
    /// The statement history was full: the oldest statements may be missing.
    pub history_full: bool,
    pub max_statement_ms: Option<f64>,
    pub max_lock_ms: Option<f64>,
    pub violations: usize,
    pub kept: bool,
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn short_sql(sql: &str) -> String {
    let one_line: String = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > 120 {
        format!("{}…", one_line.chars().take(119).collect::<String>())
    } else {
        one_line
    }
}

/// The table a DDL/DML statement works on, from its text (`schema.table`, or the current
/// schema's table).
pub fn statement_table(sql: &str, current_schema: Option<&str>) -> Option<String> {
    let words = tokens(sql);
    let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    let find = |kw: &str, from: usize| {
        upper
            .iter()
            .skip(from)
            .position(|w| w == kw)
            .map(|p| p + from)
    };
    let skip_modifiers = |mut i: usize, mods: &[&str]| {
        while i < upper.len() && mods.contains(&upper[i].as_str()) {
            i += 1;
        }
        i
    };
    let first = upper.first()?.as_str();
    let idx = match first {
        "ALTER" | "CREATE" | "DROP" | "TRUNCATE" | "OPTIMIZE" | "RENAME" => {
            if let Some(on) = upper
                .iter()
                .position(|w| w == "INDEX")
                .and_then(|i| find("ON", i))
            {
                on + 1
            } else if let Some(t) = find("TABLE", 0) {
                skip_modifiers(t + 1, &["IF", "NOT", "EXISTS"])
            } else if first == "TRUNCATE" {
                1
            } else {
                return None;
            }
        }
        "INSERT" | "REPLACE" => skip_modifiers(
            1,
            &["LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "INTO"],
        ),
        "UPDATE" => skip_modifiers(1, &["LOW_PRIORITY", "IGNORE"]),
        "DELETE" => find("FROM", 0)? + 1,
        _ => return None,
    };
    let name = words.get(idx)?;
    let name = name.trim_end_matches(['(', ',', ';']);
    if name.is_empty() {
        return None;
    }
    let parts: Vec<&str> = name.split('.').map(|p| p.trim_matches('`')).collect();
    match parts.as_slice() {
        [schema, table] => Some(format!("{schema}.{table}")),
        [table] => Some(match current_schema {
            Some(s) => format!("{s}.{table}"),
            None => table.to_string(),
        }),
        _ => None,
    }
}

/// Words of a statement; backquoted names stay whole, `(` and `,` split.
fn tokens(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in sql.chars() {
        match c {
            '`' => {
                quoted = !quoted;
                cur.push(c);
            }
            c if !quoted && (c.is_whitespace() || c == '(' || c == ',' || c == ';') => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// How an ALTER ran, from its stages, else from whether the table got a new id.
fn change_of(event: &StatementEvent, table_rebuilt: bool) -> String {
    let has = |needle: &str| event.stages.iter().any(|s| s.contains(needle));
    if has("copy to tmp table") {
        "copy".into()
    } else if has("alter table (log apply table)") || (event.stages.is_empty() && table_rebuilt) {
        "rebuild".into()
    } else if has("stage/innodb/alter table") {
        "in place (index build)".into()
    } else {
        "instant".into()
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    pub max_statement: Option<Duration>,
    pub max_lock: Option<Duration>,
}

pub fn analyse(
    before: &[TableInfo],
    after: &[TableInfo],
    history: &StatementHistory,
    limits: &Limits,
) -> (Vec<StatementReport>, Vec<String>) {
    let key = |t: &TableInfo| format!("{}.{}", t.schema, t.name);
    let before_map: HashMap<String, &TableInfo> = before.iter().map(|t| (key(t), t)).collect();
    let after_map: HashMap<String, &TableInfo> = after.iter().map(|t| (key(t), t)).collect();
    let mut rebuilt: Vec<String> = after
        .iter()
        .filter(|t| {
            before_map
                .get(&key(t))
                .is_some_and(|b| b.table_id.is_some() && b.table_id != t.table_id)
        })
        .map(key)
        .collect();
    rebuilt.sort();
    let mut reports = Vec::new();
    for event in history
        .events
        .iter()
        .filter(|e| CHECKED_KINDS.contains(&e.kind.as_str()))
    {
        let table = statement_table(&event.sql, event.schema.as_deref());
        let info = table
            .as_ref()
            .and_then(|t| after_map.get(t).or_else(|| before_map.get(t)));
        let change = if ALTER_KINDS.contains(&event.kind.as_str()) {
            change_of(event, table.as_ref().is_some_and(|t| rebuilt.contains(t)))
        } else {
            "-".into()
        };
        let mut violations = Vec::new();
        if let Some(max) = limits.max_statement.filter(|m| event.duration > *m) {
            violations.push(format!(
                "ran {:.2} s > --max-statement {:.2} s",
                event.duration.as_secs_f64(),
                max.as_secs_f64()
            ));
        }
        if let Some(max) = limits.max_lock.filter(|m| event.lock > *m) {
            violations.push(format!(
                "locked {:.2} s > --max-lock {:.2} s",
                event.lock.as_secs_f64(),
                max.as_secs_f64()
            ));
        }
        reports.push(StatementReport {
            seq: reports.len() + 1,
            statement: short_sql(&event.sql),
            kind: event.kind.clone(),
            table,
            duration_ms: ms(event.duration),
            lock_ms: ms(event.lock),
            rows_examined: event.rows_examined,
            rows_affected: event.rows_affected,
            change,
            table_bytes: info.map(|t| t.bytes),
            table_rows: info.map(|t| t.rows),
            error: event.error.clone(),
            violations,
        });
    }
    (reports, rebuilt)
}

pub fn advice(s: &StatementReport) -> &'static str {
    match s.change.as_str() {
        "copy" => {
            "the table is copied with writes blocked: use ALGORITHM=INPLACE, LOCK=NONE or \
             ALGORITHM=INSTANT where the change allows; a column type change needs a copy, \
             so add a new column, backfill it in batches and switch over instead"
        }
        "rebuild" => {
            "the table is rebuilt: check whether ALGORITHM=INSTANT can do it, or run it at a \
             quiet time with ALGORITHM=INPLACE, LOCK=NONE"
        }
        "in place (index build)" => {
            "building the index reads the whole table: add it with ALGORITHM=INPLACE, \
             LOCK=NONE so writes go on"
        }
        _ if s.kind.starts_with("update")
            || s.kind.starts_with("delete")
            || s.kind.starts_with("insert") =>
        {
            "batch large data changes (e.g. 10,000 rows per transaction) so locks stay short"
        }
        _ => "split the statement or run it at a quiet time",
    }
}

#[derive(Debug, Clone)]
pub struct MigrateOptions {
    /// Use this branch (created if missing and then deleted unless `keep`; reset first if
    /// it exists, then kept). None: a throw-away branch.
    pub branch: Option<BranchName>,
    pub baseline: Option<Generation>,
    pub limits: Limits,
    pub keep: bool,
    /// The migration command and its arguments.
    pub command: Vec<String>,
}

/// Runs the migration on an instrumented branch and reports each statement. The report is
/// returned whatever the migration's exit code; the caller decides what fails.
pub fn migrate_check(host: &Host, opts: &MigrateOptions) -> Result<MigrateReport> {
    let program = opts
        .command
        .first()
        .ok_or_else(|| usage("give the migration command after `--`"))?;
    host.storage.open()?;
    let throwaway: BranchName = format!("migrate-check-{}", std::process::id())
        .parse()
        .map_err(|e: String| anyhow!(e))?;
    let name = opts.branch.clone().unwrap_or(throwaway);
    let instrumentation = host.server.instrumentation_options();
    // Existing branch: reset it with instrumentation. New one: create it with it.
    let existed = records::load(&host.layout, &name)?.is_some();
    if existed {
        let r = require(host, &name)?;
        if let Some(g) = opts.baseline.filter(|g| *g != r.baseline) {
            return Err(usage(format!(
                "branch {name} exists and was cloned from {} (not {g}); drop --baseline \
                 or use another --branch",
                r.baseline
            )));
        }
        host.printer.note(format!(
            "resetting branch {name} with statement instrumentation..."
        ));
        let mut reset_opts = ResetOptions::named(name.clone());
        reset_opts.server_options = Some(instrumentation);
        reset(host, &reset_opts)?;
    } else {
        host.printer.note(format!(
            "creating branch {name} with statement instrumentation..."
        ));
        let mut c = CreateOptions::named(name.clone());
        c.baseline = opts.baseline;
        c.server_options = instrumentation;
        create(host, &c)?;
    }
    let delete_after = !existed && !opts.keep;
    let result = check(host, opts, &name, program);
    // Clean up whatever happened: the throw-away branch goes; a kept one loses the
    // instrumentation at its next start.
    if delete_after {
        if let Err(e) = delete(host, &name, true) {
            host.printer
                .warn(format!("could not delete branch {name}: {e:#}"));
        }
    } else {
        let _lock = host.branch_lock(&name)?;
        if let Some(mut r) = records::load(&host.layout, &name)? {
            r.server_options.clear();
            records::save(&host.layout, &r)?;
        }
    }
    let mut report = result?;
    report.kept = !delete_after;
    Ok(report)
}

fn check(
    host: &Host,
    opts: &MigrateOptions,
    name: &BranchName,
    program: &str,
) -> Result<MigrateReport> {
    let record = require(host, name)?;
    let socket = host.layout.socket(name);
    let before = host
        .server
        .tables(&socket)
        .context("reading the tables before")?;
    let conn = Connection::of(host, &record);
    let mut cmd = Command::new(program);
    cmd.args(&opts.command[1..])
        .envs(conn.variables(name.as_str()))
        // The report owns stdout; the migration's own output goes to stderr.
        .stdout(std::io::stderr())
        .stderr(std::io::stderr());
    // For a user of db-branchd, the migration runs as them, never as root.
    crate::access::run_as_caller(&mut cmd, &host.caller);
    host.printer
        .note(format!("running `{}`...", opts.command.join(" ")));
    let started = Instant::now();
    let status = cmd
        .status()
        .with_context(|| format!("starting the migration command `{program}`"))?;
    let seconds = started.elapsed().as_secs_f64();
    let after = host
        .server
        .tables(&socket)
        .context("reading the tables after")?;
    let history = host.server.statement_history(&socket)?;
    let (statements, rebuilt_tables) = analyse(&before, &after, &history, &opts.limits);
    Ok(MigrateReport {
        branch: name.to_string(),
        baseline: record.baseline,
        command: opts.command.clone(),
        exit_code: status.code(),
        seconds,
        violations: statements
            .iter()
            .filter(|s| !s.violations.is_empty())
            .count(),
        statements,
        rebuilt_tables,
        history_full: history.capacity > 0 && history.events.len() as u64 >= history.capacity,
        max_statement_ms: opts.limits.max_statement.map(ms),
        max_lock_ms: opts.limits.max_lock.map(ms),
        kept: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_found_in_statements() {
        let t = |sql: &str| statement_table(sql, Some("shop"));
        assert_eq!(
            t("ALTER TABLE orders ADD COLUMN x INT").as_deref(),
            Some("shop.orders")
        );
        assert_eq!(
            t("alter online ignore table `a`.`b` force").as_deref(),
            Some("a.b")
        );
        assert_eq!(
            t("CREATE TABLE IF NOT EXISTS t2 (id INT)").as_deref(),
            Some("shop.t2")
        );
        assert_eq!(t("DROP TABLE IF EXISTS x.y").as_deref(), Some("x.y"));
        assert_eq!(
            t("CREATE UNIQUE INDEX i ON orders (total)").as_deref(),
            Some("shop.orders")
        );
        assert_eq!(
            t("DROP INDEX i ON `orders`").as_deref(),
            Some("shop.orders")
        );
        assert_eq!(
            t("INSERT IGNORE INTO items(a) VALUES (1)").as_deref(),
            Some("shop.items")
        );
        assert_eq!(
            t("UPDATE LOW_PRIORITY orders SET a=1").as_deref(),
            Some("shop.orders")
        );
        assert_eq!(
            t("DELETE QUICK FROM orders WHERE 1").as_deref(),
            Some("shop.orders")
        );
        assert_eq!(t("TRUNCATE t3").as_deref(), Some("shop.t3"));
        assert_eq!(t("SELECT 1"), None);
    }

    fn event(kind: &str, sql: &str, ms: u64, stages: &[&str]) -> StatementEvent {
        StatementEvent {
            thread: 1,
            event_id: 1,
            kind: kind.into(),
            sql: sql.into(),
            schema: Some("shop".into()),
            duration: Duration::from_millis(ms),
            lock: Duration::from_millis(ms / 2),
            rows_examined: 0,
            rows_affected: 0,
            error: None,
            stages: stages.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn table_info(name: &str, id: u64) -> TableInfo {
        TableInfo {
            schema: "shop".into(),
            name: name.into(),
            table_id: Some(id),
            bytes: 1 << 20,
            rows: 1000,
        }
    }

    #[test]
    fn alters_are_classified_and_limits_enforced() {
        let history = StatementHistory {
            events: vec![
                event("select", "SELECT * FROM orders", 5, &[]),
                event(
                    "alter_table",
                    "ALTER TABLE orders ADD COLUMN n INT, ALGORITHM=INSTANT",
                    12,
                    &[],
                ),
                event(
                    "alter_table",
                    "ALTER TABLE items MODIFY q BIGINT",
                    1300,
                    &["stage/sql/copy to tmp table"],
                ),
                event(
                    "alter_table",
                    "ALTER TABLE c FORCE",
                    100,
                    &["stage/innodb/alter table (log apply table)"],
                ),
                event(
                    "alter_table",
                    "ALTER TABLE orders ADD INDEX t (total)",
                    130,
                    &["stage/innodb/alter table (log apply index)"],
                ),
                event("update", "UPDATE orders SET total = 0", 40, &[]),
            ],
            capacity: 100,
        };
        let before = vec![
            table_info("orders", 1),
            table_info("items", 2),
            table_info("c", 3),
        ];
        let after = vec![
            table_info("orders", 1),
            table_info("items", 7),
            table_info("c", 8),
        ];
        let limits = Limits {
            max_statement: Some(Duration::from_secs(1)),
            max_lock: None,
        };
        let (r, rebuilt) = analyse(&before, &after, &history, &limits);
        assert_eq!(r.len(), 5, "the SELECT is not reported");
        let changes: Vec<&str> = r.iter().map(|s| s.change.as_str()).collect();
        assert_eq!(
            changes,
            ["instant", "copy", "rebuild", "in place (index build)", "-"]
        );
        assert_eq!(rebuilt, ["shop.c", "shop.items"]);
        assert_eq!(r[1].violations.len(), 1);
        assert!(r[1].violations[0].contains("1.30 s"));
        assert!(r
            .iter()
            .filter(|s| s.seq != 2)
            .all(|s| s.violations.is_empty()));
        assert!(advice(&r[1]).contains("ALGORITHM=INPLACE"));
    }
}
