//! Pools on real servers (root tiers): parallel claimants never share a slot and always
//! get a pristine one, released and abandoned slots come back ready through the recycler,
//! `pool run` releases whatever its command did, and the memory guard's budget holds.

use db_branch::testkit::{checksum, sql, TestEnv};
use serde_json::Value;
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

/// The guard test measures free memory: the others of this module must not start servers
/// meanwhile (they may run beside each other). scripts/test runs it after every other test.
static MEMORY: RwLock<()> = RwLock::new(());

fn claim(env: &TestEnv, pool: &str) -> (usize, u16) {
    let v = env.json(&["pool", "claim", pool, "--wait", "300s"]);
    let slot = v["DB_BRANCH_POOL_SLOT"].as_str().unwrap().parse().unwrap();
    let port = v["MYSQL_PORT"].as_str().unwrap().parse().unwrap();
    (slot, port)
}

fn wait_until_ready(env: &TestEnv, pool: &str, ready: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = env.json(&["pool", "status", pool]);
        if s["ready"] == ready {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "pool {pool} never got {ready} ready: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A pool of `size` slots, ready; the checksum every slot of it must show when pristine.
fn pristine_pool(env: &TestEnv, pool: &str, size: u64) -> String {
    env.json(&["pool", "create", pool, "--size", &size.to_string()]);
    let ready = wait_until_ready(env, pool, size);
    checksum(ready["slots"][0]["port"].as_u64().unwrap() as u16)
}

/// Waits until all `size` slots are ready again and checks each is pristine; the status.
fn assert_back_pristine(env: &TestEnv, pool: &str, size: u64, pristine: &str) -> Value {
    let after = wait_until_ready(env, pool, size);
    for slot in after["slots"].as_array().unwrap() {
        assert_eq!(
            checksum(slot["port"].as_u64().unwrap() as u16),
            pristine,
            "slot {slot} came back dirty"
        );
    }
    after
}

/// A test runner's run passed, and its report says `passed` (e.g. "12 passed").
fn assert_runner_passed(runner: &str, out: &std::process::Output, passed: &str) {
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{runner} failed:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains(passed), "{report}");
}

#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn eight_claimants_share_four_slots_and_always_get_a_pristine_one() {
    let _m = MEMORY.read().unwrap_or_else(|e| e.into_inner());
    let env = TestEnv::with_baseline();
    let created = env.json(&["pool", "create", "t", "--size", "4"]);
    assert_eq!(created["ready"], 4, "{created}");
    let pristine = checksum(
        wait_until_ready(&env, "t", 4)["slots"][0]["port"]
            .as_u64()
            .unwrap() as u16,
    );
    // 50 each on MariaDB 10.11 under the built-in supervisor, as the issue asks; MySQL's and
    // MariaDB 11.8's servers restart several times slower (docs/benchmarks.md), and under
    // systemd the race is the same claim protocol with the recycler's restarts going through
    // the manager (218 s of that tier at 50), so those run it with fewer rounds to stay
    // inside CI's time.
    let full_race = db_branch::testkit::server().name == "mariadb-10.11"
        && db_branch::testkit::service() == "process";
    let claims_each: usize = if full_race { 50 } else { 12 };
    // (slot, from, to): when each claimant held which slot.
    let held = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for worker in 0..8 {
            let (env, held, pristine) = (&env, &held, &pristine);
            s.spawn(move || {
                for i in 0..claims_each {
                    let (slot, port) = claim(env, "t");
                    let from = Instant::now();
                    assert_eq!(&checksum(port), pristine, "slot {slot} was not pristine");
                    sql(
                        port,
                        &format!(
                            "INSERT INTO shop.customers VALUES ({}, 'w{worker}-{i}')",
                            1_000_000 + worker * 1000 + i
                        ),
                    );
                    let to = Instant::now();
                    held.lock().unwrap().push((slot, from, to));
                    env.run_ok(&["pool", "release", "t", &slot.to_string()]);
                }
            });
        }
    });
    let mut held = held.into_inner().unwrap();
    assert_eq!(held.len(), 8 * claims_each);
    held.sort_by_key(|(slot, from, _)| (*slot, *from));
    for pair in held.windows(2) {
        let ((a, _, a_to), (b, b_from, _)) = (pair[0], pair[1]);
        if a == b {
            assert!(a_to <= b_from, "slot {a} was held by two claimants at once");
        }
    }
    // Every slot comes back ready, and pristine.
    let s = assert_back_pristine(&env, "t", 4, &pristine);
    assert!(s["recycler"].as_bool().unwrap(), "{s}");
    env.run_ok(&["--yes", "pool", "delete", "t"]);
    assert_eq!(env.json(&["list"]), serde_json::json!([]));
}

#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn an_abandoned_claim_is_recycled_and_pool_run_releases_its_slot() {
    let _m = MEMORY.read().unwrap_or_else(|e| e.into_inner());
    let env = TestEnv::with_baseline();
    env.json(&["pool", "create", "one", "--size", "1"]);
    let pristine = checksum(
        wait_until_ready(&env, "one", 1)["slots"][0]["port"]
            .as_u64()
            .unwrap() as u16,
    );
    // A claimant that dirties its slot and dies without releasing it.
    let out = env.root.join("claim.env");
    // Its lease names the shell, which then becomes `sleep` (same process).
    let mut claimant = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "\"$0\" pool claim one --format dotenv > {} && exec sleep 600",
            out.display()
        ))
        .arg(db_branch::testkit::bin())
        .env("DB_BRANCH_CONFIG", &env.config)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let port: u16 = loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        if let Some(p) = text.lines().find_map(|l| l.strip_prefix("MYSQL_PORT=")) {
            break p.parse().unwrap();
        }
        assert!(Instant::now() < deadline, "the claim did not happen");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(env.json(&["pool", "status", "one"])["claimed"], 1);
    sql(port, "DELETE FROM shop.orders WHERE id <= 100");
    claimant.kill().unwrap();
    claimant.wait().unwrap();
    let s = wait_until_ready(&env, "one", 1);
    assert_eq!(
        checksum(s["slots"][0]["port"].as_u64().unwrap() as u16),
        pristine
    );

    // pool run: the command sees the slot, its status is ours, the slot comes back.
    let out = env
        .command(&[
            "pool",
            "run",
            "one",
            "--",
            "sh",
            "-c",
            "test -n \"$MYSQL_PORT\" && test -n \"$DB_BRANCH_POOL_SLOT\" && exit 3",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until_ready(&env, "one", 1);
    // Nothing ready and no waiting: refused with 75, naming the way out.
    let holder = env.json(&["pool", "claim", "one"]);
    let err = env.run_err(&["pool", "claim", "one"], 75);
    assert!(
        err.contains("no ready slot") && err.contains("--wait"),
        "{err}"
    );
    env.run_ok(&[
        "pool",
        "release",
        "one",
        holder["DB_BRANCH_POOL_SLOT"].as_str().unwrap(),
    ]);
    // Deleting the pool deletes its slots and stops its recycler.
    env.run_ok(&["--yes", "pool", "delete", "one"]);
    assert_eq!(env.json(&["list"]), serde_json::json!([]));
    assert_eq!(env.json(&["pool", "list"]), serde_json::json!([]));
}

#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn the_memory_guard_counts_every_slot() {
    let _m = MEMORY.write().unwrap_or_else(|e| e.into_inner());
    // Headroom that leaves room for two and a half slots on this host right now.
    let probe = TestEnv::with_baseline();
    let doctor = probe.json(&["doctor"]);
    let memory = &doctor["memory"];
    let available = memory["available_bytes"]
        .as_u64()
        .unwrap()
        .min(memory["cgroup_room_bytes"].as_u64().unwrap_or(u64::MAX));
    let per_slot = doctor["per_branch_bytes"].as_u64().unwrap();
    drop(probe);
    let headroom = available.saturating_sub(per_slot * 5 / 2) >> 20;
    let env = TestEnv::new("", &format!("[memory]\nheadroom = \"{headroom}M\"\n")).seeded();
    let report = env.json(&["pool", "create", "g", "--size", "5"]);
    let ready = report["ready"].as_u64().unwrap();
    let refused: Vec<u64> = report["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!((1..5).contains(&ready), "{report}");
    // Slots start in parallel: which of them the guard turns away depends on which asked
    // last, not on its number. Every slot is either ready or refused, never both.
    let mut made: Vec<u64> = report["slots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["slot"].as_u64().unwrap())
        .chain(refused.iter().copied())
        .collect();
    made.sort_unstable();
    assert_eq!(made, (1..=5).collect::<Vec<_>>(), "{report}");
    assert_eq!(refused.len() as u64, 5 - ready, "{report}");
    assert!(
        report["refusal"].as_str().unwrap().contains("memory"),
        "{report}"
    );
    env.run_ok(&["--yes", "pool", "delete", "g"]);
}

/// The pytest-xdist recipe of docs/pools.md, run as written: its conftest.py is read from
/// the document, four xdist workers each claim a slot for their session, every test sees
/// only its own worker's rows on a slot that was pristine when claimed, and the released
/// slots come back pristine.
#[test]
#[ignore = "needs root, btrfs, a server and python3-pytest-xdist; run by scripts/test"]
fn the_pytest_xdist_recipe_gives_each_worker_its_own_pristine_slot() {
    let _m = MEMORY.read().unwrap_or_else(|e| e.into_inner());
    let env = TestEnv::with_baseline();
    let pristine = pristine_pool(&env, "ci", 4);

    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/pools.md")).unwrap();
    let recipe = doc
        .split_once("### pytest with pytest-xdist")
        .and_then(|(_, rest)| rest.split_once("```python\n"))
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(code, _)| code)
        .expect("docs/pools.md has the pytest-xdist conftest.py");
    let project = env.root.join("pytest-project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("conftest.py"), recipe).unwrap();
    std::fs::write(
        project.join("test_isolation.py"),
        r#"import os, urllib.parse, pymysql, pytest

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "none")
done = []  # the tests this worker ran before, on its one slot

@pytest.mark.parametrize("n", range(24))
def test_a_worker_sees_only_its_own_rows(database_url, n):
    u = urllib.parse.urlparse(database_url)
    db = pymysql.connect(host=u.hostname, port=u.port, user=u.username,
                         password=u.password or "", autocommit=True)
    with db, db.cursor() as c:
        c.execute("SELECT email FROM shop.customers WHERE email LIKE 'xdist-%%'")
        assert sorted(r[0] for r in c.fetchall()) == sorted(f"xdist-{WORKER}-{i}" for i in done)
        c.execute("INSERT INTO shop.customers VALUES (%s, %s)", (2_000_000 + n, f"xdist-{WORKER}-{n}"))
    done.append(n)
"#,
    )
    .unwrap();
    // `db-branch` on PATH, as the recipe calls it.
    let out = env.pytest(&project, &["-n", "4"]);
    assert_runner_passed("pytest", &out, "24 passed");
    // Every worker released its slot; the recycler made them pristine again.
    assert_back_pristine(&env, "ci", 4, &pristine);
    env.run_ok(&["--yes", "pool", "delete", "ci"]);
}

/// The Python helper (clients/python, installed by pip into a venv) under pytest-xdist:
/// four workers each hold one slot for their session over the recycler's socket, the
/// function-scoped reset fixture hands every test a pristine slot, no slot is held by two
/// workers, a killed claimant's slot comes back, and released slots come back pristine.
#[test]
#[ignore = "needs root, btrfs, a server, python3-venv and python3-pytest-xdist; run by scripts/test"]
fn the_python_helper_gives_xdist_workers_pristine_slots_over_the_socket() {
    let _m = MEMORY.read().unwrap_or_else(|e| e.into_inner());
    let env = TestEnv::with_baseline();
    let pristine = pristine_pool(&env, "ci", 4);
    let python = env.python_with_helpers();

    let project = env.root.join("helper-project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("pytest.ini"),
        "[pytest]\ndb_branch_pool = ci\n",
    )
    .unwrap();
    std::fs::write(
        project.join("test_pristine.py"),
        r#"import os, time, urllib.parse, pymysql, pytest

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "none")

def connect(url):
    u = urllib.parse.urlparse(url)
    return pymysql.connect(host=u.hostname, port=u.port, user=u.username,
                           password=urllib.parse.unquote(u.password or ""), autocommit=True)

def checksum(c):
    c.execute("CHECKSUM TABLE shop.customers, shop.orders")
    return "\n".join(f"{t}\t{s}" for t, s in c.fetchall())

@pytest.mark.parametrize("n", range(12))
def test_every_test_gets_a_pristine_slot(db_branch_reset, n):
    with connect(db_branch_reset.url) as db, db.cursor() as c:
        assert checksum(c) == os.environ["PRISTINE"]
        c.execute("INSERT INTO shop.customers VALUES (%s, %s)", (3_000_000 + n, f"{WORKER}-{n}"))
    # Who held which slot when, for the test to check nobody shared one.
    with open(os.path.join(os.environ["HELD_DIR"], f"{WORKER}-{n}"), "w") as f:
        f.write(f"{db_branch_reset.number} {time.monotonic()} {WORKER}")
"#,
    )
    .unwrap();
    let held_dir = env.root.join("held");
    std::fs::create_dir_all(&held_dir).unwrap();
    let out = env
        .with_db_branch_on_path(&python)
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "4"])
        .current_dir(&project)
        .env("PRISTINE", &pristine)
        .env("HELD_DIR", &held_dir)
        .output()
        .unwrap();
    assert_runner_passed("pytest", &out, "12 passed");
    // A slot belongs to one worker: no two workers wrote the same slot number.
    let mut owner = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(&held_dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let fields: Vec<&str> = text.split(' ').collect();
        let (slot, worker) = (fields[0].to_string(), fields[2].to_string());
        let first = owner.entry(slot.clone()).or_insert_with(|| worker.clone());
        assert_eq!(*first, worker, "slot {slot} served two workers");
    }

    // A claimant killed while it holds a slot: its connection closes, the slot comes back.
    let mut claimant = env
        .with_db_branch_on_path(&python)
        .args([
            "-c",
            "import time, db_branch_pool as p; s = p.claim('ci', wait=120); \
             print(s.number, flush=True); time.sleep(600)",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(claimant.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    let slot: usize = line.trim().parse().unwrap_or_else(|_| panic!("{line:?}"));
    // The recycler writes the lease just after its reply: give it that moment.
    let mut status = Value::Null;
    db_branch::testkit::wait_for("the claimant's lease", || {
        status = env.json(&["pool", "status", "ci"]);
        !status["slots"][slot - 1]["lease"].is_null()
    });
    let row = &status["slots"][slot - 1];
    assert_eq!(row["state"], "claimed", "{status}");
    assert_eq!(row["lease"], "connection", "{status}");
    assert_eq!(row["holder"], claimant.id(), "{status}");
    claimant.kill().unwrap();
    claimant.wait().unwrap();
    assert_back_pristine(&env, "ci", 4, &pristine);
    env.run_ok(&["--yes", "pool", "delete", "ci"]);
}

/// The Node helper (clients/node) under node's own test runner: each test file claims a
/// slot over the socket, sees it pristine, dirties it, resets it in place and sees it
/// pristine again, then releases it.
#[test]
#[ignore = "needs root, btrfs, a server and nodejs; run by scripts/test"]
fn the_node_helper_claims_resets_and_releases_over_the_socket() {
    let _m = MEMORY.read().unwrap_or_else(|e| e.into_inner());
    let env = TestEnv::with_baseline();
    let pristine = pristine_pool(&env, "js", 2);
    let project = env.root.join("node-project");
    std::fs::create_dir_all(&project).unwrap();
    for n in 0..4 {
        std::fs::write(
            project.join(format!("slot{n}.test.js")),
            format!(
                r#"const test = require('node:test');
const assert = require('node:assert');
const {{ execFileSync }} = require('node:child_process');
const {{ claim }} = require({helper:?});

// The same CHECKSUM TABLE through the server's own client as the Rust side reads.
function checksum(env) {{
  return execFileSync(process.env.SQL_CLIENT, ['--no-defaults', '-h' + env.MYSQL_HOST,
    '-P' + env.MYSQL_TCP_PORT, '-u' + env.MYSQL_USER, '-N', '-B', '-e',
    'CHECKSUM TABLE shop.customers, shop.orders'],
    {{ env: {{ ...process.env, MYSQL_PWD: env.MYSQL_PWD }} }}).toString().trim();
}}
function sql(env, q) {{
  execFileSync(process.env.SQL_CLIENT, ['--no-defaults', '-h' + env.MYSQL_HOST,
    '-P' + env.MYSQL_TCP_PORT, '-u' + env.MYSQL_USER, '-e', q],
    {{ env: {{ ...process.env, MYSQL_PWD: env.MYSQL_PWD }} }});
}}

test('slot {n}: pristine, dirtied, reset in place, pristine again', async () => {{
  const slot = await claim({{ pool: 'js', waitMs: 120000 }});
  try {{
    assert.strictEqual(checksum(slot.env), process.env.PRISTINE);
    sql(slot.env, "INSERT INTO shop.customers VALUES ({id}, 'node-{n}')");
    assert.notStrictEqual(checksum(slot.env), process.env.PRISTINE);
    const url = slot.url;
    await slot.reset();
    assert.strictEqual(slot.url, url, 'a reset slot keeps its URL');
    assert.strictEqual(checksum(slot.env), process.env.PRISTINE);
  }} finally {{
    await slot.release();
  }}
}});
"#,
                helper = concat!(env!("CARGO_MANIFEST_DIR"), "/clients/node"),
                id = 4_000_000 + n,
            ),
        )
        .unwrap();
    }
    let out = env
        .with_db_branch_on_path(std::path::Path::new("node"))
        .arg("--test")
        .current_dir(&project)
        .env("PRISTINE", &pristine)
        .env("SQL_CLIENT", db_branch::testkit::server().client)
        .output()
        .expect("node (scripts/install-deps installs nodejs)");
    assert_runner_passed("node --test", &out, "# pass 4");
    assert_back_pristine(&env, "js", 2, &pristine);
    env.run_ok(&["--yes", "pool", "delete", "js"]);
}

/// SQL as the account a claim's variables name (its own user, password and database);
/// the client's output, or its error.
fn sql_as(slot: &Value, query: &str) -> Result<String, String> {
    let out = std::process::Command::new(db_branch::testkit::server().client)
        .args(["--no-defaults", "-h127.0.0.1", "-N", "-B"])
        .arg(format!("-u{}", slot["MYSQL_USER"].as_str().unwrap()))
        .arg(format!("-p{}", slot["MYSQL_PWD"].as_str().unwrap()))
        .arg(format!("-P{}", slot["MYSQL_PORT"].as_str().unwrap()))
        .arg(format!("-D{}", slot["DB_DATABASE"].as_str().unwrap()))
        .args(["-e", query])
        .output()
        .unwrap();
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The checksums of a dense slot's tables, without their database's name.
fn dense_checksum(slot: &Value) -> String {
    let text = sql_as(slot, "CHECKSUM TABLE customers, orders").unwrap();
    text.lines()
        .map(|l| l.split('\t').nth(1).unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Dense slots: three slots in two servers, each a database of its own with an account
/// that reaches only it; a released slot is remade alone while its neighbour keeps its
/// rows, and comes back pristine (schema too); a generation with an event is refused; a
/// template with a big table and a small one of awkward columns is copied exactly, made
/// and after a reset.
#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn dense_slots_share_servers_each_reaching_only_its_own_database() {
    let _m = MEMORY.read().unwrap_or_else(|e| e.into_inner());
    let env = TestEnv::with_baseline();
    let made = env.json(&[
        "pool",
        "create",
        "d",
        "--size",
        "3",
        "--dense",
        "--per-server",
        "2",
    ]);
    assert_eq!(made["ready"], 3, "{made}");
    assert_eq!(made["per_server"], 2, "{made}");
    let servers = made["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 2, "{made}");
    assert_eq!(servers[0]["slots"], serde_json::json!([1, 2]), "{made}");
    // The template's checksums, read as root on the first server.
    let port = servers[0]["port"].as_u64().unwrap() as u16;
    let pristine: String = checksum(port)
        .lines()
        .map(|l| l.split('\t').nth(1).unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join(" ");

    let a = env.json(&["pool", "claim", "d"]);
    let b = env.json(&["pool", "claim", "d"]);
    assert_eq!(a["DB_BRANCH_POOL_SLOT"], "1");
    assert_eq!(b["DB_BRANCH_POOL_SLOT"], "2");
    assert_eq!(
        a["MYSQL_PORT"], b["MYSQL_PORT"],
        "slots 1 and 2 share a server"
    );
    assert_eq!(a["DB_DATABASE"], "shop_1");
    assert!(
        a["DATABASE_URL"].as_str().unwrap().ends_with("/shop_1"),
        "{a}"
    );
    assert_ne!(a["MYSQL_PWD"], b["MYSQL_PWD"]);
    assert_eq!(dense_checksum(&a), pristine);
    assert_eq!(dense_checksum(&b), pristine);
    // Only its own database: not the neighbour's, not the template, no server-wide rights.
    for query in [
        "SELECT COUNT(*) FROM shop_2.customers",
        "SELECT COUNT(*) FROM shop.customers",
        "CREATE DATABASE shopx1",
        "SELECT COUNT(*) FROM mysql.user",
    ] {
        let e = sql_as(&a, query).expect_err(query);
        assert!(e.contains("denied"), "{query}: {e}");
    }
    let seen = sql_as(&a, "SHOW DATABASES").unwrap();
    assert!(
        !seen.lines().any(|d| d == "shop_2" || d == "shop"),
        "{seen}"
    );

    // Both write; slot 1 also changes its schema; slot 1 goes back.
    sql_as(
        &a,
        "INSERT INTO customers VALUES (900001, 'a@x'); ALTER TABLE orders ADD COLUMN note INT",
    )
    .unwrap();
    sql_as(&b, "INSERT INTO customers VALUES (900002, 'b@x')").unwrap();
    env.run_ok(&["pool", "release", "d", "1"]);
    wait_until_ready(&env, "d", 2);
    // The neighbour kept serving and kept its row; slot 1 is pristine, schema and all.
    assert_eq!(
        sql_as(&b, "SELECT email FROM customers WHERE id = 900002").unwrap(),
        "b@x"
    );
    let again = env.json(&["pool", "claim", "d"]);
    assert_eq!(again["DB_BRANCH_POOL_SLOT"], "1");
    assert_eq!(
        again["MYSQL_PWD"], a["MYSQL_PWD"],
        "a slot's password stays"
    );
    assert_eq!(dense_checksum(&again), pristine);
    assert_eq!(
        sql_as(&again, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'shop_1' AND TABLE_NAME = 'orders'").unwrap(),
        "3"
    );
    env.run_ok(&["--yes", "pool", "delete", "d"]);
    assert!(env.names().is_empty(), "{:?}", env.names());

    // A generation whose database has an event cannot be copied exactly: refused, exit 2.
    env.baseline_from_sql(
        "event.sql",
        "CREATE DATABASE app; CREATE TABLE app.t (id INT PRIMARY KEY) ENGINE=InnoDB;\n\
         CREATE EVENT app.tick ON SCHEDULE EVERY 1 HOUR DO DELETE FROM app.t;\n",
    );
    let out = env.run(&["pool", "create", "e", "--size", "2", "--dense"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("events"), "{err}");
    assert!(env.names().is_empty(), "{:?}", env.names());

    // Small tables are copied row by row, big ones imported (server::dense::plan): both in
    // one template, with what a row copy could get wrong — an AUTO_INCREMENT key of 0, a
    // counter above the largest key, generated and invisible columns. `big` holds ~2 MB,
    // past LOGICAL_COPY_BYTES, so it goes the import's way.
    env.baseline_from_sql(
        "shapes.sql",
        &format!(
            "SET SESSION sql_mode = 'NO_AUTO_VALUE_ON_ZERO';\n\
             CREATE DATABASE app;\n\
             CREATE TABLE app.edge (id INT AUTO_INCREMENT PRIMARY KEY, a INT, \
               twice INT AS (a * 2) STORED, next INT AS (a + 1) VIRTUAL, hidden INT INVISIBLE, \
               KEY (twice)) ENGINE=InnoDB;\n\
             INSERT INTO app.edge (id, a, hidden) VALUES (0, 1, 10), (5, 2, 20);\n\
             ALTER TABLE app.edge AUTO_INCREMENT = 1000;\n\
             CREATE TABLE app.big (id INT PRIMARY KEY, body VARCHAR(3000)) ENGINE=InnoDB;\n\
             INSERT INTO app.big SELECT seq, REPEAT(CHAR(65 + seq % 26), 2000) FROM {};\n",
            db_branch::testkit::seq(1000)
        ),
    );
    let made = env.json(&["pool", "create", "f", "--size", "1", "--dense"]);
    assert_eq!(made["ready"], 1, "{made}");
    let port = made["servers"][0]["port"].as_u64().unwrap() as u16;
    let sums = |text: String| -> String {
        text.lines()
            .map(|l| l.split('\t').nth(1).unwrap_or_default().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let template = sums(sql(port, "CHECKSUM TABLE app.big, app.edge"));
    let rows = "0\t1\t2\t2\t10\n5\t2\t4\t3\t20";
    for round in ["made", "reset"] {
        let s = env.json(&["pool", "claim", "f"]);
        assert_eq!(s["DB_DATABASE"], "app_1", "{s}");
        assert_eq!(
            sums(sql_as(&s, "CHECKSUM TABLE big, edge").unwrap()),
            template,
            "{round}"
        );
        assert_eq!(
            sql_as(
                &s,
                "SELECT id, a, twice, next, hidden FROM edge ORDER BY id"
            )
            .unwrap(),
            rows,
            "{round}"
        );
        assert_eq!(
            sql_as(
                &s,
                "INSERT INTO edge (a) VALUES (3); SELECT MAX(id) FROM edge"
            )
            .unwrap(),
            "1000",
            "{round}: the counter came with the copy"
        );
        sql_as(&s, "DELETE FROM big WHERE id < 500").unwrap();
        env.run_ok(&["pool", "release", "f", "1"]);
        wait_until_ready(&env, "f", 1);
    }
    env.run_ok(&["--yes", "pool", "delete", "f"]);
}

/// InnoDB's id of each table of `database` (a table rebuilt, moved in from a spare or made
/// again gets a new one), as root on `port`.
fn table_ids(port: u16, database: &str) -> String {
    let view = if db_branch::testkit::server().mysql {
        "INNODB_TABLES"
    } else {
        "INNODB_SYS_TABLES"
    };
    sql(
        port,
        &format!(
            "SELECT NAME, TABLE_ID FROM information_schema.{view} \
             WHERE NAME LIKE '{database}/%' ORDER BY NAME"
        ),
    )
}

/// A dense slot of small tables is reset by putting its rows back (server::dense::
/// reset_rows): the same tables (InnoDB ids unchanged), the template's rows and counters,
/// foreign keys among them; the neighbour untouched. A schema change, a new table or a view
/// is not put back by rows: such a slot is made again, pristine all the same.
#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn a_dense_slot_of_small_tables_is_reset_by_its_rows() {
    let _m = MEMORY.read().unwrap_or_else(|e| e.into_inner());
    let env = TestEnv::with_baseline();
    env.baseline_from_sql(
        "small.sql",
        "CREATE DATABASE app;\n\
         CREATE TABLE app.parent (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20)) ENGINE=InnoDB;\n\
         CREATE TABLE app.child (id INT AUTO_INCREMENT PRIMARY KEY, parent_id INT NOT NULL, \
           FOREIGN KEY (parent_id) REFERENCES app.parent (id) ON DELETE CASCADE) ENGINE=InnoDB;\n\
         CREATE TABLE app.plain (k VARCHAR(10) PRIMARY KEY, v INT) ENGINE=InnoDB;\n\
         INSERT INTO app.parent (name) VALUES ('a'), ('b'), ('c');\n\
         INSERT INTO app.child (parent_id) VALUES (1), (1), (2);\n\
         INSERT INTO app.plain VALUES ('x', 1);\n",
    );
    let made = env.json(&[
        "pool",
        "create",
        "r",
        "--size",
        "2",
        "--dense",
        "--per-server",
        "2",
    ]);
    assert_eq!(made["ready"], 2, "{made}");
    let port = made["servers"][0]["port"].as_u64().unwrap() as u16;
    let sums = |slot: &Value| {
        sql_as(slot, "CHECKSUM TABLE child, parent, plain")
            .unwrap()
            .lines()
            .map(|l| l.split('\t').nth(1).unwrap_or_default().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let a = env.json(&["pool", "claim", "r"]);
    let b = env.json(&["pool", "claim", "r"]);
    assert_eq!(a["DB_DATABASE"], "app_1", "{a}");
    let pristine = sums(&a);
    let ids = table_ids(port, "app_1");
    assert_eq!(ids.lines().count(), 3, "{ids}");

    // Rows changed every way, a counter moved; the neighbour writes too.
    sql_as(
        &a,
        "UPDATE parent SET name = 'z' WHERE id = 2; DELETE FROM parent WHERE id = 1; \
         INSERT INTO parent (name) VALUES ('d'), ('e'); INSERT INTO plain VALUES ('y', 2)",
    )
    .unwrap();
    sql_as(&b, "INSERT INTO plain VALUES ('b', 9)").unwrap();
    assert_ne!(sums(&a), pristine);
    env.run_ok(&["pool", "release", "r", "1"]);
    wait_until_ready(&env, "r", 1);
    let again = env.json(&["pool", "claim", "r"]);
    assert_eq!(again["DB_BRANCH_POOL_SLOT"], "1");
    assert_eq!(sums(&again), pristine);
    assert_eq!(
        table_ids(port, "app_1"),
        ids,
        "the same tables: rows put back"
    );
    assert_eq!(
        sql_as(
            &again,
            "INSERT INTO parent (name) VALUES ('n'); SELECT LAST_INSERT_ID()"
        )
        .unwrap(),
        "4",
        "the template's counter, not the test's"
    );
    assert_eq!(
        sql_as(&again, "SELECT COUNT(*) FROM child WHERE parent_id = 1").unwrap(),
        "2",
        "the cascade the test's DELETE ran is undone"
    );
    assert_eq!(
        sql_as(&b, "SELECT v FROM plain WHERE k = 'b'").unwrap(),
        "9",
        "the neighbour kept its row"
    );

    // What rows cannot put back: the slot is made again.
    for change in [
        "ALTER TABLE plain ADD COLUMN w INT",
        "CREATE TABLE extra (i INT PRIMARY KEY) ENGINE=InnoDB",
        "CREATE VIEW names AS SELECT name FROM parent",
    ] {
        sql_as(&again, change).unwrap();
        env.run_ok(&["pool", "release", "r", "1"]);
        wait_until_ready(&env, "r", 1);
        let s = env.json(&["pool", "claim", "r"]);
        assert_eq!(s["DB_BRANCH_POOL_SLOT"], "1");
        assert_eq!(sums(&s), pristine, "after {change}");
        assert_eq!(
            sql_as(
                &s,
                "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'app_1'"
            )
            .unwrap(),
            "3",
            "after {change}"
        );
        assert_eq!(
            sql_as(&s, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app_1' AND TABLE_NAME = 'plain'").unwrap(),
            "2",
            "after {change}"
        );
    }
    env.run_ok(&["--yes", "pool", "delete", "r"]);
    assert!(env.names().is_empty(), "{:?}", env.names());
}
