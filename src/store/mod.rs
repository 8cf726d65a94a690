//! db-branch's own files under `root`: branch records, locks, memory reservations, and the
//! safe way to write any of them.

pub mod files;
pub mod locks;
pub mod records;
pub mod reservations;
pub mod secrets;
pub mod stats;
pub mod tls;
pub mod trash;
