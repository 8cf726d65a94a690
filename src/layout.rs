//! Where things live under `root`. Paths only; nothing here touches the disk.

use crate::branch::{BranchName, TrashId};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    pub fn new(root: &Path) -> Self {
        Layout {
            root: root.to_path_buf(),
        }
    }
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// The sparse file holding the embedded btrfs pool, in `image_dir` (default: root).
    pub fn image_file(&self, image_dir: &Path) -> PathBuf {
        if image_dir.as_os_str().is_empty() {
            self.root.join("pool.img")
        } else {
            image_dir.join(format!(
                "db-branch-{}.img",
                self.root
                    .display()
                    .to_string()
                    .trim_matches('/')
                    .replace('/', "-")
            ))
        }
    }
    /// Send streams of the baselines, kept on disk when the pool lives in RAM.
    pub fn baseline_streams(&self) -> PathBuf {
        self.root.join("baseline-streams")
    }
    /// Where the embedded pool is mounted.
    pub fn embedded_mount(&self) -> PathBuf {
        self.root.join("pool")
    }
    /// Per-branch record and option file (root's: only root writes here), and `run/`.
    /// Kept outside the datadir so that a reset (which replaces the datadir) keeps the log
    /// that proves it.
    pub fn branch_dir(&self, name: &BranchName) -> PathBuf {
        self.root.join("branches").join(name.as_str())
    }
    pub fn branches_dir(&self) -> PathBuf {
        self.root.join("branches")
    }
    pub fn record_file(&self, name: &BranchName) -> PathBuf {
        self.branch_dir(name).join("branch.json")
    }
    pub fn option_file(&self, name: &BranchName) -> PathBuf {
        self.branch_dir(name).join("my.cnf")
    }
    /// What the branch's server writes (socket, pid file, error log, `tmp/`): the one
    /// directory its OS user owns, so nothing root writes lives where it could plant a link.
    pub fn run_dir(&self, name: &BranchName) -> PathBuf {
        self.branch_dir(name).join("run")
    }
    pub fn socket(&self, name: &BranchName) -> PathBuf {
        self.run_dir(name).join("mysqld.sock")
    }
    pub fn pid_file(&self, name: &BranchName) -> PathBuf {
        self.run_dir(name).join("mysqld.pid")
    }
    pub fn error_log(&self, name: &BranchName) -> PathBuf {
        self.run_dir(name).join("error.log")
    }
    /// The server's temporary directory and its `secure_file_priv`.
    pub fn branch_tmp(&self, name: &BranchName) -> PathBuf {
        self.run_dir(name).join("tmp")
    }
    /// Branch passwords and the start-up SQL that sets them (see `store::secrets`): a
    /// directory only root writes, outside the branch directories the servers own.
    pub fn secrets_root(&self) -> PathBuf {
        self.root.join("secrets")
    }
    pub fn secrets_dir(&self, name: &BranchName) -> PathBuf {
        self.secrets_root().join(name.as_str())
    }
    pub fn password_file(&self, name: &BranchName) -> PathBuf {
        self.secrets_dir(name).join("password")
    }
    pub fn init_sql(&self, name: &BranchName) -> PathBuf {
        self.secrets_dir(name).join("init.sql")
    }
    /// This host's certificate authority for branches reachable from other machines.
    pub fn tls_dir(&self) -> PathBuf {
        self.root.join("tls")
    }
    pub fn tls_ca_cert(&self) -> PathBuf {
        self.tls_dir().join("ca.pem")
    }
    pub fn tls_ca_key(&self) -> PathBuf {
        self.tls_dir().join("ca.key")
    }
    pub fn locks_dir(&self) -> PathBuf {
        self.root.join("locks")
    }
    pub fn host_lock(&self) -> PathBuf {
        self.locks_dir().join("host.lock")
    }
    pub fn baseline_lock(&self) -> PathBuf {
        self.locks_dir().join("baseline.lock")
    }
    /// What each server binary's `--version` said, remembered by binary identity.
    pub fn server_versions_cache(&self) -> PathBuf {
        self.root.join("cache/server-versions.json")
    }
    /// Libraries db-branch's servers preload (MySQL's start-up shim): root's, readable by
    /// the servers' user.
    pub fn lib_dir(&self) -> PathBuf {
        self.root.join("lib")
    }
    pub fn branch_lock(&self, name: &BranchName) -> PathBuf {
        self.locks_dir().join(format!("branch-{name}.lock"))
    }
    /// Memory promised to servers that are starting right now (see `memory.rs`).
    pub fn reservations_dir(&self) -> PathBuf {
        self.root.join("reservations")
    }
    /// Deleted branches kept for `restore`: one directory per entry (store/trash.rs).
    pub fn trash_dir(&self) -> PathBuf {
        self.root.join("trash")
    }
    pub fn trash_entry(&self, id: &TrashId) -> PathBuf {
        self.trash_dir().join(id.as_str())
    }
    pub fn trash_lock(&self, id: &TrashId) -> PathBuf {
        self.locks_dir().join(format!("trash-{id}.lock"))
    }
    /// What is followed (`baseline follow`): the follower, its source, its last cut.
    pub fn follow_file(&self) -> PathBuf {
        self.root.join("follow.json")
    }
    /// The follower's masking SQL as `baseline follow --mask-sql` read it: what cuts run
    /// (a copy, so a file in a directory others can write cannot be swapped under a timer
    /// that runs as root).
    pub fn follow_mask_file(&self) -> PathBuf {
        self.root.join("follow-mask.sql")
    }
    /// How the follower logs in to its source (host, port, user, password; 0600): outside
    /// every datadir, given to the server only to start replicating.
    pub fn follow_secret_file(&self) -> PathBuf {
        self.root.join("follow-secret.json")
    }
    /// Scratch space for the one-off servers that prepare baselines.
    pub fn work_dir(&self) -> PathBuf {
        self.root.join("work")
    }
}
