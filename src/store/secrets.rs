//! Each branch's own client password, and the start-up SQL that gives it to the server.
//!
//! Both live under `root/secrets/NAME/`, a directory only root can write (0711: the server's
//! OS user may pass through to its one file, nobody may list it). The password file is the
//! branch owner's (0400); `init.sql` is root's, readable by the server's group (0640), and is
//! the server's `init-file`: every start of the server (create, start, reset, a refreshed
//! baseline) sets the password again, so the connection string never changes while the
//! branch lives. Neither file is in the datadir, so a reset, a checkpoint or a baseline made
//! from the branch never carries them.

use super::files::write_atomic;
use crate::branch::BranchName;
use crate::layout::Layout;
use anyhow::{Context, Result};
use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

/// Length of a generated password. 32 characters from 62 give 190 bits.
pub const PASSWORD_LEN: usize = 32;

/// A new password from the OS random number generator: letters and digits only, so it
/// needs no escaping in a URL, an option file, a shell or SQL.
pub fn generate_password() -> Result<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut out = String::with_capacity(PASSWORD_LEN);
    while out.len() < PASSWORD_LEN {
        let mut buf = [0u8; 64];
        getrandom::fill(&mut buf).context("reading the OS random number generator")?;
        // 248 = 4 × 62: bytes at or above it would favour the first letters.
        for b in buf.into_iter().filter(|b| *b < 248) {
            if out.len() < PASSWORD_LEN {
                out.push(ALPHABET[(b % 62) as usize] as char);
            }
        }
    }
    Ok(out)
}

/// The branch's password, if it has one yet (branches made before db-branch kept one get
/// theirs at their next start).
pub fn password(layout: &Layout, name: &BranchName) -> Result<Option<String>> {
    read_password_file(&layout.password_file(name))
}

/// The password kept in `path`, if it exists.
pub fn read_password_file(path: &Path) -> Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s.trim().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// The branch's password, made and stored the first time. `owner`: the uid that may read it
/// besides root.
pub fn ensure_password(layout: &Layout, name: &BranchName, owner: Option<u32>) -> Result<String> {
    if let Some(p) = password(layout, name)? {
        // Only the owner's own file is theirs to keep: one given to anybody else (left by
        // another user's create under this name) is replaced, never shown to this owner.
        let path = layout.password_file(name);
        let holder = fs::metadata(&path)
            .with_context(|| format!("reading {}", path.display()))?
            .uid();
        if holder == owner.unwrap_or(0) {
            return Ok(p);
        }
        fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    }
    ensure_dir(layout, name)?;
    let password = generate_password()?;
    let path = layout.password_file(name);
    write_atomic(&path, format!("{password}\n").as_bytes(), 0o400)?;
    if let Some(uid) = owner {
        nix::unistd::chown(&path, Some(nix::unistd::Uid::from_raw(uid)), None)
            .with_context(|| format!("giving {} to uid {uid}", path.display()))?;
    }
    Ok(password)
}

/// Writes the statements the server runs at every start (`init-file`), readable by the
/// server's group only.
pub fn write_init_sql(
    layout: &Layout,
    name: &BranchName,
    statements: &[String],
    server_gid: Option<u32>,
) -> Result<std::path::PathBuf> {
    ensure_dir(layout, name)?;
    let path = layout.init_sql(name);
    let mut text = String::from("-- Written by db-branch at each start: this branch's password.\n");
    for s in statements {
        text.push_str(s);
        text.push_str(";\n");
    }
    write_atomic(&path, text.as_bytes(), 0o640)?;
    if let Some(gid) = server_gid {
        nix::unistd::chown(&path, None, Some(nix::unistd::Gid::from_raw(gid)))
            .with_context(|| format!("giving {} to gid {gid}", path.display()))?;
    }
    Ok(path)
}

/// The uid of the OS user `name`, if there is one (a branch's owner may be a label such as
/// `ci` that no OS user has).
pub fn uid_of(name: &str) -> Option<u32> {
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw())
}

/// The primary gid of the OS user `name` (the server's, for its start-up SQL).
pub fn gid_of(name: &str) -> Option<u32> {
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| u.gid.as_raw())
}

/// Removes the branch's secrets (on delete).
pub fn remove(layout: &Layout, name: &BranchName) -> Result<()> {
    super::files::remove_tree(&layout.secrets_dir(name))
}

fn ensure_dir(layout: &Layout, name: &BranchName) -> Result<()> {
    let top = layout.secrets_root();
    for dir in [top.as_path(), layout.secrets_dir(name).as_path()] {
        make_private_dir(dir)?;
    }
    Ok(())
}

/// A directory only root writes, that others may pass through but not list. An existing
/// one is put right (a link planted in its place is refused by `create_dir`'s EEXIST check
/// followed by `symlink_metadata`).
fn make_private_dir(dir: &Path) -> Result<()> {
    match fs::DirBuilder::new().mode(0o711).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let meta =
                fs::symlink_metadata(dir).with_context(|| format!("checking {}", dir.display()))?;
            if !meta.is_dir() {
                anyhow::bail!(
                    "{} is not a directory; remove it so db-branch can keep branch passwords there",
                    dir.display()
                );
            }
        }
        Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(0o711))
        .with_context(|| format!("setting the mode of {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_long_alphanumeric_and_differ() {
        let a = generate_password().unwrap();
        let b = generate_password().unwrap();
        assert_eq!(a.len(), PASSWORD_LEN);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()), "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn a_password_is_made_once_and_kept_private() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let n: BranchName = "a".parse().unwrap();
        assert_eq!(password(&layout, &n).unwrap(), None);
        let p = ensure_password(&layout, &n, None).unwrap();
        assert_eq!(ensure_password(&layout, &n, None).unwrap(), p);
        assert_eq!(password(&layout, &n).unwrap(), Some(p));
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&layout.password_file(&n)), 0o400);
        assert_eq!(mode(&layout.secrets_dir(&n)), 0o711);
        let init = write_init_sql(&layout, &n, &["SELECT 1".into()], None).unwrap();
        assert_eq!(mode(&init), 0o640);
        assert!(fs::read_to_string(&init).unwrap().contains("SELECT 1;\n"));
        remove(&layout, &n).unwrap();
        assert!(!layout.secrets_dir(&n).exists());
    }
}
