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
}

/// How writes are held off while the transactions open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freeze {
    /// The caller holds `FLUSH TABLES … FOR EXPORT` on every table being baked.
    Held,
    /// Take `FLUSH TABLES WITH READ LOCK` for the moment it takes (needs RELOAD).
    GlobalReadLock,
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
        Ok(Snapshot {
            readers,
            verifier,
            consistent,
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
