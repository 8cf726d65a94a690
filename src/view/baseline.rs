//! `baseline create`, `baseline list`, `baseline prune`.

use crate::branch::Generation;
use crate::ops::baseline::{BaselineRow, PruneRow};
use crate::printer::{table, Human};
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct BaselineCreated {
    pub generation: Generation,
    pub seconds: f64,
}

impl Human for BaselineCreated {
    fn human(&self) -> String {
        format!("{}\n", self.generation)
    }
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct BaselineList(pub Vec<BaselineRow>);

impl Human for BaselineList {
    fn human(&self) -> String {
        if self.0.is_empty() {
            return "no baselines; make one with `db-branch baseline create --empty`".into();
        }
        table(
            &[
                "GENERATION",
                "BRANCHES",
                "SERVER",
                "CREATED",
                "DATABASES",
                "SOURCE",
            ],
            self.0
                .iter()
                .map(|r| {
                    vec![
                        r.generation.to_string(),
                        r.branches.to_string(),
                        r.server.map_or("-".into(), |s| s.to_string()),
                        r.created
                            .map_or("-".into(), |t| t.format("%Y-%m-%d %H:%M").to_string()),
                        match &r.databases {
                            Some(d) if !d.is_empty() => d.join(", "),
                            _ => "-".into(),
                        },
                        match (&r.source, &r.followed) {
                            (Some(s), Some(cut)) => format!("{s} at {}", cut.gtid),
                            (Some(s), None) => s.clone(),
                            (None, _) => "-".into(),
                        },
                    ]
                })
                .collect(),
        )
    }
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct PruneReport(pub Vec<PruneRow>);

impl Human for PruneReport {
    fn human(&self) -> String {
        table(
            &["GENERATION", "ACTION"],
            self.0
                .iter()
                .map(|r| vec![r.generation.to_string(), r.action.to_string()])
                .collect(),
        )
    }
}
