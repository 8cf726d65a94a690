//! The far side of a transfer, behind one small trait: another host over ssh (its own
//! `db-branch baseline receive/send/list`) or a directory of stream files. Only the
//! implementations touch `ssh` or the directory.

use super::wire::StreamHeader;
use crate::branch::Generation;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};

/// A generation the far side holds, and what it is known by everywhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FarGeneration {
    pub generation: Generation,
    pub identity: Option<String>,
    /// For one received as a file-level copy: its identity where it came from.
    #[serde(default)]
    pub origin_identity: Option<String>,
}

impl FarGeneration {
    /// It holds the data `identity` names (as itself, or as a copy of it).
    pub fn is(&self, identity: &Option<String>) -> bool {
        identity.is_some() && (&self.identity == identity || &self.origin_identity == identity)
    }
}

/// How a generation can travel: the storage's own send stream (an increment on a parent,
/// or in full), or a file-level copy (storage/file_copy.rs: between backends).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shape {
    Stream(Option<Generation>),
    Files,
}

/// What the far side said when it took a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Received {
    pub generation: Generation,
    /// It held that generation already (nothing was written).
    pub already_there: bool,
    /// The digest it verified.
    pub sha256: Option<String>,
    /// Bytes of the storage's send stream it took.
    pub bytes: u64,
}

/// A stream on its way to the far side.
pub trait Outgoing: Write {
    /// The stream is whole: waits for the far side to verify and keep it.
    fn finish(self: Box<Self>, sha256: &str, bytes: u64) -> Result<Received>;
}

/// A stream coming from the far side.
pub trait Incoming: Read {
    /// The stream was read to its end: checks the far side ended well.
    fn finish(self: Box<Self>) -> Result<()>;
}

pub trait Remote {
    /// How to name it in messages: `ssh://host`, `file:DIR`.
    fn describe(&self) -> String;
    /// The generations it holds.
    fn generations(&self) -> Result<Vec<FarGeneration>>;
    /// The storage format its pool receives (`btrfs`, `zfs`); None for a directory, which
    /// keeps any.
    fn format(&self) -> Result<Option<String>>;
    /// How it can send `gen` to a pool of `format`: a host, in full or as an increment on
    /// any generation it holds (same format), or as files; a directory, the streams it has.
    fn offers(&self, gen: Generation, format: &str) -> Result<Vec<Shape>>;
    /// `gen` as a framed stream (wire.rs) of that shape.
    fn open_send(&self, gen: Generation, shape: Shape) -> Result<Box<dyn Incoming + '_>>;
    /// Somewhere to write the framed stream `header` begins.
    fn open_receive(&self, header: &StreamHeader) -> Result<Box<dyn Outgoing + '_>>;
}
