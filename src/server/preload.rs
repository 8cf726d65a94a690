//! A library the branch servers of the `test` profile run with: libeatmydata, which makes
//! fsync, fdatasync, sync, msync and O_SYNC opens no-ops. InnoDB calls fsync on file
//! creation, for its redo log and its temporary tablespace even under
//! `innodb_flush_method=nosync`; on a loop-mounted pool each call reaches the disk under
//! the image. Measured (docs/benchmarks.md, "Where a start goes"): a MySQL 9.7 start from a
//! clean datadir 771 → 543 ms (median of 7), 107 fsync/fdatasync calls taking 370 ms.
//! Writes still reach the page cache: a killed server loses nothing; a host crash can lose
//! what was written since the OS last wrote back, which the `test` profile already accepts.

use crate::config::Profile;
use crate::flavour::Flavour;
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

/// The environment a branch server starts with: the library preloaded for the `test`
/// profile when `skip_fsync` is on and `library` was found; for MySQL, whose Debian build
/// allocates with tcmalloc, memory handed back to the OS as soon as it is freed (an idle
/// 9.7 branch 167 → 147 MB RSS, start time unchanged: 523 vs 525 ms).
pub fn environment(
    flavour: Option<Flavour>,
    profile: Profile,
    skip_fsync: bool,
    library: Option<&Path>,
) -> Vec<(String, String)> {
    let mut env = Vec::new();
    if let (Profile::Test, true, Some(lib)) = (profile, skip_fsync, library) {
        env.push(("LD_PRELOAD".into(), lib.display().to_string()));
    }
    if flavour.is_some_and(|f| f.is_mysql()) {
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
        assert_eq!(
            environment(maria, Profile::Test, true, Some(lib)),
            vec![("LD_PRELOAD".to_string(), lib.display().to_string())]
        );
        assert!(environment(maria, Profile::Durable, true, Some(lib)).is_empty());
        assert!(environment(maria, Profile::Test, false, Some(lib)).is_empty());
        assert!(environment(maria, Profile::Test, true, None).is_empty());
    }

    #[test]
    fn mysql_returns_freed_memory_in_every_profile() {
        let mysql = Some(Flavour::new(crate::flavour::Family::Mysql, 9, 7, 4));
        let env = environment(mysql, Profile::Durable, true, None);
        assert_eq!(
            env,
            vec![(
                "TCMALLOC_AGGRESSIVE_DECOMMIT".to_string(),
                "true".to_string()
            )]
        );
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
