//! The server's own command-line client, fed by us: SQL files and dumps reach the server
//! exactly as `mysql < file` would send them (bytes untouched, `--binary-mode`), while we
//! keep the progress and map an error back to the statement that caused it.

use crate::exec::{command_line, tail, CommandError};
use anyhow::{Context, Result};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread::JoinHandle;

/// A running client reading statements from us.
pub struct ClientFeed {
    child: Child,
    stdin: Option<ChildStdin>,
    errors: Option<JoinHandle<Vec<u8>>>,
    line: String,
}

/// How a client session ended badly: the command and its stderr, and the input line the
/// client named in `ERROR 1064 (42000) at line 7: …`.
#[derive(Debug)]
pub struct ClientFailure {
    pub error: CommandError,
    /// The 1-based line of our input the failing statement started on.
    pub line: Option<u64>,
    /// The server's words (`ERROR 1046 (3D000): No database selected`), when it said any.
    pub message: Option<String>,
}

impl ClientFeed {
    /// Starts `program` as root over `socket`. `binary_mode`: NUL bytes and `\r\n` pass
    /// untouched and client commands other than `DELIMITER` are off (for dumps);
    /// `delimiter` replaces `;` (our own marker between statements we already split).
    pub fn start(
        program: &Path,
        socket: &Path,
        binary_mode: bool,
        delimiter: Option<&str>,
    ) -> Result<ClientFeed> {
        let mut cmd = Command::new(program);
        cmd.arg("--no-defaults")
            .arg(format!("--socket={}", socket.display()))
            .arg("--user=root")
            .arg("--batch")
            .arg("--default-character-set=utf8mb4")
            .arg("--max-allowed-packet=1G");
        if binary_mode {
            cmd.arg("--binary-mode");
        }
        if let Some(d) = delimiter {
            cmd.arg(format!("--delimiter={d}"));
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let line = command_line(&cmd);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        let stdin = child.stdin.take();
        let mut stderr = child.stderr.take().expect("piped");
        // Read stderr meanwhile, so a chatty client cannot block on a full pipe.
        let errors = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stderr.read_to_end(&mut buf);
            buf
        });
        Ok(ClientFeed {
            child,
            stdin,
            errors: Some(errors),
            line,
        })
    }

    /// Sends bytes; false once the client has stopped reading (it stops at the first
    /// error: `finish` says which).
    pub fn write(&mut self, bytes: &[u8]) -> bool {
        match &mut self.stdin {
            Some(stdin) => stdin.write_all(bytes).is_ok(),
            None => false,
        }
    }

    /// Ends the input and waits for the client. `input` names what was fed, for messages.
    pub fn finish(mut self, input: &str) -> std::result::Result<(), ClientFailure> {
        drop(self.stdin.take());
        let status = self.child.wait();
        let stderr = self
            .errors
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        let status = match status {
            Ok(s) if s.success() => return Ok(()),
            Ok(s) => s.to_string(),
            Err(e) => format!("could not be waited for: {e}"),
        };
        let text = String::from_utf8_lossy(&stderr);
        let (line, message) = error_line(&text);
        Err(ClientFailure {
            error: CommandError {
                command: format!("{} < {input}", self.line),
                status,
                stderr_tail: tail(&stderr),
            },
            line,
            message,
        })
    }
}

impl Drop for ClientFeed {
    fn drop(&mut self) {
        // Abandoned half-way (an error of ours, a cancel): the client must not linger.
        if self.errors.is_some() {
            drop(self.stdin.take());
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The line and message of `ERROR 1046 (3D000) at line 7: No database selected`.
fn error_line(stderr: &str) -> (Option<u64>, Option<String>) {
    for l in stderr.lines() {
        let Some(rest) = l.trim().strip_prefix("ERROR ") else {
            continue;
        };
        if let Some((code, after)) = rest.split_once(" at line ") {
            let (number, words) = after.split_once(':').unwrap_or((after, ""));
            return (
                number.trim().parse().ok(),
                Some(format!("ERROR {}: {}", code.trim(), words.trim())),
            );
        }
        return (None, Some(format!("ERROR {rest}")));
    }
    (None, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failing_line_is_read_from_either_client() {
        assert_eq!(
            error_line("ERROR 1046 (3D000) at line 7: No database selected\n"),
            (
                Some(7),
                Some("ERROR 1046 (3D000): No database selected".into())
            )
        );
        // MySQL's client prefixes its name.
        assert_eq!(
            error_line("mysql: [Warning] x\nERROR 1064 (42000) at line 12: You have an error\n").0,
            Some(12)
        );
        assert_eq!(
            error_line("ERROR 2002 (HY000): Can't connect").1.as_deref(),
            Some("ERROR 2002 (HY000): Can't connect")
        );
        assert_eq!(error_line("nothing"), (None, None));
    }
}
