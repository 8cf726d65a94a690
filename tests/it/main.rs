//! Every integration test, in one binary (as jj does): black-box CLI tests that need
//! nothing (`cli`, `hostile`, `generated`, `ci_recipes`, `snapshots`), and the root tiers
//! on real btrfs, real servers and a real service manager, `#[ignore]`d in a plain
//! `cargo test` and run on purpose by scripts/test with `--ignored` and a module filter
//! (`lifecycle::`, `bake::`, …). Shared set-up is `db_branch::testkit` (the `testing`
//! feature).

mod bake;
mod ci_recipes;
mod cli;
mod clients;
mod fidelity;
mod fleet;
mod follow;
mod generated;
mod history;
mod hostile;
mod hostile_bus;
mod idle_ttl;
mod lifecycle;
mod memory;
mod metrics;
mod migrate;
mod network;
mod pools;
mod profiles;
mod reliability;
mod servers;
mod shared_host;
mod trash;
mod zfs;
