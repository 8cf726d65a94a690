//! Other machines for tests and benchmarks: network namespaces (veth.rs) each with its own
//! db-branch root and pool and an `sshd` (Debian's openssh-server) bound to the namespace's
//! address, with keys made here. Nothing listens anywhere else; all of it goes when dropped.

use super::veth::Veth;
use super::TestEnv;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The client's key and ssh options, shared by a test's hosts.
pub struct Keys {
    dir: tempfile::TempDir,
}

impl Default for Keys {
    fn default() -> Self {
        Keys::new()
    }
}

impl Keys {
    pub fn new() -> Keys {
        let dir = tempfile::tempdir().unwrap();
        keygen(&dir.path().join("id"));
        Keys { dir }
    }
    pub fn id(&self) -> PathBuf {
        self.dir.path().join("id")
    }
    /// The `[fleet]` table of the host that pushes, pulls and sends `--host`.
    pub fn fleet_table(&self) -> String {
        format!(
            "[fleet]\nremote_command = \"{}\"\nssh_options = [\"-i\", \"{}\", \"-o\", \"StrictHostKeyChecking=no\", \
             \"-o\", \"UserKnownHostsFile=/dev/null\", \"-o\", \"BatchMode=yes\", \"-o\", \"LogLevel=ERROR\"]\n",
            super::bin(),
            self.id().display()
        )
    }
}

fn keygen(path: &Path) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Another machine: its namespace, its db-branch root, and its sshd.
pub struct FarHost {
    pub env: TestEnv,
    sshd: Child,
    _dir: tempfile::TempDir,
    // Last: the namespace goes after its sshd.
    pub veth: Veth,
}

impl FarHost {
    /// With `reachable`, its branches listen on its own address (not its loopback) and it
    /// advertises that address.
    pub fn new(keys: &Keys, reachable: bool) -> FarHost {
        let veth = Veth::new();
        let top = if reachable {
            format!(
                "bind_address = \"{a}\"\nadvertise_address = \"{a}\"",
                a = veth.peer_addr
            )
        } else {
            String::new()
        };
        // The tier's service manager; the benchmark suite (which sets none) runs its own.
        let service = std::env::var("DB_BRANCH_TEST_SERVICE").unwrap_or_else(|_| "process".into());
        let env = TestEnv::with_service(&service, "3G", &top, "");
        env.run_ok(&["init"]);
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        keygen(&d.join("hostkey"));
        std::fs::copy(keys.id().with_extension("pub"), d.join("authorized_keys")).unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap();
        let config = d.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "ListenAddress {addr}:22\nHostKey {d}/hostkey\nAuthorizedKeysFile {d}/authorized_keys\n\
                 PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile {d}/sshd.pid\n\
                 SetEnv DB_BRANCH_CONFIG={config}\n",
                addr = veth.peer_addr,
                d = d.display(),
                config = env.config.display(),
            ),
        )
        .unwrap();
        let sshd = veth
            .command(Path::new("/usr/sbin/sshd"))
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let addr: std::net::SocketAddr = format!("{}:22", veth.peer_addr).parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(Instant::now() < deadline, "sshd did not listen on {addr}");
            std::thread::sleep(Duration::from_millis(50));
        }
        FarHost {
            env,
            sshd,
            _dir: dir,
            veth,
        }
    }

    pub fn url(&self) -> String {
        format!("ssh://root@{}", self.veth.peer_addr)
    }

    /// `db-branch --host URL ARGS` from the near host.
    pub fn via(&self, near: &TestEnv, args: &[&str]) -> std::process::Output {
        let url = self.url();
        let mut all = vec!["--host", url.as_str()];
        all.extend_from_slice(args);
        near.run(&all)
    }
}

impl FarHost {
    /// The peer of `baseline push`, side by side on the same data: a bare `btrfs send |
    /// ssh | btrfs receive` of `subvolume` into this host's pool (outside db-branch's own
    /// directories), removed again. Its seconds.
    pub fn bare_btrfs_push(&self, keys: &Keys, subvolume: &Path) -> f64 {
        let peer = self.env.pool().join("peer");
        std::fs::create_dir_all(&peer).unwrap();
        let started = Instant::now();
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "btrfs send -q {} | ssh -i {} -o StrictHostKeyChecking=no \
                 -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR root@{} \
                 btrfs receive -q {}",
                subvolume.display(),
                keys.id().display(),
                self.veth.peer_addr,
                peer.display()
            ))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let seconds = started.elapsed().as_secs_f64();
        if let Some(name) = subvolume.file_name() {
            let _ = Command::new("btrfs")
                .args(["subvolume", "delete"])
                .arg(peer.join(name))
                .output();
        }
        seconds
    }
}

impl Drop for FarHost {
    fn drop(&mut self) {
        let _ = self.sshd.kill();
        let _ = self.sshd.wait();
    }
}
