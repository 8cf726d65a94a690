//! Start-up side by side (`--only startup`, a run of its own, spliced into the document):
//! per server, create and reset on one empty baseline with `mysqld.skip_fsync` on and off
//! (and, for Oracle MySQL, `mysqld.skip_timer_calibration` off), the idle memory of one
//! branch, and create/reset of baselines with many tables.

use db_branch::testkit::bench::stats;
use db_branch::testkit::TestServer;
use std::fmt::Write as _;

pub struct Startup {
    pub version: String,
    /// Medians (s): (create, reset) with skip_fsync on, then off.
    pub on: (f64, f64),
    pub off: (f64, f64),
    /// Oracle MySQL only: medians with skip_fsync on and `skip_timer_calibration` off.
    pub calibrating: Option<(f64, f64)>,
    pub runs: usize,
    /// One idle branch: Rss, Pss, and the part of Rss that is anonymous (not the binary's
    /// and libraries' pages, which every server of the host shares).
    pub rss: u64,
    pub pss: u64,
    pub anon: u64,
    /// (tables, baseline seconds, create median, reset median, datadir bytes)
    pub tables: Vec<(usize, f64, f64, f64, u64)>,
}

/// Sets the boolean `key` of the config's `[mysqld]` table.
fn set_mysqld(env: &db_branch::testkit::TestEnv, key: &str, on: bool) {
    let text = std::fs::read_to_string(&env.config).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with(&format!("{key} ")))
        .collect();
    let text = kept
        .join("\n")
        .replacen("[mysqld]\n", &format!("[mysqld]\n{key} = {on}\n"), 1);
    std::fs::write(&env.config, text).unwrap();
}

fn set_skip_fsync(env: &db_branch::testkit::TestEnv, on: bool) {
    set_mysqld(env, "skip_fsync", on);
}

/// Median (create, reset) seconds of `runs` each.
fn create_reset(env: &db_branch::testkit::TestEnv, tag: &str, runs: usize) -> (f64, f64) {
    let names: Vec<String> = (0..runs).map(|i| format!("{tag}{i}")).collect();
    let create: Vec<f64> = names
        .iter()
        .map(|n| crate::timed(|| env.run_ok(&["create", n])).0)
        .collect();
    let reset: Vec<f64> = (0..runs)
        .map(|_| crate::timed(|| env.run_ok(&["reset", &names[0]])).0)
        .collect();
    for n in &names {
        env.run_ok(&["delete", "--yes", n]);
    }
    (stats(create).1, stats(reset).1)
}

fn smaps_field(pid: i32, name: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

pub fn measure(server: &TestServer, version: String, runs: usize, tables: &[usize]) -> Startup {
    let env = crate::suite_env("10G", "33000-33099");
    env.run_ok(&["baseline", "create", "--empty"]);
    set_skip_fsync(&env, true);
    let on = create_reset(&env, "on", runs);
    set_skip_fsync(&env, false);
    let off = create_reset(&env, "off", runs);
    set_skip_fsync(&env, true);
    let calibrating = server.mysql.then(|| {
        set_mysqld(&env, "skip_timer_calibration", false);
        let figures = create_reset(&env, "cal", runs);
        set_mysqld(&env, "skip_timer_calibration", true);
        figures
    });
    env.run_ok(&["create", "idle"]);
    // Settled: what a branch nobody uses holds.
    std::thread::sleep(std::time::Duration::from_secs(5));
    let pid = env.server_pids()[0];
    let (rss, pss, anon) = (
        smaps_field(pid, "Rss:"),
        smaps_field(pid, "Pss:"),
        smaps_field(pid, "Anonymous:"),
    );
    env.run_ok(&["delete", "--yes", "idle"]);
    drop(env);
    let tables = tables
        .iter()
        .map(|n| crate::many_tables(server, *n, runs.min(5)))
        .collect();
    eprintln!(
        "startup: {version}: create/reset {:.3}/{:.3} s (skip_fsync off: {:.3}/{:.3}), idle Rss {} MB",
        on.0,
        on.1,
        off.0,
        off.1,
        rss >> 20
    );
    Startup {
        version,
        on,
        off,
        calibrating,
        runs,
        rss,
        pss,
        anon,
        tables,
    }
}

pub const BEGIN: &str = "<!-- startup: begin -->";
pub const END: &str = "<!-- startup: end -->";

/// `args`: what the suite was given (`SUITE_ARGS`), quoted in the text.
pub fn section(rows: &[(String, Startup)], when: &str, args: &str) -> String {
    let mut d = String::new();
    let _ = writeln!(d, "{BEGIN}\n## Start-up side by side\n");
    let _ = writeln!(
        d,
        "Measured in a run of its own ({when}, `scripts/bench suite` with `SUITE_ARGS=\"{args}\"`), not the run above; same machine, built-in supervisor, an empty baseline (`baseline create --empty`). `skip_fsync` is `mysqld.skip_fsync` (libeatmydata preloaded, the default where it is installed); `calibrating` is Oracle MySQL with `mysqld.skip_timer_calibration = false` (no `times()` shim: every start spends ~0.1 s in `my_timer_init`), skip_fsync on. Idle memory: one branch, 5 s after create; Anon is the part of Rss that is the server's own (the rest is the binary and libraries, shared by every server of the host). Where the time goes: docs/startup.md.\n"
    );
    let base = rows.first().map(|(_, s)| s.on);
    let _ = writeln!(d, "| server | create (s) | reset (s) | ÷ first row (create / reset) | create, skip_fsync off (s) | reset, skip_fsync off (s) | create / reset, calibrating (s) | idle Rss | idle Pss | idle Anon |");
    let _ = writeln!(d, "|---|---|---|---|---|---|---|---|---|---|");
    for (name, s) in rows {
        let ratio = base
            .map(|b| format!("{:.1}× / {:.1}×", s.on.0 / b.0, s.on.1 / b.1))
            .unwrap_or_default();
        let calibrating = s
            .calibrating
            .map(|(c, r)| format!("{c:.3} / {r:.3}"))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            d,
            "| {name} ({}) | {:.3} | {:.3} | {ratio} | {:.3} | {:.3} | {calibrating} | {} MB | {} MB | {} MB |",
            s.version,
            s.on.0,
            s.on.1,
            s.off.0,
            s.off.1,
            s.rss / 1_000_000,
            s.pss / 1_000_000,
            s.anon / 1_000_000,
        );
    }
    let runs = rows.first().map(|(_, s)| s.runs).unwrap_or(0);
    let _ = writeln!(
        d,
        "\nMedians of {runs} creates and {runs} resets per cell.\n"
    );
    if rows.iter().any(|(_, s)| !s.tables.is_empty()) {
        let _ = writeln!(d, "With many tables (`id INT PRIMARY KEY, v VARCHAR(20)` and a secondary index each, baked from a SQL file with `bake --from file:`; skip_fsync on; medians of {}):\n", runs.min(5));
        let _ = writeln!(
            d,
            "| server | tables | baseline made in (s) | datadir | create (s) | reset (s) |"
        );
        let _ = writeln!(d, "|---|---|---|---|---|---|");
        for (name, s) in rows {
            for (n, made, create, reset, bytes) in &s.tables {
                let _ = writeln!(
                    d,
                    "| {name} | {n} | {made:.1} | {} MB | {create:.2} | {reset:.2} |",
                    bytes / 1_000_000
                );
            }
        }
    }
    let _ = writeln!(d, "\n{END}");
    d
}
