//! Crash injection for reliability tests (builds with the `testing` feature only): `DB_BRANCH_FAILPOINT=create:after-clone` makes the
//! process exit on the spot right after that side effect, with no undo and no clean-up, as
//! a SIGKILL or power loss would. Every failpoint name is listed in `ALL`; the tests prove
//! that the next ordinary command, or `doctor --repair`, puts things right after each one.

pub const ENV: &str = "DB_BRANCH_FAILPOINT";
/// The exit code of a process stopped at a failpoint.
pub const EXIT_CODE: i32 = 86;

pub const ALL: &[&str] = &[
    "create:after-record",
    "create:after-clone",
    "create:after-options",
    "create:after-start",
    "create:after-ready",
    "reset:after-kill",
    "reset:after-rollback",
    "reset:after-start",
    "delete:after-kill",
    "delete:after-destroy",
    "delete:after-forget",
    "baseline:after-workspace",
    "baseline:after-load",
    "baseline:after-seal",
    "gc:after-delete",
    "trash:after-entry",
    "trash:after-storage",
    "bake:after-workspace",
    "bake:after-load",
    "bake:after-seal",
];

/// The failpoints just after a step of the storage backend (a clone, a rollback, a destroy,
/// a workspace, a seal): where btrfs and ZFS leave different things behind. The sweep runs
/// these on ZFS in CI, and all of `ALL` on btrfs and in a full run. (`reset:after-kill`
/// is not one: the server is gone and the storage untouched, the same on both.)
pub const STORAGE: &[&str] = &[
    "create:after-clone",
    "reset:after-rollback",
    "delete:after-destroy",
    "baseline:after-workspace",
    "baseline:after-load",
    "baseline:after-seal",
];

/// Exits the process here when `name` is the armed failpoint. Only in builds with the
/// `testing` feature: the shipped binary ignores the variable, and does not contain the
/// exit either (the package is built unoptimised, where a branch that is never taken is
/// still compiled in; `scripts/test-package` looks for its message).
pub fn hit(name: &str) {
    debug_assert!(ALL.contains(&name), "unlisted failpoint {name}");
    #[cfg(feature = "testing")]
    if armed(name) {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            format!("db-branch: failpoint {name}: exiting without clean-up\n").as_bytes(),
        );
        std::process::exit(EXIT_CODE);
    }
}

/// Steps that return an error instead of exiting when armed the same way: a fallback that
/// no server a test can set up will take (the one-off server refusing the source's index
/// statistics — it is ours, and shares their tables' definitions on every supported
/// series). Not in `ALL`: nothing exits, so the crash sweep has nothing to repair.
pub const ERRORS: &[&str] = &["bake:statistics-refused"];

/// Whether the step `name` of `ERRORS` is to fail here. Never in a build without the
/// `testing` feature.
pub fn fails(name: &str) -> bool {
    debug_assert!(ERRORS.contains(&name), "unlisted failpoint {name}");
    armed(name)
}

/// Whether `name` is the failpoint `DB_BRANCH_FAILPOINT` arms.
#[cfg(feature = "testing")]
fn armed(name: &str) -> bool {
    std::env::var(ENV).is_ok_and(|armed| armed == name)
}

/// The shipped binary has no failpoints: it does not even read the variable.
#[cfg(not(feature = "testing"))]
#[inline(always)]
fn armed(_name: &str) -> bool {
    false
}
