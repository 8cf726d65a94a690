//! What commands print: each result as one struct that serialises for `--json` and renders
//! as text or a table for people (`printer::Human`). The same struct serves both, so the
//! JSON contract (docs/json.md) and the tables cannot drift apart.

pub mod bake;
pub mod baseline;
pub mod branch;
pub mod doctor;
pub mod follow;
pub mod history;
pub mod init;
pub mod lifecycle;
pub mod migrate;
pub mod pool;
pub mod transfer;
pub mod trash;
