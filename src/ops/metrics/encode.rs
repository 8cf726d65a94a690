//! `HostMetrics` in the Prometheus text exposition format. prometheus-client does the
//! encoding; the values come from files and other processes, not from metrics this process
//! updates, so each family is a small `EncodeMetric` over what was read.

use super::figures::{HostMetrics, JobRun};
use anyhow::Result;
use prometheus_client::encoding::{EncodeGaugeValue, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn gauge(registry: &mut Registry, name: &str, help: &str, value: u64) {
    let g: Gauge = Gauge::default();
    g.set(i64::try_from(value).unwrap_or(i64::MAX));
    registry.register(name, help, g);
}

/// Labelled gauges in the order given (prometheus-client's `Family` keeps a hash map, whose
/// order changes from run to run: people and snapshot tests read this output).
#[derive(Debug)]
struct OrderedGauges<V>(Vec<(Labels, V)>);

impl<V: EncodeGaugeValue + std::fmt::Debug + Send + Sync + 'static> EncodeMetric
    for OrderedGauges<V>
{
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

/// One labelled histogram: its sum and count, and per-bucket (not cumulative) counts with
/// their upper bounds, the last `+Inf`.
#[derive(Debug)]
struct HistogramRow {
    labels: Labels,
    sum: f64,
    count: u64,
    buckets: Vec<(f64, u64)>,
}

/// Labelled histograms in the order given.
#[derive(Debug)]
struct OrderedHistograms(Vec<HistogramRow>);

impl EncodeMetric for OrderedHistograms {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for h in &self.0 {
            encoder
                .encode_family(&h.labels)?
                .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                    h.sum, h.count, &h.buckets, None,
                )?;
        }
        Ok(())
    }
    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn family(registry: &mut Registry, name: &str, help: &str, rows: &[(Labels, u64)]) {
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
    if let Some(f) = &m.follower {
        let source = || labels(&[("source", &f.source)]);
        family(
            &mut r,
            "db_branch_follower_replicating",
            "1 while the follower's receiver and applier run without an error (baseline follow)",
            &[(source(), u64::from(f.replicating))],
        );
        if let Some(lag) = f.lag_seconds {
            family(
                &mut r,
                "db_branch_follower_lag_seconds",
                "Seconds the follower's applier is behind its source",
                &[(source(), lag)],
            );
        }
        if let Some(age) = f.last_cut_age_seconds {
            family(
                &mut r,
                "db_branch_follower_last_cut_age_seconds",
                "Age of the newest generation cut from the follower",
                &[(source(), age.max(0) as u64)],
            );
        }
    }
    let latency = OrderedHistograms(
        m.operations
            .iter()
            .map(|o| {
                let mut buckets: Vec<(f64, u64)> = Vec::new();
                let mut below = 0;
                for b in &o.buckets {
                    buckets.push((b.le, b.count.saturating_sub(below)));
                    below = b.count;
                }
                buckets.push((f64::INFINITY, o.count.saturating_sub(below)));
                HistogramRow {
                    labels: labels(&[("operation", &o.operation)]),
                    sum: o.sum_seconds,
                    count: o.count,
                    buckets,
                }
            })
            .collect(),
    );
    if !latency.is_empty() {
        r.register(
            "db_branch_operation_duration_seconds",
            "How long create, reset and claim took, as each measured itself",
            latency,
        );
    }
    let runs = |f: &dyn Fn(&JobRun) -> f64| {
        OrderedGauges(
            m.runs
                .iter()
                .map(|j| (labels(&[("job", &j.job)]), f(j)))
                .collect(),
        )
    };
    if !m.runs.is_empty() {
        r.register(
            "db_branch_job_last_run_timestamp_seconds",
            "When gc and stop-idle last finished (Unix time)",
            runs(&|j| j.finished_at.timestamp_millis() as f64 / 1000.0),
        );
        r.register(
            "db_branch_job_last_run_duration_seconds",
            "How long their last run took",
            runs(&|j| j.seconds),
        );
        r.register(
            "db_branch_job_last_run_success",
            "1 when the last run acted on everything it meant to, 0 when it failed",
            runs(&|j| if j.ok { 1.0 } else { 0.0 }),
        );
        r.register(
            "db_branch_job_last_run_acted",
            "Branches and trash entries the last run deleted, purged or stopped",
            runs(&|j| j.acted as f64),
        );
    }
    let mut out = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut out, &r)
        .map_err(|e| anyhow::anyhow!("encoding the metrics: {e}"))?;
    Ok(out)
}
