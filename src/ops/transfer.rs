//! `baseline push`, `pull`, `receive` and `send`: generations between hosts as the storage's
//! own send streams, incremental against the newest generation both sides hold (by
//! identity, not just number), framed and checksummed end to end (transfer/wire.rs). A
//! generation keeps its number, and is visible on the receiving side only once the whole
//! stream was verified: an interrupted or corrupt transfer leaves nothing behind.

use crate::branch::Generation;
use crate::error::{usage, Error, Kind};
use crate::host::Host;
use crate::printer::PhaseProgress;
use crate::storage::file_copy::FORMAT as FILES;
use crate::storage::StorageError;
use crate::transfer::remote::{FarGeneration, Received, Remote, Shape};
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
    /// Sent as a file-level copy (between backends, or `--as-files`), not a send stream.
    pub files: bool,
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

fn header(host: &Host, gen: Generation, shape: Shape) -> Result<StreamHeader> {
    let parent = match shape {
        Shape::Stream(p) => p,
        Shape::Files => None,
    };
    Ok(StreamHeader {
        generation: gen,
        identity: host.storage.generation_identity(gen)?,
        parent,
        parent_identity: match parent {
            Some(p) => host.storage.generation_identity(p)?,
            None => None,
        },
        format: match shape {
            Shape::Files => FILES.to_string(),
            Shape::Stream(_) => host.storage.stream_format().to_string(),
        },
        info: host.storage.generation_info(gen)?,
    })
}

/// This host holds `gen` as the data `identity` names: itself, or a file-level copy of it.
fn here_is(host: &Host, gen: Generation, identity: &Option<String>) -> Result<bool> {
    if identity.is_none() || !host.storage.baselines()?.contains(&gen) {
        return Ok(false);
    }
    if &host.storage.generation_identity(gen)? == identity {
        return Ok(true);
    }
    let origin = host
        .storage
        .generation_info(gen)?
        .and_then(|i| i.origin_identity);
    Ok(&origin == identity)
}

/// Writes `gen` in `shape` to `out`.
fn write_shape(host: &Host, gen: Generation, shape: Shape, out: &mut dyn Write) -> Result<()> {
    match shape {
        Shape::Stream(parent) => host.storage.send_generation(gen, parent, out),
        Shape::Files => host.storage.send_files(gen, out),
    }
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

/// `baseline push DEST [GEN]` (default: the newest generation); `as_files` sends a
/// file-level copy (which it does anyway to a pool of another backend).
pub fn push(
    host: &Host,
    remote: &dyn Remote,
    gen: Option<Generation>,
    as_files: bool,
) -> Result<Transferred> {
    host.storage.open()?;
    let gen = require_generation(host, gen)?;
    let identity = host.storage.generation_identity(gen)?;
    let peer = remote.describe();
    let far = remote
        .generations()
        .with_context(|| format!("asking {peer} which baselines it holds"))?;
    let far_format = remote
        .format()
        .with_context(|| format!("asking {peer} what it receives"))?;
    let files = as_files
        || far_format
            .as_deref()
            .is_some_and(|f| f != host.storage.stream_format());
    let mut done = Transferred {
        generation: gen,
        direction: "push".into(),
        peer: peer.clone(),
        parent: None,
        files,
        already_there: false,
        bytes: 0,
        seconds: 0.0,
        bytes_per_second: 0.0,
        sha256: None,
    };
    if let Some(f) = far.iter().find(|f| f.generation == gen) {
        if !f.is(&identity) {
            return Err(conflict(&peer, gen));
        }
        // A host that holds it holds it; a directory may hold it as a send stream only,
        // and a file-level copy is asked for.
        let held =
            !files || far_format.is_some() || remote.offers(gen, "")?.contains(&Shape::Files);
        if held {
            done.already_there = true;
            return Ok(done);
        }
    }
    let shape = if files {
        Shape::Files
    } else {
        Shape::Stream(common_parent(host, gen, &far)?)
    };
    let parent = match shape {
        Shape::Stream(p) => p,
        Shape::Files => None,
    };
    let header = header(host, gen, shape)?;
    let progress = host.printer.progress().labelled("push");
    progress.phase_bytes(
        &match shape {
            Shape::Stream(Some(p)) => format!("{gen} to {peer} (increment on {p})"),
            Shape::Stream(None) => format!("{gen} to {peer} (in full)"),
            Shape::Files => format!("{gen} to {peer} (as files)"),
        },
        if files {
            0
        } else {
            host.storage.estimate_send(gen, parent).unwrap_or(0)
        },
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
    write_shape(host, gen, shape, &mut writer)
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
    let files = header.format == FILES;
    if !files && header.format != ours {
        return Err(Error::new(
            Kind::Usage,
            format!(
                "this is a {} stream of {gen}; this host's pool is {ours}, which cannot receive it",
                header.format
            ),
        )
        .hint("send it as a file-level copy: `db-branch baseline push DEST --as-files` (a push to a host does that by itself)")
        .into());
    }
    if host.storage.baselines()?.contains(&gen) {
        if here_is(host, gen, &header.identity)? {
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
    if files {
        return receive_files(host, &header, &mut reader);
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

/// A file-level copy: unpacked into a workspace like any new generation, sealed under its
/// number once the checksum matched, with the sender's identity kept as its origin.
fn receive_files(
    host: &Host,
    header: &StreamHeader,
    reader: &mut StreamReader<&mut dyn Read>,
) -> Result<Received> {
    let gen = header.generation;
    let result = (|| -> Result<()> {
        let workspace = host.storage.receive_files(gen, reader)?;
        std::io::copy(reader, &mut std::io::sink()).context("reading the end of the stream")?;
        if reader.digest().is_none() {
            return Err(anyhow!("the stream ended without its checksum"));
        }
        let mut info = match host.storage.generation_info_in(&workspace)? {
            Some(i) => i,
            None => header
                .info
                .clone()
                .ok_or_else(|| anyhow!("the copy of {gen} does not say which server made it"))?,
        };
        info.origin_identity = header.identity.clone();
        host.storage.write_generation_info(gen, &workspace, &info)?;
        host.storage.seal_baseline(gen)
    })();
    if let Err(e) = result {
        let e = e.context(format!("receiving baseline {gen} as files"));
        return Err(match host.storage.abandon_baseline(gen) {
            Ok(()) => e,
            Err(undo) => e.context(format!(
                "and removing the unfinished baseline failed too: {undo:#} (`db-branch doctor --repair` removes it)"
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

/// `baseline send GEN [--parent P | --as-files]`: the far side of `pull`, to stdout.
pub fn send(
    host: &Host,
    gen: Generation,
    parent: Option<Generation>,
    as_files: bool,
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
    let shape = if as_files {
        Shape::Files
    } else {
        Shape::Stream(parent)
    };
    let header = header(host, gen, shape)?;
    let mut writer = StreamWriter::new(out, &header)?;
    write_shape(host, gen, shape, &mut writer)?;
    writer.finish()?;
    Ok(())
}

/// The streams to fetch for `gen`, oldest first: an increment on what this host holds,
/// else in full, else a file-level copy (a source of another backend), else through a
/// parent fetched first.
fn pull_plan(
    host: &Host,
    remote: &dyn Remote,
    far: &[FarGeneration],
    gen: Generation,
    depth: usize,
) -> Result<Vec<(Generation, Shape)>> {
    let wanted = far.iter().find(|f| f.generation == gen);
    if let Some(w) = wanted {
        if here_is(host, gen, &w.identity)? {
            return Ok(Vec::new());
        }
    }
    if host.storage.baselines()?.contains(&gen) {
        return Err(conflict("this host", gen));
    }
    let mut offers = remote.offers(gen, host.storage.stream_format())?;
    offers.sort();
    offers.reverse();
    let parents: Vec<Generation> = offers
        .iter()
        .filter_map(|o| match o {
            Shape::Stream(Some(p)) => Some(*p),
            _ => None,
        })
        .collect();
    for p in &parents {
        let theirs = far
            .iter()
            .find(|f| f.generation == *p)
            .and_then(|f| f.identity.clone());
        let ours = host.storage.generation_identity(*p)?;
        if ours.is_some() && ours == theirs {
            return Ok(vec![(gen, Shape::Stream(Some(*p)))]);
        }
    }
    for shape in [Shape::Stream(None), Shape::Files] {
        if offers.contains(&shape) {
            return Ok(vec![(gen, shape)]);
        }
    }
    if depth < 64 {
        if let Some(p) = parents.first() {
            let mut chain = pull_plan(host, remote, far, *p, depth + 1)?;
            chain.push((gen, Shape::Stream(Some(*p))));
            return Ok(chain);
        }
    }
    Err(crate::error::not_found(format!(
        "{} has no stream of {gen} that this host can apply (a {} pool)",
        remote.describe(),
        host.storage.stream_format()
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
            files: false,
            already_there: true,
            bytes: 0,
            seconds: 0.0,
            bytes_per_second: 0.0,
            sha256: None,
        }]);
    }
    let mut out = Vec::new();
    for (g, shape) in plan {
        let parent = match shape {
            Shape::Stream(p) => p,
            Shape::Files => None,
        };
        let progress = host.printer.progress().labelled("pull");
        progress.phase_bytes(
            &match shape {
                Shape::Stream(Some(p)) => format!("{g} from {peer} (increment on {p})"),
                Shape::Stream(None) => format!("{g} from {peer} (in full)"),
                Shape::Files => format!("{g} from {peer} (as files)"),
            },
            0,
        );
        let started = Instant::now();
        let mut incoming = remote
            .open_send(g, shape)
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
            files: shape == Shape::Files,
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
        let first = push(&a.host, &remote, None, false).unwrap();
        assert_eq!((first.generation, first.parent), (Generation(1), None));
        assert!(first.bytes > 0 && first.sha256.is_some());
        // The same again: nothing to send.
        assert!(push(&a.host, &remote, None, false).unwrap().already_there);
        a.storage
            .with_state(|s| s.generations.insert(Generation(2)));
        let second = push(&a.host, &remote, None, false).unwrap();
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
        send(&a.host, Generation(1), None, false, &mut stream).unwrap();
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
    fn a_file_level_copy_keeps_its_number_and_origin() {
        let a = sim_host();
        let files_dir = tempfile::tempdir().unwrap();
        let only_files = Dir::new(files_dir.path().to_path_buf());
        let sent = push(&a.host, &only_files, None, true).unwrap();
        assert!(sent.files && sent.parent.is_none());
        let b = sim_host();
        b.storage.with_state(|s| s.generations.clear());
        let got = pull(&b.host, &only_files, None).unwrap();
        assert!(got[0].files, "{got:?}");
        assert_eq!(b.storage.baselines().unwrap(), [Generation(1)]);
        // Pulled again: already there, by its origin.
        assert!(pull(&b.host, &only_files, None).unwrap()[0].already_there);

        // A directory holding it as a send stream still takes a copy as files, and a pull
        // of the same format prefers the stream.
        let both_dir = tempfile::tempdir().unwrap();
        let both = Dir::new(both_dir.path().to_path_buf());
        assert!(!push(&a.host, &both, None, false).unwrap().files);
        let sent = push(&a.host, &both, None, true).unwrap();
        assert!(sent.files && !sent.already_there);
        assert!(push(&a.host, &both, None, true).unwrap().already_there);
        let c = sim_host();
        c.storage.with_state(|s| s.generations.clear());
        assert!(!pull(&c.host, &both, None).unwrap()[0].files);
    }

    #[test]
    fn a_generation_of_another_origin_is_never_replaced() {
        let a = sim_host();
        let mut stream = Vec::new();
        send(&a.host, Generation(1), None, false, &mut stream).unwrap();
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
            crate::report::exit_code(&e),
            crate::error::EXIT_USAGE,
            "{e:#}"
        );
    }
}
