//! The one place that writes: data to stdout (a table, text, or `--json`), notes and
//! progress to stderr. Like uv's printer, it knows the modes (`--json`, `--quiet`, a
//! terminal or not); nothing else prints. A reader that goes away (`| head -1`) ends the
//! program quietly: writing returns the `BrokenPipe` error, which exits 0.

use crate::values::ByteSize;
use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Text for people; the same struct serialises for `--json`.
pub trait Human {
    fn human(&self) -> String;
}

#[derive(Debug, Clone, Default)]
pub struct Printer {
    pub json: bool,
    pub quiet: bool,
    /// Data goes here instead of stdout (snapshot tests).
    capture: Option<std::sync::Arc<Mutex<String>>>,
}

impl Printer {
    pub fn new(json: bool, quiet: bool) -> Self {
        Printer {
            json,
            quiet,
            capture: None,
        }
    }

    /// A printer whose data is kept in memory, for tests; the second value reads it.
    #[cfg(any(test, feature = "testing"))]
    pub fn capturing(json: bool) -> (Self, std::sync::Arc<Mutex<String>>) {
        let buf = std::sync::Arc::new(Mutex::new(String::new()));
        (
            Printer {
                json,
                quiet: true,
                capture: Some(buf.clone()),
            },
            buf,
        )
    }

    /// Writes `text` and a newline to stdout. A closed pipe comes back as an `io::Error` of
    /// kind `BrokenPipe` (exit 0, nothing said).
    pub fn data(&self, text: &str) -> anyhow::Result<()> {
        let line = if text.ends_with('\n') {
            text.to_string()
        } else {
            format!("{text}\n")
        };
        if let Some(buf) = &self.capture {
            buf.lock().unwrap().push_str(&line);
            return Ok(());
        }
        let mut out = std::io::stdout().lock();
        out.write_all(line.as_bytes())?;
        out.flush()?;
        Ok(())
    }

    /// A result: as JSON with `--json`, else as text or a table.
    pub fn emit<T: Serialize + Human>(&self, value: &T) -> anyhow::Result<()> {
        if self.json {
            self.emit_json(value)
        } else {
            let text = value.human();
            if text.trim().is_empty() {
                return Ok(());
            }
            self.data(text.trim_end())
        }
    }

    /// A result as JSON, whatever the mode (`env --format json`, `migrate-check --format json`).
    pub fn emit_json<T: Serialize>(&self, value: &T) -> anyhow::Result<()> {
        self.data(&serde_json::to_string_pretty(value)?)
    }

    /// A diagnostic for people (stderr), silenced by `-q`.
    pub fn note(&self, msg: impl AsRef<str>) {
        if !self.quiet {
            Self::stderr_line(msg.as_ref());
        }
    }

    /// A warning: shown even with `-q`.
    pub fn warn(&self, msg: impl AsRef<str>) {
        Self::stderr_line(&format!("warning: {}", msg.as_ref()));
    }

    /// Asks before destroying data: `yes` (`--yes`) says it already; without a terminal to
    /// ask on, a usage error names what would be destroyed and asks for `--yes`; "no" is a
    /// usage error that changes nothing.
    pub fn confirm(&self, yes: bool, question: &str, destroys: &str) -> anyhow::Result<()> {
        if yes {
            return Ok(());
        }
        if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
            return Err(crate::error::usage(format!(
                "{destroys}; there is no terminal to ask on, so pass --yes"
            )));
        }
        let ok = dialoguer::Confirm::new()
            .with_prompt(question)
            .default(false)
            .interact()
            .map_err(anyhow::Error::from)
            .context("asking for confirmation")?;
        if !ok {
            return Err(crate::error::usage("answered no; nothing was changed"));
        }
        Ok(())
    }

    /// An error at the end of the program.
    pub fn error(&self, text: &str) {
        Self::stderr_line(text);
    }

    fn stderr_line(text: &str) {
        // A closed stderr is nobody's problem: there is no one left to tell.
        let _ = writeln!(std::io::stderr().lock(), "{text}");
    }

    /// Progress bars draw on a terminal only; elsewhere phases are logged as lines.
    pub fn progress(&self) -> PhaseProgress {
        PhaseProgress {
            bar: Mutex::new(None),
            terminal: std::io::stderr().is_terminal(),
            quiet: self.quiet,
            label: "",
            total: AtomicU64::new(0),
            done: AtomicU64::new(0),
            last_tenth: AtomicU64::new(0),
        }
    }
}

/// Long work in phases (a bake, a baseline's SQL files): a bar per phase on a terminal,
/// a line per phase start and every 10% otherwise, nothing with `-q`.
pub struct PhaseProgress {
    bar: Mutex<Option<ProgressBar>>,
    terminal: bool,
    quiet: bool,
    /// Prefix of the log lines, e.g. "bake".
    label: &'static str,
    total: AtomicU64,
    done: AtomicU64,
    last_tenth: AtomicU64,
}

impl PhaseProgress {
    pub fn labelled(mut self, label: &'static str) -> Self {
        self.label = label;
        self
    }

    fn prefix(&self) -> String {
        if self.label.is_empty() {
            String::new()
        } else {
            format!("{}: ", self.label)
        }
    }

    /// A new phase; `total_bytes` 0 means its size is unknown (a spinner).
    pub fn phase(&self, name: &str, total_bytes: u64) {
        self.finish();
        self.total.store(total_bytes, Ordering::SeqCst);
        self.done.store(0, Ordering::SeqCst);
        self.last_tenth.store(0, Ordering::SeqCst);
        if self.quiet {
            return;
        }
        if !self.terminal {
            Printer::stderr_line(&format!("{}{name}...", self.prefix()));
            return;
        }
        let bar = if total_bytes > 0 {
            let b = ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("{prefix:>40} [{bar:30}] {bytes}/{total_bytes} {msg}")
                    .expect("static template")
                    .progress_chars("=> "),
            );
            b
        } else {
            let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("{prefix:>40} {spinner} {pos} {msg}")
                    .expect("static template"),
            );
            b.enable_steady_tick(std::time::Duration::from_millis(120));
            b
        };
        bar.set_prefix(name.to_string());
        *self.bar.lock().unwrap() = Some(bar);
    }

    /// A new phase that moves bytes (a transfer): on a terminal a bar with bytes and rate
    /// (a spinner with bytes and rate when `total_bytes` is 0, unknown); elsewhere as
    /// `phase`.
    pub fn phase_bytes(&self, name: &str, total_bytes: u64) {
        self.phase(name, total_bytes);
        if let Some(b) = self.bar.lock().unwrap().as_ref() {
            let template = if total_bytes > 0 {
                "{prefix:>40} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {msg}"
            } else {
                "{prefix:>40} {spinner} {bytes} {bytes_per_sec} {msg}"
            };
            b.set_style(
                ProgressStyle::with_template(template)
                    .expect("static template")
                    .progress_chars("=> "),
            );
        }
    }

    /// `bytes` more of the current phase done (0 for a unit of work without a size).
    pub fn advance(&self, bytes: u64, what: &str) {
        let done = self.done.fetch_add(bytes, Ordering::SeqCst) + bytes;
        if self.quiet {
            return;
        }
        if let Some(b) = self.bar.lock().unwrap().as_ref() {
            if bytes == 0 && b.length().is_none() {
                b.inc(1);
            } else {
                b.inc(bytes);
            }
            if !what.is_empty() {
                b.set_message(what.to_string());
            }
            return;
        }
        let total = self.total.load(Ordering::SeqCst);
        if let Some(tenth) = (done * 10).checked_div(total).map(|t| t.min(10)) {
            if tenth > self.last_tenth.fetch_max(tenth, Ordering::SeqCst) {
                Printer::stderr_line(&format!(
                    "{}  {}% ({})",
                    self.prefix(),
                    tenth * 10,
                    ByteSize(done)
                ));
            }
        }
    }

    /// A line above the bar.
    pub fn note(&self, msg: &str) {
        if self.quiet {
            return;
        }
        let line = format!("{}{msg}", self.prefix());
        match self.bar.lock().unwrap().as_ref() {
            Some(b) => b.println(line),
            None => Printer::stderr_line(&line),
        }
    }

    /// Ends the current phase's bar.
    pub fn finish(&self) {
        if let Some(b) = self.bar.lock().unwrap().take() {
            b.finish_and_clear();
        }
    }
}

pub fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::UTF8_BORDERS_ONLY)
        .set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
        .set_header(header.to_vec());
    if t.width().is_none() {
        // Not a terminal: wrap at a width that reads well in logs and CI output.
        t.set_width(120);
    }
    for r in rows {
        t.add_row(r);
    }
    t.to_string()
}

pub fn bytes(b: Option<u64>) -> String {
    match b {
        Some(b) => ByteSize(b).to_string(),
        None => "-".into(),
    }
}
