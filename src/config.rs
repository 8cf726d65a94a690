//! `/etc/db-branch/config.toml`: every key has a default, unknown keys are refused by name.

use crate::error::usage;
use crate::values::{ByteSize, Duration, PortRange};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

pub const DEFAULT_CONFIG_PATH: &str = "/etc/db-branch/config.toml";
pub const CONFIG_ENV: &str = "DB_BRANCH_CONFIG";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Btrfs,
    Zfs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceManagerKind {
    /// systemd when it is running as the init system, else the built-in supervisor.
    Auto,
    Systemd,
    Process,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// State, metadata, locks and the embedded pool image.
    pub root: PathBuf,
    pub backend: Backend,
    pub service_manager: ServiceManagerKind,
    /// Ports handed to branches, each checked with a real bind before use.
    pub ports: PortRange,
    /// Where branch servers listen. Loopback unless you mean to expose them.
    pub bind_address: IpAddr,
    /// How long a command waits for another db-branch holding a lock before giving up (exit 75).
    pub lock_timeout: Duration,
    pub btrfs: BtrfsConfig,
    pub mysqld: MysqldConfig,
    pub memory: MemoryConfig,
    pub systemd: SystemdConfig,
    pub client: ClientConfig,
    pub lifecycle: LifecycleConfig,
    pub zfs: ZfsConfig,
    pub access: AccessConfig,
    /// The name or address other machines reach this host by, for `env` and `create`
    /// (a CI job elsewhere gets a working DATABASE_URL). Empty: `bind_address`.
    pub advertise_address: String,
    pub fleet: FleetConfig,
    pub metrics: MetricsConfig,
}

/// Prometheus: where `metrics --listen` serves, and the textfile the timers refresh.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Where `metrics --listen` (the db-branch-metrics service) serves /metrics.
    pub listen: std::net::SocketAddr,
    /// A `.prom` file that `gc` and `stop-idle` (their timers) rewrite after each run, for
    /// node_exporter's textfile collector; empty: none.
    pub textfile: PathBuf,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 9469)),
            textfile: PathBuf::new(),
        }
    }
}

/// Other hosts: `baseline push/pull` and `--host` reach them over ssh.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct FleetConfig {
    /// How db-branch is run on the far side, as shell words (e.g. "sudo db-branch", or
    /// "db-branch --config /etc/db-branch/ci.toml").
    pub remote_command: String,
    /// Extra arguments for every `ssh` (e.g. ["-i", "/root/.ssh/fleet", "-F", "/etc/db-branch/ssh_config"]).
    pub ssh_options: Vec<String>,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            remote_command: "db-branch".into(),
            ssh_options: Vec::new(),
        }
    }
}

/// Who may use db-branch through the `db-branchd` service without root (see
/// docs/security.md). Root may always do everything.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct AccessConfig {
    /// Members may create branches and act on their own (env, reset, delete, start, stop,
    /// extend, protect), list everyone's, and claim pool slots.
    pub users_group: String,
    /// Members may act on every branch and run host-wide commands (init, bake, baselines,
    /// gc, stop-idle, doctor, pools' set-up).
    pub admins_group: String,
    /// `init` installs the `db-branchd` service (and its bus policy) where systemd is the
    /// service manager. One per host: a second root under the same systemd says false.
    pub service: bool,
    /// How many commands one user may have running through `db-branchd` at once; more are
    /// refused (each is a root process on the caller's behalf).
    pub max_operations_per_user: u32,
}

impl Default for AccessConfig {
    fn default() -> Self {
        AccessConfig {
            users_group: "db-branch".into(),
            admins_group: "db-branch-admin".into(),
            service: true,
            max_operations_per_user: 8,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ZfsConfig {
    /// `POOL/PATH` holding baselines and branches (backend = "zfs"); made by `init`.
    pub dataset: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LifecycleConfig {
    /// `stop-idle` stops servers without client activity for this long.
    pub stop_idle_after: Duration,
    /// Expiry given to new branches without `--ttl`/`--expires-at`; "0s" = never expire.
    pub default_ttl: Duration,
    /// How long `delete`, `gc` and `pool delete` keep a branch in the trash, restorable
    /// (`db-branch restore`); "0s" = destroy at once.
    pub keep_deleted: Duration,
    /// `reset` keeps the state it throws away as a checkpoint `before-reset-N` (as
    /// `reset --keep` does), for `keep_deleted`.
    pub keep_before_reset: bool,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        LifecycleConfig {
            stop_idle_after: Duration(std::time::Duration::from_secs(3600)),
            default_ttl: Duration(std::time::Duration::ZERO),
            keep_deleted: Duration(std::time::Duration::from_secs(24 * 3600)),
            keep_before_reset: false,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BtrfsConfig {
    /// A mounted btrfs directory; empty = an embedded image file under `root`.
    pub path: PathBuf,
    /// Size of the sparse embedded image (only used when `path` is empty).
    pub image_size: ByteSize,
    /// Where the embedded image lives; empty = `root`. A tmpfs such as /dev/shm makes a
    /// RAM-backed pool: faster, counted against memory, rebuilt by `init` after a reboot.
    pub image_dir: PathBuf,
    /// `create` and `baseline create` refuse when the pool has less free space than this.
    pub min_free: ByteSize,
}

/// How a branch's server trades durability for speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Fast: skips what only protects against a host crash (reset returns to a clean
    /// snapshot anyway). A server that dies uncleanly should be reset, not started.
    Test,
    /// The engine's crash-safe defaults.
    Durable,
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Profile::Test => "test",
            Profile::Durable => "durable",
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MysqldConfig {
    /// The server binary: mariadbd or mysqld.
    pub binary: PathBuf,
    /// Default InnoDB buffer pool per branch (`create --buffer-pool` overrides).
    pub buffer_pool: ByteSize,
    /// Extra server options, written `--name=value`, appended to every branch's option file.
    pub extra_args: Vec<String>,
    /// How long a server may take to answer its first query after start.
    pub start_timeout: Duration,
    /// The OS user the servers run as.
    pub user: String,
    /// Default server profile for new branches (`create --profile` overrides).
    pub profile: Profile,
    /// `test`-profile branches run with libeatmydata preloaded, where it is installed:
    /// every fsync of the server is a no-op (the engines still call it on file creation and
    /// redo writes even with `innodb_flush_method=nosync`). Writes still reach the page
    /// cache, so a killed server loses nothing; a host crash can, as the profile says.
    pub skip_fsync: bool,
    /// Oracle MySQL servers preload db-branch's `times()` shim (written to ROOT/lib): their
    /// start skips the 0.1 s `my_timer_init` spends calibrating a "ticks" timer that only
    /// the performance schema's `performance_timers` table shows (docs/startup.md). No
    /// effect on MariaDB.
    pub skip_timer_calibration: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// Memory kept free for the host on top of what the branches may use.
    pub headroom: ByteSize,
    /// With a RAM-backed pool: how much a branch may write into the pool (RAM) before it
    /// is reset, counted by the memory guard on top of its buffer pool.
    pub ram_pool_growth: ByteSize,
    /// How far beyond its buffer pool a branch server may grow — with the buffer pool, its
    /// warm ceiling, which the guard counts and the server's cgroup enforces (throttled at
    /// three quarters of this, killed alone at all of it). "auto": measured per server
    /// family and profile (docs/memory.md).
    pub branch_allowance: Allowance,
    /// How much of what running branches still owe (ceiling minus resident memory) the
    /// guard counts as taken: 1.0 (default) never overcommits; 0.5 admits more on purpose.
    pub owed_fraction: f64,
}

/// `memory.branch_allowance`: a size, or "auto" for the measured figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Allowance {
    #[default]
    Auto,
    Size(ByteSize),
}

impl Serialize for Allowance {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Allowance::Auto => s.serialize_str("auto"),
            Allowance::Size(b) => b.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Allowance {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim() == "auto" {
            return Ok(Allowance::Auto);
        }
        s.parse()
            .map(Allowance::Size)
            .map_err(|e: String| serde::de::Error::custom(format!("{e}, or \"auto\"")))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SystemdConfig {
    /// Where `init` installs the `mysqld@.service` template.
    pub unit_dir: PathBuf,
    /// Template name: branch NAME runs as `<unit_prefix>@NAME.service`. Change it only to
    /// run several db-branch roots side by side under one systemd.
    pub unit_prefix: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientConfig {
    /// The database user printed in connection details (`env`, `create`).
    pub user: String,
    /// Its password; empty for the baselines `baseline create --empty` makes.
    pub password: String,
    /// The application database clients are pointed at (`DATABASE_URL`'s path,
    /// `DB_DATABASE`), for branches made without `create --database`. Unset: the
    /// generation's only database, if it has exactly one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<crate::names::DatabaseName>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            root: PathBuf::from("/var/lib/db-branch"),
            backend: Backend::Btrfs,
            service_manager: ServiceManagerKind::Auto,
            ports: PortRange {
                first: 3400,
                last: 3999,
            },
            bind_address: IpAddr::from([127, 0, 0, 1]),
            btrfs: BtrfsConfig::default(),
            mysqld: MysqldConfig::default(),
            memory: MemoryConfig::default(),
            systemd: SystemdConfig::default(),
            client: ClientConfig::default(),
            lifecycle: LifecycleConfig::default(),
            zfs: ZfsConfig::default(),
            access: AccessConfig::default(),
            advertise_address: String::new(),
            fleet: FleetConfig::default(),
            metrics: MetricsConfig::default(),
            lock_timeout: Duration(std::time::Duration::from_secs(120)),
        }
    }
}

impl Default for BtrfsConfig {
    fn default() -> Self {
        BtrfsConfig {
            path: PathBuf::new(),
            image_size: ByteSize(20 << 30),
            image_dir: PathBuf::new(),
            min_free: ByteSize::mib(128),
        }
    }
}

impl Default for MysqldConfig {
    fn default() -> Self {
        MysqldConfig {
            binary: PathBuf::from("/usr/sbin/mariadbd"),
            buffer_pool: ByteSize::mib(128),
            extra_args: Vec::new(),
            start_timeout: Duration(std::time::Duration::from_secs(120)),
            user: "mysql".into(),
            profile: Profile::Test,
            skip_fsync: true,
            skip_timer_calibration: true,
        }
    }
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            headroom: ByteSize::mib(300),
            ram_pool_growth: ByteSize::mib(256),
            branch_allowance: Allowance::Auto,
            owed_fraction: 1.0,
        }
    }
}

impl Default for SystemdConfig {
    fn default() -> Self {
        SystemdConfig {
            unit_dir: PathBuf::from("/etc/systemd/system"),
            unit_prefix: "mysqld".into(),
        }
    }
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            user: "root".into(),
            password: String::new(),
            database: None,
        }
    }
}

/// Where the config comes from: `--config`, then `$DB_BRANCH_CONFIG`, then the default path.
/// Only the default path may be missing (then every key takes its default).
pub fn locate(flag: Option<&Path>, env: Option<&str>) -> (PathBuf, bool) {
    if let Some(p) = flag {
        return (p.to_path_buf(), true);
    }
    if let Some(e) = env.filter(|e| !e.is_empty()) {
        return (PathBuf::from(e), true);
    }
    (PathBuf::from(DEFAULT_CONFIG_PATH), false)
}

pub fn load(path: &Path, must_exist: bool) -> Result<Config> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => {
            return Ok(Config::default());
        }
        Err(e) => {
            return Err(usage(format!(
            "cannot read config file {}: {e}; pass an existing file with --config or ${CONFIG_ENV}",
            path.display()
        )))
        }
    };
    parse(&text).with_context(|| format!("in config file {}", path.display()))
}

pub fn parse(text: &str) -> Result<Config> {
    let config: Config = toml::from_str(text).map_err(|e| usage(clean_toml_error(&e)))?;
    config.validate()?;
    Ok(config)
}

fn clean_toml_error(e: &toml::de::Error) -> String {
    // toml's message already names the unknown key and lists the expected ones; add the line.
    let msg = e.message().trim().to_string();
    match e.span() {
        Some(span) => format!("{msg} (at byte {})", span.start),
        None => msg,
    }
}

impl Config {
    pub fn validate(&self) -> Result<()> {
        if !self.root.is_absolute() {
            return Err(usage(format!(
                "root = {:?} must be an absolute path",
                self.root
            )));
        }
        for (key, path) in [("root", &self.root), ("btrfs.path", &self.btrfs.path)] {
            if let Some(hidden) = path.components().find(|c| {
                c.as_os_str().to_string_lossy().starts_with('.')
                    && !matches!(
                        c,
                        std::path::Component::CurDir | std::path::Component::ParentDir
                    )
            }) {
                return Err(usage(format!(
                    "{key} = {path:?} has a hidden directory ({}): MySQL cannot start a datadir \
                     below a directory whose name starts with '.'; choose a path without one",
                    hidden.as_os_str().to_string_lossy()
                )));
            }
        }
        let textfile = &self.metrics.textfile;
        if !textfile.as_os_str().is_empty()
            && (!textfile.is_absolute() || textfile.extension().is_none_or(|e| e != "prom"))
        {
            return Err(usage(format!(
                "metrics.textfile = {textfile:?} must be an absolute path ending in .prom \
                 (node_exporter's textfile collector reads only *.prom), e.g. \
                 \"/var/lib/prometheus/node-exporter/db-branch.prom\""
            )));
        }
        match shell_words::split(&self.fleet.remote_command) {
            Ok(words) if !words.is_empty() => {}
            _ => {
                return Err(usage(format!(
                    "fleet.remote_command = {:?} must be a command line (shell words), e.g. \"db-branch\"",
                    self.fleet.remote_command
                )))
            }
        }
        if self
            .advertise_address
            .chars()
            .any(|c| c.is_whitespace() || "/@?#".contains(c))
        {
            return Err(usage(format!(
                "advertise_address = {:?} must be a host name or an IP address",
                self.advertise_address
            )));
        }
        if !self.btrfs.path.as_os_str().is_empty() && !self.btrfs.path.is_absolute() {
            return Err(usage(format!(
                "btrfs.path = {:?} must be an absolute path (or empty for the embedded image)",
                self.btrfs.path
            )));
        }
        if !self.btrfs.image_dir.as_os_str().is_empty() && !self.btrfs.image_dir.is_absolute() {
            return Err(usage(format!(
                "btrfs.image_dir = {:?} must be an absolute path (or empty for root)",
                self.btrfs.image_dir
            )));
        }
        if self.btrfs.image_size.bytes() < (256 << 20) {
            return Err(usage(format!(
                "btrfs.image_size = {} is too small; btrfs needs at least 256M",
                self.btrfs.image_size
            )));
        }
        check_buffer_pool(self.mysqld.buffer_pool).map_err(usage)?;
        if !(0.0..=1.0).contains(&self.memory.owed_fraction) {
            return Err(usage(format!(
                "memory.owed_fraction = {} must be between 0.0 and 1.0 (1.0 counts all that \
                 running branches may still take)",
                self.memory.owed_fraction
            )));
        }
        for arg in &self.mysqld.extra_args {
            validate_extra_arg(arg)?;
        }
        if self.backend == Backend::Zfs {
            let ds = &self.zfs.dataset;
            let valid = !ds.is_empty()
                && !ds.starts_with('/')
                && !ds.ends_with('/')
                && ds.split('/').all(|part| {
                    !part.is_empty()
                        && part
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
                });
            if !valid {
                return Err(usage(format!(
                    "backend = \"zfs\" needs [zfs] dataset = \"POOL/PATH\" (got {ds:?})"
                )));
            }
        }
        let prefix = &self.systemd.unit_prefix;
        if prefix.is_empty()
            || !prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(usage(format!(
                "systemd.unit_prefix = {prefix:?} must be letters, digits, '-', '_' or '.'"
            )));
        }
        if self.service_manager == ServiceManagerKind::Systemd {
            check_root_for_systemd(&self.root)?;
        }
        if self.mysqld.user.is_empty() {
            return Err(usage("mysqld.user must name the OS user servers run as"));
        }
        // Systemd needs a socket path under 108 bytes; branch names add up to 64 more.
        if self.root.as_os_str().len() > 40 {
            return Err(usage(format!(
                "root = {:?} is longer than 40 bytes: server sockets live under it and \
                 Unix socket paths are limited to 107 bytes; choose a shorter root",
                self.root
            )));
        }
        Ok(())
    }

    pub fn embedded_pool(&self) -> bool {
        self.btrfs.path.as_os_str().is_empty()
    }
}

/// The unit sandbox gives each server a private /tmp and /var/tmp (`PrivateTmp=`), so a
/// root below them is invisible to the servers: systemd fails every start with "Failed to
/// set up mount namespacing".
pub fn check_root_for_systemd(root: &Path) -> Result<()> {
    for tmp in ["/tmp", "/var/tmp"] {
        if root.starts_with(tmp) {
            return Err(usage(format!(
                "root = {root:?} is below {tmp}, which the branch units' sandbox (PrivateTmp) \
                 hides from the servers under systemd; choose a root elsewhere (the default \
                 is /var/lib/db-branch), or service_manager = \"process\""
            )));
        }
    }
    Ok(())
}

/// InnoDB refuses to start with a buffer pool below 5M.
pub fn check_buffer_pool(size: ByteSize) -> std::result::Result<(), String> {
    if size.bytes() < (5 << 20) {
        return Err(format!(
            "mysqld.buffer_pool = {size} is too small; InnoDB needs at least 5M"
        ));
    }
    Ok(())
}

/// Extra server options go into the option file, so they must be long options.
pub fn validate_extra_arg(arg: &str) -> Result<()> {
    let ok = arg.starts_with("--")
        && arg.len() > 2
        && !arg.contains('\n')
        && !arg[2..].starts_with('-')
        && !arg.starts_with("--defaults");
    if !ok {
        return Err(usage(format!(
            "mysqld.extra_args entry {arg:?} is not a long server option; write it like \
             \"--max-connections=500\" (--defaults-* options are managed by db-branch)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_config_gives_defaults() {
        let c = parse("").unwrap();
        assert_eq!(c.root, PathBuf::from("/var/lib/db-branch"));
        assert_eq!(c.ports.to_string(), "3400-3999");
        assert_eq!(c.mysqld.buffer_pool, ByteSize::mib(128));
        assert!(c.embedded_pool());
    }

    #[test]
    fn documented_example_parses() {
        let c = parse(
            r#"
root = "/var/lib/db-branch"
backend = "btrfs"
service_manager = "auto"
ports = "3400-3999"
bind_address = "127.0.0.1"
[btrfs]
path = ""
image_size = "20G"
[mysqld]
binary = "/usr/sbin/mariadbd"
buffer_pool = "128M"
extra_args = []
[memory]
headroom = "300M"
[systemd]
unit_dir = "/etc/systemd/system"
"#,
        )
        .unwrap();
        assert_eq!(c.btrfs.image_size, ByteSize(20 << 30));
        assert_eq!(c.memory.headroom, ByteSize::mib(300));
    }

    #[test]
    fn zfs_backend_takes_a_dataset() {
        let c = parse("backend = \"zfs\"\n[zfs]\ndataset = \"tank/db-branch\"\n").unwrap();
        assert_eq!(c.backend, Backend::Zfs);
        assert_eq!(c.zfs.dataset, "tank/db-branch");
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = parse("[mysqld]\nbuffer_pol = \"1G\"\n").unwrap_err();
        assert!(format!("{e:#}").contains("buffer_pol"), "{e:#}");
        let e = parse("colour = 1\n").unwrap_err();
        assert!(format!("{e:#}").contains("colour"), "{e:#}");
    }

    #[test]
    fn bad_values_are_explained() {
        for (text, needle) in [
            ("ports = \"99-3\"", "port range"),
            ("backend = \"lvm\"", "lvm"),
            ("service_manager = \"upstart\"", "upstart"),
            ("bind_address = \"localhost\"", "address"),
            ("root = \"relative\"", "absolute"),
            ("root = \"/home/a/.db-branch\"", "hidden directory"),
            ("[mysqld]\nbuffer_pool = \"1K\"", "too small"),
            ("[memory]\nowed_fraction = 1.5", "between 0.0 and 1.0"),
            ("[memory]\nbranch_allowance = \"lots\"", "auto"),
            (
                "service_manager = \"systemd\"\nroot = \"/var/tmp/dbb\"",
                "PrivateTmp",
            ),
            (
                "[mysqld]\nextra_args = [\"max-connections=5\"]",
                "long server option",
            ),
            ("[btrfs]\nimage_size = \"10M\"", "too small"),
            ("backend = \"zfs\"", "dataset"),
            ("backend = \"zfs\"\n[zfs]\ndataset = \"/tank\"", "dataset"),
            ("backend = \"zfs\"\n[zfs]\ndataset = \"tank//x\"", "dataset"),
        ] {
            let e = format!("{:#}", parse(text).unwrap_err());
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn packaged_config_is_all_defaults_and_uncomments_cleanly() {
        let text = include_str!("../packaging/config.toml");
        let as_is = parse(text).unwrap();
        let defaults = toml::to_string(&Config::default()).unwrap();
        assert_eq!(toml::to_string(&as_is).unwrap(), defaults);
        // Uncommenting every key gives the same config: the comments state the defaults.
        let uncommented: String = text
            .lines()
            .map(|l| {
                l.strip_prefix('#')
                    .filter(|r| {
                        r.split_once(" = ").is_some_and(|(k, _)| {
                            !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                        })
                    })
                    .unwrap_or(l)
            })
            .collect::<Vec<_>>()
            .join("\n");
        let c = parse(&uncommented).unwrap();
        assert_eq!(toml::to_string(&c).unwrap(), defaults);
    }

    #[test]
    fn locate_prefers_flag_then_env() {
        assert_eq!(
            locate(Some(Path::new("/a")), Some("/b")),
            (PathBuf::from("/a"), true)
        );
        assert_eq!(locate(None, Some("/b")), (PathBuf::from("/b"), true));
        assert_eq!(
            locate(None, None),
            (PathBuf::from(DEFAULT_CONFIG_PATH), false)
        );
    }
}
