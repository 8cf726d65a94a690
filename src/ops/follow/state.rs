//! What is followed, kept in the root: the follow state, the source's login, the masking
//! SQL cuts run.

use crate::branch::{BranchName, Generation};
use crate::error::{Error, Kind};
use crate::flavour::Family;
use crate::host::Host;
use crate::replication::ReplicaSource;
use crate::store::files;
use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What is followed: kept in `ROOT/follow.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Following {
    /// The follower's branch.
    pub branch: BranchName,
    /// The source, password left out.
    pub source: String,
    pub family: Family,
    /// The follower's own server id (the source's differs).
    pub server_id: u32,
    pub seeded_at: DateTime<Utc>,
    /// The bake path that seeded it (`tablespace` or `logical`).
    pub seed_path: String,
    /// The GTIDs the seed held.
    pub seed_gtid: String,
    /// Where the masking SQL came from (None: `--no-mask`, the source holds nothing to
    /// mask). Cuts run the copy taken then (`Layout::follow_mask_file`).
    pub mask_sql: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_cut: Option<LastCut>,
    /// `--every`: how often the timer cuts (None: by hand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<crate::values::Duration>,
    /// The timer unit that runs the cuts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastCut {
    pub generation: Generation,
    pub at: DateTime<Utc>,
    pub gtid: String,
}

pub(crate) fn load(host: &Host) -> Result<Option<Following>> {
    files::read_json(&host.layout.follow_file(), "the follow state")
}

pub(crate) fn save(host: &Host, following: &Following) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(following)?;
    files::write_atomic(&host.layout.follow_file(), &bytes, 0o600)
}

/// How the follower logs in to its source: kept by db-branch (`Layout::follow_secret_file`)
/// and given to the server only to start replicating (MySQL stores no password of it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Login {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) user: String,
    pub(crate) password: String,
}

impl Login {
    /// Where the follower replicates from, after `position`.
    pub(crate) fn source(self, family: Family, position: String) -> ReplicaSource {
        ReplicaSource {
            family,
            host: self.host,
            port: self.port,
            user: self.user,
            password: self.password,
            position,
        }
    }
}

/// Keeps the follower's login, outside every datadir.
pub(crate) fn save_login(host: &Host, login: &Login) -> Result<()> {
    files::write_atomic(
        &host.layout.follow_secret_file(),
        &serde_json::to_vec(login)?,
        0o600,
    )
}

pub(crate) fn replica_source(host: &Host, following: &Following) -> Result<ReplicaSource> {
    let path = host.layout.follow_secret_file();
    let login: Login = files::read_json(&path, "the follower's login")?.ok_or_else(|| {
        Error::new(
            Kind::Failed,
            format!(
                "{} is missing: the follower's login to its source",
                path.display()
            ),
        )
        .hint("`db-branch baseline unfollow`, then `baseline follow` again")
    })?;
    Ok(login.source(following.family, following.seed_gtid.clone()))
}

/// Keeps the masking SQL cuts will run: read now, as whoever asked could read it.
pub(crate) fn keep_mask(host: &Host, mask: &std::path::Path) -> Result<()> {
    let sql = std::fs::read(mask).with_context(|| format!("reading {}", mask.display()))?;
    files::write_atomic(&host.layout.follow_mask_file(), &sql, 0o600)
}

pub(crate) fn nothing_followed() -> anyhow::Error {
    Error::new(Kind::NotFound, "nothing is followed here")
        .hint("start with `db-branch baseline follow mysql://USER@HOST:PORT --mask-sql FILE`")
        .into()
}

pub(crate) fn socket(host: &Host, following: &Following) -> PathBuf {
    host.layout.socket(&following.branch)
}
