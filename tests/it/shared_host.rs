//! A shared host: users without root act through the db-branchd service on the real system
//! bus of the systemd namespace (scripts/test runs this module there only). Users, groups,
//! the service's unit and its bus files are made by the test and removed when it ends.

use db_branch::testkit::{server, TestEnv};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BUS_FILES: [&str; 2] = [
    "/etc/dbus-1/system.d/io.dbbranch.Manager1.conf",
    "/usr/share/dbus-1/system-services/io.dbbranch.Manager1.service",
];

/// OS users and groups made for the test, and the service's files: all removed on drop.
struct Host {
    users: Vec<String>,
    groups: Vec<String>,
    unit: PathBuf,
    bin_dir: PathBuf,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = Command::new("systemctl")
            .args(["stop", "db-branchd.service"])
            .status();
        let _ = std::fs::remove_file(&self.unit);
        for f in BUS_FILES {
            let _ = std::fs::remove_file(f);
        }
        let _ = Command::new("systemctl").arg("daemon-reload").status();
        reload_bus();
        for u in &self.users {
            let _ = Command::new("userdel").arg(u).status();
        }
        for g in &self.groups {
            let _ = Command::new("groupdel").arg(g).status();
        }
        let _ = std::fs::remove_dir_all(&self.bin_dir);
    }
}

pub(crate) fn reload_bus() {
    let _ = Command::new("busctl")
        .args([
            "call",
            "org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            "ReloadConfig",
        ])
        .status();
}

pub(crate) fn ok(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `program` to be run by OS user `user` (their uid, gid and groups; no sudo).
pub(crate) fn setpriv(user: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args([
        &format!("--reuid={user}"),
        &format!("--regid={user}"),
        "--init-groups",
        "--",
    ])
    .arg(program)
    .stdin(std::process::Stdio::null());
    cmd
}

/// db-branch run by OS user `user`, against the test's config.
pub(crate) fn as_user(bin: &Path, env: &TestEnv, user: &str, args: &[&str]) -> Output {
    setpriv(user, bin)
        .args(args)
        .env("DB_BRANCH_CONFIG", &env.config)
        .output()
        .unwrap()
}

pub(crate) fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// One db-branchd per host: the tests that install it take turns.
static SERVICE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A shared host made for a test: groups, users (alice and bob in the users group, eve in
/// neither), a root with db-branchd installed by `init`, and a generation. Everything goes
/// when it is dropped.
pub(crate) struct SharedHost {
    pub env: TestEnv,
    pub bin: PathBuf,
    pub users_group: String,
    pub admins_group: String,
    pub alice: String,
    pub bob: String,
    pub eve: String,
    pub unit: PathBuf,
    _host: Host,
    _service: std::sync::MutexGuard<'static, ()>,
}

impl SharedHost {
    /// `extra_access`: more `[access]` keys.
    pub fn new(tag: &str, extra_access: &str) -> SharedHost {
        assert_eq!(
            db_branch::testkit::service(),
            "systemd",
            "db-branchd needs systemd: scripts/test runs this module in the systemd namespace"
        );
        let service = SERVICE.lock().unwrap_or_else(|e| e.into_inner());
        let id = format!("{tag}{}", std::process::id());
        let (users_group, admins_group) = (format!("dbbtu{id}"), format!("dbbtadm{id}"));
        let (alice, bob, eve) = (
            format!("dbbta{id}"),
            format!("dbbtb{id}"),
            format!("dbbte{id}"),
        );
        let env = TestEnv::new(
            "",
            &format!(
                "[access]\nusers_group = \"{users_group}\"\nadmins_group = \"{admins_group}\"\nservice = true\n{extra_access}\n[lifecycle]\nkeep_deleted = \"24h\"\n"
            ),
        );
        let bin_dir = PathBuf::from(format!("/var/lib/dbbt/bin-{id}"));
        let host = Host {
            users: vec![alice.clone(), bob.clone(), eve.clone()],
            groups: vec![users_group.clone(), admins_group.clone()],
            unit: PathBuf::from("/run/systemd/system/db-branchd.service"),
            bin_dir: bin_dir.clone(),
        };
        for g in &host.groups {
            ok(Command::new("groupadd").arg(g));
        }
        for u in [&alice, &bob] {
            ok(Command::new("useradd").args([
                "--no-create-home",
                "--user-group",
                "--shell",
                "/usr/sbin/nologin",
                "--groups",
                &users_group,
                u,
            ]));
        }
        ok(Command::new("useradd").args([
            "--no-create-home",
            "--user-group",
            "--shell",
            "/usr/sbin/nologin",
            &eve,
        ]));
        // A copy every user may run (the build tree may not be reachable for them); the
        // service's unit runs the copy that ran `init`.
        std::fs::create_dir_all(&bin_dir).unwrap();
        let bin = bin_dir.join("db-branch");
        std::fs::copy(db_branch::testkit::bin(), &bin).unwrap();
        ok(Command::new(&bin)
            .args(["init"])
            .env("DB_BRANCH_CONFIG", &env.config));
        for f in BUS_FILES {
            assert!(Path::new(f).exists(), "init installed {f}");
        }
        env.pull_fixture(db_branch::testkit::Fixture::Seed);
        SharedHost {
            env,
            bin,
            users_group,
            admins_group,
            alice,
            bob,
            eve,
            unit: host.unit.clone(),
            _host: host,
            _service: service,
        }
    }

    pub fn as_user(&self, user: &str, args: &[&str]) -> Output {
        as_user(&self.bin, &self.env, user, args)
    }
}

#[test]
#[ignore = "needs root, systemd as PID 1 with a system bus and a server; run by scripts/test"]
fn users_act_on_their_own_branches_through_the_service() {
    let shared = SharedHost::new("s", "");
    let SharedHost {
        env,
        bin,
        users_group,
        alice,
        bob,
        eve,
        unit,
        ..
    } = &shared;
    let (env, bin, users_group, alice, bob, eve) = (env, bin, users_group, alice, bob, eve);
    // The service's sandbox, as systemd scores it (docs/security.md promises ≤ 4.0).
    let analyze = Command::new("systemd-analyze")
        .args(["security", "--offline=true"])
        .arg(unit)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&analyze.stdout).into_owned();
    let exposure: f64 = report
        .lines()
        .find_map(|l| l.split("db-branchd.service: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{report}"));
    assert!(exposure <= 4.0, "exposure {exposure}:\n{report}");

    // alice creates her branch, gets her own password, logs in with it, resets it.
    let out = as_user(bin, env, alice, &["--json", "create", "a1"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let created: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(created["owner"], alice.as_str());
    let port = created["port"].as_u64().unwrap() as u16;
    let password = created["connection"]["password"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(password.len(), 32);
    let login = |pw: &str| {
        Command::new(server().client)
            .args([
                "--no-defaults",
                "-h127.0.0.1",
                "-uroot",
                &format!("-P{port}"),
            ])
            .arg(format!("-p{pw}"))
            .args(["-N", "-B", "-e", "SELECT 42"])
            .output()
            .unwrap()
    };
    let answer = login(&password);
    assert!(answer.status.success(), "{}", stderr(&answer));
    assert_eq!(String::from_utf8_lossy(&answer.stdout).trim(), "42");
    let out = as_user(bin, env, alice, &["--json", "reset", "a1"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let out = as_user(bin, env, alice, &["env", "a1", "--format", "url"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&password));
    // Exit codes come through: a branch that does not exist is exit 2.
    let out = as_user(bin, env, alice, &["status", "nope"]);
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));

    // bob may see alice's branch but not act on it, read its password or log in.
    for args in [
        &["env", "a1"][..],
        &["reset", "a1"],
        &["stop", "a1"],
        &["start", "a1"],
        &["extend", "a1", "--ttl", "1h"],
        &["protect", "a1"],
        &["delete", "a1", "--yes"],
    ] {
        let out = as_user(bin, env, bob, args);
        assert_eq!(code(&out), Some(77), "bob {args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("not yours: owned by {alice}")),
            "{}",
            stderr(&out)
        );
    }
    let out = as_user(bin, env, bob, &["--json", "status", "a1"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(seen["connection"].get("password").is_none(), "{seen}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&password));
    let cat = setpriv(bob, "cat")
        .arg(env.root.join("secrets/a1/password"))
        .output()
        .unwrap();
    assert!(!cat.status.success(), "bob read alice's password file");
    assert!(!login("").status.success() && !login("wrong").status.success());
    // Host-wide work is for admins.
    let out = as_user(bin, env, bob, &["gc"]);
    assert_eq!(code(&out), Some(77), "{}", stderr(&out));
    // bob cannot take over alice's branch name, nor make one for her.
    let out = as_user(bin, env, bob, &["create", "a1"]);
    assert_eq!(code(&out), Some(77), "{}", stderr(&out));
    let out = as_user(bin, env, bob, &["create", "b1", "--owner", alice]);
    assert_eq!(code(&out), Some(77), "{}", stderr(&out));

    // Outside the group: a clear refusal.
    let out = as_user(bin, env, eve, &["list"]);
    assert_eq!(code(&out), Some(77), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("not in group {users_group}")),
        "{}",
        stderr(&out)
    );

    // What db-branch runs for a user runs as that user, never as root.
    env.run_ok(&["pool", "create", "p", "--size", "1"]);
    let out = as_user(bin, env, alice, &["pool", "run", "p", "--", "id", "-un"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), alice.as_str());
    env.run_ok(&["--yes", "pool", "delete", "p"]);

    // A caller that goes away mid-command leaves no half-made branch: the command runs to
    // its end in its own unit.
    let mut gone = setpriv(alice, bin)
        .args(["create", "a2"])
        .env("DB_BRANCH_CONFIG", &env.config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Gone as soon as the create has begun (its record exists, its server not yet up).
    let record = env.root.join("branches/a2/branch.json");
    let begun = std::time::Instant::now();
    while !record.exists() && begun.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    gone.kill().unwrap();
    gone.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let s = env.run(&["--json", "status", "a2"]);
        let v: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap_or_default();
        if v["state"] == "running" {
            assert_eq!(v["owner"], alice.as_str());
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a2 never finished: {}",
            stderr(&s)
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let doctor = env.json(&["doctor"]);
    assert!(
        doctor["findings"]
            .as_array()
            .expect("doctor --json has a findings list")
            .is_empty(),
        "{doctor}"
    );
    let out = as_user(bin, env, alice, &["delete", "a2", "--yes"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));

    // Root sees everything, owners included; alice deletes her branch.
    let all = env.json(&["list"]);
    assert_eq!(all[0]["owner"], alice.as_str(), "{all}");
    let out = as_user(bin, env, alice, &["delete", "a1", "--yes"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    assert_eq!(env.json(&["list"]), serde_json::json!([]));
    assert!(
        !env.root.join("secrets/a1").exists(),
        "secrets go with the branch"
    );
    // Into the trash, which keeps it alice's: bob may see it, not bring it back or end it.
    let out = as_user(bin, env, bob, &["--json", "trash"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let a1 = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "a1")
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(a1["owner"], alice.as_str(), "{listed}");
    assert_eq!(a1["deleted_by"], alice.as_str(), "{listed}");
    for args in [
        &["restore", "a1"][..],
        &["restore", "a1", "--as", "mine"],
        &["--yes", "trash", "purge", "a1"],
    ] {
        let out = as_user(bin, env, bob, args);
        assert_eq!(code(&out), Some(77), "bob {args:?}: {}", stderr(&out));
    }
    let out = as_user(
        bin,
        env,
        bob,
        &["--json", "--yes", "trash", "purge", "--all"],
    );
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let none: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        none["purged"],
        serde_json::json!([]),
        "only bob's own: none"
    );
    // alice gets it back as it was, password and all.
    let out = as_user(bin, env, alice, &["--json", "restore", "a1"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let out = as_user(bin, env, alice, &["env", "a1", "--format", "url"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&password),
        "the same password"
    );
    let out = as_user(bin, env, alice, &["delete", "a1", "--yes"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let out = as_user(bin, env, alice, &["--yes", "trash", "purge", "a1"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let left = env.json(&["trash"]);
    assert!(
        left.as_array().unwrap().iter().all(|e| e["name"] != "a1"),
        "{left}"
    );
    drop(shared);
}
