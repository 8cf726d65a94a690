//! Benchmark (not a test): the bake paths against their peers at several sizes and at many
//! tables, every method on the same data in the same run, with ratios and where the time
//! goes at the largest size.
//!
//!   sudo scripts/bench bake        (installs mydumper; MariaDB 10.11, the host's server)
//!
//! Environment:
//!   DB_BRANCH_TEST_SERVER  the server (default mariadb-10.11; mysql-9.7 or mariadb-11.8
//!                      from their side roots): the source, the bakes' servers and the
//!                      peers' targets, with that server's own dump program and client;
//!                      mydumper + myloader (Debian's, built on MariaDB's client) on every
//!                      server
//!   DBB_BENCH_SCALES   sample-sql scales, comma-separated (default 6,21,83: about 0.3, 1
//!                      and 4 GB of data and indexes, ~48 MB per unit; 208 is about 10 GB)
//!   DBB_BENCH_TABLES   tables of the many-tables point (default 10000; 0 leaves it out)
//!   DBB_BENCH_WIDE     rows of each table of the big-keys point (default 20000000; 0
//!                      leaves it out): one keyed by a UUID CHAR(36) in the server's
//!                      default collation, one by (tenant_id, id)
//!   DBB_BENCH_RUNS     runs of each bake per point (default 1); peers run once
//!   DBB_BENCH_METHODS  which methods each point runs, comma-separated (default all of
//!                      tablespace,logical,clone,dump-file,dump-pipe,dump-load,mydumper;
//!                      clone on Oracle MySQL only): at 4 GB each peer is the better part
//!                      of half an hour on 2 cores
//!   DBB_BENCH_IMAGE    size of the btrfs image (default 64G; sparse)

use db_branch::testkit::bench::{env_or, now_utc, which};
use db_branch::testkit::{sql, TestEnv};
use std::process::Command;
use std::time::Instant;

fn sh(script: &str) -> f64 {
    try_sh(script).unwrap_or_else(|| panic!("failed: {script}"))
}

/// Seconds `script` took under `sh -c`, or None when it failed.
fn try_sh(script: &str) -> Option<f64> {
    let t = Instant::now();
    let ok = Command::new("sh")
        .arg("-c")
        .arg(script)
        .status()
        .unwrap()
        .success();
    ok.then(|| t.elapsed().as_secs_f64())
}

/// CPU seconds (user + system) of a process, from /proc.
fn cpu_of(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(vec![], |(_, r)| r.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU seconds of this process's waited-for children (db-branch and its one-off server).
fn children_cpu() -> f64 {
    cpu_of_children(std::process::id())
}

fn cpu_of_children(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(vec![], |(_, r)| r.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(13) + ticks(14)) / 100.0
}

/// One bake: wall seconds, the phases, and CPU seconds of the baker (with its server) and
/// of the source server.
struct Baked {
    wall: f64,
    phases: String,
    /// How big tables were cut, from the summary's `splits`.
    splits: String,
    path: String,
    baker_cpu: f64,
    source_cpu: f64,
    /// Every run's wall seconds, in order: the host's spread beside the fastest.
    runs: Vec<f64>,
}

/// One point of the curve; `None` where the method was not run (DBB_BENCH_METHODS, or
/// mydumper not installed).
struct Point {
    label: String,
    mb: f64,
    tablespace: Option<Baked>,
    logical: Option<Baked>,
    /// MySQL's `CLONE INSTANCE` (`--via clone`), Oracle MySQL only.
    clone: Option<Baked>,
    dump_bake: Option<Baked>,
    dump_pipe: Option<f64>,
    /// `mariadb < dump` (`mysql < dump`), and how long the dump itself took.
    dump_load: Option<(f64, f64)>,
    mydumper: Option<(f64, f64)>,
}

/// The methods a point can run.
const METHODS: [&str; 7] = [
    "tablespace",
    "logical",
    "clone",
    "dump-file",
    "dump-pipe",
    "dump-load",
    "mydumper",
];

struct Bench {
    env: TestEnv,
    jobs: usize,
    runs: usize,
    empty_generation: String,
    peers: usize,
    methods: Vec<String>,
    /// The server under test's client and dump program, the options a dump to load
    /// elsewhere needs (after `--no-defaults`, which must come first), and whether it is
    /// Oracle MySQL.
    client: String,
    dump: String,
    dump_options: &'static str,
    mysql: bool,
}

impl Bench {
    fn runs(&self, method: &str) -> bool {
        self.methods.iter().any(|m| m == method)
    }

    fn bake(&self, source_pid: u32, args: &[&str]) -> Baked {
        let mut best: Option<Baked> = None;
        let mut walls = Vec::new();
        for run in 0..self.runs {
            let (c0, s0) = (children_cpu(), cpu_of(source_pid));
            let t = Instant::now();
            let mut a = vec!["bake", "--from"];
            a.extend_from_slice(args);
            let report = self.env.json(&a);
            let wall = t.elapsed().as_secs_f64();
            let phases = report["phases"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    format!(
                        "{} {:.1} s",
                        p["name"].as_str().unwrap(),
                        p["seconds"].as_f64().unwrap()
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            let splits = report["splits"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|s| {
                            format!(
                                "{} {} range(s)",
                                s["table"].as_str().unwrap_or("?"),
                                s["ranges"]
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            let b = Baked {
                wall,
                phases,
                splits,
                path: report["path"].as_str().unwrap_or("?").to_string(),
                baker_cpu: children_cpu() - c0,
                source_cpu: cpu_of(source_pid) - s0,
                runs: Vec::new(),
            };
            eprintln!(
                "bench: bake {} run {}: {:.1} s, CPU: baker and its server {:.1} s, source {:.1} s ({})",
                b.path,
                run + 1,
                b.wall,
                b.baker_cpu,
                b.source_cpu,
                b.phases
            );
            // Only the newest generation and the ones branches use are kept: room for
            // the next bake.
            self.env.run_ok(&["baseline", "prune", "--yes"]);
            walls.push(b.wall);
            // The fastest run: the least disturbed by anything else on the host.
            best = Some(match best {
                Some(prev) if prev.wall <= b.wall => prev,
                _ => b,
            });
        }
        let mut best = best.unwrap();
        best.runs = walls;
        best
    }

    /// A fresh empty server with MariaDB's default durability, as a standalone restore
    /// target has; returns its name and client arguments.
    fn fresh(&mut self) -> (String, String, u16) {
        self.peers += 1;
        let name = format!("peer-{}", self.peers);
        let p = self.env.json(&[
            "create",
            &name,
            "--baseline",
            &self.empty_generation,
            "--profile",
            "durable",
        ])["port"]
            .as_u64()
            .unwrap() as u16;
        (name, db_branch::testkit::login(p), p)
    }

    fn peer(&mut self, script: &dyn Fn(&str, u16) -> String) -> f64 {
        let (name, target, port) = self.fresh();
        let script = script(&target, port);
        let Some(took) = try_sh(&script) else {
            // What the server it loaded into said: a peer that fails is measured by nobody.
            let status = self.env.json(&["status", &name]);
            let log = status["error_log"].as_str().unwrap_or_default();
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            panic!("failed: {script}\n{log}, last lines:\n{tail}");
        };
        self.env.run_ok(&["delete", "--yes", &name]);
        took
    }

    /// Every method on database `db` of the newest generation. `many`: the many-tables
    /// point, whose source gets a bigger buffer pool (its table cache stays the server's
    /// default: the tablespace path exports past it in batches).
    fn point(&mut self, label: &str, db: &str, many: bool) -> Point {
        let env = &self.env;
        let pool = if many { "1G" } else { "128M" };
        let status = env.json(&["create", "source", "--buffer-pool", pool]);
        let source = status["port"].as_u64().unwrap() as u16;
        let source_pid = env.json(&["status", "source"])["main_pid"]
            .as_u64()
            .unwrap_or(0) as u32;
        let url = db_branch::testkit::source_url(source);
        let mb: f64 = sql(
            source,
            &format!(
                "SELECT ROUND(SUM(DATA_LENGTH + INDEX_LENGTH) / 1e6) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{db}'"
            ),
        )
        .parse()
        .unwrap();
        eprintln!("bench: {label}: {mb} MB of data and indexes");
        // The load's aftermath (statistics recalculated, pages flushed, purge) runs on the
        // source for a while: whichever method ran first would share the host with it.
        let t = Instant::now();
        loop {
            let before = cpu_of(source_pid);
            std::thread::sleep(std::time::Duration::from_secs(1));
            if cpu_of(source_pid) - before < 0.05 || t.elapsed().as_secs() > 300 {
                break;
            }
        }
        eprintln!(
            "bench: the source went quiet {:.0} s after its load",
            t.elapsed().as_secs_f64()
        );
        let conn = db_branch::testkit::login(source);
        let (client, dumper, opts) = (self.client.clone(), self.dump.clone(), self.dump_options);
        let dump = env.root.join("bench-dump.sql");
        let dump_took = (self.runs("dump-file") || self.runs("dump-load")).then(|| {
            sh(&format!(
                "{dumper} {conn} {opts} --single-transaction --databases {db} > {}",
                dump.display()
            ))
        });
        let jobs = self.jobs.to_string();
        let from_file = format!("file:{}", dump.display());
        let tablespace = self.runs("tablespace").then(|| {
            self.bake(
                source_pid,
                &[&url, "--databases", db, "--via", "tablespace"],
            )
        });
        let logical = self.runs("logical").then(|| {
            self.bake(
                source_pid,
                &[&url, "--databases", db, "--via", "logical", "--jobs", &jobs],
            )
        });
        let clone = (self.runs("clone") && self.mysql).then(|| {
            // The donor needs the plugin; the bake's recipient server loads its own.
            sql(source, "INSTALL PLUGIN clone SONAME 'mysql_clone.so'");
            self.bake(source_pid, &[&url, "--databases", db, "--via", "clone"])
        });
        let dump_bake = self
            .runs("dump-file")
            .then(|| self.bake(source_pid, &[&from_file]));
        let dump_pipe = self.runs("dump-pipe").then(|| {
            self.peer(&|target, _| {
                format!(
                    "{dumper} {conn} {opts} --single-transaction --databases {db} | {client} {target}"
                )
            })
        });
        let d = dump.display().to_string();
        let dump_load = match dump_took {
            Some(took) if self.runs("dump-load") => Some((
                self.peer(&|target, _| format!("{client} {target} < {d}")),
                took,
            )),
            _ => None,
        };
        // Debian's mydumper 0.10 is built on MariaDB's client library, which logs in to
        // MySQL 9.7 too (caching_sha2_password).
        let mydumper = if self.runs("mydumper") && which("mydumper") && which("myloader") {
            let dir = self.env.root.join("mydumper");
            let threads = self.jobs;
            let dumped = sh(&format!(
                "rm -rf {0} && mydumper -h 127.0.0.1 -P {source} -u root -p {1} -B {db} -t {threads} -r 200000 -o {0}",
                dir.display(),
                db_branch::testkit::password(source)
            ));
            let dir_s = dir.display().to_string();
            let loaded = self.peer(&|_, port| {
                format!(
                    "myloader -h 127.0.0.1 -P {port} -u root -p {} -t {threads} -d {dir_s}",
                    db_branch::testkit::password(port)
                )
            });
            let _ = std::fs::remove_dir_all(&dir);
            Some((dumped, loaded))
        } else {
            None
        };
        let _ = std::fs::remove_file(&dump);
        self.env.run_ok(&["delete", "--yes", "source"]);
        self.env.run_ok(&["baseline", "prune", "--yes"]);
        let point = Point {
            label: label.to_string(),
            mb,
            tablespace,
            logical,
            clone,
            dump_bake,
            dump_pipe,
            dump_load,
            mydumper,
        };
        // Printed now too, so an interrupted run keeps what it measured.
        eprintln!("bench: {}", row(&point));
        eprintln!("{}", profile(&point, self.jobs));
        point
    }
}

/// Two tables of `rows` rows in `wide`: `events` keyed by a UUID (CHAR(36), the server's
/// default collation) and `tenant_rows` by (tenant_id, id) over 50 tenants, each with a
/// secondary index. Rows made by the server from a cross join of digits.
fn wide_tables_sql(rows: u64) -> String {
    let seq = db_branch::testkit::seq(rows);
    format!(
        "CREATE DATABASE wide;\nUSE wide;\n\
         CREATE TABLE events (id CHAR(36) NOT NULL PRIMARY KEY, at DATETIME NOT NULL, \
           kind VARCHAR(20) NOT NULL, body VARCHAR(60) NOT NULL, KEY by_at (at)) ENGINE=InnoDB;\n\
         INSERT INTO events SELECT UUID(), '2026-01-01' + INTERVAL (seq % 31536000) SECOND, \
           ELT(1 + seq % 4, 'click', 'view', 'buy', 'leave'), CONCAT('event ', seq, ' body') \
           FROM {seq};\n\
         CREATE TABLE tenant_rows (tenant_id INT NOT NULL, id BIGINT NOT NULL, \
           amount DECIMAL(10,2) NOT NULL, note VARCHAR(60) NOT NULL, \
           PRIMARY KEY (tenant_id, id), KEY by_amount (amount)) ENGINE=InnoDB;\n\
         INSERT INTO tenant_rows SELECT seq % 50, seq, (seq % 100000) / 100, \
           CONCAT('row ', seq, ' of its tenant') FROM {seq};\n"
    )
}

/// SQL for `tables` small tables (an id key, a secondary index, 20 rows each) in `many`.
fn many_tables_sql(tables: usize) -> String {
    let mut s = String::from("CREATE DATABASE many;\nUSE many;\n");
    for i in 0..tables {
        s.push_str(&format!(
            "CREATE TABLE t{i} (id INT PRIMARY KEY, a INT NOT NULL, b VARCHAR(40) NOT NULL, KEY a (a)) ENGINE=InnoDB;\n\
             INSERT INTO t{i} VALUES {};\n",
            (1..=20)
                .map(|r| format!("({r},{},'row {r} of table {i}')", r * 7 % 13))
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    s
}

fn main() {
    let scales: Vec<u32> = std::env::var("DBB_BENCH_SCALES")
        .unwrap_or_else(|_| "6,21,83".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let tables: usize = env_or("DBB_BENCH_TABLES", 10_000);
    let wide: u64 = env_or("DBB_BENCH_WIDE", 20_000_000);
    let runs: usize = env_or("DBB_BENCH_RUNS", 1);
    let image: String = env_or("DBB_BENCH_IMAGE", "64G".to_string());
    let methods: Vec<String> = env_or("DBB_BENCH_METHODS", METHODS.join(","))
        .split(',')
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .collect();
    if let Some(bad) = methods.iter().find(|m| !METHODS.contains(&m.as_str())) {
        panic!(
            "DBB_BENCH_METHODS: {bad:?} is none of {}",
            METHODS.join(",")
        );
    }
    let server = db_branch::testkit::server();
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    // Every server here gets room to grow: peers load as a standalone restore would, with
    // no ceiling of db-branch's around them (at 10,000 tables myloader's MySQL 9.7 went
    // past a default branch's and was OOM-killed in its cgroup; the one-off servers of
    // the bakes have none either).
    let env = TestEnv::with_service(
        "process",
        &image,
        "",
        "[memory]\nbranch_allowance = \"4G\"\n",
    );
    env.run_ok(&["init"]);
    env.run_ok(&["baseline", "create", "--empty"]);
    // A stopped branch keeps the empty generation from being pruned: peers load into it.
    env.run_ok(&["create", "keep-empty"]);
    env.run_ok(&["stop", "keep-empty"]);
    let mut bench = Bench {
        env,
        jobs,
        runs: runs.max(1),
        empty_generation: "1".into(),
        peers: 0,
        methods,
        client: server.client.display().to_string(),
        // MySQL's servers keep GTIDs: a dump's GTID_PURGED would not load into a server
        // with its own history, and a restore elsewhere leaves it out.
        dump: server.dump.display().to_string(),
        dump_options: if server.mysql {
            "--set-gtid-purged=OFF"
        } else {
            ""
        },
        mysql: server.mysql,
    };
    let started = now_utc();
    let mut points = Vec::new();
    for scale in &scales {
        eprintln!("bench: building the sample at scale {scale}...");
        let t = bench.env.sample_baseline(*scale);
        eprintln!("bench: sample built in {t:.0} s");
        points.push(bench.point(&format!("sample-sql {scale}"), "shop", false));
    }
    if tables > 0 {
        eprintln!("bench: building {tables} tables...");
        bench
            .env
            .baseline_from_sql("many.sql", &many_tables_sql(tables));
        let _ = std::fs::remove_file(bench.env.root.join("many.sql"));
        points.push(bench.point(&format!("{tables} tables × 20 rows"), "many", true));
    }
    if wide > 0 {
        eprintln!("bench: building two tables of {wide} rows...");
        let t = Instant::now();
        bench
            .env
            .baseline_from_sql("wide.sql", &wide_tables_sql(wide));
        eprintln!("bench: built in {:.0} s", t.elapsed().as_secs_f64());
        let _ = std::fs::remove_file(bench.env.root.join("wide.sql"));
        points.push(bench.point(
            &format!("UUID-keyed + (tenant_id, id)-keyed, {wide} rows each"),
            "wide",
            false,
        ));
    }

    println!("\n## Bake paths and their peers, by size\n");
    println!(
        "{}, {jobs} cores, {started}; {} run(s) of each bake per point (the fastest shown), peers once; `-`: not run (DBB_BENCH_METHODS). Bakes are timed whole: empty datadir, load, full-purge clean shutdown, snapshot. Peers load into a fresh server with the server's default durability, as a standalone restore would; mydumper and myloader use {jobs} threads, as the logical bake uses {jobs} jobs.\n",
        server.name,
        bench.runs
    );
    let (dumper, client) = if server.mysql {
        ("mysqldump", "mysql")
    } else {
        ("mariadb-dump", "mariadb")
    };
    println!("| data | bake: tablespace | bake: logical | bake: dump file | `{dumper} \\| {client}` | `{client} < dump` | mydumper + myloader | `dump \\| load` ÷ tablespace | `< dump` ÷ logical | mydumper+myloader ÷ logical | bake: clone | `dump \\| load` ÷ clone |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for p in &points {
        println!("{}", row(p));
    }
    println!("\n## Where the time goes\n");
    for p in &points {
        println!("{}\n", profile(p, jobs));
    }
}

/// One point's line of the results table; `-` where a method was not run.
fn row(p: &Point) -> String {
    let secs = |t: Option<f64>| t.map_or("-".to_string(), |t| format!("{t:.1}"));
    let wall = |b: &Option<Baked>| b.as_ref().map(|b| b.wall);
    let ratio = |peer: Option<f64>, bake: Option<f64>, digits: usize| match (peer, bake) {
        (Some(peer), Some(bake)) => format!("{:.*}×", digits, peer / bake),
        _ => "-".to_string(),
    };
    let my = p.mydumper.map_or("-".into(), |(d, l)| {
        format!("{:.1} ({d:.1} + {l:.1})", d + l)
    });
    let load = p
        .dump_load
        .map_or("-".into(), |(l, took)| format!("{l:.1} (dump {took:.1})"));
    format!(
        "| {} ({:.0} MB) | {} | {} | {} | {} | {load} | {my} | **{}** | **{}** | {} | {} | {} |",
        p.label,
        p.mb,
        secs(wall(&p.tablespace)),
        secs(wall(&p.logical)),
        secs(wall(&p.dump_bake)),
        secs(p.dump_pipe),
        ratio(p.dump_pipe, wall(&p.tablespace), 1),
        ratio(p.dump_load.map(|(l, _)| l), wall(&p.logical), 2),
        ratio(p.mydumper.map(|(d, l)| d + l), wall(&p.logical), 2),
        secs(wall(&p.clone)),
        ratio(p.dump_pipe, wall(&p.clone), 1),
    )
}

/// Where one point's time went, bake by bake.
fn profile(p: &Point, jobs: usize) -> String {
    let mut out = format!("{} ({:.0} MB):\n", p.label, p.mb);
    for (name, b) in [
        ("tablespace", &p.tablespace),
        ("logical", &p.logical),
        ("clone", &p.clone),
        ("dump file", &p.dump_bake),
    ] {
        let Some(b) = b else { continue };
        if b.runs.len() > 1 {
            let runs: Vec<String> = b.runs.iter().map(|w| format!("{w:.1}")).collect();
            out.push_str(&format!("\n- {name}, every run: {} s", runs.join(", ")));
        }
        out.push_str(&format!(
            "\n- {name} (path {}): {:.1} s wall; CPU: baker and its server {:.1} s, source server {:.1} s ({:.0}% of {jobs} cores); {}{}",
            b.path,
            b.wall,
            b.baker_cpu,
            b.source_cpu,
            100.0 * (b.baker_cpu + b.source_cpu) / (b.wall * jobs as f64),
            b.phases,
            if b.splits.is_empty() { String::new() } else { format!("; split: {}", b.splits) }
        ));
    }
    out
}
