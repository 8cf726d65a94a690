//! Shared, immutable fixtures of a test run: the baselines most tests start from, made once
//! per server and backend and handed to each test's own root by the product's own fastest
//! copy — `baseline push file:DIR` once, `baseline pull file:DIR` per test (a btrfs or ZFS
//! send stream received into the test's pool). Tests stay independent: each receives its
//! own copy, and nobody writes to a fixture once it is made.
//!
//! The fixture directory is `DB_BRANCH_TEST_FIXTURES` (scripts/test makes a fresh one per
//! run and removes it), else a directory under /var/tmp keyed by the db-branch binary, so a
//! rebuilt binary never meets fixtures an older one made. Concurrent tests, and test
//! binaries running side by side (the systemd namespace shares this filesystem), take a
//! `flock` per fixture: the first makes it, the others wait and reuse it.

use super::subject;
use nix::fcntl::{Flock, FlockArg};
use std::path::{Path, PathBuf};

pub const FIXTURES_ENV: &str = "DB_BRANCH_TEST_FIXTURES";

/// A baseline a test can start from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fixture {
    /// tests/fixtures/seed.sql on an empty server (`TestEnv::with_baseline`).
    Seed,
    /// `scripts/sample-sql SCALE` (scale 1 is a datadir of about 180 MB).
    Sample(u32),
    /// `scripts/sample-sql 1 10`: the same schema with a tenth of the rows, for tests of
    /// what comes along rather than of how long it takes (the baker's).
    SampleTenth,
}

impl Fixture {
    fn name(self) -> String {
        match self {
            Fixture::Seed => "seed".into(),
            Fixture::Sample(scale) => format!("sample-{scale}"),
            Fixture::SampleTenth => "sample-tenth".into(),
        }
    }
}

/// The run's fixture directory (made if missing).
pub fn root() -> PathBuf {
    let dir = match std::env::var_os(FIXTURES_ENV).filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(format!("/var/tmp/dbbt-fixtures/{}", binary_stamp())),
    };
    std::fs::create_dir_all(&dir).expect("making the test fixture directory");
    // The servers' OS user reads the templates and streams through it (mktemp makes 0700).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
        .expect("opening the fixture directory to the servers' user");
    dir
}

/// Where every test root of the run keeps its servers' empty-datadir templates.
pub fn templates() -> PathBuf {
    let dir = root().join("templates");
    std::fs::create_dir_all(&dir).expect("making the template directory");
    dir
}

/// Size and modification time of the db-branch binary under test: a fixture made by
/// another build is never reused.
fn binary_stamp() -> String {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(subject::bin()) {
        Ok(m) => format!("{}-{}", m.len(), m.mtime()),
        Err(_) => "unknown".into(),
    }
}

/// The stream directory holding `fixture` for the server and backend under test, made the
/// first time it is asked for: `make` pushes it into the directory it is given.
pub fn stream_dir(fixture: Fixture, make: impl FnOnce(Fixture, &Path)) -> PathBuf {
    let root = root();
    let key = format!(
        "{}-{}-{}",
        subject::server().name,
        subject::backend(),
        fixture.name()
    );
    let dir = root.join(&key);
    let done = |d: &PathBuf| d.join(crate::transfer::dir::MANIFEST).is_file();
    if done(&dir) {
        return dir;
    }
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(root.join(format!("{key}.lock")))
        .expect("opening the fixture lock");
    let _lock = Flock::lock(lock_file, FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .expect("locking the fixture");
    if done(&dir) {
        return dir;
    }
    let started = std::time::Instant::now();
    let partial = root.join(format!("{key}.partial"));
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).unwrap();
    make(fixture, &partial);
    std::fs::rename(&partial, &dir).expect("publishing the fixture");
    eprintln!(
        "testkit: fixture {key} made in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    dir
}
