//! A generation as a file-level copy — a tar of its clean datadir, zstd-compressed — for
//! what send streams cannot do: move between backends (btrfs ↔ ZFS), or to a stream
//! directory that hosts of either backend pull from (`baseline push --as-files`). The
//! receiver builds it in a workspace like any new generation and seals it under the same
//! number once the stream's checksum matched; it gets an identity of its own there, and
//! keeps the sender's as its origin (so a second push of it is a no-op).

use super::Storage;
use crate::branch::Generation;
use crate::exec;
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::Command;

pub const FORMAT: &str = "files";

/// Writes generation `gen`'s files to `out`.
pub fn send<S: Storage + ?Sized>(
    storage: &S,
    gen: Generation,
    out: &mut dyn std::io::Write,
) -> Result<()> {
    let dir = storage.generation_dir(gen);
    let mut zstd = zstd::stream::write::Encoder::new(out, 3)?;
    exec::stream_out(
        Command::new("tar")
            .arg("-C")
            .arg(&dir)
            .args(["--sparse", "-cf", "-", "."]),
        &mut zstd,
    )
    .with_context(|| format!("packing baseline {gen}"))?;
    zstd.finish()?;
    Ok(())
}

/// Unpacks a file-level copy into a new workspace for `gen` (the caller seals it, or
/// abandons it). Owners are restored by name, so the server's user may have another uid
/// here than where the copy was made.
pub fn receive<S: Storage + ?Sized>(
    storage: &S,
    gen: Generation,
    input: &mut dyn std::io::Read,
) -> Result<PathBuf> {
    let workspace = storage.begin_baseline(gen)?;
    let mut zstd = zstd::stream::read::Decoder::new(input)?;
    exec::stream_in(
        Command::new("tar")
            .arg("-C")
            .arg(&workspace)
            .args(["--same-owner", "-xpf", "-"]),
        &mut zstd,
    )
    .with_context(|| format!("unpacking baseline {gen}"))?;
    Ok(workspace)
}
