//! `baseline push`, `pull` and `receive`.

use crate::ops::transfer::Transferred;
use crate::printer::{table, Human};
use crate::transfer::remote::Received;
use crate::values::ByteSize;
use serde::Serialize;

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct TransferReport(pub Vec<Transferred>);

impl Human for TransferReport {
    fn human(&self) -> String {
        table(
            &[
                "GENERATION",
                "TO/FROM",
                "SENT AS",
                "BYTES",
                "SECONDS",
                "RATE",
            ],
            self.0
                .iter()
                .map(|t| {
                    vec![
                        t.generation.to_string(),
                        t.peer.clone(),
                        if t.already_there {
                            "already there".to_string()
                        } else {
                            match t.parent {
                                Some(p) => format!("increment on {p}"),
                                None => "full".into(),
                            }
                        },
                        ByteSize(t.bytes).to_string(),
                        format!("{:.2}", t.seconds),
                        format!("{}/s", ByteSize(t.bytes_per_second as u64)),
                    ]
                })
                .collect(),
        )
    }
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct ReceivedView(pub Received);

impl Human for ReceivedView {
    fn human(&self) -> String {
        if self.0.already_there {
            format!("{} (already here)\n", self.0.generation)
        } else {
            format!("{}\n", self.0.generation)
        }
    }
}
