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
    /// The parents it can send `gen` as an increment on (None: in full). A host can send
    /// any it holds; a directory only the streams it has.
    fn offers(&self, gen: Generation) -> Result<Vec<Option<Generation>>>;
    /// `gen` as a framed stream (wire.rs), on `parent` when given.
    fn open_send(
        &self,
        gen: Generation,
        parent: Option<Generation>,
    ) -> Result<Box<dyn Incoming + '_>>;
    /// Somewhere to write the framed stream `header` begins.
    fn open_receive(&self, header: &StreamHeader) -> Result<Box<dyn Outgoing + '_>>;
}
