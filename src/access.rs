//! Who is asking, and what they may do — decided once, here, for every command before it
//! has any effect (`decide`, then `authorize`; `commands::dispatch` takes the `Grant` only
//! they make).
//!
//! Where a command comes from (`Origin`): root at a shell (an admin); the db-branchd
//! service's worker, running as root for a caller whose uid and groups the bus reported
//! (`Service`: nothing that caller passed can change who or where — `--config` and `--host`
//! are refused, the config is the service's); or any other user, whose command goes to the
//! service (or over ssh, as that user, with `--host`).
//!
//! Policy (`[access]` in the config): members of `users_group` may create branches and act
//! on their own; members of `admins_group` (and root) may act on every branch and run the
//! host-wide commands (init, bake, baselines, gc, stop-idle, doctor, pools' set-up).
//! The threat model is docs/security.md.

use crate::branch::{BranchName, BranchRecord};
use crate::config::AccessConfig;
use crate::error::{Error, Kind};
use anyhow::Result;
use std::path::{Path, PathBuf};

/// Set by the service for the command it runs on a caller's behalf; honoured only when
/// db-branch runs as root (as the service's worker does).
pub const CALLER_UID_ENV: &str = "DB_BRANCH_CALLER_UID";
/// The caller's groups as the bus daemon knows them, comma-separated.
pub const CALLER_GIDS_ENV: &str = "DB_BRANCH_CALLER_GIDS";
/// The caller's working directory, as the service read it from a directory the caller
/// opened (so relative paths in the command mean what they meant to the caller).
pub const CALLER_CWD_ENV: &str = "DB_BRANCH_CALLER_CWD";
/// The caller's process (the bus peer), whose parent holds a pool claim's lease.
pub const CALLER_PID_ENV: &str = "DB_BRANCH_CALLER_PID";
/// Every variable the service sets about its caller: helpers a worker starts (a pool's
/// recycler) act for the host, not for the caller, and must not inherit them.
pub const CALLER_ENV: &[&str] = &[
    CALLER_UID_ENV,
    CALLER_GIDS_ENV,
    CALLER_CWD_ENV,
    CALLER_PID_ENV,
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    /// Primary group first (the passwd entry's), then the supplementary ones.
    pub gids: Vec<u32>,
    /// The OS user name (the uid as text when it has none).
    pub name: String,
    /// Where relative paths the caller typed start (None: this process's own directory).
    pub cwd: Option<PathBuf>,
    /// The caller's own process, when the service reported it.
    pub pid: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Neither group: may only ask who they are (`list`, `status` are refused too).
    Outsider,
    /// `users_group`: own branches.
    User,
    /// `admins_group` or root: everything.
    Admin,
}

/// What a command needs of its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Nothing: it touches nothing of this host (`completions`).
    Anyone,
    /// Any member of the users group (list, status, create, pools' claims).
    User,
    /// The branches must be the caller's own (or the caller an admin): the one acted on and
    /// any it reads from (`create --from`).
    Owner(Vec<BranchName>),
    /// Host-wide work: admins only.
    Admin,
    /// Root itself, not on anyone's behalf (`daemon`: the service's own process).
    Root,
    /// Runs in the caller's own process, as the caller, with what a nested `env` hands it
    /// (checked as `env` is): `exec`, `shell`. Never in the service, which would run the
    /// caller's command as root.
    OwnProcess,
}

impl Need {
    pub fn owner(name: &BranchName) -> Need {
        Need::Owner(vec![name.clone()])
    }
}

/// Where the command comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Root running db-branch itself (at a shell, under sudo, from a timer).
    Root,
    /// The service's worker: root, for this caller.
    Service(Caller),
    /// Any other user: the command is handed to the service.
    User,
}

impl Origin {
    pub fn detect() -> Result<Origin> {
        if !nix::unistd::geteuid().is_root() {
            return Ok(Origin::User);
        }
        Ok(match Caller::from_env()? {
            Some(c) => Origin::Service(c),
            None => Origin::Root,
        })
    }
}

/// The global flags that choose who or where a command acts: only root may give them to a
/// command the service runs (a caller's config could name any program as the server, which
/// root would run; `--host` would have root's ssh keys act for them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Globals {
    pub config: bool,
    pub host: bool,
}

/// What happens to a command, decided before it has any effect.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// Run here; the grant still needs the config's policy (`authorize`).
    Here,
    /// Run here without a host: it needs nothing of it (`completions`).
    Anywhere,
    /// Run on `--host` over ssh, as whoever this process is.
    Ssh,
    /// Hand it to the db-branchd service.
    Service,
}

/// The one decision every command goes through first: where it runs, and whether its global
/// flags are allowed from where it comes. Refused: exit 77, with nothing done.
pub fn decide(origin: &Origin, globals: Globals, need: &Need) -> Result<Route> {
    if *need == Need::Anyone {
        return Ok(Route::Anywhere);
    }
    if *need == Need::OwnProcess {
        return match origin {
            Origin::Service(c) => Err(Error::new(
                Kind::Permission,
                format!(
                    "exec and shell run in {}'s own process: the db-branch service never runs them",
                    c.name
                ),
            )
            .hint("run `db-branch exec` or `db-branch shell` itself; it asks the service for the connection")
            .into()),
            _ => Ok(Route::Anywhere),
        };
    }
    match origin {
        Origin::Root if globals.host => Ok(Route::Ssh),
        Origin::Root => Ok(Route::Here),
        Origin::User if globals.host => Ok(Route::Ssh),
        Origin::User => Ok(Route::Service),
        Origin::Service(c) => {
            let flag = if globals.config {
                Some("--config")
            } else if globals.host {
                Some("--host")
            } else {
                None
            };
            if let Some(flag) = flag {
                return Err(Error::new(
                    Kind::Permission,
                    format!(
                        "{flag} is not accepted from {} through the db-branch service: it \
                         serves its own config on this host only",
                        c.name
                    ),
                )
                .hint("leave it out (the `db-branch` client does), or run db-branch as root")
                .into());
            }
            if *need == Need::Root {
                return Err(Error::new(
                    Kind::Permission,
                    "only root itself may run this (it is the service's own process)",
                )
                .into());
            }
            Ok(Route::Here)
        }
    }
}

/// Proof that the caller may run the command: made only by `authorize`, required by
/// `commands::dispatch`, so no command runs past the policy.
#[derive(Debug)]
pub struct Grant {
    need: Need,
}

impl Grant {
    pub fn need(&self) -> &Need {
        &self.need
    }
}

/// The policy's answer for `need` (exit 77 when refused). `owner_of` gives a branch's owner
/// as its record says (None: no such branch yet); the operations check again under each
/// branch's lock (`Host::branch_lock`), as a branch may change hands between the two.
pub fn authorize(
    caller: &Caller,
    access: &AccessConfig,
    need: Need,
    owner_of: &dyn Fn(&BranchName) -> Result<Option<BranchRecord>>,
) -> Result<Grant> {
    match &need {
        // `exec`/`shell`: their nested `env` is authorized as itself.
        Need::Anyone | Need::OwnProcess => {}
        Need::Root => {
            if !caller.is_root() {
                return Err(crate::error::permission("only root may run this"));
            }
        }
        Need::Owner(names) => {
            for name in names {
                let record = owner_of(name)?;
                caller.check(access, &need, name, record.as_ref())?;
            }
            if names.is_empty() {
                caller.check_role(access, Role::User)?;
            }
        }
        Need::User => caller.check_role(access, Role::User)?,
        Need::Admin => caller.check_role(access, Role::Admin)?,
    }
    Ok(Grant { need })
}

impl Caller {
    /// The user running db-branch directly (root).
    pub fn current() -> Caller {
        let uid = nix::unistd::geteuid().as_raw();
        Caller {
            uid,
            gids: vec![nix::unistd::getegid().as_raw()],
            name: user_name(uid),
            cwd: None,
            pid: None,
        }
    }

    /// The caller the service handed down, if any (only honoured when running as root).
    pub fn from_env() -> Result<Option<Caller>> {
        let Ok(uid) = std::env::var(CALLER_UID_ENV) else {
            return Ok(None);
        };
        if !nix::unistd::geteuid().is_root() {
            return Ok(None);
        }
        let uid: u32 = uid
            .parse()
            .map_err(|_| crate::error::usage(format!("{CALLER_UID_ENV}={uid:?} is not a uid")))?;
        let listed: Vec<u32> = std::env::var(CALLER_GIDS_ENV)
            .unwrap_or_default()
            .split(',')
            .filter_map(|g| g.trim().parse().ok())
            .collect();
        let cwd = std::env::var_os(CALLER_CWD_ENV)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute());
        let pid = std::env::var(CALLER_PID_ENV)
            .ok()
            .and_then(|p| p.parse().ok());
        Ok(Some(Caller {
            uid,
            gids: with_primary_first(uid, listed),
            name: user_name(uid),
            cwd,
            pid,
        }))
    }

    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    pub fn role(&self, access: &AccessConfig) -> Role {
        if self.is_root() || in_group(&self.gids, &access.admins_group) {
            Role::Admin
        } else if in_group(&self.gids, &access.users_group) {
            Role::User
        } else {
            Role::Outsider
        }
    }

    /// The group's members only, whatever else a command needs.
    fn outsider_refusal(&self, access: &AccessConfig) -> anyhow::Error {
        Error::new(
            Kind::Permission,
            format!(
                "{} may not use db-branch on this host: not in group {}",
                self.name, access.users_group
            ),
        )
        .hint(format!(
            "ask an admin to add you: `sudo usermod -aG {} {}` (then log in again)",
            access.users_group, self.name
        ))
        .into()
    }

    /// Refuses (exit 77) a caller below `least`.
    pub fn check_role(&self, access: &AccessConfig, least: Role) -> Result<()> {
        let role = self.role(access);
        if role >= least {
            return Ok(());
        }
        if role == Role::Outsider {
            return Err(self.outsider_refusal(access));
        }
        Err(Error::new(
            Kind::Permission,
            format!(
                "only root and members of group {} may do this",
                access.admins_group
            ),
        )
        .hint("ask an admin, or run it with sudo")
        .into())
    }

    /// Whether `record` is the caller's: by uid where the record knows it (a renamed user
    /// keeps their branches), else by name.
    pub fn owns(&self, record: &BranchRecord) -> bool {
        match record.owner_uid {
            Some(uid) => uid == self.uid,
            None => record.owner == self.name,
        }
    }

    /// Refuses (exit 77) acting on branch `name` (whose record is `record`, None when it
    /// does not exist yet) unless the caller owns it or is an admin.
    pub fn check(
        &self,
        access: &AccessConfig,
        _need: &Need,
        name: &BranchName,
        record: Option<&BranchRecord>,
    ) -> Result<()> {
        self.check_role(access, Role::User)?;
        if self.role(access) == Role::Admin {
            return Ok(());
        }
        match record {
            Some(r) if !self.owns(r) => Err(Error::new(
                Kind::Permission,
                format!(
                    "branch {name} is not yours: owned by {}; ask an admin",
                    r.owner
                ),
            )
            .into()),
            _ => Ok(()),
        }
    }

    /// Whether the caller may see this branch's password.
    pub fn may_see_secrets(&self, access: &AccessConfig, record: &BranchRecord) -> bool {
        self.role(access) == Role::Admin || self.owns(record)
    }

    /// `path` as the caller meant it: relative paths start at the caller's working directory.
    pub fn resolve(&self, path: &Path) -> PathBuf {
        match &self.cwd {
            Some(cwd) if path.is_relative() => cwd.join(path),
            _ => path.to_path_buf(),
        }
    }
}

/// In the service's worker, moves to the caller's working directory before the command
/// line is read, so relative paths in it (`file:streams`, `--sql seed.sql`) mean what they
/// meant where the caller typed them. Only a worker does this (root, with the service's
/// variables); what runs as the caller enters it again with the caller's own rights
/// (`run_as_caller`).
pub fn enter_caller_directory() {
    if !nix::unistd::geteuid().is_root() || std::env::var_os(CALLER_UID_ENV).is_none() {
        return;
    }
    if let Some(dir) = std::env::var_os(CALLER_CWD_ENV).map(PathBuf::from) {
        if dir.is_absolute() {
            if let Err(e) = std::env::set_current_dir(&dir) {
                tracing::warn!("cannot enter the caller's directory {}: {e}", dir.display());
            }
        }
    }
}

/// The user's primary group (their passwd entry's) first, then the other groups the bus
/// listed — never just the lowest of a sorted list.
pub fn with_primary_first(uid: u32, listed: Vec<u32>) -> Vec<u32> {
    let primary = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.gid.as_raw());
    let mut gids: Vec<u32> = primary.into_iter().collect();
    for g in listed {
        if !gids.contains(&g) {
            gids.push(g);
        }
    }
    gids
}

fn in_group(gids: &[u32], group: &str) -> bool {
    if group.is_empty() {
        return false;
    }
    nix::unistd::Group::from_name(group)
        .ok()
        .flatten()
        .is_some_and(|g| gids.contains(&g.gid.as_raw()))
}

pub fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name)
}

/// Makes `cmd` run as the caller (uid, gid and groups) when the caller is not root: the
/// commands db-branch runs for a user (`pool run`, `migrate-check`) must not run as root.
pub fn run_as_caller(cmd: &mut std::process::Command, caller: &Caller) {
    use std::os::unix::process::CommandExt;
    if caller.is_root() {
        return;
    }
    let uid = nix::unistd::Uid::from_raw(caller.uid);
    let gids: Vec<nix::unistd::Gid> = caller
        .gids
        .iter()
        .map(|g| nix::unistd::Gid::from_raw(*g))
        .collect();
    let primary = gids
        .first()
        .copied()
        .unwrap_or(nix::unistd::Gid::from_raw(caller.uid));
    let home = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.dir);
    if let Some(h) = home {
        cmd.env("HOME", h);
    }
    cmd.env("USER", &caller.name).env("LOGNAME", &caller.name);
    // Entered after the identity changes, so the kernel checks the caller's own right to
    // it at that moment (a `current_dir` would be entered as root, before the switch).
    let cwd = caller
        .cwd
        .as_ref()
        .and_then(|d| std::ffi::CString::new(d.as_os_str().as_encoded_bytes()).ok());
    // SAFETY: only async-signal-safe system calls between fork and exec (nothing allocates:
    // the path was made above); groups first, then gid, then uid (after which the others
    // would be refused), then the directory.
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::setgroups(&gids).map_err(std::io::Error::from)?;
            nix::unistd::setgid(primary).map_err(std::io::Error::from)?;
            nix::unistd::setuid(uid).map_err(std::io::Error::from)?;
            if let Some(dir) = &cwd {
                if libc::chdir(dir.as_ptr()) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// The bytes of a file the caller named, read with the caller's rights: root reads it
/// itself; for anyone else a `cat` running as them does, so db-branchd never reads for a
/// user what that user could not.
pub fn read_as_caller(caller: &Caller, path: &std::path::Path) -> Result<Vec<u8>> {
    if caller.is_root() {
        return Ok(std::fs::read(path)?);
    }
    check_readable(caller, path)?;
    let mut cmd = std::process::Command::new("cat");
    cmd.arg("--").arg(path);
    run_as_caller(&mut cmd, caller);
    Ok(crate::exec::run(&mut cmd)?.stdout)
}

/// Refuses (exit 77) a path the caller could not read themselves (a dump, a datadir, a
/// masking script named to a command that db-branchd runs as root for them).
pub fn check_readable(caller: &Caller, path: &std::path::Path) -> Result<()> {
    if caller.is_root() {
        return Ok(());
    }
    let mut cmd = std::process::Command::new("test");
    cmd.arg("-r").arg(path);
    run_as_caller(&mut cmd, caller);
    let readable = cmd.status().is_ok_and(|s| s.success());
    if readable {
        Ok(())
    } else {
        Err(Error::new(
            Kind::Permission,
            format!("{} cannot read {}", caller.name, path.display()),
        )
        .hint("db-branch reads files for you only where you could read them yourself")
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(uid: u32, gids: Vec<u32>, name: &str) -> Caller {
        Caller {
            uid,
            gids,
            name: name.into(),
            cwd: None,
            pid: None,
        }
    }

    fn nobody_groups() -> AccessConfig {
        AccessConfig {
            users_group: "no-such-group-dbb".into(),
            admins_group: "no-such-group-dbb-admin".into(),
            ..AccessConfig::default()
        }
    }

    /// Group 0 exists everywhere: the users group of these tests.
    fn root_group_is_users() -> AccessConfig {
        let root_group = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(0))
            .unwrap()
            .unwrap()
            .name;
        AccessConfig {
            users_group: root_group,
            admins_group: "no-such-group-dbb-admin".into(),
            ..AccessConfig::default()
        }
    }

    fn record(owner: &str, uid: Option<u32>) -> BranchRecord {
        let mut r = BranchRecord::new(
            "a".parse().unwrap(),
            crate::branch::Generation(1),
            crate::values::ByteSize::mib(16),
            chrono::Utc::now(),
        );
        r.owner = owner.into();
        r.owner_uid = uid;
        r
    }

    #[test]
    fn service_callers_may_not_choose_the_config_or_the_host() {
        let eve = Origin::Service(caller(4242, vec![4242], "eve"));
        for globals in [
            Globals {
                config: true,
                host: false,
            },
            Globals {
                config: false,
                host: true,
            },
        ] {
            for need in [Need::User, Need::Admin, Need::owner(&"a".parse().unwrap())] {
                let err = decide(&eve, globals, &need).unwrap_err();
                assert_eq!(
                    crate::report::exit_code(&err),
                    crate::error::EXIT_PERMISSION
                );
            }
        }
        let err = decide(&eve, Globals::default(), &Need::Root).unwrap_err();
        assert_eq!(
            crate::report::exit_code(&err),
            crate::error::EXIT_PERMISSION
        );
        assert_eq!(
            decide(&eve, Globals::default(), &Need::User).unwrap(),
            Route::Here
        );
        // Root and other users: --host is theirs to use, as themselves.
        let host = Globals {
            config: false,
            host: true,
        };
        assert_eq!(
            decide(&Origin::Root, host, &Need::Admin).unwrap(),
            Route::Ssh
        );
        assert_eq!(
            decide(&Origin::User, host, &Need::User).unwrap(),
            Route::Ssh
        );
        assert_eq!(
            decide(&Origin::User, Globals::default(), &Need::Admin).unwrap(),
            Route::Service
        );
        assert_eq!(
            decide(&eve, Globals::default(), &Need::Anyone).unwrap(),
            Route::Anywhere
        );
    }

    /// `exec` and `shell` run the caller's program: in their own process, never in the
    /// service's root worker, whatever the flags.
    #[test]
    fn exec_and_shell_never_run_in_the_service() {
        let eve = Origin::Service(caller(4242, vec![4242], "eve"));
        for globals in [
            Globals::default(),
            Globals {
                config: true,
                host: true,
            },
        ] {
            let err = decide(&eve, globals, &Need::OwnProcess).unwrap_err();
            assert_eq!(
                crate::report::exit_code(&err),
                crate::error::EXIT_PERMISSION
            );
        }
        for origin in [Origin::Root, Origin::User] {
            assert_eq!(
                decide(&origin, Globals::default(), &Need::OwnProcess).unwrap(),
                Route::Anywhere
            );
        }
    }

    #[test]
    fn root_may_do_anything_and_others_by_role() {
        let access = nobody_groups();
        let root = caller(0, vec![0], "root");
        assert_eq!(root.role(&access), Role::Admin);
        let none = |_: &BranchName| -> Result<Option<BranchRecord>> { Ok(None) };
        assert!(authorize(&root, &access, Need::Admin, &none).is_ok());
        assert!(authorize(&root, &access, Need::Root, &none).is_ok());
        let stranger = caller(4242, vec![4242], "eve");
        assert_eq!(stranger.role(&access), Role::Outsider);
        let err = authorize(&stranger, &access, Need::User, &none).unwrap_err();
        assert_eq!(
            crate::report::exit_code(&err),
            crate::error::EXIT_PERMISSION
        );
        assert!(err.to_string().contains("not in group no-such-group-dbb"));
        let err = authorize(&stranger, &access, Need::Root, &none).unwrap_err();
        assert_eq!(
            crate::report::exit_code(&err),
            crate::error::EXIT_PERMISSION
        );
        assert!(authorize(&stranger, &access, Need::Anyone, &none).is_ok());
    }

    #[test]
    fn a_user_acts_on_their_own_branches_only() {
        let access = root_group_is_users();
        let alice = caller(4243, vec![0], "alice");
        assert_eq!(alice.role(&access), Role::User);
        let a: BranchName = "a".parse().unwrap();
        assert!(alice
            .check(&access, &Need::owner(&a), &a, Some(&record("alice", None)))
            .is_ok());
        assert!(alice.check(&access, &Need::owner(&a), &a, None).is_ok());
        let err = alice
            .check(&access, &Need::owner(&a), &a, Some(&record("bob", None)))
            .unwrap_err();
        assert_eq!(
            crate::report::exit_code(&err),
            crate::error::EXIT_PERMISSION
        );
        assert_eq!(
            err.to_string(),
            "branch a is not yours: owned by bob; ask an admin"
        );
        // The uid decides where the record has one: a name is not enough.
        assert!(!alice.owns(&record("alice", Some(4244))));
        assert!(alice.owns(&record("renamed", Some(4243))));
        let none = |_: &BranchName| -> Result<Option<BranchRecord>> { Ok(None) };
        let err = authorize(&alice, &access, Need::Admin, &none).unwrap_err();
        assert_eq!(
            crate::report::exit_code(&err),
            crate::error::EXIT_PERMISSION
        );
        // Every branch of an Owner need is checked: the source of `create --from` too.
        let bobs = |n: &BranchName| -> Result<Option<BranchRecord>> {
            Ok((n.as_str() == "src").then(|| record("bob", Some(5000))))
        };
        let need = Need::Owner(vec!["mine".parse().unwrap(), "src".parse().unwrap()]);
        let err = authorize(&alice, &access, need, &bobs).unwrap_err();
        assert!(err.to_string().contains("src is not yours"), "{err}");
    }

    #[test]
    fn the_primary_group_comes_from_passwd_not_the_lowest_number() {
        // root's primary group is 0; listed after others, it still comes first.
        assert_eq!(with_primary_first(0, vec![5, 3, 0]), vec![0, 5, 3]);
    }
}
