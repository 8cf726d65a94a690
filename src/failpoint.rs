//! Crash injection for reliability tests: `DB_BRANCH_FAILPOINT=create:after-clone` makes the
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
    "baseline:after-prepare",
    "baseline:after-seal",
    "gc:after-delete",
    "bake:after-workspace",
    "bake:after-load",
    "bake:after-seal",
];

/// Exits the process here when `name` is the armed failpoint.
pub fn hit(name: &str) {
    debug_assert!(ALL.contains(&name), "unlisted failpoint {name}");
    if std::env::var(ENV).is_ok_and(|armed| armed == name) {
        eprintln!("db-branch: failpoint {name}: exiting without clean-up");
        std::process::exit(EXIT_CODE);
    }
}
