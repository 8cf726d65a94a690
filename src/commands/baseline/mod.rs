//! `baseline create`, `baseline list`, `baseline prune`.

pub mod create;
pub mod list;
pub mod prune;
