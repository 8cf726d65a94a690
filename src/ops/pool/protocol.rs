//! The claim protocol a pool's recycler speaks on its unix socket (docs/pools.md, "The
//! claim protocol"): one JSON object per line each way, one reply per request, in order.
//! A claim made on a connection lasts as long as the connection; one made for a process
//! (`holder_pid`, what `pool claim` sends) lasts as long as that process.
//!
//! Kept small on purpose — a test runner in any language speaks it in a few lines — and
//! open: fields a side does not know are ignored, so either side can add some.

use anyhow::{Context, Result};
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// A request line longer than this is refused (it can only be garbage or an attack).
pub const MAX_LINE: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Request {
    /// A ready slot, waiting up to `wait_ms` for one (none: not at all). With `holder_pid`,
    /// the claim is held by that process (one of the caller's own) instead of the
    /// connection.
    Claim {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wait_ms: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        holder_pid: Option<u32>,
    },
    /// Reset the slot this connection holds (SIGKILL, roll back, start): pristine again, with
    /// the same connection details.
    Reset,
    /// Hand the slot this connection holds back to be recycled.
    Release,
}

/// The answer to one request. `ok` false: `exit` is the exit code `db-branch` would have
/// ended with (docs/json.md), `error` what it would have said.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<usize>,
    /// The variables `pool claim --json` prints, in the same order.
    #[serde(default, skip_serializing_if = "Env::is_empty")]
    pub env: Env,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What to do about it, a line each (the `hint:` lines db-branch prints).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<String>,
}

impl Reply {
    pub fn claimed(slot: usize, env: Env) -> Reply {
        Reply {
            ok: true,
            slot: Some(slot),
            env,
            ..Reply::default()
        }
    }

    pub fn done() -> Reply {
        Reply {
            ok: true,
            ..Reply::default()
        }
    }

    pub fn failed(exit: u8, error: String) -> Reply {
        Reply {
            ok: false,
            exit: Some(exit),
            error: Some(error),
            ..Reply::default()
        }
    }

    /// A failure as db-branch reports its own: the exit code its kind maps to, the cause
    /// chain, the hints.
    pub fn of_error(err: &anyhow::Error) -> Reply {
        let (kind, hints) = crate::report::classify(err);
        Reply {
            hints,
            ..Reply::failed(kind.exit_code(), crate::report::chain_text(err))
        }
    }

    /// The URL among the variables (`env --format url`'s).
    pub fn url(&self) -> &str {
        self.env.get("DATABASE_URL").unwrap_or_default()
    }
}

/// Variables in the order db-branch made them: a JSON object on the wire, whose key order a
/// plain map would lose (and `pool claim` prints them in order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env(pub Vec<(String, String)>);

impl Env {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

impl Serialize for Env {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Env {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Env, D::Error> {
        struct InOrder;
        impl<'de> Visitor<'de> for InOrder {
            type Value = Env;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> std::result::Result<Env, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = m.next_entry::<String, String>()? {
                    out.push(entry);
                }
                Ok(Env(out))
            }
        }
        d.deserialize_map(InOrder)
    }
}

/// One JSON line (no newline inside: serde_json escapes them in strings).
pub fn write_line<T: Serialize>(w: &mut impl Write, value: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value).expect("protocol values serialise");
    line.push(b'\n');
    w.write_all(&line)?;
    w.flush()
}

/// A client of a pool's socket: what `pool claim` uses when the recycler listens.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    /// Connects; None when nothing listens there (no recycler, or an old one): the caller
    /// falls back to claiming through the pool's files.
    pub fn connect(socket: &Path) -> Result<Option<Client>> {
        match UnixStream::connect(socket) {
            Ok(stream) => {
                let writer = stream
                    .try_clone()
                    .with_context(|| format!("connecting to {}", socket.display()))?;
                Ok(Some(Client {
                    reader: BufReader::new(stream),
                    writer,
                }))
            }
            // Not there, not listening, or not reachable by this user (a root directory
            // they may not traverse): the files' way, or db-branchd, serves them instead.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound
                        | std::io::ErrorKind::ConnectionRefused
                        | std::io::ErrorKind::PermissionDenied
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e).with_context(|| format!("connecting to {}", socket.display())),
        }
    }

    pub fn request(&mut self, request: &Request) -> Result<Reply> {
        write_line(&mut self.writer, request).context("sending to the pool's recycler")?;
        let mut line = Vec::new();
        let n = self
            .reader
            .by_ref()
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
            .context("reading the pool's recycler's reply")?;
        if n == 0 {
            anyhow::bail!("the pool's recycler closed the connection without a reply");
        }
        serde_json::from_slice(&line).with_context(|| {
            format!(
                "the pool's recycler replied {:?}, which is not a reply",
                String::from_utf8_lossy(&line)
            )
        })
    }

    /// How long a reply may take: a claim waits as long as asked, plus a margin.
    pub fn set_timeout(&self, wait: Option<Duration>) -> Result<()> {
        let limit = wait.unwrap_or_default() + Duration::from_secs(30);
        self.writer
            .set_read_timeout(Some(limit))
            .context("setting the socket's timeout")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_what_the_document_shows() {
        let parse = |s: &str| serde_json::from_str::<Request>(s);
        assert_eq!(
            parse(r#"{"op":"claim"}"#).unwrap(),
            Request::Claim {
                wait_ms: None,
                holder_pid: None
            }
        );
        assert_eq!(
            parse(r#"{"op":"claim","wait_ms":5000,"extra":true}"#).unwrap(),
            Request::Claim {
                wait_ms: Some(5000),
                holder_pid: None
            },
            "unknown fields are ignored"
        );
        assert_eq!(parse(r#"{"op":"reset"}"#).unwrap(), Request::Reset);
        assert_eq!(parse(r#"{"op":"release"}"#).unwrap(), Request::Release);
        assert!(parse(r#"{"op":"delete"}"#).is_err());
        assert!(parse(r#"{"op":"claim","holder_pid":-1}"#).is_err());
    }

    #[test]
    fn the_variables_keep_their_order_on_the_wire() {
        let reply = Reply::claimed(
            3,
            Env(vec![
                ("MYSQL_USER".into(), "u".into()),
                ("DATABASE_URL".into(), "mysql://u@127.0.0.1:1/".into()),
                ("DB_BRANCH_POOL_SLOT".into(), "3".into()),
            ]),
        );
        let text = serde_json::to_string(&reply).unwrap();
        assert_eq!(
            text,
            r#"{"ok":true,"slot":3,"env":{"MYSQL_USER":"u","DATABASE_URL":"mysql://u@127.0.0.1:1/","DB_BRANCH_POOL_SLOT":"3"}}"#
        );
        let back: Reply = serde_json::from_str(&text).unwrap();
        assert_eq!(back, reply);
        assert_eq!(back.url(), "mysql://u@127.0.0.1:1/");
        let failed = serde_json::to_string(&Reply::failed(75, "no ready slot".into())).unwrap();
        assert_eq!(failed, r#"{"ok":false,"exit":75,"error":"no ready slot"}"#);
    }
}
