//! What a dense pool is made of (`pool create --dense`), as pure values: which server
//! and database each slot has, what the servers are called, and which generations can be
//! copied into dense slots at all. The operations are in dense.rs.

use crate::branch::{BranchName, CheckpointTag};
use crate::error::usage;
use crate::names::PoolName;
use anyhow::Result;
use serde::{Deserialize, Serialize};

/// Slots per server unless `--per-server` says otherwise.
pub const DEFAULT_PER_SERVER: usize = 16;
/// Slots per server at most.
pub const MAX_PER_SERVER: usize = 200;

/// The checkpoint of a dense server holding every slot's copy pristine.
pub fn checkpoint_tag() -> CheckpointTag {
    "dense".parse().expect("a valid tag")
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DenseSpec {
    pub per_server: usize,
    /// The generation's application database each slot has a copy of.
    pub database: String,
}

impl DenseSpec {
    /// Which server (1, 2, …) slot `slot` lives in.
    pub fn server_index(&self, slot: usize) -> usize {
        (slot - 1) / self.per_server + 1
    }

    /// The slots of server `k` in a pool of `size`.
    pub fn slots_of(&self, k: usize, size: usize) -> std::ops::RangeInclusive<usize> {
        (k - 1) * self.per_server + 1..=(k * self.per_server).min(size)
    }

    /// Servers a pool of `size` slots needs.
    pub fn servers(&self, size: usize) -> usize {
        size.div_ceil(self.per_server)
    }

    /// Slot `slot`'s database.
    pub fn slot_database(&self, slot: usize) -> String {
        format!("{}_{slot}", self.database)
    }
}

/// The branch serving dense server `k` of `pool`.
pub fn server_branch(pool: &PoolName, k: usize) -> BranchName {
    format!("{pool}-s{k}")
        .parse()
        .expect("a pool name plus -sN is a branch name")
}

/// Slot `slot`'s account name (32 characters at most on MySQL).
pub fn slot_user(slot: usize) -> String {
    format!("dbb_slot{slot}")
}

/// The dense spec for a pool of generation databases `databases`, or why not.
pub fn plan(databases: &[String], per_server: Option<usize>) -> Result<DenseSpec> {
    let per_server = per_server.unwrap_or(DEFAULT_PER_SERVER);
    if per_server == 0 || per_server > MAX_PER_SERVER {
        return Err(usage(format!(
            "--per-server must be between 1 and {MAX_PER_SERVER}, not {per_server}"
        )));
    }
    let database = match databases {
        [one] => one.clone(),
        [] => {
            return Err(crate::error::Error::new(
                crate::error::Kind::Usage,
                "the generation has no application database for dense slots to copy",
            )
            .hint("make the pool without --dense")
            .into())
        }
        many => {
            return Err(crate::error::Error::new(
                crate::error::Kind::Usage,
                format!(
                    "dense slots copy one application database; the generation has {}",
                    many.join(", ")
                ),
            )
            .hint("make the pool without --dense (a server per slot holds them all)")
            .into())
        }
    };
    // The slot's database name: the template's plus `_N`, within the server's 64.
    if !crate::server::dense::plain_name(&database) || database.len() > 64 - 5 {
        return Err(usage(format!(
            "database {database:?} cannot be copied into dense slots: its name must be \
             letters, digits, `_` and `$`, at most 59 characters"
        )));
    }
    Ok(DenseSpec {
        per_server,
        database,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_map_to_servers_and_databases() {
        let d = DenseSpec {
            per_server: 3,
            database: "shop".into(),
        };
        assert_eq!(
            (1..=7).map(|s| d.server_index(s)).collect::<Vec<_>>(),
            [1, 1, 1, 2, 2, 2, 3]
        );
        assert_eq!(d.slots_of(3, 7), 7..=7);
        assert_eq!(d.slots_of(2, 7), 4..=6);
        assert_eq!(d.servers(7), 3);
        assert_eq!(d.slot_database(12), "shop_12");
        let p: PoolName = "ci".parse().unwrap();
        assert_eq!(server_branch(&p, 2).as_str(), "ci-s2");
    }

    #[test]
    fn plans_refuse_what_they_cannot_copy() {
        assert!(plan(&["shop".into()], None).is_ok());
        let e = plan(&["a".into(), "b".into()], None).unwrap_err();
        assert!(e.to_string().contains("one application database"), "{e}");
        assert!(plan(&[], None).is_err());
        assert!(plan(&["shop".into()], Some(0)).is_err());
        assert!(plan(&["my-db".into()], None).is_err());
    }
}
