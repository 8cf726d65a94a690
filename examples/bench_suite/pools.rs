//! Pools: how fast a claim is — the whole `pool claim` command, and a claim in-process
//! through the Python helper (clients/python) over the recycler's socket — and how long a
//! big pool takes to fill.

use db_branch::testkit::TestEnv;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// Figures for one server.
pub struct Pools {
    /// Seconds for `pool create --size 16` to return with every slot ready.
    pub create_16: f64,
    /// Whole `pool claim` commands (s): (claimants, p50, p99, claims measured).
    pub claims: Vec<(usize, f64, f64, usize)>,
    /// In-process claims through the Python helper (s), likewise; empty without python3.
    pub helper: Vec<(usize, f64, f64, usize)>,
    /// `pool create --size N --buffer-pool 16M`: (asked, ready, refused, seconds).
    pub big: (usize, u64, usize, f64),
    /// A pytest suite run three ways; empty where pytest-xdist is not installed.
    pub three_ways: Vec<crate::three_ways::Outcome>,
    /// Dense slots; None without python3.
    pub dense: Option<Dense>,
}

/// Dense pools: how fast one fills, how many slots fit in a GB, how fast a slot resets.
pub struct Dense {
    /// Slots asked for, slots per server, servers.
    pub slots: usize,
    pub per_server: usize,
    pub servers: usize,
    /// Seconds for `pool create --dense` to return with every slot ready.
    pub made_s: f64,
    /// What the memory guard holds for the servers, and what they hold (RSS), bytes.
    pub guard_bytes: u64,
    pub rss_bytes: u64,
    /// `reset()` through the helper (s), half a second of "test" between resets: a dense
    /// slot, and a slot of an ordinary pool of the same generation; and a dense slot reset
    /// back to back (its spare not made again yet): (p50, p99, count) each.
    pub dense_reset: (f64, f64, usize),
    pub server_reset: (f64, f64, usize),
    pub dense_back_to_back: (f64, f64, usize),
}

pub const BEGIN: &str = "<!-- pools: begin -->";
pub const END: &str = "<!-- pools: end -->";

/// Slots of the pool the claims are measured on.
const SLOTS: u64 = 16;

/// The p-th percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// (claimants, p50, p99, count) of claim times.
fn summary(claimants: usize, mut times: Vec<f64>) -> (usize, f64, f64, usize) {
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (
        claimants,
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        times.len(),
    )
}

fn wait_ready(env: &TestEnv, pool: &str, n: u64) {
    while env.json(&["pool", "status", pool])["ready"] != n {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

pub fn measure(smoke: bool) -> Pools {
    let env = crate::suite_env("40G", "31800-32199");
    env.run_ok(&[
        "baseline",
        "create",
        "--empty",
        "--sql",
        &db_branch::testkit::seed_sql(),
    ]);
    let (create_16, _) =
        crate::timed(|| env.run_ok(&["pool", "create", "p", "--size", &SLOTS.to_string()]));
    let rounds = if smoke { 3 } else { 25 };
    let mut claims = Vec::new();
    for claimants in [1usize, 8] {
        let mut times = Vec::new();
        for _ in 0..rounds {
            // Every claimant at once, on a pool with a ready slot for each.
            let got = std::sync::Mutex::new(Vec::new());
            std::thread::scope(|s| {
                for _ in 0..claimants {
                    s.spawn(|| {
                        let (t, v) = crate::timed(|| env.json(&["pool", "claim", "p"]));
                        let slot = v["DB_BRANCH_POOL_SLOT"].as_str().unwrap().to_string();
                        got.lock().unwrap().push((t, slot));
                    });
                }
            });
            for (t, slot) in got.into_inner().unwrap() {
                times.push(t);
                env.run_ok(&["pool", "release", "p", &slot]);
            }
            wait_ready(&env, "p", SLOTS);
        }
        claims.push(summary(claimants, times));
    }
    let helper = if Path::new("/usr/bin/python3").exists() {
        [1usize, 8]
            .iter()
            .map(|&n| summary(n, helper_claims(&env, "p", n, rounds * 2)))
            .collect()
    } else {
        eprintln!("suite: no python3: the helper's claims are left out");
        Vec::new()
    };
    env.run_ok(&["--yes", "pool", "delete", "p"]);
    // A big pool: small slots; the guard decides how many fit on this host.
    let asked = if smoke { 6 } else { 100 };
    let (t, report) = crate::timed(|| {
        env.json(&[
            "pool",
            "create",
            "big",
            "--size",
            &asked.to_string(),
            "--buffer-pool",
            "16M",
        ])
    });
    let big = (
        asked,
        report["ready"].as_u64().unwrap(),
        report["refused"].as_array().map_or(0, |a| a.len()),
        t,
    );
    env.run_ok(&["--yes", "pool", "delete", "big"]);
    let three_ways = if crate::three_ways::available() {
        crate::three_ways::run(&env)
    } else {
        eprintln!("suite: python3-pytest-xdist or python3-pymysql missing: the pytest comparison is left out");
        Vec::new()
    };
    let dense = Path::new("/usr/bin/python3")
        .exists()
        .then(|| dense(&env, smoke));
    Pools {
        create_16,
        claims,
        helper,
        big,
        three_ways,
        dense,
    }
}

/// Tables of the schema dense resets are timed on.
const RESET_TABLES: usize = 30;

fn dense(env: &TestEnv, smoke: bool) -> Dense {
    let (slots, per_server) = if smoke { (4, 2) } else { (100, 16) };
    let (made_s, report) = crate::timed(|| {
        env.json(&[
            "pool",
            "create",
            "dense",
            "--size",
            &slots.to_string(),
            "--dense",
            "--per-server",
            &per_server.to_string(),
        ])
    });
    assert_eq!(report["ready"], slots, "{report}");
    let servers = report["servers"].as_array().unwrap();
    let sum = |key: &str| {
        servers
            .iter()
            .map(|s| s[key].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    let (guard_bytes, rss_bytes) = (sum("memory_bytes"), sum("rss_bytes"));
    let server_count = servers.len();
    env.run_ok(&["--yes", "pool", "delete", "dense"]);

    // A schema of 30 small tables, as a generation of its own; a dense pool and an
    // ordinary one of it, each slot reset in place through the helper.
    let mut sql = String::from("CREATE DATABASE app;\nUSE app;\n");
    for i in 0..RESET_TABLES {
        let _ = writeln!(
            sql,
            "CREATE TABLE t{i} (id INT PRIMARY KEY, v VARCHAR(40), n INT, KEY v (v)) ENGINE=InnoDB;\n\
             INSERT INTO t{i} VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3);"
        );
    }
    let made = env.baseline_from_sql("thirty.sql", &sql);
    let gen = made["generation"]
        .as_u64()
        .map(|g| g.to_string())
        .or_else(|| made["generation"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no generation in {made}"));
    let runs = if smoke { 3 } else { 20 };
    let mut resets = Vec::new();
    for (dense, gap) in [(true, 0.5), (false, 0.5), (true, 0.0)] {
        let mut args = vec!["pool", "create", "r", "--size", "2", "--baseline", &gen];
        if dense {
            args.extend(["--dense", "--per-server", "2"]);
        }
        env.run_ok(&args);
        settle(env);
        let times = python(
            env,
            "r",
            HELPER_RESETS,
            &["r".into(), runs.to_string(), gap.to_string()],
        );
        let (_, p50, p99, n) = summary(1, times);
        resets.push((p50, p99, n));
        env.run_ok(&["--yes", "pool", "delete", "r"]);
    }
    Dense {
        slots,
        per_server,
        servers: server_count,
        made_s,
        guard_bytes,
        rss_bytes,
        dense_reset: resets[0],
        server_reset: resets[1],
        dense_back_to_back: resets[2],
    }
}

/// Waits for btrfs to finish deleting the subvolumes of the pools deleted before (its
/// cleaner rewrites metadata for seconds after a `pool delete`), so a timing measures the
/// reset, not the previous benchmark's clean-up.
fn settle(env: &TestEnv) {
    let pool = env.root.join("pool");
    if pool.is_dir() {
        let _ = Command::new("btrfs")
            .args(["subvolume", "sync"])
            .arg(&pool)
            .stdout(std::process::Stdio::null())
            .status();
    }
    let _ = Command::new("sync").status();
}

/// One claimant resetting its slot in place `runs` times (`Slot.reset()`: the reply comes
/// when the slot is pristine and serving), a test's `gap` seconds before each in which it
/// changes rows of three tables (an UPDATE, a DELETE, an INSERT that moves a counter) over
/// PyMySQL, as the slot's own account; the reset times, in seconds.
const HELPER_RESETS: &str = r#"import json, os, sys, time
import db_branch_pool, pymysql

slot = db_branch_pool.claim(sys.argv[1], wait=120, socket_file=os.environ["DB_BRANCH_POOL_SOCKET"])
times = []
for i in range(int(sys.argv[2])):
    e = slot.env
    db = pymysql.connect(host=e["MYSQL_HOST"], port=int(e["MYSQL_TCP_PORT"]),
                         user=e["MYSQL_USER"], password=e["MYSQL_PWD"],
                         database=e.get("DB_DATABASE") or "app", autocommit=True)
    with db.cursor() as c:
        c.execute("UPDATE t0 SET v = 'changed' WHERE id = 1")
        c.execute("DELETE FROM t1 WHERE id = 2")
        c.execute("INSERT INTO t2 (id, v, n) VALUES (%s, 'new', 0)", (100 + i,))
    db.close()
    time.sleep(float(sys.argv[3]))  # the rest of the test that used the slot
    t = time.perf_counter()
    slot.reset()
    times.append(time.perf_counter() - t)
slot.release()
print(json.dumps(times))
"#;

/// Runs `script` with the helper importable and the pool's socket in the environment; the
/// JSON list of seconds it prints.
fn python(env: &TestEnv, pool: &str, script: &str, args: &[String]) -> Vec<f64> {
    let socket = env.json(&["pool", "status", pool])["socket"]
        .as_str()
        .unwrap()
        .to_string();
    let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python");
    // Debian's, which has PyMySQL (scripts/install-deps), whatever else is first on PATH.
    let out = env
        .with_db_branch_on_path(Path::new("/usr/bin/python3"))
        .arg("-c")
        .arg(script)
        .args(args)
        .env("PYTHONPATH", &clients)
        .env("DB_BRANCH_POOL_SOCKET", &socket)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "the helper's benchmark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the helper's times")
}

/// `claimants` worker processes (as pytest-xdist's are), each timing `db_branch_pool.claim`
/// in-process — connect, request, reply — every worker at once in each of `rounds` rounds;
/// the slots are released (the connection closed) and the parent waits for the recycler to
/// make them ready again between rounds. The claim times, in seconds.
const HELPER_BENCH: &str = r#"import json, multiprocessing as mp, os, subprocess, sys, time
import db_branch_pool

POOL, SLOTS, CLAIMANTS, ROUNDS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
SOCK = os.environ["DB_BRANCH_POOL_SOCKET"]

def worker(start, claimed, out):
    times = []
    for _ in range(ROUNDS):
        start.wait()
        t = time.perf_counter()
        slot = db_branch_pool.claim(POOL, socket_file=SOCK)
        times.append(time.perf_counter() - t)
        claimed.wait()
        slot.release()
    out.put(times)

def ready():
    out = subprocess.run(["db-branch", "--json", "pool", "status", POOL],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["ready"]

if __name__ == "__main__":
    mp.set_start_method("fork")
    start, claimed, out = mp.Barrier(CLAIMANTS + 1), mp.Barrier(CLAIMANTS + 1), mp.Queue()
    procs = [mp.Process(target=worker, args=(start, claimed, out)) for _ in range(CLAIMANTS)]
    for p in procs:
        p.start()
    for _ in range(ROUNDS):
        while ready() != SLOTS:
            time.sleep(0.05)
        start.wait()
        claimed.wait()
    times = [t for _ in procs for t in out.get()]
    for p in procs:
        p.join()
    print(json.dumps(times))
"#;

fn helper_claims(env: &TestEnv, pool: &str, claimants: usize, rounds: usize) -> Vec<f64> {
    python(
        env,
        pool,
        HELPER_BENCH,
        &[
            pool.to_string(),
            SLOTS.to_string(),
            claimants.to_string(),
            rounds.to_string(),
        ],
    )
}

/// The section, for `(server, figures)` pairs; `separate` names a run of its own.
pub fn section<P: std::borrow::Borrow<Pools>>(
    rows: &[(String, P)],
    separate: Option<&str>,
) -> String {
    let mut d = String::new();
    let _ = writeln!(d, "{BEGIN}\n## Pools: claiming a pristine branch\n");
    if let Some(when) = separate {
        let _ = writeln!(
            d,
            "Measured in a run of its own ({when}, `scripts/bench suite` with `SUITE_ARGS=\"--only pools\"`), not the run above; same machine.\n"
        );
    }
    let _ = writeln!(d, "A pool of {SLOTS} slots of the seed schema, claimed two ways with every claimant of a round at once and a ready slot for each; released slots are reset by the recycler between rounds (not timed). **command**: the whole `db-branch --json pool claim` as a test worker runs it, process start to exit with its JSON read (it claims over the recycler's socket and hands the lease to its caller). **helper**: `db_branch_pool.claim()` of clients/python inside already-running worker processes (as pytest-xdist's are), connect to reply. Then a pool of small slots (16M buffer pool) as big as asked or as the memory guard allows.\n");
    let _ = writeln!(d, "| server | `pool create --size {SLOTS}` (s) | claim | claimants | claims | p50 (ms) | p99 (ms) | big pool: asked / ready / refused | made in (s) |\n|---|---|---|---|---|---|---|---|---|");
    for (server, p) in rows {
        let p: &Pools = p.borrow();
        let lines = p
            .claims
            .iter()
            .map(|c| ("command", c))
            .chain(p.helper.iter().map(|c| ("helper", c)));
        for (i, (how, (n, p50, p99, count))) in lines.enumerate() {
            let first = |s: String| if i == 0 { s } else { String::new() };
            let _ = writeln!(
                d,
                "| {server} | {} | {how} | {n} | {count} | {:.2} | {:.2} | {} | {} |",
                first(format!("{:.1}", p.create_16)),
                p50 * 1000.0,
                p99 * 1000.0,
                first(format!("{} / {} / {}", p.big.0, p.big.1, p.big.2)),
                first(format!("{:.1}", p.big.3)),
            );
        }
    }
    if rows.iter().any(|(_, p)| !p.borrow().three_ways.is_empty()) {
        let _ = writeln!(d, "\nA parallel test suite (pytest with pytest-xdist, 2 workers, `--dist loadfile`; 16 test files of 4 tests that write and then check what they wrote, some through counts) run three ways on the seed schema: one shared database that each test cleans up after (deleting what it inserted), a branch made with `create` and removed with `delete` per test file, and a pool slot claimed and released per test file (pool made beforehand, not counted). Wall time of the whole `pytest` run, and its failures.\n");
        let _ = writeln!(
            d,
            "| server | way | wall (s) | passed | failed |\n|---|---|---|---|---|"
        );
        for (server, p) in rows {
            for (way, wall, passed, failed) in &p.borrow().three_ways {
                let _ = writeln!(d, "| {server} | {way} | {wall:.1} | {passed} | {failed} |");
            }
        }
    }
    if rows.iter().any(|(_, p)| p.borrow().dense.is_some()) {
        let _ = writeln!(d, "\nDense slots (`pool create --dense`): a pool of the seed schema, timed until `pool create` returns with every slot ready; what the memory guard holds for its servers (buffer pool and allowance each) and what they hold once made (RSS), as slots per GB. Then a schema of {RESET_TABLES} small tables (3 rows each), a slot reset in place through the Python helper (`Slot.reset()`, the reply comes when it serves pristine again), half a second of test between resets, in which it changes rows of three tables over PyMySQL (an UPDATE, a DELETE, an INSERT): a dense slot (its rows put back in place — small tables, schema unchanged — its server untouched) beside a slot of an ordinary pool of the same generation (SIGKILL, roll back, start); and the dense slot reset back to back.\n");
        let _ = writeln!(d, "| server | slots / per server / servers | made in (s) | guard holds (MB) | slots per GB (guard) | RSS (MB) | slots per GB (RSS) | resets | dense reset p50 / p99 (ms) | server reset p50 / p99 (ms) | dense, back to back p50 / p99 (ms) |\n|---|---|---|---|---|---|---|---|---|---|---|");
        for (server, p) in rows {
            let Some(x) = &p.borrow().dense else { continue };
            // GB as the MB beside it: 10^9 bytes.
            let per_gb = |bytes: u64| x.slots as f64 / (bytes as f64 / 1e9).max(1e-9);
            let _ = writeln!(
                d,
                "| {server} | {} / {} / {} | {:.1} | {:.0} | {:.1} | {:.0} | {:.1} | {} | {:.0} / {:.0} | {:.0} / {:.0} | {:.0} / {:.0} |",
                x.slots,
                x.per_server,
                x.servers,
                x.made_s,
                x.guard_bytes as f64 / 1e6,
                per_gb(x.guard_bytes),
                x.rss_bytes as f64 / 1e6,
                per_gb(x.rss_bytes),
                x.dense_reset.2,
                x.dense_reset.0 * 1000.0,
                x.dense_reset.1 * 1000.0,
                x.server_reset.0 * 1000.0,
                x.server_reset.1 * 1000.0,
                x.dense_back_to_back.0 * 1000.0,
                x.dense_back_to_back.1 * 1000.0,
            );
        }
    }
    let _ = writeln!(d, "\n{END}");
    d
}
