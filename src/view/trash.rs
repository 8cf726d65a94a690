//! `trash`, `trash purge` and `restore`.

use crate::branch::TrashId;
use crate::ops::inspect::BranchReport;
use crate::ops::trash::TrashRow;
use crate::printer::{bytes, table, Human};
use serde::Serialize;

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct TrashList(pub Vec<TrashRow>);

impl Human for TrashList {
    fn human(&self) -> String {
        if self.0.is_empty() {
            return "the trash is empty".into();
        }
        let when = |t: &chrono::DateTime<chrono::Utc>| {
            t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        };
        table(
            &[
                "NAME",
                "OWNER",
                "DELETED",
                "BY",
                "REASON",
                "KEPT UNTIL",
                "OWN DISK",
                "ID",
            ],
            self.0
                .iter()
                .map(|r| {
                    vec![
                        r.name.to_string(),
                        r.owner.clone(),
                        when(&r.deleted_at),
                        r.deleted_by.clone(),
                        if r.complete {
                            r.reason.to_string()
                        } else {
                            format!("{} (half-moved: see doctor)", r.reason)
                        },
                        when(&r.keep_until),
                        bytes(r.own_bytes),
                        r.id.to_string(),
                    ]
                })
                .collect(),
        )
    }
}

#[derive(Debug, Serialize)]
pub struct TrashPurged {
    pub purged: Vec<TrashId>,
}

impl Human for TrashPurged {
    fn human(&self) -> String {
        String::new()
    }
}

#[derive(Debug, Serialize)]
pub struct RestoreView {
    #[serde(flatten)]
    pub branch: BranchReport,
    pub restored_from: TrashId,
    /// Its old port was taken meanwhile: the connection string changed with it.
    pub port_changed: bool,
}

impl Human for RestoreView {
    fn human(&self) -> String {
        self.branch.human()
    }
}
