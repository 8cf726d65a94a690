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
    let started = std::time::Instant::now();
    let out = cmd.output().map_err(|e| CommandError {
        command: line.clone(),
        status: format!("could not be started: {e}"),
        stderr_tail: String::new(),
    })?;
    // DB_BRANCH_LOG=debug: where a slow command's time goes, program by program.
    tracing::debug!(
        secs = started.elapsed().as_secs_f64(),
        status = %out.status,
        "ran {line}"
    );
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

/// Collects a child's stderr on a thread, so a chatty child never blocks on a full pipe.
fn drain_stderr(child: &mut std::process::Child) -> std::thread::JoinHandle<Vec<u8>> {
    let mut err = child.stderr.take().expect("stderr piped");
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut buf);
        buf
    })
}

fn failed(line: &str, status: std::process::ExitStatus, stderr: &[u8]) -> CommandError {
    CommandError {
        command: line.to_string(),
        status: status.to_string(),
        stderr_tail: tail(stderr),
    }
}

fn spawn(cmd: &mut Command, line: &str) -> anyhow::Result<std::process::Child> {
    Ok(cmd.spawn().map_err(|e| CommandError {
        command: line.to_string(),
        status: format!("could not be started: {e}"),
        stderr_tail: String::new(),
    })?)
}

/// Runs `cmd` with its stdout copied into `out` (a send stream); returns the bytes copied.
/// A failing writer kills the command; a failing command is reported with its stderr.
pub fn stream_out(cmd: &mut Command, out: &mut dyn std::io::Write) -> anyhow::Result<u64> {
    use std::process::Stdio;
    let line = command_line(cmd);
    let mut child = spawn(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
        &line,
    )?;
    let stderr = drain_stderr(&mut child);
    let mut stdout = child.stdout.take().expect("stdout piped");
    let copied = std::io::copy(&mut stdout, out);
    drop(stdout);
    if let Err(e) = copied {
        let _ = child.kill();
        let _ = child.wait();
        let _ = stderr.join();
        return Err(anyhow::Error::new(e).context(format!("passing on the output of `{line}`")));
    }
    let status = child.wait()?;
    let err = stderr.join().unwrap_or_default();
    if !status.success() {
        return Err(failed(&line, status, &err).into());
    }
    Ok(copied.unwrap_or(0))
}

/// Runs `cmd` with `input` copied into its stdin (a receive). When the input fails (a short
/// or corrupt stream) the command is killed and the input's error returned; when the
/// command fails by itself, its own error (with stderr) comes first.
pub fn stream_in(cmd: &mut Command, input: &mut dyn std::io::Read) -> anyhow::Result<u64> {
    use std::process::Stdio;
    let line = command_line(cmd);
    let mut child = spawn(
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
        &line,
    )?;
    let stderr = drain_stderr(&mut child);
    let mut stdin = child.stdin.take().expect("stdin piped");
    let copied = std::io::copy(input, &mut stdin);
    drop(stdin);
    match copied {
        Ok(n) => {
            let status = child.wait()?;
            let err = stderr.join().unwrap_or_default();
            if !status.success() {
                return Err(failed(&line, status, &err).into());
            }
            Ok(n)
        }
        Err(e) => {
            // The command may have stopped reading because it failed: give it a moment to
            // say why before it is killed.
            for _ in 0..20 {
                if child.try_wait()?.is_some() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let own = child.try_wait()?;
            let _ = child.kill();
            let _ = child.wait();
            let err = stderr.join().unwrap_or_default();
            match own {
                Some(status) if !status.success() && e.kind() == std::io::ErrorKind::BrokenPipe => {
                    Err(failed(&line, status, &err).into())
                }
                _ => Err(anyhow::Error::new(e).context(format!("feeding `{line}`"))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_pass_through_and_failures_are_told() {
        let mut out = Vec::new();
        let n = stream_out(Command::new("sh").args(["-c", "printf hello"]), &mut out).unwrap();
        assert_eq!((n, out.as_slice()), (5, &b"hello"[..]));
        let e = stream_out(
            Command::new("sh").args(["-c", "echo boom >&2; exit 4"]),
            &mut Vec::new(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("boom"), "{e}");
        let n = stream_in(
            Command::new("sh").args(["-c", "cat >/dev/null"]),
            &mut &b"abc"[..],
        )
        .unwrap();
        assert_eq!(n, 3);
        // A command that stops reading and fails is the error, not the broken pipe.
        let big = vec![0u8; 4 << 20];
        let e = stream_in(
            Command::new("sh").args(["-c", "echo 'cannot find parent' >&2; exit 1"]),
            &mut big.as_slice(),
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("cannot find parent"), "{e:#}");
    }

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
