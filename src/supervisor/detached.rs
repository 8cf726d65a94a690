//! Helpers of db-branch's own that outlive the invocation that starts them (a pool's
//! recycler): this binary again, in a session of its own, with no terminal and its output
//! appended to a log. Both service managers start them this way; a helper ends itself when
//! its work is gone.

use anyhow::{Context, Result};
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

pub fn spawn(args: &[String], log: &Path) -> Result<()> {
    let exe = std::env::current_exe().context("finding db-branch's own binary")?;
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    let mut cmd = Command::new(&exe);
    // A helper acts for the host, not for whoever's command started it.
    for var in crate::access::CALLER_ENV {
        cmd.env_remove(var);
    }
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    // SAFETY: setsid is async-signal-safe. A session of its own: the caller's terminal
    // closing (a CI step ending) does not take the helper with it.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    cmd.spawn()
        .with_context(|| format!("starting {} {}", exe.display(), args.join(" ")))?;
    Ok(())
}
