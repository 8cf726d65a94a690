//! Handing the terminal over to the caller's own program (`exec`, `shell`): a nested
//! `db-branch env` fetches the branch's connection through the same route and checks as any
//! `env` (here as root, through db-branchd, or over ssh), then this process becomes the
//! program, so its exit code, signals and terminal are the program's own.

use crate::error::{Error, Kind};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// The branch's variables, as `db-branch GLOBALS env NAME --format json` prints them. A
/// refusal or failure of the nested command (already explained on stderr) ends this one
/// with the same exit code.
pub fn branch_variables(
    globals: &[OsString],
    name: &crate::branch::BranchName,
) -> anyhow::Result<Vec<(String, String)>> {
    let exe = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("finding db-branch's own executable: {e}"))?;
    let out = Command::new(&exe)
        .args(globals)
        .args(["env", name.as_str(), "--format", "json"])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| anyhow::anyhow!("running {} env: {e}", exe.display()))?;
    if !out.status.success() {
        let code = out.status.code().unwrap_or(1).clamp(1, 255) as u8;
        return Err(Error::new(Kind::Exited(code), "").into());
    }
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&out.stdout)
        .map_err(|e| anyhow::anyhow!("reading what `db-branch env {name}` printed: {e}"))?;
    Ok(map
        .into_iter()
        .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_string()))
        .collect())
}

/// Becomes `program args…` with `vars` added to the environment (what `exec` and `dotenv
/// run` do). Returns only when it could not: 127 when there is no such program, 126 when
/// it cannot be run, as shells answer.
pub fn become_program(
    program: &OsStr,
    args: &[OsString],
    vars: &[(String, String)],
) -> anyhow::Error {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(vars.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let line = crate::exec::command_line(&cmd);
    let err = cmd.exec();
    let code = if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    Error::new(
        Kind::Exited(code),
        format!("`{line}` could not be started: {err}"),
    )
    .hint("check the command's name and that it is on PATH")
    .into()
}

/// `contents` in an anonymous in-memory file readable by this user only, inherited by the
/// program this process becomes and gone with it (nothing on disk to leave behind), and the
/// path that program opens it by.
pub fn private_file(contents: &str) -> anyhow::Result<(OwnedFd, String)> {
    use nix::sys::memfd::{memfd_create, MFdFlags};
    use nix::sys::stat::{fchmod, Mode};
    // Without MFD_CLOEXEC: the program must inherit it.
    let fd = memfd_create(c"db-branch-options", MFdFlags::empty())
        .map_err(|e| anyhow::anyhow!("making an in-memory option file: {e}"))?;
    // The clients ignore an option file others may write (a memfd starts 0777).
    fchmod(&fd, Mode::S_IRUSR | Mode::S_IWUSR)
        .map_err(|e| anyhow::anyhow!("making the option file private: {e}"))?;
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, contents.as_bytes())?;
    let fd = OwnedFd::from(file);
    let path = format!("/dev/fd/{}", fd.as_raw_fd());
    Ok((fd, path))
}
