//! `baseline create`, `list`, `prune`, and between hosts `push`, `pull` (with the far
//! side's `receive` and `send`).

pub mod create;
pub mod list;
pub mod prune;
pub mod transfer;
