//! `metrics`: the host as Prometheus reads it — branches by state, owner and pool, what
//! the memory guard counts, pools' slots, the trash, the baselines — in the Prometheus text
//! exposition format (prometheus-client encodes it), for node_exporter's textfile collector
//! or a Prometheus scrape (`serve`).
//! The metric names are a contract (docs/json.md).

mod encode;
mod figures;
pub mod serve;

pub use encode::exposition;
pub use figures::{
    BranchCount, Bucket, FollowerFigures, HostMetrics, JobRun, OperationLatency, SlotCount,
};

use crate::host::Host;
use crate::ops::branch::unit::launch;
use crate::ops::pool::POOL_LABEL;
use crate::store::{records, stats};
use anyhow::Result;
use std::collections::BTreeMap;

pub fn gather(host: &Host) -> Result<HostMetrics> {
    host.storage.open()?;
    let mut m = HostMetrics::default();
    let mut by: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for r in records::list(&host.layout)? {
        let state = host
            .services
            .state(&launch(host, &r.name))
            .map_or_else(|_| "unknown".to_string(), |s| s.to_string());
        let pool = r.labels.get(POOL_LABEL).cloned().unwrap_or_default();
        *by.entry((state, r.owner.clone(), pool)).or_default() += 1;
    }
    m.branches = by
        .into_iter()
        .map(|((state, owner, pool), count)| BranchCount {
            state,
            owner,
            pool,
            count,
        })
        .collect();
    let probe = crate::ops::doctor::new_branch_probe(host);
    if let Ok(a) = crate::ops::branch::budget::assess(host, &probe, 0) {
        m.memory_committed_bytes = a.running.iter().map(|c| c.ceiling_bytes).sum();
        m.memory_rss_bytes = a.running.iter().map(|c| c.rss_bytes).sum();
        m.memory_available_bytes = a.free();
        m.memory_left_bytes = a.left();
    }
    for p in crate::ops::pool::manage::all(host)? {
        for (state, n) in [
            ("ready", p.ready),
            ("claimed", p.claimed),
            ("recycling", p.recycling),
        ] {
            m.pool_slots.push(SlotCount {
                pool: p.name.to_string(),
                state: state.into(),
                count: n as u64,
            });
        }
    }
    let trash = crate::ops::trash::list(host)?;
    m.trash_entries = trash.len() as u64;
    m.trash_bytes = trash.iter().filter_map(|t| t.own_bytes).sum();
    let gens = host.storage.baselines()?;
    m.baseline_generations = gens.len() as u64;
    m.baseline_newest_age_seconds = gens
        .last()
        .and_then(|g| host.storage.generation_info(*g).ok().flatten())
        .map(|i| (host.clock.now() - i.created).num_seconds().max(0));
    let kept = stats::load(&host.layout).unwrap_or_else(|e| {
        host.printer.warn(format!(
            "{e:#}; the latency and last-run figures are left out"
        ));
        stats::Stats::default()
    });
    m.operations = kept
        .operations
        .iter()
        .map(|(op, h)| {
            let mut below = 0;
            OperationLatency {
                operation: op.clone(),
                count: h.count,
                sum_seconds: h.sum_seconds,
                buckets: h
                    .bounds
                    .iter()
                    .zip(&h.counts)
                    .map(|(le, n)| {
                        below += n;
                        Bucket {
                            le: *le,
                            count: below,
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    m.runs = kept
        .runs
        .iter()
        .map(|(job, r)| JobRun {
            job: job.clone(),
            finished_at: r.finished_at,
            seconds: r.seconds,
            ok: r.ok,
            acted: r.acted,
        })
        .collect();
    m.follower = crate::ops::follow::status(host)?.map(|v| FollowerFigures {
        source: v.following.source.clone(),
        replicating: v.status.as_ref().is_some_and(|s| s.healthy()),
        lag_seconds: v.status.as_ref().and_then(|s| s.lag_seconds),
        last_error: v
            .status
            .as_ref()
            .and_then(|s| s.last_error.clone())
            .or(v.status_error),
        last_cut_age_seconds: v
            .following
            .last_cut
            .as_ref()
            .map(|c| (host.clock.now() - c.at).num_seconds().max(0)),
    });
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::create::{create, CreateOptions};
    use crate::ops::testing::{name, sim_host};

    #[test]
    fn branches_trash_and_baselines_are_counted() {
        let sim = sim_host();
        create(&sim.host, &CreateOptions::named(name("a"))).unwrap();
        create(&sim.host, &CreateOptions::named(name("b"))).unwrap();
        crate::ops::power::stop(&sim.host, &name("b")).unwrap();
        create(&sim.host, &CreateOptions::named(name("c"))).unwrap();
        crate::ops::delete::delete(
            &sim.host,
            &name("c"),
            false,
            crate::store::trash::Reason::Delete,
        )
        .unwrap();
        crate::ops::reset::reset(
            &sim.host,
            &crate::ops::reset::ResetOptions::named(name("a")),
        )
        .unwrap();
        crate::ops::gc::gc(&sim.host, &Default::default()).unwrap();
        crate::ops::gc::gc(
            &sim.host,
            &crate::ops::gc::GcOptions {
                dry_run: true,
                ..Default::default()
            },
        )
        .unwrap();
        let m = gather(&sim.host).unwrap();
        let text = exposition(&m).unwrap();
        let owner = &sim.host.caller.name;
        for line in [
            format!("db_branch_branches{{state=\"running\",owner=\"{owner}\",pool=\"\"}} 1"),
            format!("db_branch_branches{{state=\"stopped\",owner=\"{owner}\",pool=\"\"}} 1"),
            "db_branch_trash_entries 1".to_string(),
            "db_branch_trash_bytes 1048576".to_string(),
            "db_branch_baseline_generations 1".to_string(),
            "# TYPE db_branch_memory_committed_bytes gauge".to_string(),
            "# TYPE db_branch_operation_duration_seconds histogram".to_string(),
            "db_branch_operation_duration_seconds_count{operation=\"create\"} 3".to_string(),
            "db_branch_operation_duration_seconds_count{operation=\"reset\"} 1".to_string(),
            "db_branch_operation_duration_seconds_bucket{operation=\"reset\",le=\"+Inf\"} 1"
                .to_string(),
            "db_branch_job_last_run_success{job=\"gc\"} 1.0".to_string(),
            "db_branch_job_last_run_acted{job=\"gc\"} 0.0".to_string(),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
        assert!(m.memory_committed_bytes > 0, "{m:?}");
        assert_eq!(m.runs.len(), 1, "a dry run is not a run: {:?}", m.runs);
        assert!(
            !text.contains("operation=\"claim\""),
            "no claim yet:\n{text}"
        );
        // Cumulative buckets end at the count.
        let create = m
            .operations
            .iter()
            .find(|o| o.operation == "create")
            .unwrap();
        assert!(create.buckets.windows(2).all(|w| w[0].count <= w[1].count));
        assert!(create.buckets.last().unwrap().count <= create.count);
    }

    /// A HostMetrics with every family present.
    fn every_family() -> HostMetrics {
        let now = chrono::Utc::now();
        HostMetrics {
            branches: vec![BranchCount {
                state: "running".into(),
                owner: "ann".into(),
                pool: String::new(),
                count: 1,
            }],
            pool_slots: vec![SlotCount {
                pool: "ci".into(),
                state: "ready".into(),
                count: 2,
            }],
            baseline_newest_age_seconds: Some(60),
            operations: vec![OperationLatency {
                operation: "claim".into(),
                count: 1,
                sum_seconds: 0.001,
                buckets: vec![Bucket {
                    le: 0.001,
                    count: 1,
                }],
            }],
            runs: vec![JobRun {
                job: "gc".into(),
                finished_at: now,
                seconds: 0.5,
                ok: true,
                acted: 0,
            }],
            ..Default::default()
        }
    }

    /// docs/grafana/db-branch.json asks only for what the exposition has (a renamed metric
    /// would leave a panel empty without a word). Its queries run against a real Prometheus
    /// in tests/it/metrics.rs.
    #[test]
    fn the_sample_dashboard_names_only_metrics_we_expose() {
        let text = exposition(&every_family()).unwrap();
        let families: std::collections::BTreeSet<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        let dashboard: serde_json::Value =
            serde_json::from_str(include_str!("../../../docs/grafana/db-branch.json")).unwrap();
        let mut asked = 0;
        for panel in dashboard["panels"].as_array().unwrap() {
            for target in panel["targets"].as_array().unwrap() {
                let expr = target["expr"].as_str().unwrap();
                let words = expr.split(|c: char| !(c.is_ascii_lowercase() || c == '_'));
                for name in words.filter(|w| w.starts_with("db_branch_")) {
                    let family = ["_bucket", "_sum", "_count"]
                        .iter()
                        .find_map(|s| name.strip_suffix(s))
                        .filter(|f| families.contains(f))
                        .unwrap_or(name);
                    assert!(
                        families.contains(family),
                        "panel {:?} asks for {name}, which `metrics` does not print",
                        panel["title"]
                    );
                    asked += 1;
                }
            }
        }
        assert!(
            asked >= families.len(),
            "every family has a panel: {families:?}"
        );
    }
}
