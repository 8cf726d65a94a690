//! What a test run is testing: the db-branch binary, the server, the storage backend and
//! the service manager, as scripts/test (or the ZFS guest) names them in the environment.

use std::path::PathBuf;

pub const SEED_SQL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/seed.sql");

/// The db-branch binary: DB_BRANCH_BIN where the tests run away from the build tree (the
/// ZFS guest), else the one cargo built.
pub fn bin() -> String {
    if let Ok(b) = std::env::var("DB_BRANCH_BIN") {
        return b;
    }
    match option_env!("CARGO_BIN_EXE_db-branch") {
        Some(b) => b.to_string(),
        // Examples get no CARGO_BIN_EXE_*: the binary sits next to target/<profile>/examples.
        None => std::env::current_exe()
            .ok()
            .and_then(|e| Some(e.parent()?.parent()?.join("db-branch")))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "db-branch".into()),
    }
}

/// The seed SQL, from DB_BRANCH_FIXTURES when set.
pub fn seed_sql() -> String {
    match std::env::var("DB_BRANCH_FIXTURES") {
        Ok(dir) => format!("{dir}/seed.sql"),
        Err(_) => SEED_SQL.to_string(),
    }
}

/// The storage under test: btrfs (default) or zfs (DB_BRANCH_TEST_BACKEND=zfs, with a pool
/// named by DB_BRANCH_TEST_ZPOOL, default `dbbpool`).
pub fn backend() -> String {
    std::env::var("DB_BRANCH_TEST_BACKEND").unwrap_or_else(|_| "btrfs".into())
}

/// Which service manager this run tests, from DB_BRANCH_TEST_SERVICE. Missing is an error,
/// not a skip: these tests are ignored by default and run on purpose by scripts/test.
pub fn service() -> String {
    let s = std::env::var("DB_BRANCH_TEST_SERVICE")
        .expect("set DB_BRANCH_TEST_SERVICE=process|systemd (scripts/test does)");
    assert!(
        s == "process" || s == "systemd",
        "bad DB_BRANCH_TEST_SERVICE {s}"
    );
    s
}

/// The server the root tiers run against, from `DB_BRANCH_TEST_SERVER`: `mariadb-10.11`
/// (the host's, the default), `mysql-9.7` or `mariadb-11.8` (side roots made by
/// `scripts/install-server` under `DB_BRANCH_SERVERS`, default /opt/db-branch).
#[derive(Debug, Clone)]
pub struct TestServer {
    pub name: String,
    pub binary: PathBuf,
    /// Its command-line client and dump program.
    pub client: PathBuf,
    pub dump: PathBuf,
    pub mysql: bool,
}

pub fn server() -> TestServer {
    let name = std::env::var("DB_BRANCH_TEST_SERVER").unwrap_or_else(|_| "mariadb-10.11".into());
    let servers = PathBuf::from(
        std::env::var("DB_BRANCH_SERVERS").unwrap_or_else(|_| "/opt/db-branch".into()),
    );
    let side = |program: &str| servers.join(&name).join("db-branch/bin").join(program);
    match name.as_str() {
        "mariadb-10.11" => TestServer {
            binary: "/usr/sbin/mariadbd".into(),
            client: "/usr/bin/mariadb".into(),
            dump: "/usr/bin/mariadb-dump".into(),
            mysql: false,
            name,
        },
        n if n.starts_with("mysql-") => TestServer {
            binary: side("mysqld"),
            client: side("mysql"),
            dump: side("mysqldump"),
            mysql: true,
            name,
        },
        n if n.starts_with("mariadb-") => TestServer {
            binary: side("mariadbd"),
            client: side("mariadb"),
            dump: side("mariadb-dump"),
            mysql: false,
            name,
        },
        other => {
            panic!("DB_BRANCH_TEST_SERVER={other}: one of mariadb-10.11, mysql-9.7, mariadb-11.8")
        }
    }
}
