//! Stop the servers of branches no client has used for a while. Activity comes from each
//! server's own counters (client statements and busy connections, db-branch's probes
//! excluded), sampled here and kept in the branch record.

use crate::host::Host;
use crate::ops::branch::unit::launch;
use crate::store::{locks, records, stats};
use crate::values::Duration;
use anyhow::Result;
use chrono::{DateTime, Utc};
use serde::Serialize;

#[derive(Debug, Clone, Default)]
pub struct StopIdleOptions {
    /// None: `lifecycle.stop_idle_after`.
    pub idle_for: Option<Duration>,
    pub dry_run: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IdleAction {
    Stopped,
    #[serde(rename = "would stop")]
    WouldStop,
    Active,
    #[serde(rename = "not running")]
    NotRunning,
    /// Another invocation holds the branch: skipped rather than waited for.
    Busy,
    /// A pool's slot: kept running, ready to be claimed.
    #[serde(rename = "pool slot")]
    PoolSlot,
    /// A follower (`baseline follow`): it replicates whether or not anyone connects.
    Follower,
    Error,
}

impl std::fmt::Display for IdleAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = serde_json::to_value(self).expect("plain enum");
        f.write_str(s.as_str().unwrap_or("?"))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct IdleRow {
    pub name: String,
    pub action: IdleAction,
    pub idle_secs: Option<i64>,
    pub last_activity: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn row(name: &str, action: IdleAction) -> IdleRow {
    IdleRow {
        name: name.into(),
        action,
        idle_secs: None,
        last_activity: None,
        error: None,
    }
}

pub fn stop_idle(host: &Host, opts: &StopIdleOptions) -> Result<Vec<IdleRow>> {
    let started = std::time::Instant::now();
    let rows = sweep(host, opts);
    if !opts.dry_run {
        let outcome = rows.as_ref().ok().map(|rows| {
            let stopped = rows
                .iter()
                .filter(|r| r.action == IdleAction::Stopped)
                .count();
            (
                stopped as u64,
                rows.iter().all(|r| r.action != IdleAction::Error),
            )
        });
        stats::finished(
            &host.layout,
            stats::Job::StopIdle,
            host.clock.now(),
            started.elapsed(),
            outcome,
        );
    }
    rows
}

fn sweep(host: &Host, opts: &StopIdleOptions) -> Result<Vec<IdleRow>> {
    host.storage.open()?;
    let threshold = opts
        .idle_for
        .unwrap_or(host.config.lifecycle.stop_idle_after)
        .chrono();
    let now = host.clock.now();
    let mut rows = Vec::new();
    for listed in records::list(&host.layout)? {
        let name = listed.name.clone();
        // A branch another command is working on is in use: skip it rather than wait.
        let Ok(_lock) = locks::try_lock(&host.layout.branch_lock(&name), "branch") else {
            rows.push(row(name.as_str(), IdleAction::Busy));
            continue;
        };
        let Some(mut record) = records::load(&host.layout, &name)? else {
            continue;
        };
        if record.labels.contains_key(crate::ops::pool::POOL_LABEL) {
            rows.push(row(name.as_str(), IdleAction::PoolSlot));
            continue;
        }
        if record.follows.is_some() {
            rows.push(row(name.as_str(), IdleAction::Follower));
            continue;
        }
        let l = launch(host, &name);
        if record.phase != crate::branch::Phase::Ready || !host.services.state(&l)?.is_up() {
            rows.push(row(name.as_str(), IdleAction::NotRunning));
            continue;
        }
        let sample = match host.server.activity(&host.layout.socket(&name)) {
            Ok(s) => s,
            Err(e) => {
                let mut r = row(name.as_str(), IdleAction::Error);
                r.error = Some(format!("{e:#}"));
                rows.push(r);
                continue;
            }
        };
        record.activity = record.activity.observe(sample, now);
        let idle = now - record.activity.last;
        let action = if idle < threshold {
            IdleAction::Active
        } else if opts.dry_run {
            IdleAction::WouldStop
        } else {
            host.services.stop(&l)?;
            record.stopped_idle = true;
            IdleAction::Stopped
        };
        if !opts.dry_run {
            records::save(&host.layout, &record)?;
        }
        rows.push(IdleRow {
            name: name.to_string(),
            action,
            idle_secs: Some(idle.num_seconds()),
            last_activity: Some(record.activity.last),
            error: None,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::branch::ActivitySample;
    use crate::ops::create::create;
    use crate::ops::create::CreateOptions;
    use crate::ops::testing::{name, sim_host};
    use crate::supervisor::ServiceState;

    #[test]
    fn stops_only_the_idle_branch() {
        let sim = sim_host();
        for n in ["busy", "quiet"] {
            create(&sim.host, &CreateOptions::named(name(n))).unwrap();
        }
        let socket = |n: &str| sim.host.layout.socket(&name(n));
        let set = |n: &str, counter: u64, up: u64| {
            sim.server.samples.lock().unwrap().insert(
                socket(n),
                ActivitySample {
                    counter,
                    uptime_secs: up,
                    busy_clients: 0,
                },
            );
        };
        let advance = |h: i64| sim.advance(chrono::Duration::hours(h));
        set("busy", 0, 10);
        set("quiet", 0, 10);
        let args = StopIdleOptions {
            idle_for: Some("1h".parse().unwrap()),
            dry_run: false,
        };
        stop_idle(&sim.host, &args).unwrap();
        advance(2);
        set("busy", 40, 7200);
        set("quiet", 0, 7200);
        let dry = stop_idle(
            &sim.host,
            &StopIdleOptions {
                dry_run: true,
                ..args
            },
        )
        .unwrap();
        assert_eq!(dry[1].action, IdleAction::WouldStop);
        let report = stop_idle(&sim.host, &args).unwrap();
        let action = |n: &str| report.iter().find(|r| r.name == n).unwrap().action;
        assert_eq!(action("busy"), IdleAction::Active);
        assert_eq!(action("quiet"), IdleAction::Stopped);
        let units = sim.services.with_state(|s| s.units.clone());
        assert_eq!(units[&name("busy")], ServiceState::Running);
        assert_eq!(units[&name("quiet")], ServiceState::Stopped);
        let r = records::load(&sim.host.layout, &name("quiet"))
            .unwrap()
            .unwrap();
        assert!(r.stopped_idle);
    }
}
