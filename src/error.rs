//! What went wrong, as a kind that decides the exit code, a message that says what failed,
//! and hints that say what to do. Errors travel as `anyhow` chains (each layer adds what it
//! was doing); each layer's typed error says its own kind (`Classified`), and `report`,
//! above them all, finds the kind of a whole chain. The bottom of the house: this module
//! names nothing of any other.

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
