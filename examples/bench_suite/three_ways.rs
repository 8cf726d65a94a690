//! One parallel pytest suite (pytest-xdist, 2 workers) run three ways against the same
//! seed schema: one shared database that each test cleans up after, a branch created and
//! deleted per test file, and a pool slot claimed and released per test file. Wall time and
//! failures of each.

use db_branch::testkit::TestEnv;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Test files in the suite (4 tests each).
const FILES: usize = 16;

/// One way's outcome: (way, wall seconds, passed, failed).
pub type Outcome = (&'static str, f64, u32, u32);

/// The tests: what an application's tests do to a database — write, then check what they
/// wrote, some of it through counts that assume nobody else writes meanwhile.
const TESTS: &str = r#"import os, time, pytest

FILE = int(os.path.basename(__file__).split("_")[-1].split(".")[0])
BASE = 3_000_000 + FILE * 1000

def count(c, sql, *args):
    c.execute(sql, args)
    return c.fetchone()[0]

def test_signup_adds_exactly_one_customer(db):
    c = db.cursor()
    before = count(c, "SELECT COUNT(*) FROM shop.customers")
    c.execute("INSERT INTO shop.customers VALUES (%s, %s)", (BASE + 1, f"new{FILE}@example.com"))
    time.sleep(0.05)  # the request's other work
    assert count(c, "SELECT COUNT(*) FROM shop.customers") == before + 1

def test_an_order_adds_to_the_customers_total(db):
    c = db.cursor()
    c.execute("INSERT INTO shop.customers VALUES (%s, %s)", (BASE + 2, f"buyer{FILE}@example.com"))
    for i in range(20):
        c.execute("INSERT INTO shop.orders VALUES (%s, %s, %s)", (BASE + 10 + i, BASE + 2, 5))
    assert count(c, "SELECT SUM(total) FROM shop.orders WHERE customer_id = %s", BASE + 2) == 100

def test_the_report_counts_every_order(db):
    c = db.cursor()
    time.sleep(0.05)
    assert count(c, "SELECT COUNT(*) FROM shop.orders WHERE id <= 20000") == 20000

def test_deleting_a_customer_deletes_their_orders(db):
    c = db.cursor()
    victim = 1 + FILE * 7
    before = count(c, "SELECT COUNT(*) FROM shop.customers")
    c.execute("DELETE FROM shop.orders WHERE customer_id = %s", (victim,))
    c.execute("DELETE FROM shop.customers WHERE id = %s", (victim,))
    assert count(c, "SELECT COUNT(*) FROM shop.orders WHERE customer_id = %s", victim) == 0
    assert count(c, "SELECT COUNT(*) FROM shop.customers") == before - 1
"#;

/// The `db` fixture of each way: a connection for the module, and what each way does
/// around it.
const COMMON: &str = r#"import json, subprocess, urllib.parse, pymysql, pytest

def connect(url):
    u = urllib.parse.urlparse(url)
    return pymysql.connect(host=u.hostname, port=u.port, user=u.username,
                           password=u.password or "", autocommit=True)

def db_branch(*args):
    return subprocess.run(["db-branch", *args], check=True, capture_output=True, text=True).stdout
"#;

const SHARED: &str = r#"
@pytest.fixture
def db():
    url = json.loads(db_branch("--json", "env", "shared"))["DATABASE_URL"]
    conn = connect(url)
    yield conn
    # Cleanup: what the tests inserted goes; what they deleted cannot come back.
    conn.cursor().execute("DELETE FROM shop.orders WHERE id >= 3000000")
    conn.cursor().execute("DELETE FROM shop.customers WHERE id >= 3000000")
    conn.close()
"#;

const PER_FILE: &str = r#"
@pytest.fixture(scope="module")
def db(request):
    name = "t-" + request.module.__name__.replace("_", "-")
    db_branch("create", name)
    conn = connect(json.loads(db_branch("--json", "env", name))["DATABASE_URL"])
    yield conn
    conn.close()
    db_branch("delete", name, "--yes")
"#;

const POOL: &str = r#"
@pytest.fixture(scope="module")
def db():
    slot = json.loads(db_branch("--json", "pool", "claim", "p", "--wait", "120s"))
    conn = connect(slot["DATABASE_URL"])
    yield conn
    conn.close()
    db_branch("pool", "release", "p", slot["DB_BRANCH_POOL_SLOT"])
"#;

/// True when Debian's pytest with xdist and PyMySQL can run.
pub fn available() -> bool {
    Command::new("/usr/bin/python3")
        .args(["-c", "import xdist, pymysql, pytest"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs the suite three ways on `env` (initialised, with the seed baseline; no pool `p`).
pub fn run(env: &TestEnv) -> Vec<Outcome> {
    let project = env.root.join("three-ways");
    std::fs::create_dir_all(&project).unwrap();
    for n in 1..=FILES {
        std::fs::write(project.join(format!("test_shop_{n}.py")), TESTS).unwrap();
    }
    let mut out = Vec::new();

    env.run_ok(&["create", "shared"]);
    out.push(way(
        env,
        &project,
        "one shared database, cleaned up after each test",
        SHARED,
    ));
    env.run_ok(&["delete", "shared", "--yes"]);

    out.push(way(
        env,
        &project,
        "`create` / `delete` per test file",
        PER_FILE,
    ));

    env.run_ok(&["pool", "create", "p", "--size", "4"]);
    out.push(way(
        env,
        &project,
        "a pool of 4, a slot claimed per test file",
        POOL,
    ));
    env.run_ok(&["--yes", "pool", "delete", "p"]);
    out
}

fn way(env: &TestEnv, project: &Path, name: &'static str, fixture: &str) -> Outcome {
    std::fs::write(project.join("conftest.py"), format!("{COMMON}{fixture}")).unwrap();
    let t = Instant::now();
    // A test file's tests stay on one worker (`--dist loadfile`), as module-scoped
    // database fixtures need.
    let o = env.pytest(project, &["-n", "2", "--dist", "loadfile"]);
    let wall = t.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&o.stdout);
    // The summary line: "3 failed, 29 passed in 4.1s" (either part may be missing).
    let summary = text
        .lines()
        .rev()
        .find(|l| l.contains(" in "))
        .unwrap_or("");
    let number_before = |word: &str| -> u32 {
        summary
            .split(", ")
            .filter_map(|part| part.trim_matches('=').trim().split_once(' '))
            .find(|(_, w)| w.starts_with(word))
            .and_then(|(n, _)| n.parse().ok())
            .unwrap_or(0)
    };
    let (passed, failed) = (
        number_before("passed"),
        number_before("failed") + number_before("error"),
    );
    assert!(
        passed + failed == (FILES * 4) as u32,
        "pytest ({name}) did not run every test:\n{text}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!("suite: pytest, {name}: {wall:.1} s, {passed} passed, {failed} failed");
    (name, wall, passed, failed)
}
