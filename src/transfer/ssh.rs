//! Another host over ssh: its own db-branch does the work (`baseline receive`, `baseline
//! send`, `baseline list`, or any command for `--host`), run as `fleet.remote_command`
//! with `fleet.ssh_options`. No daemon on the far side beyond sshd.

use super::endpoint::SshTarget;
use super::remote::{FarGeneration, Incoming, Outgoing, Received, Remote, Shape};
use super::wire::StreamHeader;
use crate::branch::Generation;
use crate::config::FleetConfig;
use crate::error::{Error, Kind};
use crate::exec;
use anyhow::{Context, Result};
use std::io::{Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// What `ssh` itself exits with when it could not connect or log in.
const SSH_FAILED: i32 = 255;

pub struct Ssh {
    target: SshTarget,
    options: Vec<String>,
    remote_command: Vec<String>,
}

impl Ssh {
    pub fn new(target: SshTarget, fleet: &FleetConfig) -> Result<Ssh> {
        let remote_command = shell_words::split(&fleet.remote_command)
            .map_err(|e| crate::error::usage(format!("fleet.remote_command: {e}")))?;
        Ok(Ssh {
            target,
            options: fleet.ssh_options.clone(),
            remote_command,
        })
    }

    /// `ssh … HOST -- 'db-branch ARGS…'` (the far side's shell splits the one string).
    pub fn command(&self, args: &[String], tty: bool) -> Command {
        let mut cmd = Command::new("ssh");
        cmd.args(&self.options);
        cmd.arg(if tty { "-t" } else { "-T" });
        if let Some(p) = self.target.port {
            cmd.arg("-p").arg(p.to_string());
        }
        // `--` first: the destination is never taken for one of ssh's options (the parser
        // refuses a host or user beginning with `-` as well).
        cmd.arg("--").arg(self.target.destination());
        let words: Vec<&str> = self
            .remote_command
            .iter()
            .map(String::as_str)
            .chain(args.iter().map(String::as_str))
            .collect();
        cmd.arg(shell_words::join(words));
        cmd
    }

    /// How a finished far-side command ended, as our error: ssh's own failure, or the far
    /// db-branch's exit code passed on with the end of what it said.
    fn ended(&self, line: &str, status: std::process::ExitStatus, stderr: &[u8]) -> Result<()> {
        if status.success() {
            return Ok(());
        }
        let tail = exec::tail(stderr);
        match status.code() {
            Some(SSH_FAILED) | None => Err(Error::new(
                Kind::Failed,
                format!("could not reach {} over ssh (`{line}`): {tail}", self.target),
            )
            .hint("check that `ssh` logs in without a prompt (keys, fleet.ssh_options) and that db-branch is installed there (fleet.remote_command)")
            .into()),
            Some(code) => Err(Error::new(
                Kind::Exited(code as u8),
                format!("on {}: {}", self.target, tail),
            )
            .into()),
        }
    }

    /// Runs a far-side db-branch command to completion; its stdout.
    fn output(&self, args: &[&str]) -> Result<Vec<u8>> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let mut cmd = self.command(&args, false);
        let line = exec::command_line(&cmd);
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running `{line}`"))?;
        self.ended(&line, out.status, &out.stderr)?;
        Ok(out.stdout)
    }
}

/// A far-side command started with one end of it piped to us; stderr collected.
struct Running {
    child: Child,
    stderr: std::thread::JoinHandle<Vec<u8>>,
    line: String,
}

fn start(mut cmd: Command, stdin: Stdio, stdout: Stdio) -> Result<Running> {
    let line = exec::command_line(&cmd);
    let mut child = cmd
        .stdin(stdin)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting `{line}` (is the ssh client installed?)"))?;
    let mut err = child.stderr.take().expect("piped");
    let stderr = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err.read_to_end(&mut buf);
        buf
    });
    Ok(Running {
        child,
        stderr,
        line,
    })
}

struct Push<'a> {
    ssh: &'a Ssh,
    run: Running,
    stdin: Option<ChildStdin>,
}

impl Push<'_> {
    /// A broken pipe here is the connection's end, not our reader's (which exits 0).
    fn lost(&self, e: std::io::Error) -> std::io::Error {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                format!("the ssh connection to {} ended mid-stream", self.ssh.target),
            )
        } else {
            e
        }
    }
}

impl Write for Push<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.stdin.as_mut().expect("open until finish").write(buf);
        r.map_err(|e| self.lost(e))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.stdin.as_mut().expect("open until finish").flush();
        r.map_err(|e| self.lost(e))
    }
}

impl Outgoing for Push<'_> {
    fn finish(mut self: Box<Self>, _sha256: &str, _bytes: u64) -> Result<Received> {
        drop(self.stdin.take());
        let mut out = Vec::new();
        if let Some(mut o) = self.run.child.stdout.take() {
            o.read_to_end(&mut out)?;
        }
        let status = self.run.child.wait()?;
        let err = std::mem::replace(&mut self.run.stderr, std::thread::spawn(Vec::new))
            .join()
            .unwrap_or_default();
        self.ssh.ended(&self.run.line, status, &err)?;
        serde_json::from_slice(&out).with_context(|| {
            format!(
                "reading what {} said it received: {}",
                self.ssh.target,
                String::from_utf8_lossy(&out)
            )
        })
    }
}

impl Drop for Push<'_> {
    fn drop(&mut self) {
        // Abandoned mid-stream: the far side sees a short stream and keeps nothing.
        if self.stdin.take().is_some() {
            let _ = self.run.child.kill();
            let _ = self.run.child.wait();
        }
    }
}

struct Pull<'a> {
    ssh: &'a Ssh,
    run: Running,
    stdout: ChildStdout,
}

impl Read for Pull<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.stdout.read(buf)
    }
}

impl Incoming for Pull<'_> {
    fn finish(mut self: Box<Self>) -> Result<()> {
        let status = self.run.child.wait()?;
        let err = std::mem::replace(&mut self.run.stderr, std::thread::spawn(Vec::new))
            .join()
            .unwrap_or_default();
        self.ssh.ended(&self.run.line, status, &err)
    }
}

impl Remote for Ssh {
    fn describe(&self) -> String {
        self.target.to_string()
    }

    fn generations(&self) -> Result<Vec<FarGeneration>> {
        let out = self.output(&["--json", "baseline", "list"])?;
        serde_json::from_slice(&out).with_context(|| {
            format!(
                "reading `baseline list` of {}: {}",
                self.target,
                String::from_utf8_lossy(&out)
            )
        })
    }

    fn format(&self) -> Result<Option<String>> {
        let out = self.output(&["--json", "baseline", "receive", "--probe"])?;
        let v: serde_json::Value = serde_json::from_slice(&out).with_context(|| {
            format!(
                "reading what {} receives: {}",
                self.target,
                String::from_utf8_lossy(&out)
            )
        })?;
        Ok(v["format"].as_str().map(str::to_string))
    }

    fn offers(&self, gen: Generation, format: &str) -> Result<Vec<Shape>> {
        let mut offers = vec![Shape::Files];
        if self.format()?.as_deref() == Some(format) {
            offers.push(Shape::Stream(None));
            offers.extend(
                self.generations()?
                    .into_iter()
                    .map(|g| g.generation)
                    .filter(|g| *g < gen)
                    .map(|g| Shape::Stream(Some(g))),
            );
        }
        Ok(offers)
    }

    fn open_send(&self, gen: Generation, shape: Shape) -> Result<Box<dyn Incoming + '_>> {
        let mut args = vec![
            "-q".to_string(),
            "baseline".into(),
            "send".into(),
            gen.0.to_string(),
        ];
        match shape {
            Shape::Stream(Some(p)) => {
                args.push("--parent".into());
                args.push(p.0.to_string());
            }
            Shape::Stream(None) => {}
            Shape::Files => args.push("--as-files".into()),
        }
        let mut run = start(self.command(&args, false), Stdio::null(), Stdio::piped())?;
        let stdout = run.child.stdout.take().expect("piped");
        Ok(Box::new(Pull {
            ssh: self,
            run,
            stdout,
        }))
    }

    fn open_receive(&self, _header: &StreamHeader) -> Result<Box<dyn Outgoing + '_>> {
        let args: Vec<String> = ["-q", "--json", "baseline", "receive"]
            .iter()
            .map(|a| a.to_string())
            .collect();
        let mut run = start(self.command(&args, false), Stdio::piped(), Stdio::piped())?;
        let stdin = run.child.stdin.take();
        Ok(Box::new(Push {
            ssh: self,
            run,
            stdin,
        }))
    }
}

/// `--host ssh://…`: the whole command run there, with our stdin, stdout and stderr, and
/// its exit code returned as ours.
pub fn forward(ssh: &Ssh, args: &[String]) -> Result<u8> {
    use std::io::IsTerminal;
    let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let mut cmd = ssh.command(args, tty);
    let line = exec::command_line(&cmd);
    let status = cmd
        .status()
        .with_context(|| format!("running `{line}` (is the ssh client installed?)"))?;
    match status.code() {
        Some(SSH_FAILED) | None => ssh.ended(&line, status, b"(ssh said why above)").map(|_| 1),
        Some(code) => Ok(code as u8),
    }
}
