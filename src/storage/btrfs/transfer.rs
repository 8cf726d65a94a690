//! Generations between hosts as `btrfs send` / `btrfs receive` streams. A stream is
//! received straight into `baselines/` (a received subvolume cannot be moved to another
//! directory: it is read-only, and its `..` would change): while it is being received it is
//! writable, and writable `gen-N` subvolumes are not generations (`baselines()` skips them).
//! `btrfs receive` makes it read-only when it meets the stream's end, and the framing hands
//! that end on only once the checksum matched (transfer/wire.rs). btrfs cannot resume a
//! receive: an interrupted one leaves a writable partial subvolume, which the next receive
//! (or abort, or `doctor --repair`) deletes, and the transfer starts again (an increment
//! keeps that small).

use super::BtrfsStorage;
use crate::branch::Generation;
use crate::exec;
use crate::storage::{Storage, StorageError, Transfer};
use anyhow::{anyhow, Context, Result};
use std::fs;
use std::path::PathBuf;
use std::process::Command;

impl BtrfsStorage {
    /// `gen-N` subvolumes of `baselines/` that are still writable: receives under way or
    /// interrupted.
    fn partial_subvolumes(&self) -> Result<Vec<PathBuf>> {
        let dir = self.baselines_dir();
        let mut out = Vec::new();
        for entry in fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
            let path = entry?.path();
            let is_gen = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(Generation::from_dir_name)
                .is_some();
            if is_gen && !libbtrfsutil::subvolume_read_only(&path).unwrap_or(true) {
                out.push(path);
            }
        }
        Ok(out)
    }
}

impl Transfer for BtrfsStorage {
    fn stream_format(&self) -> &'static str {
        "btrfs"
    }

    fn generation_identity(&self, gen: Generation) -> Result<Option<String>> {
        let dir = self.generation_dir(gen);
        if !dir.is_dir() {
            return Ok(None);
        }
        let info = libbtrfsutil::subvolume_info(&dir)
            .map_err(|e| anyhow!("reading the subvolume of {}: {e}", dir.display()))?;
        // `btrfs send -p` names its parent by this, and `receive` finds it by this.
        Ok(Some(
            info.received_uuid()
                .unwrap_or_else(|| info.uuid())
                .to_string(),
        ))
    }

    fn send_generation(
        &self,
        gen: Generation,
        parent: Option<Generation>,
        out: &mut dyn std::io::Write,
    ) -> Result<()> {
        let dir = self.generation_dir(gen);
        if !dir.is_dir() {
            return Err(StorageError::NoSuchGeneration(gen).into());
        }
        let mut cmd = Command::new("btrfs");
        cmd.args(["send", "-q"]);
        if let Some(p) = parent {
            cmd.arg("-p").arg(self.generation_dir(p));
        }
        cmd.arg(&dir);
        exec::stream_out(&mut cmd, out).with_context(|| format!("sending baseline {gen}"))?;
        Ok(())
    }

    fn receive_generation(
        &self,
        gen: Generation,
        _parent: Option<Generation>,
        input: &mut dyn std::io::Read,
    ) -> Result<()> {
        self.abort_received()?;
        let dir = self.baselines_dir();
        exec::stream_in(
            Command::new("btrfs").args(["receive", "-q"]).arg(&dir),
            input,
        )
        .with_context(|| format!("receiving baseline {gen}"))?;
        let got = self.generation_dir(gen);
        if !got.is_dir() || !libbtrfsutil::subvolume_read_only(&got).unwrap_or(false) {
            return Err(anyhow!(
                "the stream did not end in a finished {} under {}",
                gen.dir_name(),
                dir.display()
            ));
        }
        Ok(())
    }

    fn commit_received(&self, gen: Generation) -> Result<()> {
        // Already in place (btrfs made it read-only at the stream's verified end); a RAM
        // pool keeps it on disk too.
        if self.image_in_ram() {
            self.save_stream(gen)?;
        }
        Ok(())
    }

    fn abort_received(&self) -> Result<()> {
        for partial in self.partial_subvolumes()? {
            self.delete_subvolume_if_present(&partial)?;
        }
        Ok(())
    }

    fn partial_receives(&self) -> Result<Vec<String>> {
        Ok(self
            .partial_subvolumes()?
            .iter()
            .map(|p| p.display().to_string())
            .collect())
    }
}
