//! Test support, only in builds with the `testing` feature (the test tiers, benchmarks and
//! the benchmark suite): each root integration test gets its own root, embedded btrfs pool
//! (or ZFS dataset), port range and baseline in a `TestEnv`, which runs the real binary and
//! removes all of it when it ends, passing or failing.

pub mod fixtures;
pub mod fleet;
pub mod subject;
pub mod veth;

pub use fixtures::Fixture;
pub use subject::{backend, bin, seed_sql, server, service, TestServer, SEED_SQL};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// With DB_BRANCH_TEST_TRACE=FILE, every command a test runs is appended to FILE with its
/// test and duration: where a slow tier's time goes (the ZFS guest's profile, docs/testing.md).
/// With DB_BRANCH_LOG=debug as well, the programs each command ran and their times.
fn trace(started: std::time::Instant, args: &[&str], stderr: &[u8]) {
    let Some(file) = std::env::var_os("DB_BRANCH_TEST_TRACE") else {
        return;
    };
    let line = format!(
        "{:>8.2}s {} db-branch {}\n",
        started.elapsed().as_secs_f64(),
        std::thread::current().name().unwrap_or("?"),
        args.join(" ")
    );
    let detail: String = String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| l.contains(" ran "))
        .map(|l| format!("          {l}\n"))
        .collect();
    let line = line + &detail;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(file)
    {
        let _ = std::io::Write::write_all(&mut f, line.as_bytes());
    }
}

/// Panics unless `out` succeeded, with `what` (the command, unless empty) and the end of
/// its stderr and stdout: the one way a test says "this must have worked".
#[track_caller]
pub fn assert_success(out: &Output, what: &str) {
    if out.status.success() {
        return;
    }
    panic!(
        "{} failed ({}):\n{}\n{}",
        if what.is_empty() { "a command" } else { what },
        out.status,
        crate::exec::tail(&out.stderr),
        crate::exec::tail(&out.stdout)
    );
}

/// Waits until `done` holds, looking every 100 ms; fails the test naming `what` after 60 s.
#[track_caller]
pub fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Runs `cmd` and asserts it succeeded (see `assert_success`); its output.
#[track_caller]
pub fn run_success(cmd: &mut Command) -> Output {
    let what = crate::exec::command_line(cmd);
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what} could not start: {e}"));
    assert_success(&out, &what);
    out
}

pub struct TestEnv {
    pub root: PathBuf,
    pub unit_prefix: String,
    pub config: PathBuf,
    pub first_port: u16,
    pub service: String,
}

impl TestEnv {
    /// A fresh root for the service manager under test, with extra config: top-level keys
    /// and whole tables.
    pub fn new(extra_top: &str, extra_tables: &str) -> TestEnv {
        TestEnv::with_service(&service(), "3G", extra_top, extra_tables)
    }

    pub fn with_service(
        service: &str,
        image_size: &str,
        extra_top: &str,
        extra_tables: &str,
    ) -> TestEnv {
        TestEnv::make(service, image_size, extra_top, extra_tables, &backend())
    }

    /// A fresh root on btrfs whatever the tier's backend (the ZFS guest's btrfs host).
    pub fn on_btrfs(extra_top: &str, extra_tables: &str) -> TestEnv {
        TestEnv::make(&service(), "3G", extra_top, extra_tables, "btrfs")
    }

    fn make(
        service: &str,
        image_size: &str,
        extra_top: &str,
        extra_tables: &str,
        backend: &str,
    ) -> TestEnv {
        let service = service.to_string();
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let tag = &service[..1];
        let root = PathBuf::from(format!("/var/lib/dbbt/{tag}{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        // Separate port ranges per test and per service manager, so runs never collide.
        let first_port = 20000 + if service == "systemd" { 8000 } else { 0 } + (n as u16) * 40;
        // Unique across test binaries running side by side under one systemd.
        let prefix = format!("dbbt{tag}{}-{n}", std::process::id());
        let config = root.with_extension("toml");
        let unit_dir = if service == "systemd" {
            "unit_dir = \"/run/systemd/system\"\n"
        } else {
            ""
        };
        let storage = if backend == "zfs" {
            let pool = std::env::var("DB_BRANCH_TEST_ZPOOL").unwrap_or_else(|_| "dbbpool".into());
            format!(
                "backend = \"zfs\"\n{extra_top}\n[zfs]\ndataset = \"{pool}/t{}-{n}\"\n",
                std::process::id()
            )
        } else {
            format!("{extra_top}\n[btrfs]\nimage_size = \"{image_size}\"\n")
        };
        // The server under test, unless the test names its own.
        // The server under test, in the test's own [mysqld] table if it has one.
        let binary = format!("binary = \"{}\"\n", server().binary.display());
        let (extra_tables, mysqld) = if extra_tables.contains("[mysqld]\n") {
            (
                extra_tables.replacen("[mysqld]\n", &format!("[mysqld]\n{binary}"), 1),
                String::new(),
            )
        } else {
            (extra_tables.to_string(), format!("[mysqld]\n{binary}"))
        };
        // Deletes destroy at once unless the test is about the trash (it says so in its
        // own [lifecycle] table): the suite's many deletes would otherwise each wait for a
        // clean shutdown, and its space checks would count the trash.
        let extra_tables = if extra_tables.contains("[lifecycle]") {
            extra_tables
        } else {
            format!("{extra_tables}\n[lifecycle]\nkeep_deleted = \"0s\"\n")
        };
        // One db-branchd per host: only the test of it installs it.
        let extra_tables = if extra_tables.contains("[access]") {
            extra_tables
        } else {
            format!("{extra_tables}\n[access]\nservice = false\n")
        };
        let text = format!(
            "root = \"{}\"\nservice_manager = \"{service}\"\nports = \"{first_port}-{}\"\n\
             lock_timeout = \"120s\"\n{storage}[systemd]\n{unit_dir}unit_prefix = \"{prefix}\"\n{extra_tables}\n{mysqld}",
            root.display(),
            first_port + 39,
        );
        std::fs::write(&config, text).unwrap();
        ROOTS.lock().unwrap().push(root.clone());
        TestEnv {
            root,
            unit_prefix: prefix,
            config,
            first_port,
            service,
        }
    }

    /// Moves the embedded image to /dev/shm (a RAM-backed pool) of the given size.
    pub fn with_ram_pool(self, image_size: &str) -> TestEnv {
        let text = std::fs::read_to_string(&self.config).unwrap().replace(
            "[btrfs]\nimage_size = \"3G\"",
            &format!("[btrfs]\nimage_size = \"{image_size}\"\nimage_dir = \"/dev/shm\""),
        );
        std::fs::write(&self.config, text).unwrap();
        self
    }

    /// A fresh root, initialised, with a baseline made from the seed SQL.
    /// (The run's shared seed generation, received by `baseline pull`: see `fixtures`.)
    pub fn with_baseline() -> TestEnv {
        TestEnv::new("", "").seeded()
    }

    /// This root initialised, with the run's seed generation (`with_baseline` for a root
    /// made with its own config).
    pub fn seeded(self) -> TestEnv {
        self.run_ok(&["init"]);
        self.pull_fixture(Fixture::Seed);
        self
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.run_at(None, args)
    }

    /// db-branch with `args` against this root, to add to (environment, stdin) and run.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin());
        cmd.args(args)
            .env("DB_BRANCH_CONFIG", &self.config)
            .env(crate::server::binary::TEMPLATES_ENV, fixtures::templates())
            .stdin(std::process::Stdio::null());
        cmd
    }

    /// Runs db-branch with its stdout a pipe nobody reads any more (`| head -1` gone).
    pub fn run_into_closed_pipe(&self, args: &[&str]) -> Output {
        let (read, write) = nix::unistd::pipe().expect("pipe");
        drop(read);
        Command::new(bin())
            .args(args)
            .env("DB_BRANCH_CONFIG", &self.config)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::from(write))
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("run db-branch")
    }

    /// Runs db-branch as if the time were `now` (DB_BRANCH_FAKE_NOW).
    pub fn run_at(&self, now: Option<chrono::DateTime<chrono::Utc>>, args: &[&str]) -> Output {
        let mut cmd = self.command(args);
        if let Some(t) = now {
            cmd.env("DB_BRANCH_FAKE_NOW", t.to_rfc3339());
        }
        let started = std::time::Instant::now();
        let out = cmd.output().expect("run db-branch");
        trace(started, args, &out.stderr);
        out
    }

    /// `json` as if the time were `now`.
    pub fn json_at(&self, now: chrono::DateTime<chrono::Utc>, args: &[&str]) -> serde_json::Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let out = self.run_at(Some(now), &a);
        assert!(
            out.status.success(),
            "db-branch {args:?} at {now} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("JSON output")
    }

    /// Runs db-branch and returns stdout; panics with stderr on failure.
    #[track_caller]
    pub fn run_ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_success(&out, &format!("db-branch {args:?}"));
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let v = serde_json::from_str(&self.run_ok(&a)).expect("JSON output");
        remember_passwords(&v);
        v
    }

    /// `baseline create --empty --sql FILE` of `sql`, written to `file` under this root;
    /// the command's JSON.
    pub fn baseline_from_sql(&self, file: &str, sql: &str) -> serde_json::Value {
        let path = self.root.join(file);
        std::fs::write(&path, sql).unwrap();
        self.json(&[
            "baseline",
            "create",
            "--empty",
            "--sql",
            path.to_str().unwrap(),
        ])
    }

    pub fn port(&self, branch: &str) -> u16 {
        self.json(&["status", branch])["port"].as_u64().unwrap() as u16
    }

    /// The ZFS dataset this environment's config names (backend = "zfs").
    pub fn dataset(&self) -> Option<String> {
        std::fs::read_to_string(&self.config)
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("dataset = \""))
            .map(|l| l.trim_end_matches('"').to_string())
    }

    pub fn pool(&self) -> PathBuf {
        self.root.join("pool")
    }

    pub fn error_log(&self, branch: &str) -> PathBuf {
        self.root
            .join("branches")
            .join(branch)
            .join("run/error.log")
    }

    /// The live server of `branch`, if one runs.
    pub fn server_pid_of(&self, branch: &str) -> Option<i32> {
        let needle = format!("/branches/{branch}/my.cnf");
        self.server_pids().into_iter().find(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmd).contains(&needle)
        })
    }

    /// Whether `branch`'s server runs with the fsync-free library loaded
    /// (`server::preload`).
    pub fn server_skips_fsync(&self, branch: &str) -> bool {
        self.server_maps(branch, "libeatmydata")
    }

    /// Whether `branch`'s server runs with MySQL's start-up shim loaded (`server::preload`),
    /// the one db-branch wrote under this root.
    pub fn server_skips_timer_calibration(&self, branch: &str) -> bool {
        let shim = self
            .root
            .join("lib")
            .join(crate::server::preload::TICKS_SHIM_FILE);
        self.server_maps(branch, &shim.display().to_string())
    }

    /// Whether a mapping of `branch`'s server names `needle`.
    fn server_maps(&self, branch: &str, needle: &str) -> bool {
        let pid = self
            .server_pid_of(branch)
            .unwrap_or_else(|| panic!("no server runs for branch {branch}"));
        std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .unwrap_or_default()
            .contains(needle)
    }

    /// Pids of live processes started with an option file under this root.
    pub fn server_pids(&self) -> Vec<i32> {
        let needle = format!("--defaults-file={}/", self.root.display());
        let mut pids = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
            if !zombie
                && cmd
                    .split(|b| *b == 0)
                    .any(|a| a.starts_with(needle.as_bytes()))
            {
                pids.push(pid);
            }
        }
        pids
    }

    /// Runs Debian's pytest (`/usr/bin/python3 -m pytest ARGS`, whatever other python
    /// comes first on PATH) in `project`, with `db-branch` on PATH and this root's config,
    /// as a test suite calling db-branch from its fixtures sees them.
    pub fn pytest(&self, project: &Path, args: &[&str]) -> Output {
        self.pytest_in(Path::new("/usr/bin/python3"), project, args)
    }

    /// pytest of `python` (the system's, or `python_with_helpers`'s venv).
    pub fn pytest_in(&self, python: &Path, project: &Path, args: &[&str]) -> Output {
        let mut cmd = self.with_db_branch_on_path(python);
        cmd.args(["-m", "pytest", "-p", "no:cacheprovider", "-q"])
            .args(args)
            .current_dir(project)
            .output()
            .expect("python3 (scripts/install-deps installs python3-pytest-xdist)")
    }

    /// `program` with `db-branch` on its PATH and this root's config, as a test runner on
    /// the host would run it.
    pub fn with_db_branch_on_path(&self, program: &Path) -> Command {
        let bin_dir = self.root.join("pytest-bin");
        std::fs::create_dir_all(&bin_dir).unwrap();
        let link = bin_dir.join("db-branch");
        if !link.exists() {
            std::os::unix::fs::symlink(bin(), &link).unwrap();
        }
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new(program);
        cmd.env("PATH", path).env("DB_BRANCH_CONFIG", &self.config);
        cmd
    }

    /// A virtual environment (seeing the system's pytest, xdist and PyMySQL) with the
    /// repository's clients/python installed by pip, as its README says; its python.
    pub fn python_with_helpers(&self) -> PathBuf {
        let venv = self.root.join("venv");
        let python = venv.join("bin/python");
        if python.exists() {
            return python;
        }
        // pip builds in the source tree: build a copy, never the checkout.
        let source = self.root.join("clients-python");
        let status = Command::new("cp")
            .arg("-r")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/clients/python"))
            .arg(&source)
            .status()
            .unwrap();
        assert!(status.success(), "copying clients/python");
        run_checked(
            Command::new("/usr/bin/python3")
                .args(["-m", "venv", "--system-site-packages"])
                .arg(&venv),
        );
        run_checked(
            Command::new(venv.join("bin/pip"))
                .args([
                    "install",
                    "-q",
                    "--no-build-isolation",
                    "--no-deps",
                    "--no-index",
                ])
                .arg(&source),
        );
        python
    }
}

fn run_checked(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        // Through the tool first (it knows units and snapshots), then by force, by PID, only
        // what this test started. Pools first: their recyclers would remake deleted slots.
        if let Ok(out) = Command::new(bin())
            .args(["--json", "pool", "list"])
            .env("DB_BRANCH_CONFIG", &self.config)
            .output()
        {
            if let Ok(serde_json::Value::Array(items)) = serde_json::from_slice(&out.stdout) {
                for p in items {
                    if let Some(name) = p["name"].as_str() {
                        let _ = self.run(&["--yes", "pool", "delete", name]);
                    }
                }
            }
        }
        if let Ok(out) = Command::new(bin())
            .args(["--json", "list"])
            .env("DB_BRANCH_CONFIG", &self.config)
            .output()
        {
            if let Ok(serde_json::Value::Array(items)) = serde_json::from_slice(&out.stdout) {
                for b in items {
                    if let Some(name) = b["name"].as_str() {
                        let _ = self.run(&["delete", "--yes", "--force", name]);
                    }
                }
            }
        }
        let pids = self.server_pids();
        for pid in &pids {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        // A killed server holds the pool until it has fully exited (gone or a zombie; its
        // command line vanishes before its files close).
        for _ in 0..1000 {
            if pids.iter().all(|p| !exiting_or_alive(*p)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        if let Some(ds) = self.dataset() {
            {
                for _ in 0..50 {
                    // -R: clones inside it (branches from branches, promoted generations)
                    // depend on snapshots inside it too.
                    let ok = Command::new("zfs").args(["destroy", "-R", &ds]).status();
                    if ok.is_ok_and(|s| s.success()) {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            }
        }
        let pool = self.pool();
        for attempt in 0..50 {
            if !is_mounted(&pool) {
                break;
            }
            let lazy = if attempt == 49 { "-l" } else { "-R" };
            let _ = Command::new("umount").arg(lazy).arg(&pool).status();
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        // A RAM pool's image lives outside root.
        let layout = crate::layout::Layout::new(&self.root);
        let _ = std::fs::remove_file(layout.image_file(std::path::Path::new("/dev/shm")));
        let _ = std::fs::remove_dir_all(&self.root);
        let _ = std::fs::remove_file(&self.config);
        for dir in ["/etc/systemd/system", "/run/systemd/system"] {
            let _ = std::fs::remove_file(format!("{dir}/{}@.service", self.unit_prefix));
        }
    }
}

/// The process has not fully exited: it runs, or its main thread is a zombie while other
/// threads still hold its files.
fn exiting_or_alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let zombie = stat
        .rsplit_once(')')
        .is_some_and(|(_, r)| r.trim_start().starts_with(['Z', 'X']));
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
    !zombie || threads > 1
}

pub fn is_mounted(path: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(&path.display().to_string()))
}

static PASSWORDS: std::sync::Mutex<Vec<(u16, String)>> = std::sync::Mutex::new(Vec::new());

/// Keeps the password of every branch a JSON answer shows (`connection` objects), so
/// `sql(port, …)` and `password(port)` can log in to it as its client would.
pub fn remember_passwords(v: &serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            if let (Some(port), Some(pw)) = (
                map.get("port").and_then(|p| p.as_u64()),
                map.get("password").and_then(|p| p.as_str()),
            ) {
                let mut all = PASSWORDS.lock().unwrap();
                all.retain(|(p, _)| u64::from(*p) != port);
                all.push((port as u16, pw.to_string()));
            }
            map.values().for_each(remember_passwords);
        }
        serde_json::Value::Array(items) => items.iter().for_each(remember_passwords),
        _ => {}
    }
}

/// Roots of the test environments of this process, where `password` looks first.
static ROOTS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// The client password of the branch on `port`: from its root's records and secrets (the
/// tests run as root), else as a JSON answer last showed it (empty when none did).
pub fn password(port: u16) -> String {
    let roots = ROOTS.lock().unwrap().clone();
    for root in roots {
        let Ok(dirs) = std::fs::read_dir(root.join("branches")) else {
            continue;
        };
        for d in dirs.flatten() {
            let record: Option<serde_json::Value> = std::fs::read(d.path().join("branch.json"))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok());
            if record.is_some_and(|r| r["port"] == port) {
                if let Ok(pw) = std::fs::read_to_string(
                    root.join("secrets").join(d.file_name()).join("password"),
                ) {
                    return pw.trim().to_string();
                }
            }
        }
    }
    PASSWORDS
        .lock()
        .unwrap()
        .iter()
        .find(|(p, _)| *p == port)
        .map(|(_, pw)| pw.clone())
        .unwrap_or_default()
}

/// Client options that log in to the branch on `port` over TCP as its client user.
pub fn login(port: u16) -> String {
    let mut s = format!("--no-defaults -h127.0.0.1 -P{port} -uroot");
    if let Some(a) = password_arg(port) {
        s.push(' ');
        s.push_str(&a);
    }
    s
}

/// `-pPASSWORD`, or nothing for a branch without one (a bare `-p` would prompt).
pub fn password_arg(port: u16) -> Option<String> {
    Some(password(port))
        .filter(|p| !p.is_empty())
        .map(|p| format!("-p{p}"))
}

/// A `mysql://` URL of the branch on `port` with its password (a bake source).
pub fn source_url(port: u16) -> String {
    format!("mysql://root:{}@127.0.0.1:{port}", password(port))
}

/// Runs SQL over TCP as the branch's client user, with the client of the server under
/// test; returns tab-separated rows.
pub fn sql(port: u16, query: &str) -> String {
    let out = Command::new(server().client)
        .args(["--no-defaults", "-h127.0.0.1", "-uroot", "-N", "-B"])
        .args(password_arg(port))
        .arg(format!("-P{port}"))
        .arg("-e")
        .arg(query)
        .output()
        .expect("run mariadb client");
    assert!(
        out.status.success(),
        "SQL {query:?} on port {port} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A derived table `numbers(seq)` holding 1..=n, in SQL both MySQL and MariaDB accept
/// (MariaDB's `seq_1_to_N` tables do not exist in MySQL): `… FROM {seq(1000)}`.
pub fn seq(n: u64) -> String {
    let digits = "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 \
                  UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 \
                  UNION ALL SELECT 8 UNION ALL SELECT 9)";
    let places = n.max(1).to_string().len();
    let names: Vec<String> = (0..places).map(|i| format!("p{i}")).collect();
    let value = names
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}*{p}.d", 10u64.pow(i as u32)))
        .collect::<Vec<_>>()
        .join(" + ");
    let from = names
        .iter()
        .map(|p| format!("{digits} {p}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("(SELECT 1 + {value} AS seq FROM {from} WHERE {value} < {n}) numbers")
}

pub fn checksum(port: u16) -> String {
    sql(port, "CHECKSUM TABLE shop.customers, shop.orders")
}

/// The port in a branch view (`create`, `status`, a `list` item).
pub fn port(v: &serde_json::Value) -> u16 {
    v["port"].as_u64().expect("a port") as u16
}

impl TestEnv {
    /// Names of the branches `list` shows.
    pub fn names(&self) -> Vec<String> {
        self.json(&["list"])
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// A fresh root, initialised, with generation 1 made from `scripts/sample-sql SCALE`
    /// (the run's shared one, received by `baseline pull`: see `fixtures`).
    pub fn with_sample(env: TestEnv, scale: u32) -> TestEnv {
        env.run_ok(&["init"]);
        env.pull_fixture(Fixture::Sample(scale));
        env
    }

    /// A fresh root, initialised, with generation 1 a tenth of `scripts/sample-sql 1`.
    pub fn with_sample_tenth(env: TestEnv) -> TestEnv {
        env.run_ok(&["init"]);
        env.pull_fixture(Fixture::SampleTenth);
        env
    }

    /// Makes the next generation from `scripts/sample-sql SCALE`; returns the seconds it took.
    pub fn sample_baseline(&self, scale: u32) -> f64 {
        self.sample_baseline_divided(scale, 1)
    }

    /// `sample_baseline` with every row count divided by `divisor`.
    pub fn sample_baseline_divided(&self, scale: u32, divisor: u32) -> f64 {
        let sample = self.root.join("sample.sql");
        let text = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/sample-sql"))
            .arg(scale.to_string())
            .arg(divisor.to_string())
            .output()
            .expect("scripts/sample-sql")
            .stdout;
        std::fs::write(&sample, text).unwrap();
        let start = std::time::Instant::now();
        self.run_ok(&[
            "baseline",
            "create",
            "--empty",
            "--sql",
            sample.to_str().unwrap(),
        ]);
        start.elapsed().as_secs_f64()
    }

    /// Runs db-branch expecting exit `code`; returns its stderr.
    pub fn run_err(&self, args: &[&str], code: i32) -> String {
        let out = self.run(args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(code), "db-branch {args:?}: {err}");
        err
    }

    /// The systemd units `init` would install for this root, as (file name, text).
    pub fn rendered_units(&self) -> Vec<(String, String)> {
        let bin = bin();
        crate::supervisor::systemd::render_units(&crate::supervisor::systemd::UnitParams {
            root: &self.root,
            pool: &self.pool(),
            mysqld: std::path::Path::new("/usr/sbin/mariadbd"),
            user: "mysql",
            prefix: "mysqld",
            bin: std::path::Path::new(&bin),
            config: Some(&self.config),
            service: false,
        })
    }

    /// Polls `status NAME` until its state is `state` (a killed server takes a moment).
    pub fn wait_state(&self, name: &str, state: &str) -> serde_json::Value {
        let mut status = self.json(&["status", name]);
        for _ in 0..100 {
            if status["state"] == state {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            status = self.json(&["status", name]);
        }
        status
    }
}

/// Helpers of the benchmarks (not tests): figures, sizes, the environment.
pub mod bench {
    use std::path::Path;
    use std::process::Command;

    /// (min, median, max).
    pub fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        (v[0], median, v[n - 1])
    }

    /// Apparent size of a directory tree.
    pub fn dir_bytes(p: &Path) -> u64 {
        let mut total = 0;
        for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
            let m = e.metadata().unwrap();
            total += if m.is_dir() {
                dir_bytes(&e.path())
            } else {
                m.len()
            };
        }
        total
    }

    pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    }

    pub fn now_utc() -> String {
        let out = Command::new("date")
            .args(["-u", "+%Y-%m-%d %H:%M UTC"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    pub fn which(program: &str) -> bool {
        Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {program} >/dev/null"))
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl TestEnv {
    /// Receives `fixture` as this root's next generation (after `init`).
    pub fn pull_fixture(&self, fixture: Fixture) {
        let dir = fixtures::stream_dir(fixture, make_fixture);
        self.run_ok(&["baseline", "pull", &format!("file:{}", dir.display())]);
    }
}

/// Makes `fixture` in a root of its own and pushes it to the stream directory `into`.
fn make_fixture(fixture: Fixture, into: &Path) {
    let maker = TestEnv::new("", "");
    maker.run_ok(&["init"]);
    match fixture {
        Fixture::Seed => {
            maker.run_ok(&["baseline", "create", "--empty", "--sql", &seed_sql()]);
        }
        Fixture::Sample(scale) => {
            maker.sample_baseline(scale);
        }
        Fixture::SampleTenth => {
            maker.sample_baseline_divided(1, 10);
        }
    }
    maker.run_ok(&["baseline", "push", &format!("file:{}", into.display())]);
}
