//! Past one host: baseline generations travel as the storage's own incremental send
//! streams (`baseline push/pull`), framed and checksummed end to end (`wire`), to another
//! host over ssh or to a directory of stream files (`remote`: one trait, `ssh` and `dir`
//! behind it); `--host` runs any command on another host over ssh (`ssh`).

pub mod dir;
pub mod endpoint;
pub mod remote;
pub mod ssh;
pub mod wire;
