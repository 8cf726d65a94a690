//! `gc`: delete expired branches, for PR-close events that never arrived. `--older-than`
//! and `--idle-for` also take branches by age or inactivity; `--label` narrows to branches
//! with those labels. A protected branch is never deleted (it is listed as kept).

use crate::cli::GcArgs;
use crate::host::Host;
use crate::output::{table, Human, Output};
use crate::state;
use anyhow::{anyhow, Result};
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct GcRow {
    pub name: String,
    /// Why it was chosen: expired, older than …, idle for …
    pub reason: String,
    /// deleted | would delete | kept (protected) | error
    pub action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct GcReport(pub Vec<GcRow>);

impl Human for GcReport {
    fn human(&self) -> String {
        if self.0.is_empty() {
            return "nothing to collect".into();
        }
        table(
            &["NAME", "REASON", "ACTION"],
            self.0
                .iter()
                .map(|r| {
                    let action = match &r.error {
                        Some(e) => format!("error: {e}"),
                        None => r.action.clone(),
                    };
                    vec![r.name.clone(), r.reason.clone(), action]
                })
                .collect(),
        )
    }
}

pub fn gc(host: &Host, args: &GcArgs) -> Result<GcReport> {
    host.storage.prepare(false)?;
    let now = host.clock.now();
    let mut rows = Vec::new();
    for record in state::list_records(&host.layout)? {
        if record.phase != crate::branch::Phase::Ready || !record.has_labels(&args.labels) {
            continue;
        }
        let mut reasons = Vec::new();
        if record.is_expired(now) {
            reasons.push("expired".to_string());
        }
        if let Some(d) = args
            .older_than
            .filter(|d| now - record.created >= d.chrono())
        {
            reasons.push(format!("older than {d}"));
        }
        if let Some(d) = args
            .idle_for
            .filter(|d| now - record.activity.last >= d.chrono())
        {
            reasons.push(format!("idle for {d}"));
        }
        if reasons.is_empty() {
            continue;
        }
        let mut row = GcRow {
            name: record.name.to_string(),
            reason: reasons.join(", "),
            action: String::new(),
            error: None,
        };
        row.action = if record.is_protected(now) {
            "kept (protected)".into()
        } else if args.dry_run {
            "would delete".into()
        } else {
            match super::delete::delete(host, &record.name, false) {
                Ok(_) => {
                    crate::failpoint::hit("gc:after-delete");
                    "deleted".into()
                }
                Err(e) => {
                    row.error = Some(format!("{e:#}"));
                    "error".into()
                }
            }
        };
        rows.push(row);
    }
    Ok(GcReport(rows))
}

pub fn run(host: &Host, args: &GcArgs, out: &Output) -> Result<()> {
    let report = gc(host, args)?;
    out.emit(&report)?;
    let failed = report.0.iter().filter(|r| r.error.is_some()).count();
    if failed > 0 {
        return Err(anyhow!(
            "{failed} branch(es) could not be deleted; see above"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::branch::Protection;
    use crate::cli::CreateArgs;
    use crate::commands::create::create;
    use crate::commands::testing::{name, sim_host, OUT};

    #[test]
    fn deletes_exactly_the_expired_unprotected_matching_branches() {
        let sim = sim_host();
        let mk = |n: &str, ttl: Option<&str>, label: Option<&str>| {
            let mut a = CreateArgs::named(name(n));
            a.expiry.ttl = ttl.map(|t| t.parse().unwrap());
            a.labels = label.into_iter().map(|l| l.parse().unwrap()).collect();
            create(&sim.host, &a, &OUT).unwrap();
        };
        mk("expired", Some("1h"), None);
        mk("expired-pr", Some("1h"), Some("pr=1"));
        mk("guarded", Some("1h"), None);
        mk("fresh", Some("3h"), None);
        mk("forever", None, None);
        let mut g = state::load_record(&sim.host.layout, &name("guarded"))
            .unwrap()
            .unwrap();
        g.protection = Some(Protection { until: None });
        state::save_record(&sim.host.layout, &g).unwrap();
        sim.advance(chrono::Duration::hours(2));

        let dry = gc(
            &sim.host,
            &GcArgs {
                dry_run: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(dry.0.len(), 3);
        assert_eq!(
            sim.storage.with_state(|s| s.branches.len()),
            5,
            "dry run deletes nothing"
        );

        let by_label = GcArgs {
            labels: vec!["pr=1".parse().unwrap()],
            ..Default::default()
        };
        let r = gc(&sim.host, &by_label).unwrap();
        assert_eq!(r.0.len(), 1);
        assert_eq!(
            (r.0[0].name.as_str(), r.0[0].action.as_str()),
            ("expired-pr", "deleted")
        );

        let r = gc(&sim.host, &GcArgs::default()).unwrap();
        let actions: Vec<_> =
            r.0.iter()
                .map(|r| (r.name.as_str(), r.action.as_str()))
                .collect();
        assert_eq!(
            actions,
            [("expired", "deleted"), ("guarded", "kept (protected)")]
        );
        let left: Vec<String> = sim
            .storage
            .with_state(|s| s.branches.keys().map(|k| k.to_string()).collect());
        assert_eq!(left, ["forever", "fresh", "guarded"]);

        let old = GcArgs {
            older_than: Some("1h".parse().unwrap()),
            ..Default::default()
        };
        gc(&sim.host, &old).unwrap();
        let left: Vec<String> = sim
            .storage
            .with_state(|s| s.branches.keys().map(|k| k.to_string()).collect());
        assert_eq!(left, ["guarded"]);
    }
}
