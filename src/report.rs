//! An error chain as people and scripts see it: its kind (from the first typed error in the
//! chain: `error::Error`, or a layer's own — storage, server, locks, external commands),
//! its exit code, and its text with hints. Above every layer whose errors it reads, so that
//! `error` stays at the bottom.

use crate::error::{Classified, Error, Kind};

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

/// What the program ends with for an error: its exit code, and the text for stderr (empty
/// when there is nothing to say: a closed pipe, or a command run for us that said it).
/// `main` prints this; the snapshot tests hold it per kind.
pub fn outcome(err: &anyhow::Error) -> (u8, String) {
    let (kind, _) = classify(err);
    let text = if kind == Kind::BrokenPipe {
        String::new()
    } else {
        render(err)
    };
    (kind.exit_code(), text)
}

/// The exit code for an error chain.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    classify(err).0.exit_code()
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
    use crate::error::*;
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
