//! One point in time on a live source: the readers of a bake (and the connection `--verify`
//! compares with) all open their transactions while no table can change, so every table
//! comes from the same moment and the comparison sees what was copied.

use super::session::{connect_source, session, SOURCE_SESSION};
use anyhow::Result;
use mysql::prelude::Queryable;

/// Open consistent-snapshot transactions on the source.
pub struct Snapshot {
    /// One per parallel reader.
    pub readers: Vec<mysql::Conn>,
    /// For `--verify`.
    pub verifier: Option<mysql::Conn>,
    /// False when nothing could stop writes while the transactions opened (the source
    /// user lacks RELOAD): each then has its own moment.
    pub consistent: bool,
    /// The source's executed GTIDs at that moment (None: not consistent, or the source
    /// keeps none — its binary log is off).
    pub gtid: Option<String>,
}

/// How writes are held off while the transactions open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freeze {
    /// The caller holds `FLUSH TABLES … FOR EXPORT` on every table being baked.
    Held,
    /// Take `FLUSH TABLES WITH READ LOCK` for the moment it takes (needs RELOAD).
    GlobalReadLock,
}

/// The source's executed GTIDs now (None: it keeps none, or the query is not its flavour's).
fn gtid_now(conn: &mut mysql::Conn) -> Option<String> {
    let version: String = conn.query_first("SELECT VERSION()").ok().flatten()?;
    let family = crate::flavour::Flavour::from_version_string(&version)?.family;
    let gtid: Option<String> = conn
        .query_first(crate::replication::source_position_query(family))
        .ok()
        .flatten();
    gtid.filter(|g| !g.trim().is_empty())
}

pub fn open(url: &str, readers: usize, verifier: bool, freeze: Freeze) -> Result<Snapshot> {
    let mut coordinator = None;
    let consistent = match freeze {
        Freeze::Held => true,
        Freeze::GlobalReadLock => {
            let mut c = connect_source(url)?;
            let locked = c.query_drop("FLUSH TABLES WITH READ LOCK").is_ok();
            coordinator = Some(c);
            locked
        }
    };
    let begin = || -> Result<mysql::Conn> {
        let mut c = connect_source(url)?;
        session(&mut c, SOURCE_SESSION)?;
        c.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")?;
        c.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT")?;
        Ok(c)
    };
    let opened = (|| -> Result<Snapshot> {
        let readers = (0..readers).map(|_| begin()).collect::<Result<Vec<_>>>()?;
        let verifier = if verifier { Some(begin()?) } else { None };
        // Still frozen: no transaction can commit between the snapshots and this.
        let gtid = if consistent {
            match coordinator.as_mut() {
                Some(c) => gtid_now(c),
                None => gtid_now(&mut connect_source(url)?),
            }
        } else {
            None
        };
        Ok(Snapshot {
            readers,
            verifier,
            consistent,
            gtid,
        })
    })();
    // Writes resume as soon as the transactions are open, whatever happened.
    if let Some(mut c) = coordinator {
        if consistent {
            c.query_drop("UNLOCK TABLES")?;
        }
    }
    opened
}
