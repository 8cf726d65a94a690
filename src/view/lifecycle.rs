//! `gc` and `stop-idle`.

use crate::ops::gc::GcRow;
use crate::ops::stop_idle::IdleRow;
use crate::printer::{table, Human};
use serde::Serialize;

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct GcReport(pub Vec<GcRow>);

impl Human for GcReport {
    fn human(&self) -> String {
        if self.0.is_empty() {
            return "nothing to collect".into();
        }
        table(
            &["NAME", "REASON", "ACTION"],
            self.0
                .iter()
                .map(|r| {
                    let action = match &r.error {
                        Some(e) => format!("error: {e}"),
                        None => r.action.to_string(),
                    };
                    vec![r.name.clone(), r.reason.clone(), action]
                })
                .collect(),
        )
    }
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct IdleReport(pub Vec<IdleRow>);

impl Human for IdleReport {
    fn human(&self) -> String {
        if self.0.is_empty() {
            return "no branches".into();
        }
        table(
            &["NAME", "ACTION", "IDLE", "LAST ACTIVITY"],
            self.0
                .iter()
                .map(|r| {
                    vec![
                        r.name.clone(),
                        match &r.error {
                            Some(e) => format!("error: {e}"),
                            None => r.action.to_string(),
                        },
                        r.idle_secs.map_or("-".into(), |s| {
                            humantime::format_duration(std::time::Duration::from_secs(
                                s.max(0) as u64
                            ))
                            .to_string()
                        }),
                        r.last_activity.map_or("-".into(), |t| t.to_rfc3339()),
                    ]
                })
                .collect(),
        )
    }
}
