//! Libraries branch servers run with (`LD_PRELOAD`):
//!
//! - libeatmydata, for `test`-profile servers: fsync, fdatasync, sync, msync and O_SYNC
//!   opens become no-ops. InnoDB calls fsync on file creation, for its redo log and its
//!   temporary tablespace even under `innodb_flush_method=nosync`; on a loop-mounted pool
//!   each call reaches the disk under the image. Measured (docs/startup.md): a MySQL 9.7
//!   start from a clean datadir 771 → 543 ms (median of 7), 107 fsync/fdatasync calls
//!   taking 370 ms. Writes still reach the page cache: a killed server loses nothing; a host
//!   crash can lose what was written since the OS last wrote back, which the `test` profile
//!   already accepts.
//! - db-branch's own `times()` shim (preload/ticks.rs, embedded in this binary), for every
//!   Oracle MySQL server: its start no longer waits 0.1 s for the kernel's tick counter to
//!   move on by ten, which it did only to calibrate a timer nothing reads
//!   (`mysqld.skip_timer_calibration`).

use crate::config::Profile;
use crate::flavour::Flavour;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Where Debian, Ubuntu and Fedora install it (package libeatmydata1 / libeatmydata).
const CANDIDATES: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/libeatmydata.so.1",
    "/usr/lib/aarch64-linux-gnu/libeatmydata.so.1",
    "/usr/lib64/libeatmydata.so.1",
    "/usr/lib/libeatmydata.so.1",
];

/// The library, if this host has it.
pub fn fsync_free_library() -> Option<PathBuf> {
    first_existing(CANDIDATES.iter().map(Path::new))
}

fn first_existing<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Option<PathBuf> {
    paths
        .into_iter()
        .find(|p| p.is_file())
        .map(Path::to_path_buf)
}

/// The `times()` shim, as build.rs built it for this target (none where it knows no
/// `times` system call number).
#[cfg(ticks_shim)]
const TICKS_SHIM: Option<&[u8]> =
    Some(include_bytes!(concat!(env!("OUT_DIR"), "/libdbb-ticks.so")));
#[cfg(not(ticks_shim))]
const TICKS_SHIM: Option<&[u8]> = None;

/// Whether this build carries the shim.
pub fn ticks_shim_built() -> bool {
    TICKS_SHIM.is_some()
}

/// The shim's file name in the directory it is written to.
pub const TICKS_SHIM_FILE: &str = "libdbb-ticks.so";

/// Writes the `times()` shim into `dir` (made 0755 if missing) unless it is there already
/// with this binary's bytes, and returns its path; None where this build has no shim.
/// `dir` is root's (`ROOT/lib`, or a one-off server's work directory): the file is loaded
/// into every MySQL server, so it is written 0644 by a new file renamed over the old one,
/// never through a link someone planted, and servers that mapped the old file keep it.
pub fn install_ticks_shim(dir: &Path) -> Result<Option<PathBuf>> {
    let Some(bytes) = TICKS_SHIM else {
        return Ok(None);
    };
    let path = dir.join(TICKS_SHIM_FILE);
    if read_no_follow(&path).is_some_and(|old| old == bytes) {
        return Ok(Some(path));
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // Whatever the umask: the servers' user must reach the file (systemd starts them as it).
    std::fs::set_permissions(
        dir,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .with_context(|| format!("opening {} to the servers' user", dir.display()))?;
    crate::store::files::write_atomic(&path, bytes, 0o644)
        .with_context(|| format!("writing MySQL's start-up shim {}", path.display()))?;
    Ok(Some(path))
}

/// A regular file's bytes, without following a link in its place.
fn read_no_follow(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The environment a server starts with: libeatmydata preloaded for the `test` profile
/// when `skip_fsync` is on and `library` was found; for MySQL, the `times()` shim when
/// given (`install_ticks_shim`), and — its Debian build allocates with tcmalloc — memory
/// handed back to the OS as soon as it is freed (an idle 9.7 branch 167 → 147 MB RSS,
/// start time unchanged: 523 vs 525 ms).
pub fn environment(
    flavour: Option<Flavour>,
    profile: Profile,
    skip_fsync: bool,
    library: Option<&Path>,
    ticks_shim: Option<&Path>,
) -> Vec<(String, String)> {
    let mysql = flavour.is_some_and(|f| f.is_mysql());
    let mut preload = Vec::new();
    if let (Profile::Test, true, Some(lib)) = (profile, skip_fsync, library) {
        preload.push(lib.display().to_string());
    }
    if let (true, Some(shim)) = (mysql, ticks_shim) {
        preload.push(shim.display().to_string());
    }
    let mut env = Vec::new();
    if !preload.is_empty() {
        // ld.so splits the list at colons and spaces alike.
        env.push(("LD_PRELOAD".into(), preload.join(":")));
    }
    if mysql {
        env.push(("TCMALLOC_AGGRESSIVE_DECOMMIT".into(), "true".into()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_test_profile_skips_fsync() {
        let lib = Path::new("/usr/lib/libeatmydata.so.1");
        let maria = Some(Flavour::new(crate::flavour::Family::Mariadb, 10, 11, 19));
        let shim = Path::new("/r/lib/libdbb-ticks.so");
        assert_eq!(
            environment(maria, Profile::Test, true, Some(lib), Some(shim)),
            vec![("LD_PRELOAD".to_string(), lib.display().to_string())],
            "the shim is MySQL's alone"
        );
        assert!(environment(maria, Profile::Durable, true, Some(lib), None).is_empty());
        assert!(environment(maria, Profile::Test, false, Some(lib), None).is_empty());
        assert!(environment(maria, Profile::Test, true, None, None).is_empty());
    }

    #[test]
    fn mysql_preloads_both_libraries_in_the_test_profile_and_the_shim_in_any() {
        let lib = Path::new("/usr/lib/libeatmydata.so.1");
        let shim = Path::new("/r/lib/libdbb-ticks.so");
        let mysql = Some(Flavour::new(crate::flavour::Family::Mysql, 9, 7, 4));
        let preload = |env: Vec<(String, String)>| {
            env.into_iter()
                .find(|(k, _)| k == "LD_PRELOAD")
                .map(|(_, v)| v)
        };
        assert_eq!(
            preload(environment(
                mysql,
                Profile::Test,
                true,
                Some(lib),
                Some(shim)
            ))
            .as_deref(),
            Some("/usr/lib/libeatmydata.so.1:/r/lib/libdbb-ticks.so")
        );
        assert_eq!(
            preload(environment(
                mysql,
                Profile::Durable,
                true,
                Some(lib),
                Some(shim)
            ))
            .as_deref(),
            Some("/r/lib/libdbb-ticks.so")
        );
        assert_eq!(
            preload(environment(mysql, Profile::Durable, true, Some(lib), None)),
            None
        );
    }

    #[test]
    fn mysql_returns_freed_memory_in_every_profile() {
        let mysql = Some(Flavour::new(crate::flavour::Family::Mysql, 9, 7, 4));
        let env = environment(mysql, Profile::Durable, true, None, None);
        assert_eq!(
            env,
            vec![(
                "TCMALLOC_AGGRESSIVE_DECOMMIT".to_string(),
                "true".to_string()
            )]
        );
    }

    /// The shim as a server gets it: written out, loaded, its `times` called as
    /// `my_timer_init` calls it — the loop that waited for 10 ticks ends at once, and later
    /// differences are the kernel's own.
    #[cfg(ticks_shim)]
    #[test]
    fn the_shim_ends_the_calibration_loop_and_then_keeps_real_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = install_ticks_shim(dir.path()).unwrap().unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o644);
        assert_eq!(
            install_ticks_shim(dir.path()).unwrap(),
            Some(path.clone()),
            "again: kept"
        );
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a library of our own whose only code is `times`; loaded locally, so it
        // interposes nothing in this test process.
        let shim_times: extern "C" fn(*mut libc::tms) -> libc::clock_t = unsafe {
            let handle = libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            assert!(!handle.is_null(), "dlopen {}", path.display());
            let f = libc::dlsym(handle, c"times".as_ptr());
            assert!(!f.is_null());
            std::mem::transmute(f)
        };
        let mut buf: libc::tms = unsafe { std::mem::zeroed() };
        let started = std::time::Instant::now();
        let first = shim_times(&mut buf);
        let mut calls = 1;
        while shim_times(&mut buf) - first <= 10 {
            calls += 1;
        }
        assert!(calls <= 11, "{calls} calls to move on by 10 ticks");
        assert!(started.elapsed() < std::time::Duration::from_millis(50));
        for _ in 0..64 {
            shim_times(&mut buf);
        }
        // From here on the offset is constant: a difference is the kernel's.
        let real = || {
            let mut own: libc::tms = unsafe { std::mem::zeroed() };
            // SAFETY: times(2) with a valid buffer.
            unsafe { libc::times(&mut own) }
        };
        let (shim_before, real_before) = (shim_times(&mut buf), real());
        std::thread::sleep(std::time::Duration::from_millis(120));
        let (shim_after, real_after) = (shim_times(&mut buf), real());
        let (shim_delta, real_delta) = (shim_after - shim_before, real_after - real_before);
        assert!(
            (shim_delta - real_delta).abs() <= 1,
            "shim {shim_delta} ticks, kernel {real_delta}"
        );
        assert!(real_delta >= 10, "slept 120 ms: {real_delta} ticks");
    }

    #[test]
    fn the_first_installed_candidate_wins() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.so"), dir.path().join("b.so"));
        std::fs::write(&b, b"").unwrap();
        assert_eq!(first_existing([a.as_path(), b.as_path()]), Some(b.clone()));
        assert_eq!(first_existing([a.as_path()]), None);
    }
}
