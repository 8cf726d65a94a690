//! `BranchName` (validated once, before any side effect) and the branch record kept on disk.

use crate::values::ByteSize;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;
use std::str::FromStr;

pub const MAX_NAME_LEN: usize = 48;

/// A branch name that is safe as a systemd instance name, a ZFS dataset component and a
/// directory name: lowercase letters, digits, `-`, `_` and `.`, starting with a letter or
/// digit, at most 48 bytes (server socket paths are limited to 107 bytes).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct BranchName(String);

impl BranchName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

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

impl<'de> Deserialize<'de> for BranchName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for BranchName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A baseline generation: 1, 2, 3… shown as `gen-000003`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Generation(pub u32);

impl Generation {
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

/// How far a branch got. A record left in `Creating` belongs to a create that died half-way;
/// the next command on that branch finishes the clean-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Creating,
    Ready,
}

/// What db-branch knows about a branch, stored as JSON next to its option file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BranchRecord {
    pub name: BranchName,
    pub port: u16,
    pub baseline: Generation,
    pub buffer_pool: ByteSize,
    pub created: DateTime<Utc>,
    pub phase: Phase,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_names() {
        for n in [
            "a",
            "pr-123",
            "feature_login",
            "v1.2",
            "x".repeat(48).as_str(),
        ] {
            assert!(n.parse::<BranchName>().is_ok(), "{n}");
        }
    }

    #[test]
    fn bad_names_are_refused_with_a_reason() {
        for n in [
            "",
            "-lead",
            ".hidden",
            "_x",
            "Upper",
            "has space",
            "a/b",
            "a@init",
            "a..b",
            "trail.",
            "ü",
            "semi;colon",
            "$(reboot)",
            "back\\slash",
            "tab\t",
            "new\nline",
            "x".repeat(49).as_str(),
            "a%b",
            "a:b",
        ] {
            let e = n.parse::<BranchName>().unwrap_err();
            assert!(!e.is_empty(), "{n}");
        }
    }

    #[test]
    fn generations() {
        assert_eq!("3".parse::<Generation>().unwrap(), Generation(3));
        assert_eq!("gen-000003".parse::<Generation>().unwrap(), Generation(3));
        assert!("0".parse::<Generation>().is_err());
        assert!("latest".parse::<Generation>().is_err());
        assert_eq!(Generation(7).dir_name(), "gen-000007");
        assert_eq!(Generation::from_dir_name("gen-000007"), Some(Generation(7)));
        assert_eq!(Generation::from_dir_name("gen-7"), None);
        assert_eq!(Generation::from_dir_name(".work-gen-000007"), None);
    }
}
