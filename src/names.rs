//! The validated names of the domain — branches, checkpoints, databases, pools,
//! generations, labels — parsed before any side effect (`"pr-1".parse::<BranchName>()`),
//! so every layer below the command line holds only names that are safe as a systemd
//! instance, a ZFS dataset component, a directory and a file name.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A string newtype whose only constructor is its `FromStr`: it reads from JSON and TOML
/// through the same check, shows as itself, and serialises as a plain string.
macro_rules! validated_name {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d)?
                    .parse()
                    .map_err(serde::de::Error::custom)
            }
        }
    };
}

pub const MAX_NAME_LEN: usize = 48;

validated_name!(
    /// A branch name that is safe as a systemd instance name, a ZFS dataset component and a
    /// directory name: lowercase letters, digits, `-`, `_` and `.`, starting with a letter or
    /// digit, at most 48 bytes (server socket paths are limited to 107 bytes).
    BranchName
);

impl FromStr for BranchName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let hint = "use lowercase letters, digits, '-', '_' or '.', starting with a letter or digit, e.g. pr-123 or feature_login";
        if s.is_empty() {
            return Err(format!("a branch name cannot be empty; {hint}"));
        }
        if s.len() > MAX_NAME_LEN {
            return Err(format!(
                "branch name {s:?} is {} bytes long; the limit is {MAX_NAME_LEN}",
                s.len()
            ));
        }
        if let Some(c) = s
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(*c)))
        {
            return Err(format!("branch name {s:?} contains {c:?}; {hint}"));
        }
        if !s.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            return Err(format!(
                "branch name {s:?} must start with a letter or digit; {hint}"
            ));
        }
        if s.contains("..") || s.ends_with('.') {
            return Err(format!(
                "branch name {s:?} may not contain '..' or end with '.'; {hint}"
            ));
        }
        Ok(BranchName(s.to_string()))
    }
}

validated_name!(
    /// An application database's name as the server accepts it: 1 to 64 characters, no NUL,
    /// no '/' or backslash (they cannot be in a directory name), not ending in a space.
    DatabaseName
);

impl FromStr for DatabaseName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let count = s.chars().count();
        if count == 0 {
            return Err("a database name cannot be empty".into());
        }
        if count > 64 {
            return Err(format!(
                "database name {s:?} is {count} characters long; the servers' limit is 64"
            ));
        }
        if let Some(c) = s.chars().find(|c| matches!(c, '\0' | '/' | '\\')) {
            return Err(format!(
                "database name {s:?} contains {c:?}, which no server accepts"
            ));
        }
        if s.ends_with(' ') {
            return Err(format!(
                "database name {s:?} ends with a space, which no server accepts"
            ));
        }
        Ok(DatabaseName(s.to_string()))
    }
}

validated_name!(
    /// A checkpoint's tag: the same characters as a branch name (it names a snapshot kept
    /// beside the branch's), at most 32 bytes.
    CheckpointTag
);

impl FromStr for CheckpointTag {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.len() > 32 {
            return Err(format!(
                "checkpoint tag {s:?} is {} bytes long; the limit is 32",
                s.len()
            ));
        }
        s.parse::<BranchName>()
            .map(|_| CheckpointTag(s.to_string()))
            .map_err(|e| e.replace("branch name", "checkpoint tag"))
    }
}

/// `NAME` or `NAME@TAG`: a branch's current state or one of its checkpoints (`--from`,
/// `diff`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchRef {
    pub name: BranchName,
    pub checkpoint: Option<CheckpointTag>,
}

impl FromStr for BranchRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, tag) = match s.split_once('@') {
            Some((n, t)) => (n, Some(t.parse()?)),
            None => (s, None),
        };
        Ok(BranchRef {
            name: name.parse()?,
            checkpoint: tag,
        })
    }
}

impl fmt::Display for BranchRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.checkpoint {
            Some(t) => write!(f, "{}@{t}", self.name),
            None => write!(f, "{}", self.name),
        }
    }
}

/// A baseline generation: 1, 2, 3… shown as `gen-000003`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Generation(pub u32);

impl Generation {
    /// No generation: what a follower is made from (its seed was never sealed as one), so
    /// it counts as no generation's branch.
    pub const NONE: Generation = Generation(0);

    pub fn dir_name(self) -> String {
        format!("gen-{:06}", self.0)
    }
    pub fn from_dir_name(s: &str) -> Option<Self> {
        let n = s.strip_prefix("gen-")?;
        if n.len() != 6 {
            return None;
        }
        n.parse().ok().map(Generation)
    }
    pub fn next(self) -> Self {
        Generation(self.0 + 1)
    }
}

impl FromStr for Generation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let digits = s.strip_prefix("gen-").unwrap_or(s);
        match digits.parse::<u32>() {
            Ok(n) if n > 0 => Ok(Generation(n)),
            _ => Err(format!(
                "`{s}` is not a baseline generation; write it like 3 or gen-000003 (see `db-branch baseline list`)"
            )),
        }
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.dir_name())
    }
}

validated_name!(
    /// A pool's name: a branch name short enough that `NAME-1000` still is one.
    PoolName
);

impl FromStr for PoolName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        const MAX: usize = 40;
        BranchName::from_str(s).map_err(|e| e.replace("branch name", "pool name"))?;
        if s.len() > MAX {
            return Err(format!(
                "pool name {s:?} is {} bytes long; the limit is {MAX} (its slots are named \
                 NAME-1, NAME-2, …)",
                s.len()
            ));
        }
        Ok(PoolName(s.to_string()))
    }
}

validated_name!(
    /// One entry of the trash: `MILLIS-NAME`, the moment the branch was deleted (Unix
    /// milliseconds, so entries sort by age) and its name. A branch deleted, made anew and
    /// deleted again has two entries.
    TrashId
);

impl TrashId {
    pub fn new(deleted: chrono::DateTime<chrono::Utc>, name: &BranchName) -> TrashId {
        TrashId(format!("{}-{name}", deleted.timestamp_millis().max(0)))
    }
    /// The branch it was.
    pub fn branch(&self) -> BranchName {
        let (_, name) = self.0.split_once('-').expect("validated");
        name.parse().expect("validated")
    }
}

impl FromStr for TrashId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("{s:?} is not a trash entry (MILLIS-NAME, as `db-branch trash` shows)");
        let (millis, name) = s.split_once('-').ok_or_else(bad)?;
        if millis.is_empty() || millis.len() > 16 || !millis.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        BranchName::from_str(name).map_err(|e| format!("{}: {e}", bad()))?;
        Ok(TrashId(s.to_string()))
    }
}

/// `key=value` for `--label`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub key: String,
    pub value: String,
}

impl FromStr for Label {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| format!("label {s:?} is not key=value (e.g. pr=123)"))?;
        let key_ok = !k.is_empty()
            && k.len() <= 63
            && k.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c));
        if !key_ok {
            return Err(format!(
                "label key {k:?} must be 1-63 lowercase letters, digits, '-', '_' or '.'"
            ));
        }
        if v.len() > 255 || v.chars().any(|c| c.is_control()) {
            return Err(format!(
                "label value {v:?} must be at most 255 printable characters"
            ));
        }
        Ok(Label {
            key: k.into(),
            value: v.into(),
        })
    }
}
