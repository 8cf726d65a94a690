//! A slot's state is where its token file is: `ready/N`, `claimed/N` (holding the lease) or
//! `recycling/N`. Moving between states is a `rename(2)`, which exactly one of any number
//! of concurrent callers wins — the claim needs no lock and costs a few system calls.

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Ready,
    Claimed,
    Recycling,
}

impl State {
    pub const ALL: [State; 3] = [State::Ready, State::Claimed, State::Recycling];

    fn dir_name(self) -> &'static str {
        match self {
            State::Ready => "ready",
            State::Claimed => "claimed",
            State::Recycling => "recycling",
        }
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.dir_name())
    }
}

/// Who holds a claimed slot: a process, told apart from a later one with the same pid by
/// its start time. A claim over the pool's socket is held by the recycler (`pid`) for one
/// connection (`connection`): it ends when that connection closes, or with the recycler.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Lease {
    pub pid: u32,
    /// Clock ticks after boot when it started (`/proc/PID/stat`, field 22).
    pub started: u64,
    pub claimed_at: DateTime<Utc>,
    /// Who claimed it: only they (or an admin) may release it. None in leases written
    /// before db-branch recorded it.
    #[serde(default)]
    pub uid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<ConnectionLease>,
}

/// A claim made over the pool's socket: which connection of the recycler holds it, and the
/// claimant's process at the other end (what `pool status` shows).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct ConnectionLease {
    pub id: u64,
    pub client_pid: u32,
}

/// Field 22 of `/proc/PID/stat`: when the process started. None when it does not exist.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    // After the name: state is field 3, so field 22 is the 20th of the rest.
    rest.split_whitespace().nth(19)?.parse().ok()
}

impl Lease {
    /// A lease for process `pid` from now; None when no such process runs.
    pub fn of(pid: u32, now: DateTime<Utc>, uid: u32) -> Option<Lease> {
        Some(Lease {
            pid,
            started: start_ticks(pid)?,
            claimed_at: now,
            uid: Some(uid),
            connection: None,
        })
    }

    /// A lease this process holds for `connection` (the recycler serving the socket).
    pub fn of_connection(connection: ConnectionLease, now: DateTime<Utc>, uid: u32) -> Lease {
        // This process's start time never changes: read once, not on every claim's path.
        static STARTED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        let me = std::process::id();
        Lease {
            pid: me,
            started: *STARTED.get_or_init(|| start_ticks(me).expect("this process runs")),
            claimed_at: now,
            uid: Some(uid),
            connection: Some(connection),
        }
    }

    /// The process using the slot: the claimant over a connection, else the holder.
    pub fn claimant(&self) -> u32 {
        self.connection.map_or(self.pid, |c| c.client_pid)
    }

    /// The holder still runs (the same process, not a new one with its pid).
    pub fn holder_alive(&self) -> bool {
        start_ticks(self.pid) == Some(self.started)
    }
}

pub fn dir(pool_dir: &Path, state: State) -> PathBuf {
    pool_dir.join(state.dir_name())
}

fn token(pool_dir: &Path, state: State, slot: usize) -> PathBuf {
    dir(pool_dir, state).join(slot.to_string())
}

/// Creates the state directories.
pub fn prepare(pool_dir: &Path) -> Result<()> {
    for s in State::ALL {
        let d = dir(pool_dir, s);
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    }
    Ok(())
}

/// The slots in `state`, in order.
pub fn in_state(pool_dir: &Path, state: State) -> Result<Vec<usize>> {
    let d = dir(pool_dir, state);
    let mut out: Vec<usize> = match std::fs::read_dir(&d) {
        Ok(entries) => entries
            .flatten()
            // Temporary files of an atomic write start with a dot; only numbers are slots.
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", d.display())),
    };
    out.sort_unstable();
    Ok(out)
}

/// Every slot and its state.
pub fn all(pool_dir: &Path) -> Result<BTreeMap<usize, State>> {
    let mut out = BTreeMap::new();
    for s in State::ALL {
        for slot in in_state(pool_dir, s)? {
            out.insert(slot, s);
        }
    }
    Ok(out)
}

/// Moves `slot` from `from` to `to`; false when it was not in `from` (another process
/// moved it first).
pub fn transition(pool_dir: &Path, slot: usize, from: State, to: State) -> Result<bool> {
    let (a, b) = (token(pool_dir, from, slot), token(pool_dir, to, slot));
    match std::fs::rename(&a, &b) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("moving {} to {}", a.display(), b.display())),
    }
}

/// Puts a recycled slot back as ready, its token emptied first; false when it was not
/// recycling. A token keeps what was written into it through its renames, so the lease of
/// its last claim would otherwise be read as the next claimant's until that one writes its
/// own: `pool status` naming the previous holder, and a previous holder that has exited
/// making the new claim look abandoned to the recycler. Emptied here, after the slot's
/// reset, when no write of that old lease can still be under way.
pub fn make_ready(pool_dir: &Path, slot: usize) -> Result<bool> {
    let path = token(pool_dir, State::Recycling, slot);
    let Some(f) = open_token(&path).with_context(|| format!("emptying {}", path.display()))? else {
        return Ok(false);
    };
    f.set_len(0)
        .with_context(|| format!("emptying {}", path.display()))?;
    transition(pool_dir, slot, State::Recycling, State::Ready)
}

/// A token opened for writing in place (never through a link); None when it is not there
/// (it moved to another state meanwhile).
fn open_token(path: &Path) -> std::io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    // Not O_TRUNC: ext4 writes back at close a file that was truncated to nothing
    // (auto_da_alloc), a disk write per claim that perf showed on the claim path.
    // `write_lease` writes over from the start and cuts to its length instead, which ext4
    // never does that for; `make_ready` empties the token off the claim path.
    #[allow(clippy::suspicious_open_options)]
    match std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Puts a new slot in `state` (no-op when it is there already).
pub fn add(pool_dir: &Path, slot: usize, state: State) -> Result<()> {
    crate::store::files::write_atomic(&token(pool_dir, state, slot), b"", 0o644)
}

/// Removes a slot's token, whatever its state.
pub fn remove(pool_dir: &Path, slot: usize) -> Result<()> {
    for s in State::ALL {
        let t = token(pool_dir, s, slot);
        match std::fs::remove_file(&t) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", t.display())),
        }
    }
    Ok(())
}

/// Writes the lease into the claimed token its claimant just won: one write to a file that
/// exists, with no directory change (and its journal) for the claim to wait on, and no
/// flush (a lease means nothing once its holder is gone, as after a crash). A token that
/// left `claimed/` meanwhile (an admin released it) is left alone. A reader that catches
/// the write half-done sees no lease yet, as before it was written.
pub fn write_lease(pool_dir: &Path, slot: usize, lease: &Lease) -> Result<()> {
    use std::io::Write;
    let bytes = serde_json::to_vec(lease).expect("a lease serialises");
    let path = token(pool_dir, State::Claimed, slot);
    let Some(mut f) = open_token(&path).with_context(|| format!("writing {}", path.display()))?
    else {
        return Ok(());
    };
    f.write_all(&bytes)
        .and_then(|()| f.set_len(bytes.len() as u64))
        .with_context(|| format!("writing {}", path.display()))
}

/// The lease of a claimed slot; None while the claimant has not written it yet (it does
/// right after its rename) or when the slot is not claimed.
pub fn lease(pool_dir: &Path, slot: usize) -> Option<Lease> {
    let bytes = std::fs::read(token(pool_dir, State::Claimed, slot)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// How long ago the slot's token last changed state (a claim without a lease yet is
/// young). By its change time: a rename keeps the modification time of a token that sat
/// ready for an hour, but sets its change time, so a slot claimed this instant is young.
pub fn age(pool_dir: &Path, slot: usize, state: State) -> Option<std::time::Duration> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(token(pool_dir, state, slot)).ok()?;
    let changed = std::time::UNIX_EPOCH
        + std::time::Duration::new(m.ctime().max(0) as u64, m.ctime_nsec().max(0) as u32);
    changed.elapsed().ok().or(Some(std::time::Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_that_sat_ready_for_long_is_young_once_claimed() {
        let d = tempfile::tempdir().unwrap();
        prepare(d.path()).unwrap();
        add(d.path(), 1, State::Ready).unwrap();
        // As if it had been ready for an hour.
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        let f = std::fs::File::options()
            .write(true)
            .open(token(d.path(), State::Ready, 1))
            .unwrap();
        f.set_modified(hour_ago).unwrap();
        drop(f);
        assert!(transition(d.path(), 1, State::Ready, State::Claimed).unwrap());
        let age = age(d.path(), 1, State::Claimed).unwrap();
        assert!(age < std::time::Duration::from_secs(5), "{age:?}");
    }

    #[test]
    fn one_of_many_claimants_wins_each_slot() {
        let d = tempfile::tempdir().unwrap();
        prepare(d.path()).unwrap();
        for slot in 1..=4 {
            add(d.path(), slot, State::Ready).unwrap();
        }
        let wins = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for slot in 1..=4 {
                        if transition(d.path(), slot, State::Ready, State::Claimed).unwrap() {
                            wins.lock().unwrap().push(slot);
                        }
                    }
                });
            }
        });
        let mut wins = wins.into_inner().unwrap();
        wins.sort_unstable();
        assert_eq!(wins, vec![1, 2, 3, 4]);
        assert_eq!(
            in_state(d.path(), State::Ready).unwrap(),
            Vec::<usize>::new()
        );
        assert_eq!(
            in_state(d.path(), State::Claimed).unwrap(),
            vec![1, 2, 3, 4]
        );
    }

    #[test]
    fn a_lease_dies_with_its_holder() {
        let now = Utc::now();
        let me = Lease::of(std::process::id(), now, 0).unwrap();
        assert!(me.holder_alive());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let lease = Lease::of(pid, now, 0);
        child.wait().unwrap();
        if let Some(l) = lease {
            assert!(!l.holder_alive());
        }
        let reused = Lease {
            started: me.started + 1,
            ..me.clone()
        };
        assert!(!reused.holder_alive(), "another process with the same pid");
    }

    #[test]
    fn a_slot_made_ready_again_carries_no_lease_of_its_last_claim() {
        let d = tempfile::tempdir().unwrap();
        prepare(d.path()).unwrap();
        add(d.path(), 3, State::Ready).unwrap();
        assert!(transition(d.path(), 3, State::Ready, State::Claimed).unwrap());
        let old = Lease::of(std::process::id(), Utc::now(), 0).unwrap();
        write_lease(d.path(), 3, &old).unwrap();
        assert!(transition(d.path(), 3, State::Claimed, State::Recycling).unwrap());
        assert!(make_ready(d.path(), 3).unwrap());
        assert!(!make_ready(d.path(), 3).unwrap(), "not recycling any more");
        // The next claimant's rename: no lease until it writes its own.
        assert!(transition(d.path(), 3, State::Ready, State::Claimed).unwrap());
        assert_eq!(lease(d.path(), 3), None);
    }

    #[test]
    fn leases_are_read_back_and_tokens_move() {
        let d = tempfile::tempdir().unwrap();
        prepare(d.path()).unwrap();
        add(d.path(), 7, State::Ready).unwrap();
        assert!(transition(d.path(), 7, State::Ready, State::Claimed).unwrap());
        assert_eq!(lease(d.path(), 7), None, "no lease written yet");
        let l = Lease::of(std::process::id(), Utc::now(), 0).unwrap();
        write_lease(d.path(), 7, &l).unwrap();
        assert_eq!(lease(d.path(), 7), Some(l.clone()));
        // A shorter lease written over a longer one (a token keeps its last lease): the
        // file holds the new one alone.
        let longer = Lease {
            connection: Some(ConnectionLease {
                id: u64::MAX,
                client_pid: u32::MAX,
            }),
            ..l.clone()
        };
        write_lease(d.path(), 7, &longer).unwrap();
        write_lease(d.path(), 7, &l).unwrap();
        assert_eq!(lease(d.path(), 7), Some(l));
        assert!(!transition(d.path(), 7, State::Ready, State::Claimed).unwrap());
        assert_eq!(all(d.path()).unwrap().get(&7), Some(&State::Claimed));
        remove(d.path(), 7).unwrap();
        assert!(all(d.path()).unwrap().is_empty());
    }
}
