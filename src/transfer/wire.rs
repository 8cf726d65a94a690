//! The format a baseline generation travels in between hosts: a magic line, a header saying
//! which generation it is and what it is an increment on, the storage's own send stream cut
//! into length-prefixed frames, an empty frame, and the SHA-256 of header and payload. A
//! reader that meets a short stream, an oversized frame or a wrong digest fails, so the
//! receiver keeps nothing of it (an interrupted `ssh` looks exactly like a short stream).

use crate::branch::Generation;
use crate::storage::GenerationInfo;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::{self, Read, Write};

pub const MAGIC: &[u8] = b"db-branch stream 1\n";
/// Frames are at most this long (a longer length is corruption, not data).
const MAX_FRAME: usize = 4 << 20;
const FRAME: usize = 1 << 20;

/// What a stream carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamHeader {
    pub generation: Generation,
    /// What the generation is known by on every host that holds it (storage.rs, Transfer).
    pub identity: Option<String>,
    /// The generation this stream is an increment on; None for a full stream.
    pub parent: Option<Generation>,
    /// What the parent is known by on both sides (the receiver must hold it).
    pub parent_identity: Option<String>,
    /// `btrfs` (a `btrfs send` stream) or `zfs` (a `zfs send` stream).
    pub format: String,
    /// Which server made the generation, when and how.
    pub info: Option<GenerationInfo>,
}

/// Writes a stream: header first, then whatever is written to it, then `finish`.
pub struct StreamWriter<W: Write> {
    inner: W,
    hasher: Sha256,
    buf: Vec<u8>,
    payload: u64,
}

impl<W: Write> StreamWriter<W> {
    pub fn new(mut inner: W, header: &StreamHeader) -> io::Result<Self> {
        let json = serde_json::to_vec(header)?;
        let mut hasher = Sha256::new();
        inner.write_all(MAGIC)?;
        inner.write_all(&(json.len() as u32).to_be_bytes())?;
        inner.write_all(&json)?;
        hasher.update(&json);
        Ok(StreamWriter {
            inner,
            hasher,
            buf: Vec::with_capacity(FRAME),
            payload: 0,
        })
    }

    fn emit(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.inner
            .write_all(&(self.buf.len() as u32).to_be_bytes())?;
        self.inner.write_all(&self.buf)?;
        self.hasher.update(&self.buf);
        self.payload += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Ends the stream; returns the writer, the hex digest and the payload's length.
    pub fn finish(mut self) -> io::Result<(W, String, u64)> {
        self.emit()?;
        self.inner.write_all(&0u32.to_be_bytes())?;
        let digest = self.hasher.finalize();
        self.inner.write_all(&digest)?;
        self.inner.flush()?;
        Ok((self.inner, hex::encode(digest), self.payload))
    }
}

impl<W: Write> Write for StreamWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(FRAME - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == FRAME {
            self.emit()?;
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.emit()?;
        self.inner.flush()
    }
}

/// Reads a stream's payload one frame behind: a frame is handed on only once the next one
/// has arrived, and the last only once the digest matched. So whatever consumes the
/// payload (`btrfs receive`, `zfs receive`) never sees the end of a stream that is short or
/// corrupt, and never finishes a receive of one.
pub struct StreamReader<R: Read> {
    inner: R,
    hasher: Sha256,
    /// The frame being handed on, and how much of it is.
    serving: Vec<u8>,
    served: usize,
    /// A whole frame read but not yet handed on.
    held: Option<Vec<u8>>,
    digest: Option<String>,
    payload: u64,
}

fn short(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("the stream ended early, in {what} (an interrupted transfer?)"),
    )
}

fn read_exact_or(r: &mut impl Read, buf: &mut [u8], what: &str) -> io::Result<()> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => short(what),
        _ => e,
    })
}

impl<R: Read> StreamReader<R> {
    /// Reads the magic line and the header.
    pub fn open(mut inner: R) -> io::Result<(StreamHeader, Self)> {
        let mut magic = vec![0; MAGIC.len()];
        read_exact_or(&mut inner, &mut magic, "its first line")?;
        if magic != MAGIC {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "this is not a db-branch baseline stream (no `db-branch stream 1` line)",
            ));
        }
        let mut len = [0u8; 4];
        read_exact_or(&mut inner, &mut len, "the header")?;
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the stream's header is corrupt",
            ));
        }
        let mut json = vec![0; len];
        read_exact_or(&mut inner, &mut json, "the header")?;
        let header: StreamHeader = serde_json::from_slice(&json).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the stream's header is corrupt: {e}"),
            )
        })?;
        let mut hasher = Sha256::new();
        hasher.update(&json);
        Ok((
            header,
            StreamReader {
                inner,
                hasher,
                serving: Vec::new(),
                served: 0,
                held: None,
                digest: None,
                payload: 0,
            },
        ))
    }

    /// The verified digest, once the whole stream was read.
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// Payload bytes handed on so far.
    pub fn payload_bytes(&self) -> u64 {
        self.payload
    }

    /// The next frame from the wire, or None at the (verified) end.
    fn next_frame(&mut self) -> io::Result<Option<Vec<u8>>> {
        let mut len = [0u8; 4];
        read_exact_or(&mut self.inner, &mut len, "a frame's length")?;
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the stream is corrupt (a frame of {len} bytes)"),
            ));
        }
        if len == 0 {
            let mut theirs = [0u8; 32];
            read_exact_or(&mut self.inner, &mut theirs, "the checksum")?;
            let ours = std::mem::take(&mut self.hasher).finalize();
            if ours.as_slice() != theirs {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "the stream's SHA-256 does not match: sent {}, received {}",
                        hex::encode(theirs),
                        hex::encode(ours)
                    ),
                ));
            }
            self.digest = Some(hex::encode(ours));
            return Ok(None);
        }
        let mut frame = vec![0; len];
        read_exact_or(&mut self.inner, &mut frame, "a frame")?;
        self.hasher.update(&frame);
        Ok(Some(frame))
    }
}

impl<R: Read> Read for StreamReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        while self.served == self.serving.len() {
            if self.digest.is_some() {
                // Verified: the held frame was the last.
                match self.held.take() {
                    Some(last) => {
                        self.serving = last;
                        self.served = 0;
                    }
                    None => return Ok(0),
                }
                continue;
            }
            match self.next_frame()? {
                Some(frame) => {
                    if let Some(ready) = self.held.replace(frame) {
                        self.serving = ready;
                        self.served = 0;
                    }
                }
                None => continue,
            }
        }
        let n = buf.len().min(self.serving.len() - self.served);
        buf[..n].copy_from_slice(&self.serving[self.served..self.served + n]);
        self.served += n;
        self.payload += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> StreamHeader {
        StreamHeader {
            generation: Generation(3),
            identity: Some("uuid-3".into()),
            parent: Some(Generation(2)),
            parent_identity: Some("uuid-2".into()),
            format: "btrfs".into(),
            info: None,
        }
    }

    fn stream(payload: &[u8]) -> Vec<u8> {
        let mut w = StreamWriter::new(Vec::new(), &header()).unwrap();
        // Odd-sized writes across frame boundaries.
        for chunk in payload.chunks(777_777) {
            w.write_all(chunk).unwrap();
        }
        let (out, digest, n) = w.finish().unwrap();
        assert_eq!(n, payload.len() as u64);
        assert_eq!(digest.len(), 64);
        out
    }

    fn read_all(bytes: &[u8]) -> io::Result<(StreamHeader, Vec<u8>)> {
        let (h, mut r) = StreamReader::open(bytes)?;
        let mut out = Vec::new();
        r.read_to_end(&mut out)?;
        assert!(r.digest().is_some());
        Ok((h, out))
    }

    #[test]
    fn a_stream_reads_back_whole() {
        let payload: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let (h, out) = read_all(&stream(&payload)).unwrap();
        assert_eq!(h, header());
        assert_eq!(out, payload);
        let (_, empty) = read_all(&stream(&[])).unwrap();
        assert!(empty.is_empty());
    }

    #[test]
    fn a_cut_stream_fails_wherever_it_is_cut() {
        let bytes = stream(&vec![7u8; 2_500_000]);
        for cut in [
            0,
            5,
            MAGIC.len() + 2,
            200,
            1_200_000,
            bytes.len() - 40,
            bytes.len() - 1,
        ] {
            let e = read_all(&bytes[..cut]).unwrap_err();
            assert!(
                e.kind() == io::ErrorKind::UnexpectedEof,
                "cut at {cut}: {e}"
            );
        }
    }

    #[test]
    fn the_last_frame_waits_for_the_checksum() {
        // Two frames; the digest is wrong: the reader hands on the first frame at most.
        let payload = vec![9u8; FRAME + 10];
        let mut bytes = stream(&payload);
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        let (_, mut r) = StreamReader::open(bytes.as_slice()).unwrap();
        let mut got = Vec::new();
        let e = r.read_to_end(&mut got).unwrap_err();
        assert!(e.to_string().contains("SHA-256"), "{e}");
        assert_eq!(got.len(), FRAME, "the last frame was held back");
    }

    #[test]
    fn a_changed_byte_fails_the_checksum() {
        let mut bytes = stream(&vec![1u8; 100_000]);
        let i = bytes.len() - 5000;
        bytes[i] ^= 0xff;
        let e = read_all(&bytes).unwrap_err();
        assert!(e.to_string().contains("SHA-256 does not match"), "{e}");
        let e = read_all(b"not a stream at all, no").unwrap_err();
        assert!(
            e.to_string().contains("not a db-branch baseline stream"),
            "{e}"
        );
    }
}
