//! `BranchName` (validated once, before any side effect) and the branch record kept on disk.

use crate::config::Profile;
use crate::error::usage;
pub use crate::names::{
    BranchName, BranchRef, CheckpointTag, DatabaseName, Generation, Label, TrashId, MAX_NAME_LEN,
};
use crate::values::{ByteSize, Duration};
use anyhow::Result;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where a branch came from (lineage, `list --tree`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Parent {
    /// A baseline generation (`create NAME`).
    Baseline { generation: Generation },
    /// Another branch's state at the time, or one of its checkpoints (`create --from`).
    Branch {
        name: BranchName,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        checkpoint: Option<CheckpointTag>,
        /// The source was stopped for a clean copy (`--clean`): no crash recovery.
        clean: bool,
    },
}

/// A read-only snapshot of a branch, to reset to (`checkpoint`, `reset --to`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub tag: CheckpointTag,
    pub created: DateTime<Utc>,
    /// Taken from a stopped server (`--clean`), else crash-consistent: a reset to it runs
    /// InnoDB crash recovery.
    pub clean: bool,
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
    /// Who made it: `create --owner`, else the invoking user (the sudo caller under sudo).
    #[serde(default)]
    pub owner: String,
    /// The owner's uid, where the owner is an OS user (what access checks compare first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_uid: Option<u32>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// When `gc` may delete it (None: never expires).
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
    /// `protect`: refuses `delete` without `--force`, and `gc` never takes it.
    #[serde(default)]
    pub protection: Option<Protection>,
    #[serde(default)]
    pub activity: Activity,
    /// Stopped by `stop-idle` (rather than by `stop`).
    #[serde(default)]
    pub stopped_idle: bool,
    /// Server profile (durability vs speed); records from before profiles are `test`.
    #[serde(default = "default_profile")]
    pub profile: Profile,
    /// Extra option-file lines for this branch only (migrate-check's instrumentation).
    #[serde(default)]
    pub server_options: Vec<String>,
    /// The server that made its baseline (None: recorded before db-branch kept it).
    #[serde(default)]
    pub server: Option<crate::flavour::Flavour>,
    /// Made from another branch (None: from `baseline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Parent>,
    /// Its checkpoints, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<Checkpoint>,
    /// The application database clients are pointed at, chosen with `create --database`
    /// (or taken from the branch it was made from). None: the config's
    /// `client.database`, else the generation's only database (`ops::database`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<DatabaseName>,
    /// A follower (`baseline follow`): the source it replicates, password left out. Its
    /// data is the source's unmasked: no branch or checkpoint is made from it, and it is
    /// never reset; `baseline cut` makes masked generations of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follows: Option<String>,
    /// A dense pool's server (`pool create --dense`): how many slots it holds. The memory
    /// guard counts each slot beyond the first (`memory::DENSE_SLOT_ALLOWANCE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense_slots: Option<u32>,
}

fn default_profile() -> Profile {
    Profile::Test
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Protection {
    /// None: until `unprotect`.
    pub until: Option<DateTime<Utc>>,
}

impl BranchRecord {
    pub fn new(
        name: BranchName,
        baseline: Generation,
        buffer_pool: ByteSize,
        now: DateTime<Utc>,
    ) -> Self {
        BranchRecord {
            name,
            port: 0,
            baseline,
            buffer_pool,
            created: now,
            phase: Phase::Creating,
            owner: String::new(),
            owner_uid: None,
            labels: BTreeMap::new(),
            expires_at: None,
            protection: None,
            activity: Activity::started(now),
            stopped_idle: false,
            profile: Profile::Test,
            server_options: Vec::new(),
            server: None,
            parent: None,
            checkpoints: Vec::new(),
            database: None,
            follows: None,
            dense_slots: None,
        }
    }

    pub fn is_protected(&self, now: DateTime<Utc>) -> bool {
        self.protection
            .as_ref()
            .is_some_and(|p| p.until.is_none_or(|u| u > now))
    }

    pub fn is_expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|e| e <= now)
    }

    pub fn has_labels(&self, wanted: &[Label]) -> bool {
        wanted
            .iter()
            .all(|l| self.labels.get(&l.key) == Some(&l.value))
    }
}

/// What db-branch last saw of a server's use. Counters come from the server itself
/// (client statements, busy connections), never from its logs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Activity {
    /// Last time a client was seen using the server (or db-branch started it).
    pub last: DateTime<Utc>,
    /// Client statement counter at the last sample; None after a (re)start.
    pub counter: Option<u64>,
    /// Server uptime at the last sample: a smaller uptime means it restarted since.
    pub uptime_secs: Option<u64>,
}

impl Default for Activity {
    fn default() -> Self {
        Activity::started(DateTime::<Utc>::UNIX_EPOCH)
    }
}

/// One reading of a running server's own counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActivitySample {
    /// Statements sent by clients, excluding db-branch's own probes.
    pub counter: u64,
    pub uptime_secs: u64,
    /// Client connections executing something right now (not sleeping), other than ours.
    pub busy_clients: u64,
}

impl Activity {
    pub fn started(now: DateTime<Utc>) -> Self {
        Activity {
            last: now,
            counter: None,
            uptime_secs: None,
        }
    }

    /// Folds a new sample in: activity moves `last` to `now`.
    pub fn observe(&self, sample: ActivitySample, now: DateTime<Utc>) -> Activity {
        let restarted = match (self.counter, self.uptime_secs) {
            (Some(_), Some(up)) => sample.uptime_secs < up,
            _ => true,
        };
        // After a restart the counter starts from zero (our readiness probe is not counted).
        let previous = if restarted {
            0
        } else {
            self.counter.unwrap_or(0)
        };
        let active = sample.busy_clients > 0 || sample.counter > previous;
        Activity {
            last: if active { now } else { self.last },
            counter: Some(sample.counter),
            uptime_secs: Some(sample.uptime_secs),
        }
    }
}

/// An expiry asked for on the command line.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum ExpiryRequest {
    /// Not asked: the default applies (or, for an existing branch, nothing changes).
    #[default]
    Unset,
    /// This long from now.
    Ttl(Duration),
    /// At this moment.
    At(DateTime<Utc>),
}

/// `now + d`, or a usage error when that is past what a timestamp can hold.
pub fn after(now: DateTime<Utc>, d: Duration, what: &str) -> Result<DateTime<Utc>> {
    chrono::Duration::from_std(d.0)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .filter(|t| t.timestamp() < 253_402_300_800) // year 9999: what RFC 3339 can write
        .ok_or_else(|| {
            usage(format!(
                "{what} {d} is too far in the future; give at most a few years"
            ))
        })
}

/// The expiry `req` means at `now`; without one, `default` (zero = never expires).
pub fn resolve(
    now: DateTime<Utc>,
    req: ExpiryRequest,
    default: Option<Duration>,
) -> Result<Option<DateTime<Utc>>> {
    match req {
        ExpiryRequest::At(t) => Ok(Some(t)),
        ExpiryRequest::Ttl(d) if d.is_zero() => Ok(None),
        ExpiryRequest::Ttl(d) => after(now, d, "--ttl").map(Some),
        ExpiryRequest::Unset => match default.filter(|d| !d.is_zero()) {
            Some(d) => after(now, d, "lifecycle.default_ttl").map(Some),
            None => Ok(None),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::ByteSize;

    #[test]
    fn database_names_are_what_the_servers_accept() {
        for ok in ["shop", "my-app", "a$b", "Caf\u{e9}", &"x".repeat(64)] {
            assert_eq!(ok.parse::<DatabaseName>().unwrap().as_str(), ok);
        }
        for bad in ["", "a/b", "a\\b", "nul\0", "trailing ", &"x".repeat(65)] {
            assert!(bad.parse::<DatabaseName>().is_err(), "{bad:?}");
        }
    }

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
    fn labels() {
        let l: Label = "pr=123".parse().unwrap();
        assert_eq!((l.key.as_str(), l.value.as_str()), ("pr", "123"));
        assert_eq!("repo=".parse::<Label>().unwrap().value, "");
        for bad in ["pr", "=1", "PR=1", "a b=1", "k=new\nline"] {
            assert!(bad.parse::<Label>().is_err(), "{bad}");
        }
    }

    fn sample(counter: u64, uptime_secs: u64, busy_clients: u64) -> ActivitySample {
        ActivitySample {
            counter,
            uptime_secs,
            busy_clients,
        }
    }

    #[test]
    fn activity_from_counters() {
        let t0 = DateTime::<Utc>::UNIX_EPOCH;
        let t1 = t0 + chrono::Duration::hours(1);
        let t2 = t0 + chrono::Duration::hours(2);
        let fresh = Activity::started(t0);
        // First sample after our own start: nothing from clients yet.
        let a = fresh.observe(sample(0, 60, 0), t1);
        assert_eq!(a.last, t0);
        // Client statements since: active.
        let b = a.observe(sample(5, 120, 0), t2);
        assert_eq!(b.last, t2);
        // No change: idle since t2.
        let c = b.observe(sample(5, 180, 0), t2 + chrono::Duration::hours(1));
        assert_eq!(c.last, t2);
        // A sleeping pool connection is not activity; a running query is.
        let d = c.observe(sample(5, 240, 1), t2 + chrono::Duration::hours(2));
        assert_eq!(d.last, t2 + chrono::Duration::hours(2));
        // Restarted (uptime went down) and clients did something: active.
        let e = d.observe(sample(3, 10, 0), t2 + chrono::Duration::hours(3));
        assert_eq!(e.last, t2 + chrono::Duration::hours(3));
    }

    #[test]
    fn protection_and_expiry() {
        let now = DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::days(1000);
        let mut r = BranchRecord::new("a".parse().unwrap(), Generation(1), ByteSize::mib(128), now);
        assert!(!r.is_protected(now) && !r.is_expired(now));
        r.protection = Some(Protection { until: None });
        assert!(r.is_protected(now));
        r.protection = Some(Protection {
            until: Some(now - chrono::Duration::hours(1)),
        });
        assert!(!r.is_protected(now), "protection expires");
        r.expires_at = Some(now);
        assert!(r.is_expired(now));
    }

    proptest::proptest! {
        #[test]
        fn any_string_is_a_safe_name_or_a_refusal(s in "\\PC{0,60}") {
            match s.parse::<BranchName>() {
                Ok(n) => {
                    let n = n.as_str();
                    proptest::prop_assert!(n.len() <= MAX_NAME_LEN && !n.is_empty());
                    proptest::prop_assert!(n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c)));
                    proptest::prop_assert!(!n.contains("..") && !n.starts_with(['-', '.', '_']));
                }
                Err(e) => proptest::prop_assert!(!e.is_empty()),
            }
        }

        #[test]
        fn names_from_the_safe_alphabet_round_trip(s in "[a-z0-9][a-z0-9_-]{0,40}") {
            let n: BranchName = s.parse().unwrap();
            proptest::prop_assert_eq!(n.to_string(), s);
        }

        #[test]
        fn labels_and_generations_never_panic(s in "\\PC{0,40}") {
            let _ = s.parse::<Label>();
            let _ = s.parse::<Generation>();
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
