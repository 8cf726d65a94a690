//! One error enum for the failures that need their own exit code, and the mapping from any
//! error chain to the documented exit codes.

use std::process::ExitCode;

/// Exit codes documented in the README.
pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILURE: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
/// `EX_TEMPFAIL`: refused for lack of memory or a busy lock; retrying later may work.
pub const EXIT_REFUSED: u8 = 75;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input: a name, flag, config key or value. Nothing was changed.
    #[error("{0}")]
    Usage(String),
    /// A guard refused the operation (memory, lock). Nothing was changed.
    #[error("{0}")]
    Refused(String),
    /// An external command failed; carries the whole command line and the end of its stderr.
    #[error("`{command}` failed ({status}){}", tail_suffix(.stderr_tail))]
    Command {
        command: String,
        status: String,
        stderr_tail: String,
    },
}

fn tail_suffix(tail: &str) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!(":\n{tail}")
    }
}

pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    Error::Usage(msg.into()).into()
}

pub fn refused(msg: impl Into<String>) -> anyhow::Error {
    Error::Refused(msg.into()).into()
}

/// The exit code for an error: the most specific kind found anywhere in its chain.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        match cause.downcast_ref::<Error>() {
            Some(Error::Usage(_)) => return EXIT_USAGE,
            Some(Error::Refused(_)) => return EXIT_REFUSED,
            _ => {}
        }
    }
    EXIT_FAILURE
}

pub fn to_exit_code(code: u8) -> ExitCode {
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn exit_codes_follow_the_chain() {
        let e = Err::<(), _>(refused("no memory"))
            .context("create x")
            .unwrap_err();
        assert_eq!(exit_code(&e), EXIT_REFUSED);
        let e = Err::<(), _>(usage("bad name"))
            .context("create")
            .unwrap_err();
        assert_eq!(exit_code(&e), EXIT_USAGE);
        assert_eq!(exit_code(&anyhow::anyhow!("boom")), EXIT_FAILURE);
    }

    #[test]
    fn command_error_names_command_and_stderr() {
        let e = Error::Command {
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
}
