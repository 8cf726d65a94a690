//! Generations between hosts as `zfs send` / `zfs recv` streams. A stream is received
//! unmounted under `DATASET/incoming/` — an increment as a clone of its parent's snapshot
//! (`-o origin=`), so it needs no rollback of anything — and renamed into
//! `DATASET/generations/` once its checksum was verified. An interrupted receive is
//! destroyed by the next receive (or abort); the transfer then starts again.

use super::{zfs, ZfsStorage};
use crate::branch::Generation;
use crate::exec;
use crate::storage::Transfer;
use anyhow::{Context, Result};
use std::process::Command;

impl ZfsStorage {
    fn incoming_root(&self) -> String {
        format!("{}/incoming", self.dataset)
    }
    fn incoming(&self, gen: Generation) -> String {
        format!("{}/{}", self.incoming_root(), gen.dir_name())
    }
    fn send_args(&self, gen: Generation, parent: Option<Generation>) -> Result<Vec<String>> {
        let mut args = vec!["send".to_string()];
        if let Some(p) = parent {
            args.push("-i".into());
            args.push(self.generation_snapshot(p)?);
        }
        args.push(self.generation_snapshot(gen)?);
        Ok(args)
    }
}

impl Transfer for ZfsStorage {
    fn stream_format(&self) -> &'static str {
        "zfs"
    }

    fn generation_identity(&self, gen: Generation) -> Result<Option<String>> {
        let snap = self.generation_snapshot(gen)?;
        if !self.exists(&snap)? {
            return Ok(None);
        }
        Ok(self.props(&snap, "guid")?.get("guid").cloned())
    }

    fn can_send_incremental(&self, gen: Generation, parent: Generation) -> bool {
        let Ok(mut args) = self.send_args(gen, Some(parent)) else {
            return false;
        };
        args.insert(1, "-n".into());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        zfs(&args).is_ok()
    }

    fn estimate_send(&self, gen: Generation, parent: Option<Generation>) -> Option<u64> {
        let mut args = self.send_args(gen, parent).ok()?;
        args.insert(1, "-nP".into());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = zfs(&args).ok()?;
        out.lines()
            .find_map(|l| l.strip_prefix("size\t"))
            .and_then(|n| n.trim().parse().ok())
    }

    fn send_generation(
        &self,
        gen: Generation,
        parent: Option<Generation>,
        out: &mut dyn std::io::Write,
    ) -> Result<()> {
        let args = self.send_args(gen, parent)?;
        exec::stream_out(Command::new("zfs").args(&args), out)
            .with_context(|| format!("sending baseline {gen}"))?;
        Ok(())
    }

    fn receive_generation(
        &self,
        gen: Generation,
        parent: Option<Generation>,
        input: &mut dyn std::io::Read,
    ) -> Result<()> {
        self.abort_received()?;
        if !self.exists(&self.incoming_root())? {
            zfs(&[
                "create",
                "-o",
                "mountpoint=none",
                "-o",
                "canmount=off",
                &self.incoming_root(),
            ])?;
        }
        let mut cmd = Command::new("zfs");
        cmd.args(["receive", "-u"]);
        if let Some(p) = parent {
            cmd.arg("-o")
                .arg(format!("origin={}", self.generation_snapshot(p)?));
        }
        cmd.arg(self.incoming(gen));
        exec::stream_in(&mut cmd, input).with_context(|| format!("receiving baseline {gen}"))?;
        Ok(())
    }

    fn commit_received(&self, gen: Generation) -> Result<()> {
        let to = self.generation_ds(gen);
        zfs(&["rename", &self.incoming(gen), &to])
            .with_context(|| format!("putting received baseline {gen} in place"))?;
        zfs(&["mount", &to]).with_context(|| format!("mounting {to}"))?;
        Ok(())
    }

    fn abort_received(&self) -> Result<()> {
        for ds in self.partial_receives()? {
            self.destroy(&ds)?;
        }
        Ok(())
    }

    fn partial_receives(&self) -> Result<Vec<String>> {
        let root = self.incoming_root();
        if !self.exists(&root)? {
            return Ok(Vec::new());
        }
        let out = zfs(&[
            "list",
            "-H",
            "-o",
            "name",
            "-d",
            "1",
            "-t",
            "filesystem",
            &root,
        ])?;
        Ok(super::parse_names(&out)
            .into_iter()
            .filter(|d| *d != root)
            .collect())
    }
}
