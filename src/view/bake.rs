//! `bake`.

use crate::bake::BakeSummary;
use crate::branch::Generation;
use crate::printer::{bytes, table, Human};
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct BakeReport {
    pub generation: Generation,
    pub seconds: f64,
    #[serde(flatten)]
    pub summary: BakeSummary,
}

impl Human for BakeReport {
    fn human(&self) -> String {
        let mut out = format!(
            "baseline {} baked in {:.1} s by the {} path: {} table(s), {} rows, {}\n",
            self.generation,
            self.seconds,
            self.summary.path,
            self.summary.tables,
            self.summary.rows,
            bytes(Some(self.summary.bytes))
        );
        out += &table(
            &["PHASE", "SECONDS", "BYTES"],
            self.summary
                .phases
                .iter()
                .map(|p| {
                    vec![
                        p.name.clone(),
                        format!("{:.2}", p.seconds),
                        bytes(Some(p.bytes)),
                    ]
                })
                .collect(),
        );
        if !self.summary.splits.is_empty() {
            out += "\n";
            out += &table(
                &["TABLE", "RANGES", "BY"],
                self.summary
                    .splits
                    .iter()
                    .map(|s| {
                        vec![
                            s.table.clone(),
                            s.ranges.to_string(),
                            s.by.clone()
                                .or_else(|| {
                                    s.whole_because.as_ref().map(|w| format!("one reader: {w}"))
                                })
                                .unwrap_or_default(),
                        ]
                    })
                    .collect(),
            );
        }
        if let Some(n) = self.summary.small_as_rows {
            out += &format!(
                "\n{n} small table(s) copied as rows (on this server faster than importing them)"
            );
        }
        match self.summary.statistics {
            Some(crate::bake::job::Statistics::Source) => {
                out += "\nindex statistics: the source's";
            }
            Some(crate::bake::job::Statistics::Analyzed) => {
                out += "\nindex statistics: computed here (the source's could not be read)";
            }
            None => {}
        }
        if let Some(n) = self.summary.verified_tables {
            out += &format!("\nverified: {n} table(s) match the source");
        }
        out
    }
}
