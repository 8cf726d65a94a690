//! Who is asking, and what they may do. Root running db-branch directly is always an admin.
//! Everyone else acts through the `db-branchd` system service (`daemon`), which learns the
//! caller's uid and gids from the bus and runs the same command for them as root with that
//! identity handed down here; nothing the caller passes can change it.
//!
//! Policy (`[access]` in the config): members of `users_group` may create branches and act
//! on their own; members of `admins_group` (and root) may act on every branch and run the
//! host-wide commands (init, bake, baselines, gc, stop-idle, doctor, pools' set-up).

use crate::branch::{BranchName, BranchRecord};
use crate::cli::{BaselineCommand, Command, PoolCommand};
use crate::config::AccessConfig;
use crate::error::{Error, Kind};
use anyhow::Result;

/// Set by the service for the command it runs on a caller's behalf; honoured only when
/// db-branch runs as root (as the service's worker does).
pub const CALLER_UID_ENV: &str = "DB_BRANCH_CALLER_UID";
/// The caller's groups as the bus daemon knows them, comma-separated.
pub const CALLER_GIDS_ENV: &str = "DB_BRANCH_CALLER_GIDS";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    /// Primary group first, then the supplementary ones.
    pub gids: Vec<u32>,
    /// The OS user name (the uid as text when it has none).
    pub name: String,
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
    /// Any member of the users group (list, status, create, pools' claims).
    User,
    /// The branch must be the caller's own (or the caller an admin).
    Owner(BranchName),
    /// Host-wide work: admins only.
    Admin,
}

impl Caller {
    /// The user running db-branch directly (root).
    pub fn current() -> Caller {
        let uid = nix::unistd::geteuid().as_raw();
        Caller {
            uid,
            gids: vec![nix::unistd::getegid().as_raw()],
            name: user_name(uid),
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
        let gids = std::env::var(CALLER_GIDS_ENV)
            .unwrap_or_default()
            .split(',')
            .filter_map(|g| g.trim().parse().ok())
            .collect();
        Ok(Some(Caller {
            uid,
            gids,
            name: user_name(uid),
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

    /// Refuses (exit 77) what the caller's role does not allow.
    pub fn check(&self, access: &AccessConfig, need: &Need, owner: Option<&str>) -> Result<()> {
        let role = self.role(access);
        if role == Role::Admin {
            return Ok(());
        }
        if role == Role::Outsider {
            return Err(Error::new(
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
            .into());
        }
        match need {
            Need::User => Ok(()),
            Need::Admin => Err(Error::new(
                Kind::Permission,
                format!(
                    "only root and members of group {} may do this",
                    access.admins_group
                ),
            )
            .hint("ask an admin, or run it with sudo")
            .into()),
            Need::Owner(name) => match owner {
                Some(o) if o != self.name => Err(Error::new(
                    Kind::Permission,
                    format!("branch {name} is not yours: owned by {o}; ask an admin"),
                )
                .into()),
                _ => Ok(()),
            },
        }
    }

    /// Whether the caller may see this branch's password.
    pub fn may_see_secrets(&self, access: &AccessConfig, record: &BranchRecord) -> bool {
        self.role(access) == Role::Admin || record.owner == self.name
    }
}

/// What `command` needs of its caller.
pub fn need(command: &Command) -> Need {
    use Command as C;
    match command {
        C::Reset(a) => Need::Owner(a.name.clone()),
        C::Delete(a) => Need::Owner(a.name.clone()),
        C::Start(a) | C::Stop(a) | C::Unprotect(a) => Need::Owner(a.name.clone()),
        C::Env(a) => Need::Owner(a.name.clone()),
        C::Extend(a) => Need::Owner(a.name.clone()),
        C::Protect(a) => Need::Owner(a.name.clone()),
        C::Create(a) => Need::Owner(a.name.clone()),
        C::Checkpoint(a) => match &a.command {
            Some(crate::cli::CheckpointCommand::Delete { name, .. }) => Need::Owner(name.clone()),
            None => match &a.name {
                Some(n) => Need::Owner(n.clone()),
                None => Need::User,
            },
        },
        C::Checkpoints(a) => Need::Owner(a.name.clone()),
        C::Diff(_) => Need::User,
        C::List(_) | C::Status(_) | C::Completions { .. } => Need::User,
        C::Baseline(BaselineCommand::List) => Need::User,
        C::Pool(PoolCommand::List | PoolCommand::Status(_)) => Need::User,
        C::Pool(PoolCommand::Claim(_) | PoolCommand::Release(_) | PoolCommand::Run(_)) => {
            Need::User
        }
        C::MigrateCheck(a) => match &a.branch {
            Some(b) => Need::Owner(b.clone()),
            None => Need::Admin,
        },
        C::Init(_)
        | C::Daemon
        | C::Baseline(_)
        | C::Doctor(_)
        | C::StopIdle(_)
        | C::Gc(_)
        | C::Bake(_)
        | C::Pool(_) => Need::Admin,
    }
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

fn user_name(uid: u32) -> String {
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
    // SAFETY: only async-signal-safe system calls between fork and exec; groups first,
    // then gid, then uid (after which the others would be refused).
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::setgroups(&gids).map_err(std::io::Error::from)?;
            nix::unistd::setgid(primary).map_err(std::io::Error::from)?;
            nix::unistd::setuid(uid).map_err(std::io::Error::from)?;
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
    use clap::Parser;

    fn need_of(args: &[&str]) -> Need {
        let mut argv = vec!["db-branch"];
        argv.extend(args);
        need(&crate::cli::Cli::try_parse_from(argv).unwrap().command)
    }

    #[test]
    fn branch_commands_need_the_owner_and_host_commands_an_admin() {
        let a: BranchName = "a".parse().unwrap();
        for args in [
            &["reset", "a"][..],
            &["delete", "a"],
            &["env", "a"],
            &["stop", "a"],
            &["start", "a"],
            &["extend", "a", "--ttl", "1h"],
            &["protect", "a"],
            &["create", "a"],
        ] {
            assert_eq!(need_of(args), Need::Owner(a.clone()), "{args:?}");
        }
        for args in [&["list"][..], &["status", "a"], &["baseline", "list"]] {
            assert_eq!(need_of(args), Need::User, "{args:?}");
        }
        for args in [
            &["gc"][..],
            &["bake", "--from", "file:/x.sql"],
            &["baseline", "create", "--empty"],
            &["init"],
        ] {
            assert_eq!(need_of(args), Need::Admin, "{args:?}");
        }
    }

    #[test]
    fn root_may_do_anything_and_others_by_role() {
        let access = AccessConfig {
            users_group: "no-such-group-dbb".into(),
            admins_group: "no-such-group-dbb-admin".into(),
            service: false,
        };
        let root = Caller {
            uid: 0,
            gids: vec![0],
            name: "root".into(),
        };
        assert_eq!(root.role(&access), Role::Admin);
        assert!(root.check(&access, &Need::Admin, None).is_ok());
        let stranger = Caller {
            uid: 4242,
            gids: vec![4242],
            name: "eve".into(),
        };
        assert_eq!(stranger.role(&access), Role::Outsider);
        let err = stranger.check(&access, &Need::User, None).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), crate::error::EXIT_PERMISSION);
        assert!(err.to_string().contains("not in group no-such-group-dbb"));
    }

    #[test]
    fn a_user_acts_on_their_own_branches_only() {
        // Group 0 exists everywhere: make it the users group for this test.
        let root_group = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(0))
            .unwrap()
            .unwrap()
            .name;
        let access = AccessConfig {
            users_group: root_group,
            admins_group: "no-such-group-dbb-admin".into(),
            service: false,
        };
        let alice = Caller {
            uid: 4243,
            gids: vec![0],
            name: "alice".into(),
        };
        assert_eq!(alice.role(&access), Role::User);
        let a = Need::Owner("a".parse().unwrap());
        assert!(alice.check(&access, &a, Some("alice")).is_ok());
        assert!(alice.check(&access, &a, None).is_ok());
        let err = alice.check(&access, &a, Some("bob")).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), crate::error::EXIT_PERMISSION);
        assert_eq!(
            err.to_string(),
            "branch a is not yours: owned by bob; ask an admin"
        );
        let err = alice.check(&access, &Need::Admin, None).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), crate::error::EXIT_PERMISSION);
    }
}
