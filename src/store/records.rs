//! Branch records: what db-branch knows about each branch, as JSON (0600) in the branch's
//! directory under `root`, written atomically; and the copy of it kept with the storage
//! (ZFS user properties) from which a lost record is rebuilt.

use super::files::write_atomic;
use crate::branch::{BranchName, BranchRecord, Generation, Phase, Protection};
use crate::layout::Layout;
use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::fs;

pub fn save(layout: &Layout, record: &BranchRecord) -> Result<()> {
    let dir = layout.branch_dir(&record.name);
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = serde_json::to_vec_pretty(record)?;
    write_atomic(&layout.record_file(&record.name), &json, 0o600)
}

pub fn load(layout: &Layout, name: &BranchName) -> Result<Option<BranchRecord>> {
    super::files::read_json(&layout.record_file(name), "branch record")
}

/// The ports the branches' records hold.
pub fn held_ports(layout: &Layout) -> Result<std::collections::BTreeSet<u16>> {
    Ok(list(layout)?.iter().map(|r| r.port).collect())
}

pub fn list(layout: &Layout) -> Result<Vec<BranchRecord>> {
    let dir = layout.branches_dir();
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    let mut records = Vec::new();
    for entry in entries {
        let entry = entry?;
        let Ok(name) = entry.file_name().to_string_lossy().parse::<BranchName>() else {
            continue;
        };
        match load(layout, &name) {
            Ok(Some(r)) => records.push(r),
            Ok(None) => {}
            Err(e) => tracing::warn!("{e:#}"),
        }
    }
    records.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(records)
}

/// Makes the branch's directory root's (0755): branches made before the server's files
/// moved to `run/` had it owned by the server's OS user.
pub fn claim_branch_dir(layout: &Layout, name: &BranchName) -> Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if !nix::unistd::geteuid().is_root() {
        return Ok(()); // (unit tests as a user: nothing to give away)
    }
    let dir = layout.branch_dir(name);
    let meta = fs::symlink_metadata(&dir).with_context(|| format!("checking {}", dir.display()))?;
    if !meta.is_dir() {
        anyhow::bail!("{} is not a directory", dir.display());
    }
    if meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        nix::unistd::chown(
            &dir,
            Some(nix::unistd::Uid::from_raw(0)),
            Some(nix::unistd::Gid::from_raw(0)),
        )
        .with_context(|| format!("giving {} to root", dir.display()))?;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755))
            .with_context(|| format!("setting the mode of {}", dir.display()))?;
    }
    Ok(())
}

/// Removes a branch's directory (record, option file, log, socket).
pub fn remove_dir(layout: &Layout, name: &BranchName) -> Result<()> {
    super::files::remove_tree(&layout.branch_dir(name))
}

/// What the storage keeps of a branch (ZFS user properties), enough to rebuild its record:
/// everything but activity samples and migrate-check's temporary options.
pub fn to_metadata(record: &BranchRecord) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert("port".into(), record.port.to_string());
    m.insert("created".into(), record.created.to_rfc3339());
    m.insert("baseline".into(), record.baseline.0.to_string());
    m.insert("buffer_pool".into(), record.buffer_pool.exact());
    m.insert("profile".into(), record.profile.to_string());
    m.insert("owner".into(), record.owner.clone());
    m.insert(
        "labels".into(),
        record
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    );
    m.insert(
        "expires".into(),
        record
            .expires_at
            .map_or_else(|| "never".into(), |t| t.to_rfc3339()),
    );
    m.insert(
        "protected".into(),
        match &record.protection {
            None => "no".into(),
            Some(Protection { until: None }) => "yes".into(),
            Some(Protection { until: Some(t) }) => t.to_rfc3339(),
        },
    );
    m
}

fn time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// A record rebuilt from storage metadata (the pool alone); None when it lacks the basics.
pub fn from_metadata(name: &BranchName, m: &BTreeMap<String, String>) -> Option<BranchRecord> {
    let mut r = BranchRecord::new(
        name.clone(),
        Generation(m.get("baseline")?.parse().ok()?),
        m.get("buffer_pool")?.parse().ok()?,
        time(m.get("created")?)?,
    );
    r.port = m.get("port")?.parse().ok()?;
    r.phase = Phase::Ready;
    r.owner = m.get("owner").cloned().unwrap_or_default();
    r.profile = match m.get("profile").map(String::as_str) {
        Some("durable") => crate::config::Profile::Durable,
        _ => crate::config::Profile::Test,
    };
    r.labels = m
        .get("labels")
        .map(|l| {
            l.split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .unwrap_or_default();
    r.expires_at = m.get("expires").and_then(|e| time(e));
    r.protection = match m.get("protected").map(String::as_str) {
        None | Some("no") => None,
        Some("yes") => Some(Protection { until: None }),
        Some(t) => Some(Protection { until: time(t) }),
    };
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::branch::{Generation, Phase};
    use crate::values::ByteSize;

    fn record(name: &str) -> BranchRecord {
        BranchRecord {
            port: 3400,
            phase: Phase::Ready,
            ..BranchRecord::new(
                name.parse().unwrap(),
                Generation(1),
                ByteSize::mib(128),
                chrono::Utc::now(),
            )
        }
    }

    #[test]
    fn records_round_trip_and_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let r = record("a");
        save(&layout, &r).unwrap();
        assert_eq!(load(&layout, &r.name).unwrap(), Some(r.clone()));
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(layout.record_file(&r.name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(list(&layout).unwrap().len(), 1);
        remove_dir(&layout, &r.name).unwrap();
        assert_eq!(load(&layout, &r.name).unwrap(), None);
    }

    #[test]
    fn damaged_record_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let name: BranchName = "a".parse().unwrap();
        fs::create_dir_all(layout.branch_dir(&name)).unwrap();
        fs::write(layout.record_file(&name), "{not json").unwrap();
        let e = load(&layout, &name).unwrap_err();
        assert!(format!("{e:#}").contains("damaged"));
    }

    #[test]
    fn metadata_rebuilds_the_record_with_expiry_and_protection() {
        let mut r = record("a");
        r.labels.insert("pr".into(), "7".into());
        r.expires_at = Some(r.created + chrono::Duration::days(3));
        r.protection = Some(Protection {
            until: Some(r.created + chrono::Duration::hours(5)),
        });
        let back = from_metadata(&r.name, &to_metadata(&r)).unwrap();
        assert_eq!(back.port, r.port);
        assert_eq!(back.labels, r.labels);
        assert_eq!(back.buffer_pool, r.buffer_pool);
        assert_eq!(back.created.timestamp(), r.created.timestamp());
        assert_eq!(back.expires_at, r.expires_at);
        assert_eq!(back.protection, r.protection);
        r.protection = Some(Protection { until: None });
        r.expires_at = None;
        let back = from_metadata(&r.name, &to_metadata(&r)).unwrap();
        assert_eq!(back.protection, r.protection);
        assert_eq!(back.expires_at, None);
        assert!(from_metadata(&r.name, &Default::default()).is_none());
    }
}
