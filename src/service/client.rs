//! The caller's side: a non-root `db-branch` forwards its command to the service and exits
//! with the command's exit code.

use super::{BUS_NAME, FORWARDED_ENV, OBJECT_PATH};
use crate::error::{Error, Kind};
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use zbus::Fd;

#[zbus::proxy(
    interface = "io.dbbranch.Manager1",
    default_service = "io.dbbranch.Manager1",
    default_path = "/io/dbbranch/Manager1"
)]
trait Manager1 {
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        args: Vec<String>,
        config: String,
        env: HashMap<String, String>,
        stdin: Fd<'_>,
        stdout: Fd<'_>,
        stderr: Fd<'_>,
        status: Fd<'_>,
        cwd: Fd<'_>,
    ) -> zbus::Result<()>;
}

/// The arguments the service gets: the command line without `--config` (the config goes in
/// its own argument, which the service checks; its worker refuses one in the arguments).
pub fn forwarded_args(args: impl Iterator<Item = String>) -> Vec<String> {
    crate::argv::without_flag(args, "config")
}

/// Runs `args` (db-branch's arguments, without the program name) through the service;
/// returns the command's exit code.
pub fn forward(args: Vec<String>, config: &Path) -> Result<u8> {
    let env: HashMap<String, String> = FORWARDED_ENV
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect();
    let (status_r, status_w) = nix::unistd::pipe().context("making a pipe")?;
    let config = std::fs::canonicalize(config).unwrap_or_else(|_| config.to_path_buf());
    // Where relative paths in the command start: a descriptor of this directory, so the
    // service learns where we are rather than where we say we are.
    let cwd = std::fs::File::open(".").context("opening the working directory")?;
    zbus::block_on(async {
        let conn = zbus::Connection::system()
            .await
            .map_err(unreachable_service)?;
        let proxy = Manager1Proxy::builder(&conn)
            .destination(BUS_NAME)
            .path(OBJECT_PATH)
            .build()
            .await?;
        let stdin = std::io::stdin();
        let stdout = std::io::stdout();
        let stderr = std::io::stderr();
        proxy
            .run(
                args,
                config.display().to_string(),
                env,
                Fd::from(&stdin),
                Fd::from(&stdout),
                Fd::from(&stderr),
                Fd::from(&status_w),
                Fd::from(&cwd),
            )
            .await
            .map_err(refused_or_unreachable)
    })?;
    drop(status_w);
    let mut text = String::new();
    std::fs::File::from(status_r)
        .read_to_string(&mut text)
        .context("reading the exit status from the db-branch service")?;
    text.trim().parse::<u8>().map_err(|_| {
        anyhow::anyhow!(
            "the db-branch service did not report how the command ended; see `journalctl -u {}`",
            super::UNIT
        )
    })
}

fn unreachable_service(e: zbus::Error) -> anyhow::Error {
    Error::new(
        Kind::Permission,
        format!("db-branch needs root, or its service for other users, and the system bus is not reachable: {e}"),
    )
    .hint("run it with sudo, or ask an admin to run `sudo db-branch init` on a host where systemd is PID 1")
    .into()
}

fn refused_or_unreachable(e: zbus::Error) -> anyhow::Error {
    // The service's refusals arrive as the bus's standard errors (zbus names them).
    if let zbus::Error::FDO(fdo) = &e {
        match fdo.as_ref() {
            zbus::fdo::Error::AccessDenied(msg) => {
                return Error::new(Kind::Permission, msg.clone()).into()
            }
            zbus::fdo::Error::LimitsExceeded(msg) => {
                return Error::new(Kind::Refused, msg.clone()).into()
            }
            _ => {}
        }
    }
    match &e {
        zbus::Error::MethodError(name, msg, _) if name.as_str().ends_with("LimitsExceeded") => {
            Error::new(Kind::Refused, msg.clone().unwrap_or_else(|| e.to_string())).into()
        }
        zbus::Error::MethodError(name, msg, _) if name.as_str().ends_with("AccessDenied") => {
            Error::new(Kind::Permission, msg.clone().unwrap_or_else(|| e.to_string())).into()
        }
        zbus::Error::MethodError(name, _, _)
            if name.as_str().ends_with("ServiceUnknown") || name.as_str().ends_with("NameHasNoOwner") =>
        {
            Error::new(
                Kind::Permission,
                format!("db-branch needs root, or its service {BUS_NAME} for other users, which is not installed here: {e}"),
            )
            .hint("run it with sudo, or ask an admin to run `sudo db-branch init` (it installs the service)")
            .into()
        }
        _ => anyhow::Error::from(e).context(format!("calling the db-branch service {BUS_NAME}")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_config_is_not_forwarded_in_the_arguments() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            super::forwarded_args(
                args(&["--config", "/x", "create", "a", "--config=/y", "--json"]).into_iter()
            ),
            args(&["create", "a", "--json"])
        );
        assert_eq!(
            super::forwarded_args(
                args(&["pool", "run", "p", "--", "t", "--config", "c"]).into_iter()
            ),
            args(&["pool", "run", "p", "--", "t", "--config", "c"])
        );
    }
}
