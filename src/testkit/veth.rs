//! Another machine for tests: a network namespace joined to this one by a veth pair, with
//! its own address and nothing else. Removed when dropped.

use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A namespace `ns` at `peer_addr`, joined to `host_addr` on this side.
pub struct Veth {
    pub ns: String,
    pub link: String,
    pub host_addr: String,
    pub peer_addr: String,
}

impl Veth {
    pub fn new() -> Veth {
        let id = std::process::id();
        let slot = NEXT.fetch_add(1, Ordering::SeqCst);
        let net = (id + slot * 37) % 250 + 1;
        let v = Veth {
            ns: format!("dbbt-n{id}-{slot}"),
            link: format!("dbv{id}{slot}a"),
            host_addr: format!("10.231.{net}.1"),
            peer_addr: format!("10.231.{net}.2"),
        };
        let peer = format!("dbv{id}{slot}b");
        for args in [
            vec!["netns", "add", &v.ns],
            vec![
                "link", "add", &v.link, "type", "veth", "peer", "name", &peer,
            ],
            vec!["link", "set", &peer, "netns", &v.ns],
            vec![
                "addr",
                "add",
                &format!("{}/30", v.host_addr),
                "dev",
                &v.link,
            ],
            vec!["link", "set", &v.link, "up"],
            vec![
                "-n",
                &v.ns,
                "addr",
                "add",
                &format!("{}/30", v.peer_addr),
                "dev",
                &peer,
            ],
            vec!["-n", &v.ns, "link", "set", &peer, "up"],
            vec!["-n", &v.ns, "link", "set", "lo", "up"],
        ] {
            let out = Command::new("ip").args(&args).output().unwrap();
            assert!(
                out.status.success(),
                "ip {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        v
    }

    /// `program args` run inside the namespace (the other machine).
    pub fn run(&self, program: &std::path::Path, args: &[String]) -> Output {
        self.command(program).args(args).output().unwrap()
    }

    /// `program` to be run inside the namespace.
    pub fn command(&self, program: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns]).arg(program);
        c
    }
}

impl Default for Veth {
    fn default() -> Self {
        Veth::new()
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.link])
            .status();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}
