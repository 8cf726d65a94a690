//! `db-branchd`: how users without root use db-branch on a shared host.
//!
//! A non-root `db-branch` does not do the work itself: it hands its arguments, its terminal
//! (stdin, stdout, stderr) and a status pipe to the `io.dbbranch.Manager1` service on the
//! system bus (`client`). The service (`daemon`, bus-activated, sandboxed, without any
//! capability) learns the caller's uid and gids from the bus daemon and asks systemd to run
//! the very same command as root in a transient unit, with the caller's file descriptors as
//! its standard streams and the caller's identity in its environment (`access`). The
//! command's exit code comes back through the status pipe. So output, progress bars,
//! prompts, `--json` and exit codes are those of the root path, and both paths share every
//! operation. A caller that goes away does not stop the command half-way: it runs to its
//! end (or its own undo) as any root command would.

pub mod client;
pub mod daemon;
pub mod install;

/// The bus name, object path and interface of the service.
pub const BUS_NAME: &str = "io.dbbranch.Manager1";
pub const OBJECT_PATH: &str = "/io/dbbranch/Manager1";
/// The service's own unit.
pub const UNIT: &str = "db-branchd.service";

/// Variables of the caller's environment a command may read; nothing else crosses.
pub const FORWARDED_ENV: &[&str] = &[
    "TERM",
    "NO_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "COLUMNS",
    "LINES",
    "LANG",
    "LC_ALL",
    "DB_BRANCH_LOG",
    // bake's source password: kept out of argv, and out of the unit's properties (below).
    "MYSQL_PWD",
];
