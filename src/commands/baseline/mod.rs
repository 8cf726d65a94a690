//! `baseline create`, `list`, `prune`, between hosts `push`, `pull` (with the far side's
//! `receive` and `send`), and following a primary: `follow`, `cut`, `follower`, `unfollow`.

pub mod create;
pub mod follow;
pub mod list;
pub mod prune;
pub mod transfer;
