//! What went wrong, as a kind that decides the exit code, a message that says what failed,
//! and hints that say what to do. Errors travel as `anyhow` chains (each layer adds what it
//! was doing); the kind is found once, here, from the typed errors in the chain: this
//! module's own `Error`, and the typed errors of the storage, server, supervisor, lock and
//! command-running layers.

use std::process::ExitCode;

/// Exit codes documented in the README.
pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILURE: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
/// `EX_TEMPFAIL`: refused for lack of memory or a busy lock; retrying later may work.
pub const EXIT_REFUSED: u8 = 75;
/// `EX_NOPERM`: the caller may not do this (another user's branch).
pub const EXIT_PERMISSION: u8 = 77;

/// What kind of failure, which decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Bad input: a name, flag, config key or value. Nothing was changed.
    Usage,
    /// The thing named does not exist (a branch, a baseline, a file). Nothing was changed.
    NotFound,
    /// A guard refused (memory, disk space, a lock held too long). Nothing was changed.
    Refused,
    /// The caller may not do this.
    Permission,
    /// Something failed on the way; the message names the step.
    Failed,
    /// Our reader went away (`db-branch list | head -1`): not an error for anyone.
    BrokenPipe,
    /// A command db-branch ran for the user (`pool run -- CMD`) exited with this status:
    /// passed on as ours.
    Exited(u8),
}

impl Kind {
    pub fn exit_code(self) -> u8 {
        match self {
            Kind::Usage | Kind::NotFound => EXIT_USAGE,
            Kind::Refused => EXIT_REFUSED,
            Kind::Permission => EXIT_PERMISSION,
            Kind::Failed => EXIT_FAILURE,
            Kind::BrokenPipe => EXIT_OK,
            Kind::Exited(code) => code,
        }
    }
}

/// An error with a kind and hints. Build one with `usage`, `refused`, `not_found`, … and add
/// hints with `hint`.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub kind: Kind,
    pub message: String,
    /// What the user can do about it, one sentence each.
    pub hints: Vec<String>,
}

impl Error {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            hints: Vec::new(),
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }
}

pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    Error::new(Kind::Usage, msg).into()
}

pub fn refused(msg: impl Into<String>) -> anyhow::Error {
    Error::new(Kind::Refused, msg).into()
}

pub fn not_found(msg: impl Into<String>) -> anyhow::Error {
    Error::new(Kind::NotFound, msg).into()
}

pub fn permission(msg: impl Into<String>) -> anyhow::Error {
    Error::new(Kind::Permission, msg).into()
}

/// Errors of a layer below the operations that know their own kind. Each layer's typed
/// error implements this; `classify` finds them in a chain.
pub trait Classified {
    fn kind(&self) -> Kind;
    fn hints(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The kind and hints of an error chain: the most specific typed error found in it (the
/// outermost one that has a kind), `Failed` when none has.
pub fn classify(err: &anyhow::Error) -> (Kind, Vec<String>) {
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<Error>() {
            return (e.kind, e.hints.clone());
        }
        let layered: Option<&dyn Classified> =
            if let Some(e) = cause.downcast_ref::<crate::storage::StorageError>() {
                Some(e)
            } else if let Some(e) = cause.downcast_ref::<crate::server::ServerError>() {
                Some(e)
            } else if let Some(e) = cause.downcast_ref::<crate::store::locks::LockBusy>() {
                Some(e)
            } else if let Some(e) = cause.downcast_ref::<crate::exec::CommandError>() {
                Some(e)
            } else if let Some(e) = cause.downcast_ref::<std::io::Error>() {
                if e.kind() == std::io::ErrorKind::BrokenPipe {
                    return (Kind::BrokenPipe, Vec::new());
                }
                None
            } else {
                None
            };
        if let Some(e) = layered {
            return (e.kind(), e.hints());
        }
    }
    (Kind::Failed, Vec::new())
}

/// The exit code for an error chain.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    classify(err).0.exit_code()
}

pub fn to_exit_code(code: u8) -> ExitCode {
    ExitCode::from(code)
}

/// The text people see for an error: the chain, then one `hint:` line per hint.
pub fn render(err: &anyhow::Error) -> String {
    // A command run for us already said what went wrong (db-branchd's, `pool run`'s).
    if err
        .downcast_ref::<Error>()
        .is_some_and(|e| e.message.is_empty())
    {
        return String::new();
    }
    let (_, hints) = classify(err);
    let mut out = format!("db-branch: error: {}", chain_text(err));
    for h in hints {
        out.push_str("\n  hint: ");
        out.push_str(&h);
    }
    out
}

/// The chain as `outer: inner: cause`, like `{:#}`, but a server's error as the client
/// prints it (`ERROR 1046 (3D000): No database selected`), not as a Rust value.
pub fn chain_text(err: &anyhow::Error) -> String {
    err.chain()
        .map(|cause| match cause.downcast_ref::<mysql::Error>() {
            Some(mysql::Error::MySqlError(m)) => {
                format!("ERROR {} ({}): {}", m.code, m.state, m.message)
            }
            _ => cause.to_string(),
        })
        .collect::<Vec<_>>()
        .join(": ")
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
        assert_eq!(exit_code(&not_found("no branch x")), EXIT_USAGE);
        assert_eq!(exit_code(&permission("not yours")), EXIT_PERMISSION);
        assert_eq!(exit_code(&anyhow::anyhow!("boom")), EXIT_FAILURE);
    }

    #[test]
    fn a_closed_pipe_is_not_an_error() {
        let e = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("writing the list");
        assert_eq!(classify(&e).0, Kind::BrokenPipe);
        assert_eq!(exit_code(&e), EXIT_OK);
    }

    #[test]
    fn server_errors_read_as_the_client_prints_them() {
        let server = mysql::Error::MySqlError(mysql::MySqlError {
            state: "3D000".into(),
            message: "No database selected".into(),
            code: 1046,
        });
        let err = anyhow::Error::from(server).context("statement 3");
        assert_eq!(
            render(&err),
            "db-branch: error: statement 3: ERROR 1046 (3D000): No database selected"
        );
    }

    #[test]
    fn hints_are_rendered_after_the_message() {
        let e: anyhow::Error = Error::new(Kind::Refused, "not enough memory")
            .hint("stop idle branches with `db-branch stop-idle`")
            .into();
        let text = render(&e.context("creating branch a"));
        assert!(
            text.starts_with("db-branch: error: creating branch a: not enough memory"),
            "{text}"
        );
        assert!(text.ends_with("\n  hint: stop idle branches with `db-branch stop-idle`"));
    }
}
