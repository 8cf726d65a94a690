//! The recycler's side of the claim protocol (protocol.rs): it listens on the pool's
//! `claim.sock`, one thread per connection. Anyone on the host may connect (mode 0666);
//! each connection is judged by its peer's credentials (SO_PEERCRED), as db-branchd judges
//! a bus caller: members of the users group, admins and root may claim, outsiders are told
//! why not. A slot claimed on a connection goes back to be recycled when the connection
//! closes — the claimant released it, exited or crashed — which needs no pid and no lease
//! polling, and works alike for root and for users of db-branchd.

use super::claim::{self, DeferredLease, Holder};
use super::protocol::{write_line, Env, Reply, Request, MAX_LINE};
use super::slots::ConnectionLease;
use super::{pool_dir, socket_file, PoolName};
use crate::access::{Caller, Role};
use crate::error::{Error, Kind, EXIT_REFUSED, EXIT_USAGE};
use crate::host::Host;
use crate::ops::reset::{reset, ResetOptions};
use anyhow::{Context, Result};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Connections served at once at most; more are told to come back (exit 75).
const MAX_CONNECTIONS: usize = 1024;

/// How often an idle connection's thread looks whether the recycler is stopping.
const STOP_POLL: Duration = Duration::from_millis(250);

/// Binds the pool's socket. The recycler holds the pool's recycler lock, so a socket file
/// there is a dead recycler's: it is replaced.
pub fn bind(host: &Host, pool: &PoolName) -> Result<UnixListener> {
    let path = socket_file(&pool_dir(host, pool));
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
    }
    let listener =
        UnixListener::bind(&path).with_context(|| format!("listening on {}", path.display()))?;
    // Who may claim is decided per connection, by its credentials, not by the file's mode.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))
        .with_context(|| format!("opening {} to the host's users", path.display()))?;
    Ok(listener)
}

/// Serves connections until `stop` is set (and `wake` has unblocked the accept).
pub fn serve(host: &Host, pool: &PoolName, listener: &UnixListener, stop: &AtomicBool) {
    let next_id = AtomicU64::new(1);
    let open = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for stream in listener.incoming() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let Ok(stream) = stream else { continue };
            if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                open.fetch_sub(1, Ordering::AcqRel);
                let mut w = &stream;
                let _ = write_line(
                    &mut w,
                    &Reply::failed(EXIT_REFUSED, format!("pool {pool}'s recycler serves {MAX_CONNECTIONS} connections already; try again shortly")),
                );
                continue;
            }
            let id = next_id.fetch_add(1, Ordering::Relaxed);
            let open = &open;
            s.spawn(move || {
                let mut conn = Connection {
                    host,
                    pool,
                    id,
                    held: None,
                };
                if let Err(e) = conn.serve(stream, stop) {
                    host.printer.warn(format!(
                        "pool {pool}, connection {id}: {}",
                        crate::report::chain_text(&e)
                    ));
                }
                conn.close();
                open.fetch_sub(1, Ordering::AcqRel);
            });
        }
    });
}

/// Unblocks `serve`'s accept after `stop` was set, and removes the socket.
pub fn wake(host: &Host, pool: &PoolName) {
    let path = socket_file(&pool_dir(host, pool));
    let _ = UnixStream::connect(&path);
    let _ = std::fs::remove_file(&path);
}

/// Work a reply leaves for after it is sent.
enum After<'a> {
    /// A claimed slot's lease, to write.
    Lease(DeferredLease),
    /// A reset dense slot's next spare, to make.
    Refill(super::dense::Refill<'a>),
}

struct Connection<'a> {
    host: &'a Host,
    pool: &'a PoolName,
    id: u64,
    /// The slot this connection holds.
    held: Option<usize>,
}

impl<'a> Connection<'a> {
    fn serve(&mut self, stream: UnixStream, stop: &AtomicBool) -> Result<()> {
        let peer = peer_of(&stream)?;
        stream.set_read_timeout(Some(STOP_POLL))?;
        let mut writer = stream.try_clone()?;
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let limit = (MAX_LINE + 1).saturating_sub(line.len()) as u64;
            match reader.by_ref().take(limit).read_until(b'\n', &mut line) {
                Ok(0) => return Ok(()), // closed: `close` releases what it held
                Ok(_) if line.ends_with(b"\n") => {}
                Ok(_) if line.len() > MAX_LINE => {
                    write_line(
                        &mut writer,
                        &Reply::failed(
                            EXIT_USAGE,
                            format!("a request is one line of at most {MAX_LINE} bytes"),
                        ),
                    )?;
                    return Ok(());
                }
                Ok(_) => continue, // part of a line; the rest follows
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    continue
                }
                Err(e) => return Err(e).context("reading a request"),
            }
            let (reply, after) = match serde_json::from_slice::<Request>(&line) {
                Ok(request) => self.answer(&peer, request),
                Err(e) => (
                    Reply::failed(
                        EXIT_USAGE,
                        format!("not a request ({e}); see docs/pools.md, \"The claim protocol\""),
                    ),
                    None,
                ),
            };
            line.clear();
            write_line(&mut writer, &reply)?;
            // After the reply: the claimant need not wait for it.
            match after {
                Some(After::Lease(lease)) => lease.write()?,
                Some(After::Refill(refill)) => refill.run()?,
                None => {}
            }
        }
    }

    /// The reply, and what is left to do once it is sent.
    fn answer(&mut self, peer: &Caller, request: Request) -> (Reply, Option<After<'a>>) {
        self.try_answer(peer, request)
            .unwrap_or_else(|e| (Reply::of_error(&e), None))
    }

    fn try_answer(
        &mut self,
        peer: &Caller,
        request: Request,
    ) -> Result<(Reply, Option<After<'a>>)> {
        // As db-branchd would for `pool claim`: the users group, admins and root.
        peer.check_role(&self.host.config.access, Role::User)?;
        match request {
            Request::Claim {
                wait_ms,
                holder_pid,
            } => {
                if let Some(slot) = self.held {
                    return Err(Error::new(
                        Kind::Usage,
                        format!(
                            "this connection holds slot {slot} of pool {} already",
                            self.pool
                        ),
                    )
                    .hint("release it first, or open another connection for another slot")
                    .into());
                }
                let holder = match holder_pid {
                    Some(pid) => {
                        Holder::Process(claim::check_holder(peer, &self.host.config.access, pid)?)
                    }
                    None => Holder::Connection(ConnectionLease {
                        id: self.id,
                        client_pid: peer.pid.unwrap_or_default(),
                    }),
                };
                let (claimed, lease) = claim::claim_in_recycler(
                    self.host,
                    &claim::ClaimOptions {
                        pool: self.pool.clone(),
                        wait: wait_ms.map(Duration::from_millis),
                        holder,
                        uid: peer.uid,
                    },
                )?;
                if holder_pid.is_none() {
                    self.held = Some(claimed.slot);
                }
                Ok((reply_for(self.host, &claimed), Some(After::Lease(lease))))
            }
            Request::Reset => {
                let slot = self.holding("reset")?;
                let spec = super::require(self.host, self.pool)?;
                let name = spec.server_of(slot);
                let after = if spec.dense.is_some() {
                    Some(After::Refill(super::dense::reset_slot(
                        self.host, &spec, slot,
                    )?))
                } else {
                    reset(self.host, &ResetOptions::named(name.clone()))?;
                    None
                };
                let record = crate::store::records::load(&self.host.layout, &name)?
                    .with_context(|| format!("slot {slot}'s branch {name} is gone"))?;
                Ok((
                    reply_for(
                        self.host,
                        &claim::Claimed::of(self.host, &spec, slot, record)?,
                    ),
                    after,
                ))
            }
            Request::Release => {
                self.holding("release")?;
                self.close();
                Ok((Reply::done(), None))
            }
        }
    }

    /// The slot this connection holds — still: an admin may have released it meanwhile.
    fn holding(&mut self, what: &str) -> Result<usize> {
        let dir = pool_dir(self.host, self.pool);
        match self.held {
            Some(slot) if claim::held_by_connection(&dir, slot, self.id) => Ok(slot),
            Some(slot) => {
                self.held = None;
                Err(Error::new(
                    Kind::NotFound,
                    format!(
                        "slot {slot} of pool {} is no longer this connection's (an admin released it)",
                        self.pool
                    ),
                )
                .hint("claim another: {\"op\":\"claim\"}")
                .into())
            }
            None => Err(Error::new(
                Kind::Usage,
                format!(
                    "this connection holds no slot of pool {} to {what}",
                    self.pool
                ),
            )
            .hint("claim one first: {\"op\":\"claim\"}")
            .into()),
        }
    }

    /// Hands back the slot this connection holds, if any.
    fn close(&mut self) {
        if let Some(slot) = self.held.take() {
            if let Err(e) = claim::release_connection(self.host, self.pool, slot, self.id) {
                self.host.printer.warn(format!(
                    "slot {slot} of pool {}: releasing it: {}",
                    self.pool,
                    crate::report::chain_text(&e)
                ));
            }
        }
    }
}

fn reply_for(host: &Host, claimed: &claim::Claimed) -> Reply {
    let (vars, _) = claim::variables(host, claimed);
    Reply::claimed(
        claimed.slot,
        Env(vars.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
    )
}

/// How long a peer's account (name and groups) is reused before it is looked up again:
/// claims come in bursts (a test run's workers at once), and each lookup reads the
/// account databases (`/etc/passwd`, `/etc/group`, or whatever NSS asks). A user taken out
/// of the users group is refused at most this long after.
const PEER_ACCOUNT_TTL: Duration = Duration::from_secs(2);

/// Who is at the other end, by the kernel's word: uid, primary and supplementary groups
/// (from the account, as the bus's would be), pid.
fn peer_of(stream: &UnixStream) -> Result<Caller> {
    let cred = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)
        .context("reading the connection's credentials")?;
    let (name, gids) = account_of(cred.uid(), cred.gid());
    Ok(Caller {
        uid: cred.uid(),
        gids,
        name,
        cwd: None,
        pid: u32::try_from(cred.pid()).ok(),
    })
}

/// A peer's name and groups (primary first): looked up, or as looked up less than
/// `PEER_ACCOUNT_TTL` ago. Root needs no lookup: it may do anything whatever its groups.
fn account_of(uid: u32, gid: u32) -> (String, Vec<u32>) {
    type Accounts = std::collections::HashMap<(u32, u32), (std::time::Instant, String, Vec<u32>)>;
    static ACCOUNTS: std::sync::Mutex<Option<Accounts>> = std::sync::Mutex::new(None);
    if uid == 0 {
        return ("root".into(), vec![gid]);
    }
    if let Some((at, name, gids)) = ACCOUNTS
        .lock()
        .unwrap()
        .as_ref()
        .and_then(|a| a.get(&(uid, gid)))
    {
        if at.elapsed() < PEER_ACCOUNT_TTL {
            return (name.clone(), gids.clone());
        }
    }
    let name = crate::access::user_name(uid);
    let listed = std::ffi::CString::new(name.clone())
        .ok()
        .and_then(|n| nix::unistd::getgrouplist(&n, nix::unistd::Gid::from_raw(gid)).ok())
        .unwrap_or_default()
        .into_iter()
        .map(|g| g.as_raw())
        .collect();
    let gids = crate::access::with_primary_first(uid, listed);
    ACCOUNTS
        .lock()
        .unwrap()
        .get_or_insert_with(Default::default)
        .insert(
            (uid, gid),
            (std::time::Instant::now(), name.clone(), gids.clone()),
        );
    (name, gids)
}

#[cfg(test)]
mod tests {
    use super::super::manage::{create_pool, status, LeaseKind, PoolOptions};
    use super::super::protocol::Client;
    use super::super::slots::State;
    use super::*;
    use crate::ops::testing::sim_host;

    fn claim(c: &mut Client) -> Reply {
        c.request(&Request::Claim {
            wait_ms: None,
            holder_pid: None,
        })
        .unwrap()
    }

    fn state_of(host: &Host, pool: &PoolName, slot: usize) -> State {
        let report = status(host, pool).unwrap();
        report.slots.iter().find(|r| r.slot == slot).unwrap().state
    }

    /// Waits (up to 2 s) for `slot` to reach `want`: the server's thread releases after
    /// the client has gone.
    /// Whether `done` holds within 2 s, looking every 5 ms.
    fn within_2s(mut done: impl FnMut() -> bool) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while !done() {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    fn eventually(host: &Host, pool: &PoolName, slot: usize, want: State) {
        assert!(
            within_2s(|| state_of(host, pool, slot) == want),
            "slot {slot} never got {want}"
        );
    }

    /// Slot 1's status row once its lease is written (within 2 s).
    fn lease_written(host: &Host, pool: &PoolName) -> super::super::manage::SlotRow {
        let row = || status(host, pool).unwrap().slots[0].clone();
        within_2s(|| row().lease.is_some());
        row()
    }

    /// A sim pool `pool` of `size` slots whose listener serves while `body` runs (given the
    /// host, the pool and its socket); stopped and woken after it.
    fn serving(pool: &str, size: usize, body: impl FnOnce(&Host, &PoolName, &std::path::Path)) {
        let mut sim = sim_host();
        // Whoever runs the unit tests is an admin of this host.
        sim.host.config.access.admins_group = nix::unistd::Group::from_gid(nix::unistd::getegid())
            .unwrap()
            .unwrap()
            .name;
        let host = &sim.host;
        let pool: PoolName = pool.parse().unwrap();
        create_pool(
            host,
            &PoolOptions {
                name: pool.clone(),
                size,
                baseline: None,
                profile: None,
                buffer_pool: None,
                dense: false,
                per_server: None,
            },
        )
        .unwrap();
        let listener = bind(host, &pool).unwrap();
        let socket = socket_file(&pool_dir(host, &pool));
        let stop = AtomicBool::new(false);
        // Stops the listener however `body` ends: a failed assertion must fail the test,
        // not leave the scope joining a listener that serves on.
        struct StopOnDrop<'a>(&'a Host, &'a PoolName, &'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.2.store(true, Ordering::Relaxed);
                wake(self.0, self.1);
            }
        }
        std::thread::scope(|s| {
            s.spawn(|| serve(host, &pool, &listener, &stop));
            let _stop = StopOnDrop(host, &pool, &stop);
            body(host, &pool, &socket);
        });
        assert!(!socket.exists(), "the socket goes with its recycler");
    }

    #[test]
    fn a_claim_on_a_connection_lasts_as_long_as_the_connection() {
        serving("ci", 2, |host, pool, socket| {
            let mut first = Client::connect(socket).unwrap().unwrap();
            let got = claim(&mut first);
            assert!(got.ok, "{got:?}");
            assert_eq!(got.slot, Some(1));
            assert_eq!(got.env.get("DB_BRANCH_POOL_SLOT"), Some("1"));
            assert_eq!(got.env.get("DB_BRANCH_POOL"), Some("ci"));
            assert!(got.url().starts_with("mysql://"), "{got:?}");
            // The lease is written just after the reply, so the claim need not wait for it.
            let row = lease_written(host, pool);
            assert_eq!(row.lease, Some(LeaseKind::Connection));
            assert_eq!(
                row.holder,
                Some(std::process::id()),
                "the claimant, not the server"
            );

            let again = claim(&mut first);
            assert_eq!((again.ok, again.exit), (false, Some(2)), "{again:?}");
            assert!(!again.hints.is_empty());

            let reset = first.request(&Request::Reset).unwrap();
            assert_eq!((reset.ok, reset.slot), (true, Some(1)), "{reset:?}");
            assert_eq!(
                reset.env, got.env,
                "a reset slot keeps its connection details"
            );

            let mut second = Client::connect(socket).unwrap().unwrap();
            assert_eq!(claim(&mut second).slot, Some(2));
            let mut third = Client::connect(socket).unwrap().unwrap();
            let none = claim(&mut third);
            assert_eq!((none.ok, none.exit), (false, Some(75)), "{none:?}");
            assert!(none.error.unwrap().contains("no ready slot"));

            // Closing the connection releases; releasing by request too, once.
            drop(first);
            eventually(host, pool, 1, State::Recycling);
            assert!(second.request(&Request::Release).unwrap().ok);
            assert_eq!(state_of(host, pool, 2), State::Recycling);
            let twice = second.request(&Request::Release).unwrap();
            assert_eq!((twice.ok, twice.exit), (false, Some(2)), "{twice:?}");

            // Garbage gets an answer, not a hang or a crash.
            let garbage = third
                .request(&Request::Claim {
                    wait_ms: Some(0),
                    holder_pid: Some(u32::MAX),
                })
                .unwrap();
            assert!(
                !garbage.ok,
                "a pid that does not exist holds nothing: {garbage:?}"
            );
        });
    }

    #[test]
    fn a_claim_for_a_process_outlives_the_connection() {
        serving("p", 1, |host, pool, socket| {
            let mut c = Client::connect(socket).unwrap().unwrap();
            let got = c
                .request(&Request::Claim {
                    wait_ms: None,
                    holder_pid: Some(std::process::id()),
                })
                .unwrap();
            assert!(got.ok, "{got:?}");
            drop(c);
            std::thread::sleep(Duration::from_millis(100));
            assert_eq!(state_of(host, pool, 1), State::Claimed);
            let row = lease_written(host, pool);
            assert_eq!(row.lease, Some(LeaseKind::Process));
        });
    }
}
