//! `migrate-check`: a table, markdown for a pull-request comment, or JSON.

use crate::ops::migrate_check::MigrateReport;
use crate::printer::{table, Human};

fn size(b: Option<u64>) -> String {
    crate::printer::bytes(b)
}

impl MigrateReport {
    fn rows(&self) -> Vec<Vec<String>> {
        self.statements
            .iter()
            .map(|s| {
                vec![
                    s.seq.to_string(),
                    s.statement.clone(),
                    s.table.clone().unwrap_or_else(|| "-".into()),
                    format!("{:.0}", s.duration_ms),
                    format!("{:.0}", s.lock_ms),
                    s.rows_affected.to_string(),
                    s.change.clone(),
                    size(s.table_bytes),
                    if s.violations.is_empty() {
                        s.error.clone().unwrap_or_default()
                    } else {
                        s.violations.join("; ")
                    },
                ]
            })
            .collect()
    }

    const HEADER: [&'static str; 9] = [
        "#",
        "STATEMENT",
        "TABLE",
        "MS",
        "LOCK MS",
        "ROWS",
        "CHANGE",
        "SIZE",
        "PROBLEM",
    ];

    pub fn markdown(&self) -> String {
        let mut out = format!(
            "### db-branch migrate-check: {} statement(s), {} over the limits\n\n",
            self.statements.len(),
            self.violations
        );
        out += &format!(
            "Branch `{}` of baseline {}, `{}` in {:.1} s.\n\n",
            self.branch,
            self.baseline,
            self.command.join(" "),
            self.seconds
        );
        out += &format!("| {} |\n|{}\n", Self::HEADER.join(" | "), "---|".repeat(9));
        for r in self.rows() {
            let cells: Vec<String> = r
                .into_iter()
                .map(|c| c.replace('|', "\\|").replace('`', "'"))
                .collect();
            out += &format!("| {} |\n", cells.join(" | "));
        }
        if self.history_full {
            out += "\n⚠ The statement history was full: the oldest statements are missing.\n";
        }
        out
    }
}

impl Human for MigrateReport {
    fn human(&self) -> String {
        let mut out = if self.statements.is_empty() {
            "the migration ran no DDL or DML statement\n".to_string()
        } else {
            table(&Self::HEADER, self.rows())
        };
        if !self.rebuilt_tables.is_empty() {
            out += &format!("\nrebuilt or copied: {}", self.rebuilt_tables.join(", "));
        }
        if self.history_full {
            out += "\nwarning: the statement history was full; the oldest statements are missing";
        }
        out
    }
}
