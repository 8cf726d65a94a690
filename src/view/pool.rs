//! `pool status`, `pool create`, `pool resize` and `pool list`.

use crate::ops::pool::manage::PoolReport;
use crate::printer::{table, Human};
use serde::Serialize;

impl Human for PoolReport {
    fn human(&self) -> String {
        let mut out = format!(
            "pool {}: {} slot(s): {} ready, {} claimed, {} recycling; recycler {}\n",
            self.name,
            self.size,
            self.ready,
            self.claimed,
            self.recycling,
            if self.recycler {
                "running"
            } else {
                "not running"
            }
        );
        if !self.refused.is_empty() {
            out.push_str(&format!(
                "refused slot(s) {:?}: {}\n",
                self.refused,
                self.refusal
                    .as_deref()
                    .unwrap_or("the memory guard said no")
            ));
        }
        out.push_str(&table(
            &["SLOT", "BRANCH", "STATE", "PORT", "HOLDER", "CLAIMED AT"],
            self.slots
                .iter()
                .map(|s| {
                    vec![
                        s.slot.to_string(),
                        s.branch.clone(),
                        s.state.to_string(),
                        s.port.map_or("-".into(), |p| p.to_string()),
                        s.holder.map_or("-".into(), |p| format!("pid {p}")),
                        s.claimed_at
                            .map_or("-".into(), |t| t.format("%m-%d %H:%M:%S").to_string()),
                    ]
                })
                .collect(),
        ));
        out
    }
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct PoolList(pub Vec<PoolReport>);

impl Human for PoolList {
    fn human(&self) -> String {
        if self.0.is_empty() {
            return "no pools; make one with `db-branch pool create NAME --size N`".into();
        }
        table(
            &["POOL", "SLOTS", "READY", "CLAIMED", "RECYCLING", "RECYCLER"],
            self.0
                .iter()
                .map(|p| {
                    vec![
                        p.name.to_string(),
                        p.size.to_string(),
                        p.ready.to_string(),
                        p.claimed.to_string(),
                        p.recycling.to_string(),
                        if p.recycler { "running" } else { "not running" }.into(),
                    ]
                })
                .collect(),
        )
    }
}

/// `pool delete` and `pool release`.
#[derive(Debug, Serialize)]
pub struct PoolChange {
    pub pool: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot: Option<usize>,
    /// `deleted`, `not there`, `released`, `not claimed`
    pub action: String,
}

impl Human for PoolChange {
    fn human(&self) -> String {
        match self.slot {
            Some(s) => format!("pool {} slot {}: {}", self.pool, s, self.action),
            None => format!("pool {}: {}", self.pool, self.action),
        }
    }
}
