//! One serialisable view per result: `--json` prints it as JSON, otherwise as text or a
//! table. Data goes to stdout; notes and progress go to stderr.

use serde::Serialize;

pub trait Human {
    fn human(&self) -> String;
}

#[derive(Debug, Clone, Copy)]
pub struct Output {
    pub json: bool,
    pub quiet: bool,
}

impl Output {
    pub fn emit<T: Serialize + Human>(&self, value: &T) -> anyhow::Result<()> {
        let text = if self.json {
            serde_json::to_string_pretty(value)?
        } else {
            value.human()
        };
        if !text.is_empty() {
            println!("{}", text.trim_end());
        }
        Ok(())
    }

    /// A diagnostic for people (stderr), silenced by `-q`.
    pub fn note(&self, msg: impl AsRef<str>) {
        if !self.quiet {
            eprintln!("{}", msg.as_ref());
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
        t.set_width(100);
    }
    for r in rows {
        t.add_row(r);
    }
    t.to_string()
}

pub fn bytes(b: Option<u64>) -> String {
    match b {
        Some(b) => crate::values::ByteSize(b).to_string(),
        None => "-".into(),
    }
}
