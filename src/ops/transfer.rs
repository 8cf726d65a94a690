//! `baseline push`, `pull`, `receive` and `send`: generations between hosts as the storage's
//! own send streams, incremental against the newest generation both sides hold (by
//! identity, not just number), framed and checksummed end to end (transfer/wire.rs). A
//! generation keeps its number, and is visible on the receiving side only once the whole
//! stream was verified: an interrupted or corrupt transfer leaves nothing behind.

use crate::branch::Generation;
use crate::error::{usage, Error, Kind};
use crate::host::Host;
use crate::printer::PhaseProgress;
use crate::storage::StorageError;
use crate::transfer::remote::{FarGeneration, Received, Remote};
use crate::transfer::wire::{StreamHeader, StreamReader, StreamWriter};
use anyhow::{anyhow, Context, Result};
use serde::Serialize;
use std::io::{Read, Write};
use std::time::Instant;

/// What one transfer moved.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Transferred {
    pub generation: Generation,
    /// `push` or `pull`.
    pub direction: String,
    /// The other side: `ssh://host`, `file:DIR`.
    pub peer: String,
    /// The generation it was sent as an increment on (None: in full).
    pub parent: Option<Generation>,
    /// The other side held it already: nothing was sent.
    pub already_there: bool,
    /// Bytes of the storage's send stream.
    pub bytes: u64,
    pub seconds: f64,
    pub bytes_per_second: f64,
    /// SHA-256 of the stream, verified by the receiving side.
    pub sha256: Option<String>,
}

/// Counts what passes and moves the progress bar.
struct Counted<'p, T> {
    inner: T,
    progress: &'p PhaseProgress,
}

impl<T: Write> Write for Counted<'_, T> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.progress.advance(n as u64, "");
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<T: Read> Read for Counted<'_, T> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64, "");
        Ok(n)
    }
}

/// Test builds: `DB_BRANCH_TEST_THROTTLE=BYTES_PER_SECOND` slows a send, so a test can
/// interrupt it mid-stream.
#[cfg(feature = "testing")]
fn throttle(sent: u64, started: Instant) {
    if let Some(rate) = std::env::var("DB_BRANCH_TEST_THROTTLE")
        .ok()
        .and_then(|r| r.parse::<u64>().ok())
        .filter(|r| *r > 0)
    {
        let due = std::time::Duration::from_secs_f64(sent as f64 / rate as f64);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
    }
}
#[cfg(not(feature = "testing"))]
fn throttle(_sent: u64, _started: Instant) {}

struct Throttled<W> {
    inner: W,
    sent: u64,
    started: Instant,
}

impl<W: Write> Write for Throttled<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sent += n as u64;
        throttle(self.sent, self.started);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn header(host: &Host, gen: Generation, parent: Option<Generation>) -> Result<StreamHeader> {
    Ok(StreamHeader {
        generation: gen,
        identity: host.storage.generation_identity(gen)?,
        parent,
        parent_identity: match parent {
            Some(p) => host.storage.generation_identity(p)?,
            None => None,
        },
        format: host.storage.stream_format().to_string(),
        info: host.storage.generation_info(gen)?,
    })
}

fn require_generation(host: &Host, gen: Option<Generation>) -> Result<Generation> {
    let gens = host.storage.baselines()?;
    let gen = match gen {
        Some(g) => g,
        None => *gens.last().ok_or_else(|| {
            Error::new(Kind::NotFound, "this host has no baselines to send")
                .hint("make one with `db-branch baseline create` or `db-branch bake`")
        })?,
    };
    if !gens.contains(&gen) {
        return Err(StorageError::NoSuchGeneration(gen).into());
    }
    Ok(gen)
}

/// The newest generation below `gen` that both sides hold as the same data, and that the
/// storage can send `gen` as an increment on.
fn common_parent(
    host: &Host,
    gen: Generation,
    far: &[FarGeneration],
) -> Result<Option<Generation>> {
    let mut candidates: Vec<&FarGeneration> = far
        .iter()
        .filter(|f| f.generation < gen && f.identity.is_some())
        .collect();
    candidates.sort_by_key(|f| std::cmp::Reverse(f.generation));
    for f in candidates {
        if host.storage.generation_identity(f.generation)? == f.identity
            && host.storage.can_send_incremental(gen, f.generation)
        {
            return Ok(Some(f.generation));
        }
    }
    Ok(None)
}

fn rate(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 / seconds
    } else {
        0.0
    }
}

/// `baseline push DEST [GEN]` (default: the newest generation).
pub fn push(host: &Host, remote: &dyn Remote, gen: Option<Generation>) -> Result<Transferred> {
    host.storage.open()?;
    let gen = require_generation(host, gen)?;
    let identity = host.storage.generation_identity(gen)?;
    let peer = remote.describe();
    let far = remote
        .generations()
        .with_context(|| format!("asking {peer} which baselines it holds"))?;
    let mut done = Transferred {
        generation: gen,
        direction: "push".into(),
        peer: peer.clone(),
        parent: None,
        already_there: false,
        bytes: 0,
        seconds: 0.0,
        bytes_per_second: 0.0,
        sha256: None,
    };
    if let Some(f) = far.iter().find(|f| f.generation == gen) {
        if f.identity.is_some() && f.identity == identity {
            done.already_there = true;
            return Ok(done);
        }
        return Err(conflict(&peer, gen));
    }
    let parent = common_parent(host, gen, &far)?;
    let header = header(host, gen, parent)?;
    let progress = host.printer.progress().labelled("push");
    progress.phase_bytes(
        &match parent {
            Some(p) => format!("{gen} to {peer} (increment on {p})"),
            None => format!("{gen} to {peer} (in full)"),
        },
        host.storage.estimate_send(gen, parent).unwrap_or(0),
    );
    let started = Instant::now();
    let sink = remote.open_receive(&header)?;
    let counted = Counted {
        inner: sink,
        progress: &progress,
    };
    let mut writer = StreamWriter::new(
        Throttled {
            inner: counted,
            sent: 0,
            started,
        },
        &header,
    )
    .with_context(|| format!("starting the stream to {peer}"))?;
    // On any error the writer is dropped, which ends the far side's receive with a short
    // stream: it keeps nothing.
    host.storage
        .send_generation(gen, parent, &mut writer)
        .with_context(|| format!("pushing {gen} to {peer}"))?;
    let (throttled, sha256, bytes) = writer
        .finish()
        .with_context(|| format!("ending the stream to {peer}"))?;
    let received = throttled
        .inner
        .inner
        .finish(&sha256, bytes)
        .with_context(|| format!("{peer} did not keep {gen}"))?;
    progress.finish();
    if received
        .sha256
        .as_deref()
        .is_some_and(|theirs| theirs != sha256)
    {
        return Err(anyhow!(
            "{peer} verified another checksum ({:?}) than was sent ({sha256})",
            received.sha256
        ));
    }
    done.parent = parent;
    done.bytes = bytes;
    done.seconds = started.elapsed().as_secs_f64();
    done.bytes_per_second = rate(bytes, done.seconds);
    done.sha256 = Some(sha256);
    Ok(done)
}

fn conflict(peer: &str, gen: Generation) -> anyhow::Error {
    Error::new(
        Kind::Usage,
        format!(
            "{peer} already holds a baseline {gen} that is not this host's {gen} (made there, or \
             received from elsewhere); it was not replaced"
        ),
    )
    .hint("remove it there first (`db-branch baseline prune`), or exchange baselines between hosts that share one origin")
    .into()
}

/// `baseline receive`: a stream from stdin (the far side of `push`, and the local side of
/// `pull`), kept as its generation only once it was read whole and its checksum matched.
pub fn receive(host: &Host, input: &mut dyn Read) -> Result<Received> {
    host.storage.open()?;
    let (header, mut reader) = StreamReader::open(input).context("reading the baseline stream")?;
    let gen = header.generation;
    // One build or receive at a time.
    let _lock = host.baseline_lock()?;
    let ours = host.storage.stream_format();
    if header.format != ours {
        return Err(usage(format!(
            "this is a {} stream of {gen}; this host's pool is {ours}, which cannot receive it \
             (a transfer between backends is not built yet: bake the generation there, or \
             `baseline create --from-datadir` a copy of its datadir)",
            header.format
        )));
    }
    if host.storage.baselines()?.contains(&gen) {
        let here = host.storage.generation_identity(gen)?;
        if here.is_some() && here == header.identity {
            // Read it all anyway, so the sender ends well.
            std::io::copy(&mut reader, &mut std::io::sink())?;
            return Ok(Received {
                generation: gen,
                already_there: true,
                sha256: reader.digest().map(str::to_string),
                bytes: 0,
            });
        }
        return Err(conflict("this host", gen));
    }
    if let Some(p) = header.parent {
        let here = host.storage.generation_identity(p)?;
        if here.is_none() || here != header.parent_identity {
            return Err(Error::new(
                Kind::Failed,
                format!("the stream is an increment on {p}, which this host does not hold as the sender does"),
            )
            .hint("push or pull again: the sender picks what both sides hold, or sends in full")
            .into());
        }
    }
    let result = (|| -> Result<()> {
        host.storage
            .receive_generation(gen, header.parent, &mut reader)?;
        // The storage may stop reading at its own end marker: the checksum comes after.
        std::io::copy(&mut reader, &mut std::io::sink())
            .context("reading the end of the stream")?;
        if reader.digest().is_none() {
            return Err(anyhow!("the stream ended without its checksum"));
        }
        host.storage.commit_received(gen)
    })();
    if let Err(e) = result {
        let e = e.context(format!("receiving baseline {gen}"));
        return Err(match host.storage.abort_received() {
            Ok(()) => e,
            Err(undo) => e.context(format!(
                "and removing the partial receive failed too: {undo:#} (`db-branch doctor --repair` removes it)"
            )),
        });
    }
    Ok(Received {
        generation: gen,
        already_there: false,
        sha256: reader.digest().map(str::to_string),
        bytes: reader.payload_bytes(),
    })
}

/// `baseline send GEN [--parent P]`: the far side of `pull`, to stdout.
pub fn send(
    host: &Host,
    gen: Generation,
    parent: Option<Generation>,
    out: &mut dyn Write,
) -> Result<()> {
    host.storage.open()?;
    require_generation(host, Some(gen))?;
    if let Some(p) = parent {
        require_generation(host, Some(p))?;
        if !host.storage.can_send_incremental(gen, p) {
            return Err(usage(format!(
                "{gen} cannot be sent as an increment on {p} here"
            )));
        }
    }
    let header = header(host, gen, parent)?;
    let mut writer = StreamWriter::new(out, &header)?;
    host.storage.send_generation(gen, parent, &mut writer)?;
    writer.finish()?;
    Ok(())
}

/// The streams to fetch for `gen`, oldest first: an increment on what this host holds,
/// else in full, else through a parent fetched first.
fn pull_plan(
    host: &Host,
    remote: &dyn Remote,
    far: &[FarGeneration],
    gen: Generation,
    depth: usize,
) -> Result<Vec<(Generation, Option<Generation>)>> {
    let wanted = far.iter().find(|f| f.generation == gen);
    let here = host.storage.generation_identity(gen)?;
    if here.is_some() && wanted.is_some_and(|w| w.identity == here) {
        return Ok(Vec::new());
    }
    if host.storage.baselines()?.contains(&gen) {
        return Err(conflict("this host", gen));
    }
    let mut offers = remote.offers(gen)?;
    offers.sort_by_key(|p| std::cmp::Reverse(*p));
    for p in offers.iter().flatten() {
        let theirs = far
            .iter()
            .find(|f| f.generation == *p)
            .and_then(|f| f.identity.clone());
        let ours = host.storage.generation_identity(*p)?;
        if ours.is_some() && ours == theirs {
            return Ok(vec![(gen, Some(*p))]);
        }
    }
    if offers.contains(&None) {
        return Ok(vec![(gen, None)]);
    }
    if depth < 64 {
        if let Some(p) = offers.iter().flatten().next() {
            let mut chain = pull_plan(host, remote, far, *p, depth + 1)?;
            chain.push((gen, Some(*p)));
            return Ok(chain);
        }
    }
    Err(crate::error::not_found(format!(
        "{} has no stream of {gen} that this host can apply",
        remote.describe()
    )))
}

/// `baseline pull SRC [GEN]` (default: the newest generation there).
pub fn pull(host: &Host, remote: &dyn Remote, gen: Option<Generation>) -> Result<Vec<Transferred>> {
    host.storage.open()?;
    let peer = remote.describe();
    let far = remote
        .generations()
        .with_context(|| format!("asking {peer} which baselines it holds"))?;
    let gen = match gen {
        Some(g) => g,
        None => far
            .last()
            .map(|f| f.generation)
            .ok_or_else(|| crate::error::not_found(format!("{peer} holds no baselines")))?,
    };
    if !far.iter().any(|f| f.generation == gen) {
        return Err(crate::error::not_found(format!(
            "{peer} does not hold baseline {gen}"
        )));
    }
    let plan = pull_plan(host, remote, &far, gen, 0)?;
    if plan.is_empty() {
        return Ok(vec![Transferred {
            generation: gen,
            direction: "pull".into(),
            peer,
            parent: None,
            already_there: true,
            bytes: 0,
            seconds: 0.0,
            bytes_per_second: 0.0,
            sha256: None,
        }]);
    }
    let mut out = Vec::new();
    for (g, parent) in plan {
        let progress = host.printer.progress().labelled("pull");
        progress.phase_bytes(
            &match parent {
                Some(p) => format!("{g} from {peer} (increment on {p})"),
                None => format!("{g} from {peer} (in full)"),
            },
            0,
        );
        let started = Instant::now();
        let mut incoming = remote
            .open_send(g, parent)
            .with_context(|| format!("asking {peer} for {g}"))?;
        let received = {
            let mut counted = Counted {
                inner: &mut incoming,
                progress: &progress,
            };
            receive(host, &mut counted)
        };
        let ended = incoming.finish();
        let received = received.with_context(|| format!("pulling {g} from {peer}"))?;
        ended.with_context(|| format!("{peer} did not send {g} whole"))?;
        progress.finish();
        let seconds = started.elapsed().as_secs_f64();
        let bytes = received.bytes;
        out.push(Transferred {
            generation: g,
            direction: "pull".into(),
            peer: peer.clone(),
            parent,
            already_there: received.already_there,
            bytes,
            seconds,
            bytes_per_second: rate(bytes, seconds),
            sha256: received.sha256,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::sim_host;
    use crate::storage::Storage;
    use crate::transfer::dir::Dir;

    #[test]
    fn push_to_a_directory_then_pull_it_on_another_host() {
        let a = sim_host();
        let dir = tempfile::tempdir().unwrap();
        let remote = Dir::new(dir.path().to_path_buf());
        let first = push(&a.host, &remote, None).unwrap();
        assert_eq!((first.generation, first.parent), (Generation(1), None));
        assert!(first.bytes > 0 && first.sha256.is_some());
        // The same again: nothing to send.
        assert!(push(&a.host, &remote, None).unwrap().already_there);
        a.storage
            .with_state(|s| s.generations.insert(Generation(2)));
        let second = push(&a.host, &remote, None).unwrap();
        assert_eq!(second.parent, Some(Generation(1)), "an increment");

        // Another host (no baselines of its own) pulls the newest: the full stream first,
        // then the increment.
        let b = sim_host();
        b.storage.with_state(|s| s.generations.clear());
        let pulled = pull(&b.host, &remote, None).unwrap();
        let got: Vec<(Generation, Option<Generation>)> =
            pulled.iter().map(|t| (t.generation, t.parent)).collect();
        assert_eq!(
            got,
            [(Generation(1), None), (Generation(2), Some(Generation(1)))]
        );
        assert_eq!(
            b.storage.baselines().unwrap(),
            [Generation(1), Generation(2)]
        );
        assert!(pull(&b.host, &remote, None).unwrap()[0].already_there);
    }

    #[test]
    fn a_short_or_corrupt_stream_leaves_nothing() {
        let a = sim_host();
        let mut stream = Vec::new();
        send(&a.host, Generation(1), None, &mut stream).unwrap();
        let b = sim_host();
        b.storage.with_state(|s| s.generations.clear());
        for cut in [10, stream.len() - 1] {
            let e = receive(&b.host, &mut &stream[..cut]).unwrap_err();
            assert!(format!("{e:#}").contains("ended early"), "{e:#}");
            assert!(b
                .storage
                .with_state(|s| s.generations.is_empty() && s.receiving.is_none()));
        }
        let mut bad = stream.clone();
        let i = bad.len() - 40;
        bad[i] ^= 1;
        assert!(receive(&b.host, &mut bad.as_slice()).is_err());
        assert!(b.storage.with_state(|s| s.generations.is_empty()));
        // The whole stream is kept.
        let r = receive(&b.host, &mut stream.as_slice()).unwrap();
        assert_eq!(r.generation, Generation(1));
        assert!(b
            .storage
            .with_state(|s| s.generations.contains(&Generation(1))));
    }

    #[test]
    fn a_generation_of_another_origin_is_never_replaced() {
        let a = sim_host();
        let mut stream = Vec::new();
        send(&a.host, Generation(1), None, &mut stream).unwrap();
        // Same number, other data: the sim's identity is by number, so fake another.
        let mut other = stream.clone();
        let at = other
            .windows(5)
            .position(|w| w == b"sim-1")
            .expect("the identity is in the header");
        other[at + 4] = b'9';
        let b = sim_host();
        let e = receive(&b.host, &mut other.as_slice()).unwrap_err();
        assert_eq!(
            crate::error::exit_code(&e),
            crate::error::EXIT_USAGE,
            "{e:#}"
        );
    }
}
