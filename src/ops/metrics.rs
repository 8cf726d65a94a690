//! `metrics`: the host as Prometheus reads it — branches by state, owner and pool, what
//! the memory guard counts, pools' slots, the trash, the baselines — in the Prometheus text
//! exposition format (prometheus-client encodes it), for node_exporter's textfile collector.
//! The metric names are a contract (docs/json.md).

use crate::host::Host;
use crate::ops::branch::unit::launch;
use crate::ops::pool::POOL_LABEL;
use crate::store::records;
use anyhow::Result;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use serde::Serialize;
use std::collections::BTreeMap;

/// What `metrics` reads, before it is encoded (`--json` prints this).
#[derive(Debug, Clone, Default, Serialize)]
pub struct HostMetrics {
    /// Branches by server state, owner and pool (`pool` empty: none).
    pub branches: Vec<BranchCount>,
    /// What the guard holds for running branches once warm (their ceilings).
    pub memory_committed_bytes: u64,
    /// What their servers hold now.
    pub memory_rss_bytes: u64,
    /// Free memory as the guard reads it (MemAvailable, or its cgroup's room).
    pub memory_available_bytes: u64,
    /// What is left for new branches once every running one is warm.
    pub memory_left_bytes: u64,
    /// Pools' slots by state (`ready`, `claimed`, `recycling`).
    pub pool_slots: Vec<SlotCount>,
    pub trash_entries: u64,
    pub trash_bytes: u64,
    pub baseline_generations: u64,
    /// Age of the newest generation (None without one).
    pub baseline_newest_age_seconds: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BranchCount {
    pub state: String,
    pub owner: String,
    pub pool: String,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SlotCount {
    pub pool: String,
    pub state: String,
    pub count: u64,
}

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
    Ok(m)
}

fn gauge(registry: &mut Registry, name: &str, help: &str, value: u64) {
    let g: Gauge = Gauge::default();
    g.set(i64::try_from(value).unwrap_or(i64::MAX));
    registry.register(name, help, g);
}

/// Labelled gauges in the order given (prometheus-client's `Family` keeps a hash map, whose
/// order changes from run to run: people and snapshot tests read this output).
#[derive(Debug)]
struct OrderedGauges(Vec<(Vec<(String, String)>, i64)>);

impl EncodeMetric for OrderedGauges {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, value) in &self.0 {
            encoder.encode_family(labels)?.encode_gauge(value)?;
        }
        Ok(())
    }
    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn family(registry: &mut Registry, name: &str, help: &str, rows: &[(Vec<(String, String)>, u64)]) {
    registry.register(
        name,
        help,
        OrderedGauges(
            rows.iter()
                .map(|(l, n)| (l.clone(), i64::try_from(*n).unwrap_or(i64::MAX)))
                .collect(),
        ),
    );
}

/// The Prometheus text exposition of `m`.
pub fn exposition(m: &HostMetrics) -> Result<String> {
    let mut r = Registry::default();
    let branches: Vec<_> = m
        .branches
        .iter()
        .map(|b| {
            (
                vec![
                    ("state".to_string(), b.state.clone()),
                    ("owner".to_string(), b.owner.clone()),
                    ("pool".to_string(), b.pool.clone()),
                ],
                b.count,
            )
        })
        .collect();
    family(
        &mut r,
        "db_branch_branches",
        "Branches by server state, owner and pool (empty: none)",
        &branches,
    );
    gauge(
        &mut r,
        "db_branch_memory_committed_bytes",
        "Memory the guard holds for running branches once warm (their ceilings)",
        m.memory_committed_bytes,
    );
    gauge(
        &mut r,
        "db_branch_memory_rss_bytes",
        "Memory the running branches' servers hold now",
        m.memory_rss_bytes,
    );
    gauge(
        &mut r,
        "db_branch_memory_available_bytes",
        "Free memory as the guard reads it",
        m.memory_available_bytes,
    );
    gauge(
        &mut r,
        "db_branch_memory_left_bytes",
        "Memory left for new branches once every running one is warm",
        m.memory_left_bytes,
    );
    let slots: Vec<_> = m
        .pool_slots
        .iter()
        .map(|p| {
            (
                vec![
                    ("pool".to_string(), p.pool.clone()),
                    ("state".to_string(), p.state.clone()),
                ],
                p.count,
            )
        })
        .collect();
    family(
        &mut r,
        "db_branch_pool_slots",
        "Pool slots by state",
        &slots,
    );
    gauge(
        &mut r,
        "db_branch_trash_entries",
        "Deleted branches kept in the trash",
        m.trash_entries,
    );
    gauge(
        &mut r,
        "db_branch_trash_bytes",
        "Bytes the trash holds of its own (what emptying it frees)",
        m.trash_bytes,
    );
    gauge(
        &mut r,
        "db_branch_baseline_generations",
        "Baseline generations on this host",
        m.baseline_generations,
    );
    if let Some(age) = m.baseline_newest_age_seconds {
        gauge(
            &mut r,
            "db_branch_baseline_newest_age_seconds",
            "Age of the newest baseline generation",
            age.max(0) as u64,
        );
    }
    let mut out = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut out, &r)
        .map_err(|e| anyhow::anyhow!("encoding the metrics: {e}"))?;
    Ok(out)
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
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
        assert!(m.memory_committed_bytes > 0, "{m:?}");
    }
}
