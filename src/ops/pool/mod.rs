//! Pools of pristine branches for parallel test suites. A pool owns `size` ordinary
//! branches (its slots, named `POOL-N`, labelled `db-branch-pool=POOL`, protected from gc
//! and kept from stop-idle); a test worker claims a ready slot in milliseconds — a rename of
//! a file, atomic however many claim at once — and releases it when done; a recycler process
//! resets released slots (SIGKILL, roll back, start) in the background and returns them to
//! ready. The memory guard counts slots like any branch.
//!
//! On disk, under `root/pools/POOL/`: `pool.json` (the spec), one token file per slot in
//! `ready/`, `claimed/` (holding the lease: who claimed it) or `recycling/`, and the
//! recycler's lock, pid, log and claim socket (`claim.sock`: a claim there lasts as long
//! as the claimant's connection).

pub mod claim;
pub mod dense;
pub mod dense_spec;
pub mod listener;
pub mod make;
pub mod manage;
pub mod protocol;
pub mod recycle;
pub mod recycler;
pub mod run;
pub mod slots;

pub use crate::names::PoolName;

use crate::branch::{BranchName, Generation};
use crate::config::Profile;
use crate::error::{Error, Kind};
use crate::host::Host;
use crate::values::ByteSize;
use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The label every slot carries, naming its pool.
pub const POOL_LABEL: &str = "db-branch-pool";

/// Slots of one pool at most.
pub const MAX_SIZE: usize = 1000;

/// What a pool is made of, as `pool create` asked.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PoolSpec {
    pub name: PoolName,
    pub size: usize,
    /// None: the newest generation when each slot was made.
    pub baseline: Option<Generation>,
    pub profile: Option<Profile>,
    pub buffer_pool: Option<ByteSize>,
    pub created: DateTime<Utc>,
    /// Dense slots: databases inside shared servers (None: a server per slot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense: Option<dense_spec::DenseSpec>,
}

impl PoolSpec {
    /// The branch whose server serves slot `n`: its own, or the dense server it shares.
    pub fn server_of(&self, n: usize) -> BranchName {
        match &self.dense {
            None => slot_branch(&self.name, n),
            Some(d) => dense_spec::server_branch(&self.name, d.server_index(n)),
        }
    }
}

/// The branch serving slot `n` of `pool`.
pub fn slot_branch(pool: &PoolName, n: usize) -> BranchName {
    format!("{pool}-{n}")
        .parse()
        .expect("a pool name plus -N is a branch name")
}

pub fn pools_dir(host: &Host) -> PathBuf {
    host.layout.root().join("pools")
}

pub fn pool_dir(host: &Host, pool: &PoolName) -> PathBuf {
    pool_dir_under(host.layout.root(), pool)
}

/// The pool's directory under db-branch's root, for a caller without a host (`pool
/// claim` over the socket, before any set-up).
pub fn pool_dir_under(root: &Path, pool: &PoolName) -> PathBuf {
    root.join("pools").join(pool.as_str())
}

/// Where the pool's recycler listens for claims (docs/pools.md, "The claim protocol").
pub fn socket_file(dir: &Path) -> PathBuf {
    dir.join("claim.sock")
}

fn spec_file(dir: &Path) -> PathBuf {
    dir.join("pool.json")
}

/// The pool's spec, or None when there is no such pool.
pub fn load_spec(dir: &Path) -> Result<Option<PoolSpec>> {
    match std::fs::read(spec_file(dir)) {
        Ok(bytes) => {
            Ok(Some(serde_json::from_slice(&bytes).with_context(|| {
                format!("reading {}", spec_file(dir).display())
            })?))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", spec_file(dir).display())),
    }
}

pub fn save_spec(dir: &Path, spec: &PoolSpec) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(spec).expect("a spec serialises");
    crate::store::files::write_atomic(&spec_file(dir), &bytes, 0o644)
}

/// The spec of an existing pool, or a not-found error that says what to do.
pub fn require(host: &Host, pool: &PoolName) -> Result<PoolSpec> {
    load_spec(&pool_dir(host, pool))?.ok_or_else(|| {
        Error::new(Kind::NotFound, format!("there is no pool {pool}"))
            .hint("see `db-branch pool list`")
            .hint(format!(
                "make one with `db-branch pool create {pool} --size 4`"
            ))
            .into()
    })
}

/// Every pool's spec, by name.
pub fn list(host: &Host) -> Result<Vec<PoolSpec>> {
    let mut out = Vec::new();
    let dir = pools_dir(host);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    for entry in entries.flatten() {
        if let Some(spec) = load_spec(&entry.path())? {
            out.push(spec);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_names_leave_room_for_slot_numbers() {
        assert!("ci".parse::<PoolName>().is_ok());
        assert!("Bad".parse::<PoolName>().unwrap_err().contains("pool name"));
        assert!("a".repeat(41).parse::<PoolName>().is_err());
        let p: PoolName = "a".repeat(40).parse().unwrap();
        assert_eq!(slot_branch(&p, 1000).as_str().len(), 45);
    }
}
