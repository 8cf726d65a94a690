//! The operations: everything db-branch does, one module per operation, each taking option
//! structs and returning domain values. They never see clap and never print data (notes go
//! through the host's printer); `commands/` turns arguments into options and results into
//! views. Each validates first, takes its locks, then applies through the host's traits,
//! pushing an undo for every side effect.

pub mod bake;
pub mod baseline;
pub mod branch;
pub mod checkpoint;
pub mod create;
pub mod delete;
pub mod diff;
pub mod doctor;
pub mod follow;
pub mod gc;
pub mod init;
pub mod inspect;
pub mod metrics;
pub mod migrate_check;
pub mod pool;
pub mod power;
pub mod reset;
pub mod stop_idle;
pub mod transfer;
pub mod trash;

#[cfg(test)]
pub mod testing;
