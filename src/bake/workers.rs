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

/// A connection to the one-off server with the session the bake writes under.
pub fn target_conn(target: &OneOff) -> Result<mysql::Conn> {
    let mut conn = target.conn()?;
    session(&mut conn, TARGET_SESSION)?;
    Ok(conn)
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
    let open = || target_conn(target);
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
        Ok((target_conn(target)?, connect_source(source_url)?))
    };
    spread(jobs, items, cancel, &open, &|(target, source), item| {
        work(target, source, item)
    })
}

/// Every item to `work` on up to `jobs` threads, each with its own `open`ed connections
/// (opened when the thread takes its first item).
fn spread<T: Sync, C: Send>(
    jobs: usize,
    items: &[T],
    cancel: &AtomicBool,
    open: &(dyn Fn() -> Result<C> + Sync),
    work: &(dyn Fn(&mut C, &T) -> Result<()> + Sync),
) -> Result<()> {
    let threads = jobs.max(1).min(items.len());
    let states: Vec<Option<C>> = (0..threads).map(|_| None).collect();
    spread_over(states, items, cancel, &|state, item| {
        work(opened(state, open)?, item)
    })?;
    Ok(())
}

/// The connection in `slot`, `open`ed there first if it has none yet: a worker's
/// connections are opened when it takes its first item, not for threads that get none.
pub fn opened<C>(slot: &mut Option<C>, open: impl FnOnce() -> Result<C>) -> Result<&mut C> {
    match slot {
        Some(conn) => Ok(conn),
        None => Ok(slot.insert(open()?)),
    }
}

/// Every item to `work`, in order of the slice, on one thread per state in `states` (a
/// thread's own connections), which come back once every item is done. The first error
/// stops the other threads at their next item and is returned.
pub fn spread_over<T: Sync, C: Send>(
    states: Vec<C>,
    items: &[T],
    cancel: &AtomicBool,
    work: &(dyn Fn(&mut C, &T) -> Result<()> + Sync),
) -> Result<Vec<C>> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let mut kept = Vec::with_capacity(states.len());
    let mut first_error = None;
    std::thread::scope(|s| {
        let handles: Vec<_> = states
            .into_iter()
            .map(|mut state| {
                let (next, failed) = (&next, &failed);
                s.spawn(move || {
                    let mut run = || -> Result<()> {
                        loop {
                            if failed.load(Ordering::Relaxed) {
                                return Ok(());
                            }
                            let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) else {
                                return Ok(());
                            };
                            check_cancel(cancel)?;
                            work(&mut state, item)?;
                        }
                    };
                    let result = run();
                    if result.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    (state, result)
                })
            })
            .collect();
        for h in handles {
            match h.join() {
                Ok((state, result)) => {
                    kept.push(state);
                    if let Err(e) = result {
                        first_error.get_or_insert(e);
                    }
                }
                Err(_) => {
                    first_error.get_or_insert_with(|| anyhow!("a bake worker panicked"));
                }
            }
        }
    });
    match first_error {
        Some(e) => Err(e),
        None => Ok(kept),
    }
}
