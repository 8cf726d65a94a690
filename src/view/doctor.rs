//! `doctor`.

use crate::check::Level;
use crate::ops::doctor::DoctorReport;
use crate::printer::{table, Human};

impl Human for DoctorReport {
    fn human(&self) -> String {
        let rows = self
            .checks
            .iter()
            .map(|c| {
                let mark = match c.level {
                    Level::Ok => "ok",
                    Level::Warn => "WARN",
                    Level::Fail => "FAIL",
                };
                vec![mark.to_string(), c.name.clone(), c.detail.clone()]
            })
            .collect();
        let mut out = table(&["", "CHECK", "DETAIL"], rows);
        if !self.findings.is_empty() {
            out += "\n";
            out += &table(
                &["FOUND", "WHAT", "ACTION"],
                self.findings
                    .iter()
                    .map(|f| vec![f.kind.to_string(), f.subject.clone(), f.action.to_string()])
                    .collect(),
            );
        }
        out
    }
}
