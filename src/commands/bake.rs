//! `bake --from SOURCE`: a new baseline generation from a live server, a dump or a
//! datadir. Built in a workspace and frozen only when complete: a failed or interrupted bake
//! leaves no generation and touches no existing one.

use super::baseline::check_datadir;
use crate::branch::Generation;
use crate::cli::BakeArgs;
use crate::error::usage;
use crate::host::Host;
use crate::output::{bytes, table, Human, Output};
use crate::server::bake::{BakeProgress, BakeRequest, BakeSource, BakeSummary};
use crate::undo::Undo;
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Debug, Serialize)]
pub struct BakeReport {
    pub generation: Generation,
    pub seconds: f64,
    #[serde(flatten)]
    pub summary: BakeSummary,
}

impl Human for BakeReport {
    fn human(&self) -> String {
        let mut out = format!(
            "baseline {} baked in {:.1} s by the {} path: {} table(s), {} rows, {}\n",
            self.generation,
            self.seconds,
            self.summary.path,
            self.summary.tables,
            self.summary.rows,
            bytes(Some(self.summary.bytes))
        );
        out += &table(
            &["PHASE", "SECONDS", "BYTES"],
            self.summary
                .phases
                .iter()
                .map(|p| {
                    vec![
                        p.name.clone(),
                        format!("{:.2}", p.seconds),
                        bytes(Some(p.bytes)),
                    ]
                })
                .collect(),
        );
        if let Some(n) = self.summary.verified_tables {
            out += &format!("\nverified: {n} table(s) match the source");
        }
        out
    }
}

/// A bar per phase on a terminal; plain lines (phase starts, every 10%) otherwise.
struct Progress {
    bar: Mutex<Option<ProgressBar>>,
    terminal: bool,
    quiet: bool,
    total: AtomicU64,
    done: AtomicU64,
    last_tenth: AtomicU64,
}

impl BakeProgress for Progress {
    fn phase(&self, name: &str, total_bytes: u64) {
        self.total.store(total_bytes, Ordering::SeqCst);
        self.done.store(0, Ordering::SeqCst);
        self.last_tenth.store(0, Ordering::SeqCst);
        if self.quiet {
            return;
        }
        if self.terminal {
            let bar = if total_bytes > 0 {
                let b = ProgressBar::new(total_bytes);
                b.set_style(
                    ProgressStyle::with_template(
                        "{prefix:>40} [{bar:30}] {bytes}/{total_bytes} {msg}",
                    )
                    .expect("static template")
                    .progress_chars("=> "),
                );
                b
            } else {
                let b = ProgressBar::new_spinner();
                b.set_style(
                    ProgressStyle::with_template("{prefix:>40} {spinner} {msg}")
                        .expect("static template"),
                );
                b.enable_steady_tick(std::time::Duration::from_millis(120));
                b
            };
            bar.set_prefix(name.to_string());
            *self.bar.lock().unwrap() = Some(bar);
        } else {
            eprintln!("bake: {name}...");
        }
    }

    fn advance(&self, bytes: u64, what: &str) {
        let done = self.done.fetch_add(bytes, Ordering::SeqCst) + bytes;
        if self.quiet {
            return;
        }
        if let Some(b) = self.bar.lock().unwrap().as_ref() {
            b.inc(bytes);
            if !what.is_empty() {
                b.set_message(what.to_string());
            }
            return;
        }
        let total = self.total.load(Ordering::SeqCst);
        if let Some(tenth) = (done * 10).checked_div(total).map(|t| t.min(10)) {
            if tenth > self.last_tenth.fetch_max(tenth, Ordering::SeqCst) {
                eprintln!(
                    "bake:   {}% ({})",
                    tenth * 10,
                    crate::values::ByteSize(done)
                );
            }
        }
    }

    fn note(&self, msg: &str) {
        if !self.quiet {
            match self.bar.lock().unwrap().as_ref() {
                Some(b) => b.println(format!("bake: {msg}")),
                None => eprintln!("bake: {msg}"),
            }
        }
    }

    fn finish(&self) {
        if let Some(b) = self.bar.lock().unwrap().take() {
            b.finish_and_clear();
        }
    }
}

pub fn run(host: &Host, args: &BakeArgs, out: &Output) -> Result<()> {
    let started = Instant::now();
    let source = BakeSource::parse(&args.from, args.logical)?;
    if let BakeSource::Datadir(dir) = &source {
        check_datadir(dir)?;
        if args.verify {
            return Err(usage(
                "--verify compares against a live source; use it with mysql:// sources",
            ));
        }
    }
    if matches!(source, BakeSource::Dump(_)) && args.verify {
        return Err(usage(
            "--verify compares against a live source; use it with mysql:// sources",
        ));
    }
    if let Some(mask) = &args.mask_sql {
        if !mask.is_file() {
            return Err(usage(format!(
                "masking SQL file {} does not exist",
                mask.display()
            )));
        }
    }
    if args.jobs == Some(0) {
        return Err(usage("--jobs must be at least 1"));
    }
    host.storage.prepare(false)?;
    super::check_free_space(host)?;
    let _lock = crate::commands::baseline_lock(host)?;
    let generation = host
        .storage
        .baselines()?
        .last()
        .map_or(Generation(1), |g| g.next());

    // Ctrl-C or a TERM from a CI runner: stop at the next table or chunk and undo.
    let cancel = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, cancel.clone()).context("installing signal handlers")?;
    }
    let progress = Progress {
        bar: Mutex::new(None),
        terminal: std::io::stderr().is_terminal(),
        quiet: out.quiet,
        total: AtomicU64::new(0),
        done: AtomicU64::new(0),
        last_tenth: AtomicU64::new(0),
    };
    progress.note(&format!("baking baseline {generation}..."));
    let mut undo = Undo::new();
    let result = (|| -> Result<BakeSummary> {
        let workspace = host.storage.begin_baseline(generation)?;
        undo.push("remove the unfinished baseline", move || {
            host.storage.abandon_baseline(generation)
        });
        crate::failpoint::hit("bake:after-workspace");
        if let BakeSource::Datadir(dir) = &source {
            progress.note(&format!("copying {}...", dir.display()));
            host.storage.fill_from_dir(&workspace, dir)?;
        }
        let work = host.layout.work_dir().join(generation.dir_name());
        let req = BakeRequest {
            source: source.clone(),
            databases: args.databases.clone(),
            mask_sql: args.mask_sql.clone(),
            verify: args.verify,
            jobs: args
                .jobs
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
            datadir: &workspace,
            work: &work,
            cancel: &cancel,
        };
        let summary = host.server.bake(&req, &progress)?;
        crate::failpoint::hit("bake:after-load");
        crate::server::bake::check_cancel(&cancel)?;
        host.storage.seal_baseline(generation)?;
        crate::failpoint::hit("bake:after-seal");
        Ok(summary)
    })();
    progress.finish();
    let summary = match result {
        Ok(s) => {
            undo.commit();
            s
        }
        Err(e) => return Err(undo.unwind(e.context(format!("baking baseline {generation}")))),
    };
    let report = BakeReport {
        generation,
        seconds: started.elapsed().as_secs_f64(),
        summary,
    };
    out.emit(&report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::testing::{sim_host, OUT};
    use crate::storage::Storage;

    fn args(from: &str) -> BakeArgs {
        BakeArgs {
            from: from.into(),
            databases: vec![],
            mask_sql: None,
            verify: false,
            jobs: None,
            logical: false,
        }
    }

    #[test]
    fn a_bake_makes_the_next_generation() {
        let sim = sim_host();
        run(&sim.host, &args("mysql://u@127.0.0.1:1"), &OUT).unwrap();
        assert_eq!(
            sim.storage.baselines().unwrap(),
            vec![Generation(1), Generation(2)]
        );
    }

    #[test]
    fn a_failed_bake_leaves_no_generation() {
        let sim = sim_host();
        sim.storage.fail_once("seal_baseline");
        assert!(run(&sim.host, &args("mysql://u@127.0.0.1:1"), &OUT).is_err());
        assert_eq!(sim.storage.baselines().unwrap(), vec![Generation(1)]);
        assert!(sim.storage.with_state(|s| s.workspaces.is_empty()));
    }

    #[test]
    fn bad_sources_and_flags_are_refused_before_anything() {
        let sim = sim_host();
        for (a, says) in [
            (args("pg://x"), "not one of"),
            (args("file:/nonexistent.sql"), "does not exist"),
            (
                BakeArgs {
                    verify: true,
                    ..args("datadir:/usr")
                },
                "does not look like",
            ),
            (
                BakeArgs {
                    jobs: Some(0),
                    ..args("mysql://u@h:1")
                },
                "--jobs",
            ),
            (
                BakeArgs {
                    mask_sql: Some("/nonexistent.sql".into()),
                    ..args("mysql://u@h:1")
                },
                "masking",
            ),
        ] {
            let e = run(&sim.host, &a, &OUT).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
        assert!(sim.storage.with_state(|s| s.workspaces.is_empty()));
    }
}
