//! Where baselines go or come from: `ssh://[user@]host[:port]` or `file:DIR`, validated
//! before anything is sent.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Ssh(SshTarget),
    /// A directory of stream files and their manifest (a shared or object-store mount).
    Dir(PathBuf),
}

/// `ssh://[user@]host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}

impl SshTarget {
    /// `[user@]host` as `ssh` takes it.
    pub fn destination(&self) -> String {
        match &self.user {
            Some(u) => format!("{u}@{}", self.host),
            None => self.host.clone(),
        }
    }
}

const FORMS: &str = "use ssh://[user@]host[:port] or file:DIR";

impl FromStr for SshTarget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let url = url::Url::parse(s)
            .map_err(|e| format!("{s:?} is not an ssh:// address ({e}); {FORMS}"))?;
        if url.scheme() != "ssh" {
            return Err(format!("{s:?} is not an ssh:// address; {FORMS}"));
        }
        if url.password().is_some() {
            return Err(format!(
                "{s:?} has a password in it; ssh logs in with keys (see fleet.ssh_options)"
            ));
        }
        if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
            return Err(format!(
                "{s:?} has a path; the far side's db-branch config says where its pool is \
                 (fleet.remote_command), so give only ssh://[user@]host[:port]"
            ));
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| format!("{s:?} names no host; {FORMS}"))?;
        if host.starts_with('-') || url.username().starts_with('-') {
            return Err(format!(
                "{s:?} begins its host or user with `-`, which ssh would take for an option; {FORMS}"
            ));
        }
        Ok(SshTarget {
            user: Some(url.username())
                .filter(|u| !u.is_empty())
                .map(str::to_string),
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port: url.port(),
        })
    }
}

impl FromStr for Endpoint {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(dir) = s.strip_prefix("file:") {
            let dir = dir.strip_prefix("//").unwrap_or(dir);
            if dir.is_empty() {
                return Err(format!(
                    "{s:?} names no directory; use file:/path/to/streams"
                ));
            }
            let path = PathBuf::from(dir);
            let path = if path.is_absolute() {
                path
            } else {
                std::env::current_dir()
                    .map_err(|e| format!("{s:?}: {e}"))?
                    .join(path)
            };
            return Ok(Endpoint::Dir(path));
        }
        if s.starts_with("ssh://") {
            return s.parse().map(Endpoint::Ssh);
        }
        Err(format!("{s:?} is not a place for baselines; {FORMS}"))
    }
}

impl fmt::Display for SshTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ssh://{}", self.destination())?;
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Ssh(t) => t.fmt(f),
            Endpoint::Dir(d) => write!(f, "file:{}", d.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_or_say_why_not() {
        let e: Endpoint = "ssh://ci@runner-3:2222".parse().unwrap();
        assert_eq!(
            e,
            Endpoint::Ssh(SshTarget {
                user: Some("ci".into()),
                host: "runner-3".into(),
                port: Some(2222)
            })
        );
        assert_eq!(e.to_string(), "ssh://ci@runner-3:2222");
        let e: Endpoint = "ssh://10.0.0.7".parse().unwrap();
        assert_eq!(e.to_string(), "ssh://10.0.0.7");
        assert_eq!(
            "file:/mnt/streams".parse::<Endpoint>().unwrap(),
            Endpoint::Dir("/mnt/streams".into())
        );
        for (bad, says) in [
            ("runner-3", "not a place"),
            ("ssh://", "no host"),
            ("ssh://h/var/lib", "has a path"),
            ("ssh://u:pw@h", "password"),
            ("ssh://-oProxyCommand=x", "`-`"),
            ("ssh://-oProxyCommand=x@h", "`-`"),
            ("file:", "no directory"),
            ("http://h", "not a place"),
        ] {
            let e = bad.parse::<Endpoint>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
