//! A generation as a file-level copy — a tar of its clean datadir, zstd-compressed — for
//! what send streams cannot do: move between backends (btrfs ↔ ZFS), or to a stream
//! directory that hosts of either backend pull from (`baseline push --as-files`). The
//! receiver builds it in a workspace like any new generation and seals it under the same
//! number once the stream's checksum matched; it gets an identity of its own there, and
//! keeps the sender's as its origin (so a second push of it is a no-op).

use crate::branch::Generation;
use crate::exec;
use anyhow::{Context, Result};
use std::path::Path;
use std::process::Command;

pub const FORMAT: &str = "files";

/// Writes generation `gen`'s files (its directory `dir`) to `out`.
pub fn send(dir: &Path, gen: Generation, out: &mut dyn std::io::Write) -> Result<()> {
    let mut zstd = zstd::stream::write::Encoder::new(out, 3)?;
    exec::stream_out(
        Command::new("tar")
            .arg("-C")
            .arg(dir)
            .args(["--sparse", "-cf", "-", "."]),
        &mut zstd,
    )
    .with_context(|| format!("packing baseline {gen}"))?;
    zstd.finish()?;
    Ok(())
}

/// Unpacks a file-level copy of `gen` into its new `workspace` (the caller seals it, or
/// abandons it). Owners are restored by name, so the server's user may have another uid
/// here than where the copy was made.
///
/// A copy may come from a stream directory others can write: root unpacks only what a
/// datadir holds — directories and regular files, inside the workspace, without setuid,
/// setgid or sticky bits — and refuses links, device nodes and FIFOs (a planted device node
/// or setuid program in a generation would be served to every branch made from it).
pub fn receive(workspace: &Path, gen: Generation, input: &mut dyn std::io::Read) -> Result<()> {
    let zstd = zstd::stream::read::Decoder::new(input)?;
    unpack(zstd, workspace).with_context(|| format!("unpacking baseline {gen}"))
}

/// The checked unpack of `receive`.
pub fn unpack(input: impl std::io::Read, into: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut archive = tar::Archive::new(input);
    archive.set_preserve_permissions(false);
    archive.set_preserve_ownerships(false);
    archive.set_unpack_xattrs(false);
    archive.set_overwrite(false);
    for entry in archive.entries().context("reading the copy")? {
        let mut entry = entry.context("reading the copy")?;
        let path = entry.path().context("an entry's name")?.into_owned();
        let kind = entry.header().entry_type();
        let allowed = kind.is_file() || kind.is_dir() || kind == tar::EntryType::GNUSparse;
        if !allowed {
            anyhow::bail!(
                "the copy holds {} at {} ({kind:?}); a datadir holds only directories and \
                 files, so it was not unpacked",
                match kind {
                    tar::EntryType::Symlink | tar::EntryType::Link => "a link",
                    tar::EntryType::Char | tar::EntryType::Block => "a device node",
                    tar::EntryType::Fifo => "a FIFO",
                    _ => "an entry of another kind",
                },
                path.display()
            );
        }
        let mode = entry.header().mode().context("an entry's mode")? & 0o777;
        let owner = owner_by_name(entry.header());
        // Refuses names that leave `into` (absolute, `..`); nothing unpacked is a link, so
        // nothing later can be led out through one.
        if !entry
            .unpack_in(into)
            .with_context(|| format!("unpacking {}", path.display()))?
        {
            anyhow::bail!("the copy names {} outside the datadir", path.display());
        }
        let dest = into.join(&path);
        std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("setting the mode of {}", dest.display()))?;
        nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            &dest,
            owner.0,
            owner.1,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .with_context(|| format!("giving {} its owner", dest.display()))?;
    }
    Ok(())
}

/// The entry's owner and group by name on this host (root where the name is unknown).
fn owner_by_name(header: &tar::Header) -> (Option<nix::unistd::Uid>, Option<nix::unistd::Gid>) {
    let uid = header
        .username()
        .ok()
        .flatten()
        .and_then(|n| nix::unistd::User::from_name(n).ok().flatten())
        .map(|u| u.uid)
        .unwrap_or(nix::unistd::Uid::from_raw(0));
    let gid = header
        .groupname()
        .ok()
        .flatten()
        .and_then(|n| nix::unistd::Group::from_name(n).ok().flatten())
        .map(|g| g.gid)
        .unwrap_or(nix::unistd::Gid::from_raw(0));
    (Some(uid), Some(gid))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        build(&mut b);
        b.into_inner().unwrap()
    }

    fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_username("root").unwrap();
        h.set_groupname("root").unwrap();
        h
    }

    #[test]
    fn files_and_directories_unpack_without_special_bits() {
        let tar = archive(|b| {
            let mut h = header(tar::EntryType::Directory, 0o755, 0);
            b.append_data(&mut h, "db", std::io::empty()).unwrap();
            let mut h = header(tar::EntryType::Regular, 0o4755, 3);
            b.append_data(&mut h, "db/t.ibd", &b"abc"[..]).unwrap();
        });
        let d = tempfile::tempdir().unwrap();
        unpack(&tar[..], d.path()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let m = std::fs::metadata(d.path().join("db/t.ibd")).unwrap();
        assert_eq!(m.permissions().mode() & 0o7777, 0o755, "setuid dropped");
        assert_eq!(std::fs::read(d.path().join("db/t.ibd")).unwrap(), b"abc");
    }

    #[test]
    fn links_devices_and_escapes_are_refused() {
        for (kind, what) in [
            (tar::EntryType::Symlink, "a link"),
            (tar::EntryType::Link, "a link"),
            (tar::EntryType::Char, "a device node"),
            (tar::EntryType::Block, "a device node"),
            (tar::EntryType::Fifo, "a FIFO"),
        ] {
            let tar = archive(|b| {
                let mut h = header(kind, 0o644, 0);
                if matches!(kind, tar::EntryType::Symlink | tar::EntryType::Link) {
                    h.set_link_name("/etc/shadow").unwrap();
                }
                b.append_data(&mut h, "x", std::io::empty()).unwrap();
            });
            let d = tempfile::tempdir().unwrap();
            let err = unpack(&tar[..], d.path()).unwrap_err();
            assert!(format!("{err:#}").contains(what), "{kind:?}: {err:#}");
            assert!(!d.path().join("x").exists(), "{kind:?}");
        }
        // A name that climbs out of the workspace (written raw: the builder refuses it).
        let mut h = header(tar::EntryType::Regular, 0o644, 1);
        h.as_gnu_mut().unwrap().name[..10].copy_from_slice(b"../escape\0");
        h.set_cksum();
        let mut raw = h.as_bytes().to_vec();
        raw.extend_from_slice(&[b'x'; 512]);
        raw.extend_from_slice(&[0; 1024]);
        let outer = tempfile::tempdir().unwrap();
        let inner = outer.path().join("ws");
        std::fs::create_dir(&inner).unwrap();
        assert!(unpack(&raw[..], &inner).is_err());
        assert!(!outer.path().join("escape").exists());
    }
}
