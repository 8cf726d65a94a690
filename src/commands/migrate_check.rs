use crate::cli::{MigrateCheckArgs, ReportFormat};
use crate::host::Host;
use crate::ops::migrate_check::{advice, migrate_check, Limits, MigrateOptions, StatementReport};
use anyhow::{anyhow, Result};

pub fn run(host: &Host, args: &MigrateCheckArgs) -> Result<()> {
    let opts = MigrateOptions {
        branch: args.branch.clone(),
        baseline: args.baseline,
        limits: Limits {
            max_statement: args.max_statement.map(|d| d.0),
            max_lock: args.max_lock.map(|d| d.0),
        },
        keep: args.keep,
        command: args.command.clone(),
    };
    let report = migrate_check(host, &opts)?;
    let format = if host.printer.json {
        ReportFormat::Json
    } else {
        args.format
    };
    match format {
        ReportFormat::Table => host.printer.emit(&report)?,
        ReportFormat::Json => host.printer.emit_json(&report)?,
        ReportFormat::Markdown => host.printer.data(&report.markdown())?,
    }
    if report.exit_code != Some(0) {
        return Err(anyhow!(
            "the migration command `{}` failed ({}); its output is above",
            args.command.join(" "),
            report
                .exit_code
                .map_or("killed by a signal".into(), |c| format!("exit {c}"))
        ));
    }
    let bad: Vec<&StatementReport> = report
        .statements
        .iter()
        .filter(|s| !s.violations.is_empty())
        .collect();
    if !bad.is_empty() {
        let lines: Vec<String> = bad
            .iter()
            .map(|s| {
                format!(
                    "#{} `{}`: {}. Fix: {}",
                    s.seq,
                    s.statement,
                    s.violations.join("; "),
                    advice(s)
                )
            })
            .collect();
        return Err(anyhow!(
            "{} statement(s) over the limits:\n{}",
            bad.len(),
            lines.join("\n")
        ));
    }
    Ok(())
}
