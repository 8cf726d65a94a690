//! Work spread over `--jobs` connections to the one-off server: the bake's DDL, index
//! builds and imports, each a statement per table that the server runs as well in parallel
//! as one after another (10,000 small tables were 18.6 ms a CREATE one at a time, with the
//! host three-quarters idle: docs/bake.md).

use super::job::check_cancel;
use super::session::{connect_source, session, TARGET_SESSION};
use crate::server::oneoff::OneOff;
use anyhow::{anyhow, Result};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Connections for statements that wait more than they compute — CREATE, DISCARD and
/// IMPORT of small tables (file creation, the dictionary latch): twice `jobs`. On 2 cores
/// with 10,000 tables the tablespace bake took 39.3 s with 2, 27.4 s with 4, 29.3 s with 8.
pub fn for_ddl(jobs: usize) -> usize {
    (jobs.max(1) * 2).min(16)
}

/// Runs `work` for every item, in order of the slice, on up to `jobs` connections (each
/// with the target's session settings). The first error stops the others at their next
/// item and is returned.
pub fn on_target<T: Sync>(
    target: &OneOff,
    jobs: usize,
    items: &[T],
    cancel: &AtomicBool,
    work: &(dyn Fn(&mut mysql::Conn, &T) -> Result<()> + Sync),
) -> Result<()> {
    let open = || -> Result<mysql::Conn> {
        let mut conn = target.conn()?;
        session(&mut conn, TARGET_SESSION)?;
        Ok(conn)
    };
    spread(jobs, items, cancel, &open, &|conn, item| work(conn, item))
}

/// `on_target` with a connection to the source beside each target connection: for work
/// that reads from the source what it writes (a table's definition, then its `CREATE`).
pub fn on_target_and_source<T: Sync>(
    target: &OneOff,
    source_url: &str,
    jobs: usize,
    items: &[T],
    cancel: &AtomicBool,
    work: &(dyn Fn(&mut mysql::Conn, &mut mysql::Conn, &T) -> Result<()> + Sync),
) -> Result<()> {
    let open = || -> Result<(mysql::Conn, mysql::Conn)> {
        let mut conn = target.conn()?;
        session(&mut conn, TARGET_SESSION)?;
        Ok((conn, connect_source(source_url)?))
    };
    spread(jobs, items, cancel, &open, &|(target, source), item| {
        work(target, source, item)
    })
}

/// Every item to `work` on up to `jobs` threads, each with its own `open`ed connections.
fn spread<T: Sync, C>(
    jobs: usize,
    items: &[T],
    cancel: &AtomicBool,
    open: &(dyn Fn() -> Result<C> + Sync),
    work: &(dyn Fn(&mut C, &T) -> Result<()> + Sync),
) -> Result<()> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let workers = jobs.max(1).min(items.len());
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    let run = || -> Result<()> {
                        let mut conn = open()?;
                        loop {
                            if failed.load(Ordering::Relaxed) {
                                return Ok(());
                            }
                            let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) else {
                                return Ok(());
                            };
                            check_cancel(cancel)?;
                            work(&mut conn, item)?;
                        }
                    };
                    let result = run();
                    if result.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    result
                })
            })
            .collect();
        let mut first = Ok(());
        for h in handles {
            let r = h.join().map_err(|_| anyhow!("a bake worker panicked"))?;
            if first.is_ok() {
                first = r;
            }
        }
        first
    })
}
