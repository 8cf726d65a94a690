//! `baseline follow`, `baseline cut`, `baseline follower`, `baseline unfollow`.

use crate::ops::follow::{CutDone, Followed, FollowerView, Following};
use crate::printer::Human;
use crate::replication::ReplicaStatus;
use serde::Serialize;

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct FollowReport(pub Followed);

/// `running, 0 s behind` / `receiver stopped: error …`.
fn replication(status: &ReplicaStatus) -> String {
    let threads = if status.receiving && status.applying {
        "replicating".to_string()
    } else {
        status.threads()
    };
    let lag = status
        .lag_seconds
        .map_or(String::new(), |l| format!(", {l} s behind"));
    match &status.last_error {
        Some(e) => format!("{threads}{lag}; error: {e}"),
        None => format!("{threads}{lag}"),
    }
}

/// `key:  value` lines, the values aligned (as `status` prints a branch).
fn lines(rows: &[Vec<String>]) -> String {
    let width = rows.iter().map(|r| r[0].len()).max().unwrap_or(0) + 1;
    rows.iter()
        .map(|r| format!("{:width$} {}\n", format!("{}:", r[0]), r[1]))
        .collect()
}

fn following_rows(f: &Following) -> Vec<Vec<String>> {
    let mut rows = vec![
        vec!["source".into(), f.source.clone()],
        vec!["follower".into(), f.branch.to_string()],
        vec![
            "seeded".into(),
            format!(
                "{} by {} at {}",
                f.seeded_at.format("%Y-%m-%d %H:%M:%S"),
                f.seed_path,
                f.seed_gtid
            ),
        ],
        vec![
            "masking".into(),
            f.mask_sql
                .as_ref()
                .map_or("none (--no-mask)".into(), |m| m.display().to_string()),
        ],
        vec![
            "cuts".into(),
            match (&f.every, &f.timer) {
                (Some(every), Some(timer)) => format!("every {every} ({timer})"),
                _ => "by hand (`db-branch baseline cut`)".into(),
            },
        ],
    ];
    if let Some(c) = &f.last_cut {
        rows.push(vec![
            "last cut".into(),
            format!(
                "{} at {} ({})",
                c.generation,
                c.at.format("%Y-%m-%d %H:%M:%S"),
                c.gtid
            ),
        ]);
    }
    rows
}

impl Human for FollowReport {
    fn human(&self) -> String {
        let f = &self.0;
        let mut rows = following_rows(&f.following);
        rows.push(vec!["port".into(), f.port.to_string()]);
        rows.push(vec!["replication".into(), replication(&f.status)]);
        lines(&rows)
    }
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct CutReport(pub CutDone);

impl Human for CutReport {
    fn human(&self) -> String {
        let c = &self.0;
        format!(
            "{} (GTIDs {}; applier paused {:.3} s{}{})\n",
            c.generation,
            c.cut.gtid,
            c.cut.pause_seconds,
            c.cut
                .lag_seconds
                .map_or(String::new(), |l| format!(", {l} s behind the source")),
            if c.masked { ", masked" } else { ", not masked" }
        )
    }
}

/// The follower's replication in words, or why it could not be read.
fn replication_of(v: &FollowerView) -> String {
    match (&v.status, &v.status_error) {
        (Some(s), _) => replication(s),
        (None, Some(e)) => e.clone(),
        (None, None) => v.state.clone(),
    }
}

/// One line on the follower, for `baseline list` (on stderr: its JSON stays the list).
pub fn follower_line(v: &FollowerView) -> String {
    format!(
        "follower {} of {}: {} (`db-branch baseline follower`)",
        v.following.branch,
        v.following.source,
        replication_of(v)
    )
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct FollowerReport(pub Option<FollowerView>);

impl Human for FollowerReport {
    fn human(&self) -> String {
        let Some(v) = &self.0 else {
            return "nothing is followed; start with `db-branch baseline follow SOURCE`\n".into();
        };
        let mut rows = following_rows(&v.following);
        rows.push(vec!["port".into(), v.port.to_string()]);
        rows.push(vec!["server".into(), v.state.clone()]);
        rows.push(vec!["replication".into(), replication_of(v)]);
        if let Some(s) = &v.status {
            rows.push(vec!["applied".into(), s.position.clone()]);
        }
        lines(&rows)
    }
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct Unfollowed(pub Option<Following>);

impl Human for Unfollowed {
    fn human(&self) -> String {
        match &self.0 {
            Some(f) => format!(
                "stopped following {}; follower {} destroyed\n",
                f.source, f.branch
            ),
            None => "nothing was followed\n".into(),
        }
    }
}
