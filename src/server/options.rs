//! The option file each server reads (`--defaults-file`): everything that makes one branch's
//! server different from another's, plus the start-up flags measured to be fastest.

use crate::config::Profile;
use crate::values::ByteSize;
use std::net::IpAddr;
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub struct ServerSpec {
    pub datadir: PathBuf,
    /// None: no TCP at all (the one-off servers that prepare baselines).
    pub network: Option<(IpAddr, u16)>,
    pub socket: PathBuf,
    pub pid_file: PathBuf,
    pub error_log: PathBuf,
    /// Private scratch directory: servers sharing /tmp trip over each other's temp files.
    pub tmpdir: PathBuf,
    pub buffer_pool: ByteSize,
    pub user: String,
    pub extra_args: Vec<String>,
    pub profile: Profile,
    /// Option-file lines for this branch only.
    pub branch_options: Vec<String>,
}

/// Each flag here saved measurable start-up time or memory on a 2-core host
/// (shared/notes/measured.md): no name resolution, no buffer-pool dump/load, no binary log,
/// a small redo buffer (InnoDB reads that much redo at start even after a clean shutdown),
/// tiny MyISAM/Aria caches nothing uses. Both profiles get them.
/// `loose-` marks options one of MariaDB/MySQL lacks, so either server accepts the file.
const FAST_FLAGS: &[&str] = &[
    "skip-name-resolve",
    "innodb-buffer-pool-load-at-startup=0",
    "innodb-buffer-pool-dump-at-shutdown=0",
    "skip-log-bin",
    "innodb-log-buffer-size=2M",
    "key-buffer-size=1M",
    "loose-aria-pagecache-buffer-size=8M",
];

/// The `test` profile: what only protects against a host or server crash, turned off
/// (docs/profiles.md gives the measurements and what each risks). `reset` returns to the
/// clean `@init` snapshot, so a branch never needs to survive a crash.
pub const TEST_PROFILE_FLAGS: &[&str] = &[
    // Commit writes the redo log to the OS about once a second instead of at each commit.
    "innodb-flush-log-at-trx-commit=0",
    // No doublewrite buffer: every page is written once (a crash can tear a page).
    "innodb-doublewrite=0",
    // InnoDB never calls fsync; the OS writes back when it likes.
    "innodb-flush-method=nosync",
    // No binary log is written at all (also in FAST_FLAGS); if one is enabled, no fsync.
    "sync-binlog=0",
];

/// The `durable` profile: the engine's crash-safe defaults, stated so a config file
/// elsewhere cannot weaken them.
pub const DURABLE_PROFILE_FLAGS: &[&str] = &[
    "innodb-flush-log-at-trx-commit=1",
    "innodb-doublewrite=1",
    "sync-binlog=1",
];

pub fn render(spec: &ServerSpec) -> String {
    let mut lines = vec![
        "# Written by db-branch; changes are overwritten.".to_string(),
        "[mysqld]".to_string(),
        format!("datadir={}", spec.datadir.display()),
        format!("socket={}", spec.socket.display()),
        format!("pid-file={}", spec.pid_file.display()),
        format!("log-error={}", spec.error_log.display()),
        format!("tmpdir={}", spec.tmpdir.display()),
        format!("user={}", spec.user),
        format!("innodb-buffer-pool-size={}", spec.buffer_pool.bytes()),
    ];
    match spec.network {
        Some((addr, port)) => {
            lines.push(format!("bind-address={addr}"));
            lines.push(format!("port={port}"));
        }
        None => lines.push("skip-networking".into()),
    }
    lines.extend(FAST_FLAGS.iter().map(|f| f.to_string()));
    lines.push(format!("# profile: {}", spec.profile));
    let profile = match spec.profile {
        Profile::Test => TEST_PROFILE_FLAGS,
        Profile::Durable => DURABLE_PROFILE_FLAGS,
    };
    lines.extend(profile.iter().map(|f| f.to_string()));
    if !spec.extra_args.is_empty() {
        lines.push("# mysqld.extra_args".into());
        lines.extend(
            spec.extra_args
                .iter()
                .map(|a| a.trim_start_matches("--").to_string()),
        );
    }
    if !spec.branch_options.is_empty() {
        lines.push("# this branch only".into());
        lines.extend(spec.branch_options.iter().cloned());
    }
    lines.push(String::new());
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ServerSpec {
        ServerSpec {
            datadir: "/p/branches/a".into(),
            network: Some(("127.0.0.1".parse().unwrap(), 3400)),
            socket: "/r/branches/a/mysqld.sock".into(),
            pid_file: "/r/branches/a/mysqld.pid".into(),
            error_log: "/r/branches/a/error.log".into(),
            tmpdir: "/r/branches/a/tmp".into(),
            buffer_pool: ByteSize::mib(128),
            user: "mysql".into(),
            extra_args: vec!["--max-connections=50".into()],
            profile: Profile::Test,
            branch_options: Vec::new(),
        }
    }

    #[test]
    fn branch_options() {
        let text = render(&spec());
        for want in [
            "[mysqld]",
            "datadir=/p/branches/a",
            "port=3400",
            "bind-address=127.0.0.1",
            "innodb-buffer-pool-size=134217728",
            "skip-log-bin",
            "max-connections=50",
        ] {
            assert!(text.lines().any(|l| l == want), "missing {want}:\n{text}");
        }
        assert!(!text.contains("skip-networking"));
    }

    #[test]
    fn profiles_choose_durability() {
        let fast = render(&spec());
        assert!(fast
            .lines()
            .any(|l| l == "innodb-flush-log-at-trx-commit=0"));
        assert!(fast.lines().any(|l| l == "innodb-flush-method=nosync"));
        let mut s = spec();
        s.profile = Profile::Durable;
        let safe = render(&s);
        assert!(safe
            .lines()
            .any(|l| l == "innodb-flush-log-at-trx-commit=1"));
        assert!(!safe.contains("nosync") && !safe.contains("doublewrite=0"));
    }

    #[test]
    fn preparation_server_has_no_network() {
        let mut s = spec();
        s.network = None;
        let text = render(&s);
        assert!(text.contains("skip-networking") && !text.contains("port="));
    }
}
