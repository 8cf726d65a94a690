//! Running external programs with errors that carry the whole command line and the tail of
//! stderr. Only the real backends (storage, service, server) call this.

use crate::error::{Classified, Kind};
use std::process::{Command, Output};

/// An external command failed: the whole command line, how it ended and the end of its
/// stderr (or stdout when stderr was empty).
#[derive(Debug, thiserror::Error)]
#[error("`{command}` failed ({status}){}", tail_suffix(.stderr_tail))]
pub struct CommandError {
    pub command: String,
    pub status: String,
    pub stderr_tail: String,
}

fn tail_suffix(tail: &str) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!(":\n{tail}")
    }
}

impl Classified for CommandError {
    fn kind(&self) -> Kind {
        Kind::Failed
    }
}

const TAIL_LINES: usize = 15;

/// The command line as a user could paste it (arguments with spaces are quoted).
pub fn command_line(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    for arg in cmd.get_args() {
        let a = arg.to_string_lossy();
        if a.is_empty() || a.contains(char::is_whitespace) {
            parts.push(format!("'{a}'"));
        } else {
            parts.push(a.into_owned());
        }
    }
    parts.join(" ")
}

/// The last lines of a program's output, for error messages.
pub fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    lines[start..].join("\n")
}

/// Runs `cmd` to completion; a non-zero exit becomes `Error::Command`.
pub fn run(cmd: &mut Command) -> anyhow::Result<Output> {
    let line = command_line(cmd);
    let out = cmd.output().map_err(|e| CommandError {
        command: line.clone(),
        status: format!("could not be started: {e}"),
        stderr_tail: String::new(),
    })?;
    if !out.status.success() {
        let mut stderr_tail = tail(&out.stderr);
        if stderr_tail.is_empty() {
            stderr_tail = tail(&out.stdout);
        }
        return Err(CommandError {
            command: line,
            status: out.status.to_string(),
            stderr_tail,
        }
        .into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_carries_command_and_stderr() {
        let err =
            run(Command::new("sh").args(["-c", "echo first >&2; echo 'last words' >&2; exit 3"]))
                .unwrap_err();
        let s = err.to_string();
        assert!(s.contains("sh -c"), "{s}");
        assert!(s.contains("last words"), "{s}");
        assert!(s.contains("3"), "{s}");
    }

    #[test]
    fn command_error_names_command_and_stderr() {
        let e = CommandError {
            command: "mkfs.btrfs /x".into(),
            status: "exit status: 1".into(),
            stderr_tail: "ERROR: not enough space".into(),
        };
        let s = e.to_string();
        assert!(
            s.contains("mkfs.btrfs /x") && s.contains("not enough space"),
            "{s}"
        );
    }

    #[test]
    fn missing_program_is_named() {
        let err = run(&mut Command::new("/nonexistent/prog")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/prog"));
    }

    #[test]
    fn tail_keeps_last_lines() {
        let text: String = (0..40).map(|i| format!("line {i}\n")).collect();
        let t = tail(text.as_bytes());
        assert!(t.starts_with("line 25") && t.ends_with("line 39"), "{t}");
    }
}
