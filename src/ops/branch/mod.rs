//! The shared steps of the verbs that make, start and end branches: each is used by
//! several verbs (create, reset, start, stop, delete, gc, checkpoint, pools…) and by none
//! of them alone. Bottom up: `unit` (the supervisor's handle on a server) ← `budget` (the
//! memory guard's arithmetic for one branch: ceiling, commitments, admission) ← `fit`
//! (may this server serve that data) ← `launch` (options, start, wait) ← `capture`
//! (snapshots of a running branch); `record`, `expiry`, `database`, `connection`, `discard` and `dispose` (into the
//! trash, or at once) beside them. Nothing here imports a verb.

pub mod budget;
pub mod capture;
pub mod connection;
pub mod database;
pub mod discard;
pub mod dispose;
pub mod expiry;
pub mod fit;
pub mod launch;
pub mod record;
pub mod unit;
