//! The trust boundary of db-branchd, tried as a hostile local user would, under the real
//! systemd and system bus of the namespace (scripts/test runs this module there): the bus
//! method is called directly — not through the `db-branch` client — with arguments the
//! client never sends, by a member of the users group and by someone in neither group. A
//! canary program (named as the server binary in a config the caller wrote) and a canary
//! ssh listener prove that nothing ran as root for them. Then what a member could do to
//! other members: copy their branches, release their pool slots, hold slots forever, act
//! on a branch between the check and the lock, read a password left under a name.

use super::shared_host::{code, ok, setpriv, stderr, SharedHost};
use db_branch::testkit::wait_for;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A client of io.dbbranch.Manager1 that is not db-branch: dbus-python (Debian's
/// python3-dbus), sending whatever arguments it is given, with its own stdin, stdout and
/// stderr, a status pipe and its working directory. Exit: the command's, or 200 with
/// `REFUSED name: message` on stderr when the bus call itself is refused.
const CLIENT: &str = r#"
import dbus, json, os, sys
args, config = json.loads(sys.argv[1]), sys.argv[2]
bus = dbus.SystemBus()
manager = dbus.Interface(bus.get_object("io.dbbranch.Manager1", "/io/dbbranch/Manager1"),
                         "io.dbbranch.Manager1")
r, w = os.pipe()
cwd = os.open(".", os.O_RDONLY)
try:
    manager.Run(dbus.Array(args, signature="s"), config, dbus.Dictionary({}, signature="ss"),
                dbus.types.UnixFd(0), dbus.types.UnixFd(1), dbus.types.UnixFd(2),
                dbus.types.UnixFd(w), dbus.types.UnixFd(cwd), timeout=600)
except dbus.exceptions.DBusException as e:
    print("REFUSED %s: %s" % (e.get_dbus_name(), e.get_dbus_message()), file=sys.stderr)
    sys.exit(200)
os.close(w)
status = b""
while True:
    chunk = os.read(r, 64)
    if not chunk:
        break
    status += chunk
sys.exit(int(status.decode().strip() or "1"))
"#;

/// Files a test plants for the callers: the client, the canary, configs. Readable by all.
struct Planted {
    dir: PathBuf,
}

impl Planted {
    fn new(tag: &str) -> Planted {
        let dir = PathBuf::from(format!("/var/lib/dbbt/planted-{tag}{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        chmod(&dir, 0o755);
        let client = dir.join("client.py");
        std::fs::write(&client, CLIENT).unwrap();
        chmod(&client, 0o644);
        Planted { dir }
    }

    fn client(&self) -> PathBuf {
        self.dir.join("client.py")
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn chown(p: &Path, user: &str) {
    ok(Command::new("chown").arg(format!("{user}:")).arg(p));
}

/// The bus method called directly by `user` with `args`, naming `config` (the service's
/// own unless a test says otherwise).
fn call(planted: &Planted, user: &str, config: &Path, args: &[&str]) -> Output {
    setpriv(user, "/usr/bin/python3")
        .arg(planted.client())
        .arg(serde_json::to_string(args).unwrap())
        .arg(config)
        .current_dir(&planted.dir)
        .output()
        .unwrap()
}

/// Refused by the bus call itself: db-branchd started nothing.
fn refused_at_the_bus(out: &Output) -> bool {
    code(out) == Some(200) && stderr(out).contains("REFUSED")
}

/// A TCP listener on loopback that remembers whether anyone connected.
fn canary_listener() -> (u16, Arc<AtomicBool>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let touched = Arc::new(AtomicBool::new(false));
    let flag = touched.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            if stream.is_ok() {
                flag.store(true, Ordering::SeqCst);
            }
        }
    });
    (port, touched)
}

#[test]
#[ignore = "needs root, systemd as PID 1 with a system bus and a server; run by scripts/test"]
fn smuggled_config_host_and_host_commands_run_nothing_as_root() {
    let shared = SharedHost::new("h", "");
    let planted = Planted::new("h");
    let service_config = shared.env.config.clone();

    // alice's own directory: her config, naming her canary as the server and her own group
    // as the admins.
    let mine = planted.dir.join("alice");
    std::fs::create_dir_all(&mine).unwrap();
    let marker = mine.join("canary-ran");
    let canary = mine.join("mysqld");
    std::fs::write(
        &canary,
        format!(
            "#!/bin/sh\necho \"uid $(id -u): $*\" >> {}\necho 'mysqld  Ver 9.7.0'\n",
            marker.display()
        ),
    )
    .unwrap();
    chmod(&canary, 0o755);
    let text = std::fs::read_to_string(&service_config).unwrap();
    let evil = mine.join("config.toml");
    let evil_text = text
        .replace(
            &format!("admins_group = \"{}\"", shared.admins_group),
            &format!("admins_group = \"{}\"", shared.alice),
        )
        .lines()
        .map(|l| {
            if l.starts_with("binary = ") {
                format!("binary = \"{}\"", canary.display())
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        evil_text.contains(&canary.display().to_string()),
        "{evil_text}"
    );
    std::fs::write(&evil, evil_text).unwrap();
    chown(&mine, &shared.alice);
    chown(&evil, &shared.alice);
    chown(&canary, &shared.alice);
    let (ssh_port, ssh_touched) = canary_listener();
    let host = format!("ssh://127.0.0.1:{ssh_port}");
    let evil_s = evil.display().to_string();
    let evil_eq = format!("--config={evil_s}");
    let canary_s = canary.display().to_string();
    // A follower's source that is the canary listener: nothing may connect to it.
    let follow_url = format!("mysql://u:p@127.0.0.1:{ssh_port}");

    let smuggled: Vec<Vec<&str>> = vec![
        vec!["--config", &evil_s, "list"],
        // Commands that ask the configured binary its version (the canary says so).
        vec!["--config", &evil_s, "create", "x"],
        vec!["--config", &evil_s, "doctor"],
        vec![&evil_eq, "status", "x"],
        vec!["list", "--config", &evil_s],
        vec!["--host", &host, "list"],
        vec!["--host", &host, "migrate-check", "--", "true"],
        vec!["doctor", "--repair"],
        vec!["doctor"],
        vec!["daemon"],
        // exec and shell run the caller's program: never in the service (it would be root).
        vec!["exec", "x", "--", &canary_s, "--version"],
        vec!["shell", "x", "--", "--version"],
        // Following is host-wide: a member neither starts, cuts, schedules nor ends it.
        vec!["baseline", "follow", &follow_url, "--no-mask"],
        vec![
            "baseline",
            "follow",
            &follow_url,
            "--no-mask",
            "--every",
            "1h",
        ],
        vec!["baseline", "cut"],
        vec!["baseline", "unfollow", "--yes"],
    ];
    for args in &smuggled {
        // A member: the service runs the worker, which refuses before anything (exit 77).
        let out = call(&planted, &shared.alice, &service_config, args);
        assert_eq!(
            code(&out),
            Some(77),
            "alice {args:?}: {} / {}",
            stderr(&out),
            String::from_utf8_lossy(&out.stdout)
        );
        // Someone in neither group: refused by the bus call, no unit started.
        let out = call(&planted, &shared.eve, &service_config, args);
        assert!(refused_at_the_bus(&out), "eve {args:?}: {}", stderr(&out));
    }
    // Naming the evil config as the call's own config is refused by the service too.
    let out = call(&planted, &shared.alice, &evil, &["list"]);
    assert!(refused_at_the_bus(&out), "{}", stderr(&out));
    // What the refusals say: the flag, and why.
    let out = call(
        &planted,
        &shared.alice,
        &service_config,
        &["--config", &evil_s, "list"],
    );
    assert!(
        stderr(&out).contains("--config is not accepted"),
        "{}",
        stderr(&out)
    );
    let out = call(&planted, &shared.eve, &service_config, &["list"]);
    assert!(
        stderr(&out).contains(&format!("not in group {}", shared.users_group)),
        "{}",
        stderr(&out)
    );

    // Nothing ran as root for them: not the canary (its --version probe included), not ssh.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        !marker.exists(),
        "the canary ran: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
    assert!(
        !ssh_touched.load(Ordering::SeqCst),
        "something connected to the canary ssh listener"
    );

    // The normal client keeps working for a member: its --config (the service's own) goes
    // as the call's config, not in the arguments.
    let out = setpriv(&shared.alice, &shared.bin)
        .args(["--config"])
        .arg(&service_config)
        .arg("list")
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    // And a plain bus call without smuggled flags is an ordinary command.
    let out = call(
        &planted,
        &shared.alice,
        &service_config,
        &["--json", "list"],
    );
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    assert!(!marker.exists());
}

/// The record of a branch owned by `owner`, as a create would leave it before its server
/// is up (enough for the commands that only read and write records).
fn plant_record(shared: &SharedHost, name: &str, owner: &str) {
    let mut r = db_branch::branch::BranchRecord::new(
        name.parse().unwrap(),
        db_branch::branch::Generation(1),
        db_branch::values::ByteSize::mib(16),
        chrono::Utc::now(),
    );
    r.owner = owner.to_string();
    r.owner_uid = db_branch::store::secrets::uid_of(owner);
    r.expires_at = Some(chrono::Utc::now() + chrono::Duration::days(3));
    let layout = db_branch::layout::Layout::new(&shared.env.root);
    db_branch::store::records::save(&layout, &r).unwrap();
}

#[test]
#[ignore = "needs root, systemd as PID 1 with a system bus and a server; run by scripts/test"]
fn members_cannot_reach_each_others_branches_slots_or_passwords() {
    let shared = SharedHost::new("m", "max_operations_per_user = 1\n");
    let (env, alice, bob) = (&shared.env, &shared.alice, &shared.bob);

    // create --from reads its source: another member's branch or checkpoint is refused,
    // and --clean does not stop it.
    let out = shared.as_user(alice, &["--json", "create", "src"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let out = shared.as_user(alice, &["checkpoint", "src", "c1"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    for from in ["src", "src@c1"] {
        for clean in [false, true] {
            let mut args = vec!["create", "copy", "--from", from];
            if clean {
                args.push("--clean");
            }
            let out = shared.as_user(bob, &args);
            assert_eq!(code(&out), Some(77), "bob {args:?}: {}", stderr(&out));
            assert!(
                stderr(&out).contains("src is not yours"),
                "{}",
                stderr(&out)
            );
        }
    }
    assert_eq!(env.json(&["status", "src"])["state"], "running");
    assert!(!env.names().contains(&"copy".to_string()));

    // A password file left under a name by someone else is never handed to the next owner.
    let secrets = env.root.join("secrets/left");
    std::fs::create_dir_all(&secrets).unwrap();
    let planted_pw = "PlantedByBobPlantedByBobPlanted1";
    std::fs::write(secrets.join("password"), format!("{planted_pw}\n")).unwrap();
    chown(&secrets.join("password"), bob);
    let out = shared.as_user(alice, &["--json", "create", "left"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let made: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_ne!(made["connection"]["password"], planted_pw, "{made}");
    let cat = setpriv(bob, "cat")
        .arg(secrets.join("password"))
        .output()
        .unwrap();
    assert!(
        !cat.status.success(),
        "bob still reads the new owner's password"
    );

    // A check before the branch's lock is not enough: bob's extend of a name nobody has
    // passes it, waits for the lock, and meanwhile alice's branch appears under the name.
    let layout = db_branch::layout::Layout::new(&env.root);
    let name: db_branch::branch::BranchName = "race".parse().unwrap();
    let held = db_branch::store::locks::lock(
        &layout.branch_lock(&name),
        "branch race",
        std::time::Duration::from_secs(5),
        &|_| {},
    )
    .unwrap();
    let mut extend = setpriv(bob, &shared.bin)
        .args(["extend", "race", "--ttl", "1m"])
        .env("DB_BRANCH_CONFIG", &env.config)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut err = extend.stderr.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("waiting for the branch race lock") {
        let n = err.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "bob's extend ended: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    plant_record(&shared, "race", alice);
    let expiry = || {
        db_branch::store::records::load(&layout, &name)
            .unwrap()
            .unwrap()
            .expires_at
    };
    let before = expiry();
    drop(held);
    let status = extend.wait().unwrap();
    err.read_to_end(&mut seen).unwrap();
    assert_eq!(
        status.code(),
        Some(77),
        "{}",
        String::from_utf8_lossy(&seen)
    );
    assert_eq!(expiry(), before, "bob's extend changed alice's branch");
    db_branch::store::records::remove_dir(&layout, &name).unwrap();

    // Pool slots: released by their claimant only; a claim through the service is held by
    // the claimant's own process and ends with it; --pid must be one of the caller's.
    env.run_ok(&["pool", "create", "p", "--size", "1"]);
    let claimed = setpriv(alice, "sh")
        .arg("-c")
        .arg(format!(
            "{} pool claim p >/dev/null && echo claimed && sleep 3",
            shared.bin.display()
        ))
        .env("DB_BRANCH_CONFIG", &env.config)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("alice's claim", || {
        env.json(&["pool", "status", "p"])["claimed"] == 1
    });
    let out = shared.as_user(bob, &["pool", "release", "p", "1"]);
    assert_eq!(code(&out), Some(77), "{}", stderr(&out));
    assert!(stderr(&out).contains("was claimed by"), "{}", stderr(&out));
    assert_eq!(env.json(&["pool", "status", "p"])["claimed"], 1);
    // Only one command of alice's at a time here (max_operations_per_user = 1): a second
    // while one runs is refused with exit 75. (`pool run` goes through the service; a
    // `pool claim` would go straight to the recycler's socket, which is no operation of
    // db-branchd's.)
    let mut waiting = setpriv(alice, &shared.bin)
        .args(["pool", "run", "p", "--wait", "20s", "--", "true"])
        .env("DB_BRANCH_CONFIG", &env.config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let out = shared.as_user(alice, &["list"]);
    assert_eq!(code(&out), Some(75), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("max_operations_per_user"),
        "{}",
        stderr(&out)
    );
    // The holder (alice's shell) exits: the slot comes back; the waiting claim gets it.
    let out = claimed.wait_with_output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("claimed"));
    let got = waiting.wait().unwrap();
    assert_eq!(
        got.code(),
        Some(0),
        "the slot never came back to alice's waiting claim"
    );
    let out = shared.as_user(alice, &["pool", "claim", "p", "--pid", "1"]);
    assert_eq!(code(&out), Some(77), "{}", stderr(&out));
    env.run_ok(&["--yes", "pool", "delete", "p"]);

    // The caller's working directory: a relative command runs there, as them, with their
    // own primary group.
    let home = PathBuf::from(format!("/var/lib/dbbt/home-{alice}"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("t.sh"), "#!/bin/sh\npwd\nid -g\n").unwrap();
    chmod(&home.join("t.sh"), 0o755);
    chown(&home, alice);
    chown(&home.join("t.sh"), alice);
    env.run_ok(&["pool", "create", "q", "--size", "1"]);
    let out = setpriv(alice, &shared.bin)
        .args(["pool", "run", "q", "--", "./t.sh"])
        .env("DB_BRANCH_CONFIG", &env.config)
        .current_dir(&home)
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    let primary = nix::unistd::User::from_name(alice)
        .unwrap()
        .unwrap()
        .gid
        .as_raw();
    assert_eq!(
        printed.lines().collect::<Vec<_>>(),
        [home.display().to_string(), primary.to_string()],
        "{printed}"
    );
    env.run_ok(&["--yes", "pool", "delete", "q"]);
    let _ = std::fs::remove_dir_all(&home);
    for b in ["src", "left"] {
        let out = shared.as_user(alice, &["delete", b, "--yes"]);
        assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    }
}
