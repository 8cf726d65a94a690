//! Memory ceilings for the built-in supervisor's servers: each server in a cgroup of its
//! own with a high (throttle) and max (kill) limit, as systemd's MemoryHigh/MemoryMax do
//! for units. cgroup v2 where its memory controller is available; the v1 memory controller
//! on hosts that still mount it (its `memory.limit_in_bytes`); none where neither is
//! writable (`doctor` says so).

use anyhow::{Context, Result};
use std::fs;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// Where branch cgroups are made: a `db-branch` group at the top of the hierarchy that has
/// the memory controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    pub version: Version,
    pub root: PathBuf,
}

impl Hierarchy {
    /// The hierarchy with the memory controller, if any is mounted.
    pub fn find() -> Option<Hierarchy> {
        let v2 = Path::new("/sys/fs/cgroup");
        if fs::read_to_string(v2.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "memory"))
        {
            return Some(Hierarchy {
                version: Version::V2,
                root: v2.to_path_buf(),
            });
        }
        let v1 = Path::new("/sys/fs/cgroup/memory");
        v1.join("memory.limit_in_bytes")
            .is_file()
            .then(|| Hierarchy {
                version: Version::V1,
                root: v1.to_path_buf(),
            })
    }

    /// `db-branch/<group>/<name>`: one per server, grouped per db-branch root.
    pub fn branch_dir(&self, group: &str, name: &str) -> PathBuf {
        self.root.join("db-branch").join(group).join(name)
    }

    /// Makes (or empties the counters of) a branch's cgroup and sets its limits.
    pub fn prepare(&self, dir: &Path, high: u64, max: u64) -> Result<()> {
        // A fresh group: its OOM counter then speaks of this start only.
        let _ = fs::remove_dir(dir);
        if self.version == Version::V2 {
            // Each level must hand the memory controller down to the next.
            let mut level = self.root.clone();
            for part in dir.strip_prefix(&self.root).unwrap_or(dir).iter() {
                let control = level.join("cgroup.subtree_control");
                let enabled = fs::read_to_string(&control).unwrap_or_default();
                if !enabled.split_whitespace().any(|c| c == "memory") {
                    fs::write(&control, "+memory").with_context(|| {
                        format!("enabling the memory controller in {}", control.display())
                    })?;
                }
                level = level.join(part);
                fs::create_dir_all(&level)
                    .with_context(|| format!("creating cgroup {}", level.display()))?;
            }
            write(dir, "memory.high", high)?;
            write(dir, "memory.max", max)?;
        } else {
            fs::create_dir_all(dir)
                .with_context(|| format!("creating cgroup {}", dir.display()))?;
            write(dir, "memory.limit_in_bytes", max)?;
            write(dir, "memory.soft_limit_in_bytes", high)?;
        }
        Ok(())
    }

    /// The file a process writes its PID (or 0, itself) into to join the group.
    pub fn procs_file(dir: &Path) -> PathBuf {
        dir.join("cgroup.procs")
    }

    /// How often the kernel killed a process of this group for exceeding its limit.
    pub fn oom_kills(&self, dir: &Path) -> u64 {
        let file = match self.version {
            Version::V2 => "memory.events",
            Version::V1 => "memory.oom_control",
        };
        fs::read_to_string(dir.join(file))
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|l| l.strip_prefix("oom_kill "))
                    .and_then(|n| n.trim().parse().ok())
            })
            .unwrap_or(0)
    }

    /// Removes an empty group (its server is gone).
    pub fn remove(dir: &Path) {
        let _ = fs::remove_dir(dir);
    }
}

fn write(dir: &Path, file: &str, value: u64) -> Result<()> {
    let path = dir.join(file);
    fs::write(&path, value.to_string()).with_context(|| format!("writing {}", path.display()))
}

/// A group name for a db-branch root: its path with `/` made `-`.
pub fn group_of(root: &Path) -> String {
    let s = root.display().to_string();
    let s = s.trim_matches('/').replace('/', "-");
    if s.is_empty() {
        "root".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_named_after_roots() {
        assert_eq!(
            group_of(Path::new("/var/lib/db-branch")),
            "var-lib-db-branch"
        );
        let h = Hierarchy {
            version: Version::V2,
            root: "/sys/fs/cgroup".into(),
        };
        assert_eq!(
            h.branch_dir("var-lib-db-branch", "a"),
            PathBuf::from("/sys/fs/cgroup/db-branch/var-lib-db-branch/a")
        );
    }

    #[test]
    fn oom_kills_are_read_from_either_version() {
        let dir = tempfile::tempdir().unwrap();
        let v2 = Hierarchy {
            version: Version::V2,
            root: dir.path().into(),
        };
        fs::write(
            dir.path().join("memory.events"),
            "low 0\nhigh 3\nmax 2\noom 1\noom_kill 1\n",
        )
        .unwrap();
        assert_eq!(v2.oom_kills(dir.path()), 1);
        let v1 = Hierarchy {
            version: Version::V1,
            root: dir.path().into(),
        };
        fs::write(
            dir.path().join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        assert_eq!(v1.oom_kills(dir.path()), 2);
    }
}
