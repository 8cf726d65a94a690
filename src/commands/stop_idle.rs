//! `stop-idle`: gracefully stop the servers of branches no client has used for a while.
//! Activity comes from each server's own counters (client statements and busy connections,
//! db-branch's probes excluded), sampled here and kept in the branch record.

use super::launch;
use crate::cli::StopIdleArgs;
use crate::host::Host;
use crate::output::{table, Human, Output};
use crate::state;
use anyhow::Result;
use chrono::{DateTime, Utc};
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct IdleRow {
    pub name: String,
    /// stopped | would stop | active | not running | busy | error
    pub action: String,
    pub idle_secs: Option<i64>,
    pub last_activity: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct IdleReport(pub Vec<IdleRow>);

impl Human for IdleReport {
    fn human(&self) -> String {
        if self.0.is_empty() {
            return "no branches".into();
        }
        table(
            &["NAME", "ACTION", "IDLE", "LAST ACTIVITY"],
            self.0
                .iter()
                .map(|r| {
                    vec![
                        r.name.clone(),
                        match &r.error {
                            Some(e) => format!("error: {e}"),
                            None => r.action.clone(),
                        },
                        r.idle_secs.map_or("-".into(), |s| {
                            humantime::format_duration(std::time::Duration::from_secs(
                                s.max(0) as u64
                            ))
                            .to_string()
                        }),
                        r.last_activity.map_or("-".into(), |t| t.to_rfc3339()),
                    ]
                })
                .collect(),
        )
    }
}

fn row(name: &str, action: &str) -> IdleRow {
    IdleRow {
        name: name.into(),
        action: action.into(),
        idle_secs: None,
        last_activity: None,
        error: None,
    }
}

pub fn stop_idle(host: &Host, args: &StopIdleArgs) -> Result<IdleReport> {
    host.storage.prepare(false)?;
    let threshold = args
        .idle_for
        .unwrap_or(host.config.lifecycle.stop_idle_after)
        .chrono();
    let now = host.clock.now();
    let mut rows = Vec::new();
    for listed in state::list_records(&host.layout)? {
        let name = listed.name.clone();
        // A branch another command is working on is in use: skip it rather than wait.
        let Ok(_lock) = state::lock(
            &host.layout.branch_lock(&name),
            &format!("branch {name}"),
            std::time::Duration::ZERO,
        ) else {
            rows.push(row(name.as_str(), "busy"));
            continue;
        };
        let Some(mut record) = state::load_record(&host.layout, &name)? else {
            continue;
        };
        let l = launch(host, &name);
        if record.phase != crate::branch::Phase::Ready || !host.services.state(&l)?.is_up() {
            rows.push(row(name.as_str(), "not running"));
            continue;
        }
        let sample = match host.server.activity(&host.layout.socket(&name)) {
            Ok(s) => s,
            Err(e) => {
                let mut r = row(name.as_str(), "error");
                r.error = Some(format!("{e:#}"));
                rows.push(r);
                continue;
            }
        };
        record.activity = record.activity.observe(sample, now);
        let idle = now - record.activity.last;
        let action = if idle < threshold {
            "active"
        } else if args.dry_run {
            "would stop"
        } else {
            host.services.stop(&l)?;
            record.stopped_idle = true;
            "stopped"
        };
        if !args.dry_run {
            state::save_record(&host.layout, &record)?;
        }
        rows.push(IdleRow {
            name: name.to_string(),
            action: action.into(),
            idle_secs: Some(idle.num_seconds()),
            last_activity: Some(record.activity.last),
            error: None,
        });
    }
    Ok(IdleReport(rows))
}

pub fn run(host: &Host, args: &StopIdleArgs, out: &Output) -> Result<()> {
    let report = stop_idle(host, args)?;
    out.emit(&report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::branch::ActivitySample;
    use crate::cli::CreateArgs;
    use crate::commands::create::create;
    use crate::commands::testing::{name, sim_host, OUT};
    use crate::service::ServiceState;

    #[test]
    fn stops_only_the_idle_branch() {
        let sim = sim_host();
        for n in ["busy", "quiet"] {
            create(&sim.host, &CreateArgs::named(name(n)), &OUT).unwrap();
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
        let args = StopIdleArgs {
            idle_for: Some("1h".parse().unwrap()),
            dry_run: false,
        };
        stop_idle(&sim.host, &args).unwrap();
        advance(2);
        set("busy", 40, 7200);
        set("quiet", 0, 7200);
        let dry = stop_idle(
            &sim.host,
            &StopIdleArgs {
                dry_run: true,
                ..args
            },
        )
        .unwrap();
        assert_eq!(dry.0[1].action, "would stop");
        let report = stop_idle(&sim.host, &args).unwrap();
        let action = |n: &str| {
            report
                .0
                .iter()
                .find(|r| r.name == n)
                .unwrap()
                .action
                .clone()
        };
        assert_eq!(action("busy"), "active");
        assert_eq!(action("quiet"), "stopped");
        let units = sim.services.with_state(|s| s.units.clone());
        assert_eq!(units[&name("busy")], ServiceState::Running);
        assert_eq!(units[&name("quiet")], ServiceState::Stopped);
        let r = state::load_record(&sim.host.layout, &name("quiet"))
            .unwrap()
            .unwrap();
        assert!(r.stopped_idle);
    }
}
