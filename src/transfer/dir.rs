//! A directory of stream files (`file:DIR`) — on a shared or object-store-backed mount —
//! with a manifest saying what each file holds. A push writes `NAME.partial` and renames it
//! when whole, then rewrites the manifest atomically; a file the manifest does not name is
//! never read. Streams are the framed, checksummed ones of wire.rs, so a pull verifies what
//! it reads.

use super::remote::{FarGeneration, Incoming, Outgoing, Received, Remote, Shape};
use super::wire::StreamHeader;
use crate::branch::Generation;
use crate::storage::file_copy::FORMAT;
use crate::storage::GenerationInfo;
use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub const MANIFEST: &str = "manifest.json";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Manifest {
    pub streams: Vec<StreamEntry>,
}

/// One stream file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamEntry {
    pub generation: Generation,
    pub identity: Option<String>,
    /// The generation it is an increment on (None: a full stream).
    pub parent: Option<Generation>,
    pub parent_identity: Option<String>,
    /// `btrfs` or `zfs`.
    pub format: String,
    /// The file's name in the directory.
    pub file: String,
    pub bytes: u64,
    pub sha256: String,
    pub info: Option<GenerationInfo>,
}

pub struct Dir {
    path: PathBuf,
}

impl Dir {
    pub fn new(path: PathBuf) -> Dir {
        Dir { path }
    }

    fn manifest(&self) -> Result<Manifest> {
        let path = self.path.join(MANIFEST);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("reading {} (not a db-branch manifest?)", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if self.path.is_dir() {
                    Ok(Manifest::default())
                } else {
                    Err(crate::error::not_found(format!(
                        "{} is not a directory (make it, or mount the shared one there)",
                        self.path.display()
                    )))
                }
            }
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    fn file_name(header: &StreamHeader) -> String {
        match header.parent {
            _ if header.format == FORMAT => {
                format!("{}.files.stream", header.generation.dir_name())
            }
            Some(p) => format!(
                "{}.from-{}.stream",
                header.generation.dir_name(),
                p.dir_name()
            ),
            None => format!("{}.full.stream", header.generation.dir_name()),
        }
    }
}

struct ToFile<'a> {
    dir: &'a Dir,
    header: StreamHeader,
    partial: PathBuf,
    out: Option<BufWriter<fs::File>>,
}

impl Write for ToFile<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.as_mut().expect("open until finish").write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.as_mut().expect("open until finish").flush()
    }
}

impl Outgoing for ToFile<'_> {
    fn finish(mut self: Box<Self>, sha256: &str, bytes: u64) -> Result<Received> {
        let out = self.out.take().expect("finished once");
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        let name = Dir::file_name(&self.header);
        let dest = self.dir.path.join(&name);
        fs::rename(&self.partial, &dest)
            .with_context(|| format!("moving {} into place", self.partial.display()))?;
        let mut manifest = self.dir.manifest()?;
        manifest.streams.retain(|s| s.file != name);
        manifest.streams.push(StreamEntry {
            generation: self.header.generation,
            identity: self.header.identity.clone(),
            parent: self.header.parent,
            parent_identity: self.header.parent_identity.clone(),
            format: self.header.format.clone(),
            file: name,
            bytes,
            sha256: sha256.to_string(),
            info: self.header.info.clone(),
        });
        manifest.streams.sort_by_key(|s| (s.generation, s.parent));
        crate::store::files::write_atomic(
            &self.dir.path.join(MANIFEST),
            &serde_json::to_vec_pretty(&manifest)?,
            0o644,
        )?;
        Ok(Received {
            generation: self.header.generation,
            already_there: false,
            sha256: Some(sha256.to_string()),
            bytes,
        })
    }
}

impl Drop for ToFile<'_> {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = fs::remove_file(&self.partial);
        }
    }
}

struct FromFile(BufReader<fs::File>);

impl Read for FromFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl Incoming for FromFile {
    fn finish(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

impl Remote for Dir {
    fn describe(&self) -> String {
        format!("file:{}", self.path.display())
    }

    fn generations(&self) -> Result<Vec<FarGeneration>> {
        let mut out: Vec<FarGeneration> = Vec::new();
        for s in self.manifest()?.streams {
            if !out.iter().any(|g| g.generation == s.generation) {
                out.push(FarGeneration {
                    generation: s.generation,
                    identity: s.identity,
                    origin_identity: None,
                });
            }
        }
        out.sort_by_key(|g| g.generation);
        Ok(out)
    }

    fn format(&self) -> Result<Option<String>> {
        Ok(None)
    }

    fn offers(&self, gen: Generation, format: &str) -> Result<Vec<Shape>> {
        Ok(self
            .manifest()?
            .streams
            .iter()
            .filter(|s| s.generation == gen)
            .filter_map(|s| match s.format.as_str() {
                FORMAT => Some(Shape::Files),
                f if f == format => Some(Shape::Stream(s.parent)),
                _ => None,
            })
            .collect())
    }

    fn open_send(&self, gen: Generation, shape: Shape) -> Result<Box<dyn Incoming + '_>> {
        let manifest = self.manifest()?;
        let entry = manifest
            .streams
            .iter()
            .find(|s| {
                s.generation == gen
                    && match shape {
                        Shape::Files => s.format == FORMAT,
                        Shape::Stream(p) => s.format != FORMAT && s.parent == p,
                    }
            })
            .ok_or_else(|| anyhow!("{} has no stream of {gen} as {shape:?}", self.describe()))?;
        let path = self.path.join(&entry.file);
        let file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .with_context(|| format!("opening {} (not through a link)", path.display()))?;
        Ok(Box::new(FromFile(BufReader::with_capacity(1 << 20, file))))
    }

    fn open_receive(&self, header: &StreamHeader) -> Result<Box<dyn Outgoing + '_>> {
        self.manifest()?;
        let partial = self
            .path
            .join(format!("{}.partial", Dir::file_name(header)));
        // The directory may be writable by others: a partial left there (or a link planted
        // under its name) is removed, never written through, and ours is made new.
        match fs::remove_file(&partial) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", partial.display()))
            }
            _ => {}
        }
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o644)
            .open(&partial)
            .with_context(|| format!("creating {}", partial.display()))?;
        Ok(Box::new(ToFile {
            dir: self,
            header: header.clone(),
            partial,
            out: Some(BufWriter::with_capacity(1 << 20, file)),
        }))
    }
}

/// For tests and `doctor`: the manifest of a stream directory.
pub fn read_manifest(dir: &Path) -> Result<Manifest> {
    Dir::new(dir.to_path_buf()).manifest()
}
