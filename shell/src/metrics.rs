//! Prometheus metrics: the core's `nodewright_*` gauges of the last pass (02-lifecycle.md §12.7)
//! plus operator self-metrics and process metrics, encoded as OpenMetrics text or as the classic
//! text format 0.0.4, whichever the scraper's `Accept` header asks for (as client_golang does).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use nodewright_core::MetricSample;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Content type of the OpenMetrics exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Content type of the classic text exposition (Prometheus text format 0.0.4).
pub const CLASSIC_CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// One line of help per rollout gauge (name without the `nodewright_` prefix).
pub fn gauge_help(name: &str) -> &'static str {
    match name {
        "status" => "1 for the NodeWright's current overall status, 0 for the others",
        "node_status_count" => "Nodes of the NodeWright per node status",
        "node_target_count" => "Nodes the NodeWright selects",
        "package_state_count" => "Nodes per package version and package state",
        "package_stage_count" => "Nodes per package version and stage",
        "package_restarts_count" => "Executor restarts summed over the nodes, per package version",
        "rollout_matched_nodes" => "Nodes assigned to the compartment",
        "rollout_ceiling" => "Nodes the compartment's budget lets be in progress at once",
        "rollout_in_progress" => "Compartment nodes in progress",
        "rollout_completed" => "Compartment nodes complete",
        "rollout_progress_percent" => "Completed compartment nodes in percent of the matched ones",
        "rollout_current_batch" => "Current batch number of the compartment (1-based)",
        "rollout_consecutive_failures" => "Failed batches in a row in the compartment",
        "rollout_should_stop" => "1 when the compartment stopped until a reset",
        _ => "NodeWright rollout gauge",
    }
}

type Labels = Vec<(String, String)>;

/// The gauges the last pass reported, grouped by metric name (without prefix).
#[derive(Debug, Default)]
pub struct PlanGauges {
    samples: RwLock<BTreeMap<String, Vec<(Labels, f64)>>>,
    legacy: bool,
}

impl PlanGauges {
    /// Replaces everything exported with the samples of one pass.
    pub fn replace(&self, samples: &[MetricSample]) {
        let mut grouped: BTreeMap<String, Vec<(Labels, f64)>> = BTreeMap::new();
        for s in samples {
            grouped
                .entry(s.name.clone())
                .or_default()
                .push((s.labels.clone(), s.value));
        }
        // A poisoned lock only means a writer panicked mid-replace; overwrite it.
        *self.samples.write().unwrap_or_else(|p| p.into_inner()) = grouped;
    }
}

impl Collector for PlanGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let samples = self.samples.read().unwrap_or_else(|p| p.into_inner());
        for (name, series) in samples.iter() {
            encode_gauges(&mut encoder, &format!("nodewright_{name}"), series, None)?;
            if self.legacy {
                encode_gauges(
                    &mut encoder,
                    &format!("skyhook_{name}"),
                    series,
                    Some(("nodewright_name", "skyhook_name")),
                )?;
            }
        }
        Ok(())
    }
}

fn encode_gauges(
    encoder: &mut DescriptorEncoder,
    name: &str,
    series: &[(Labels, f64)],
    rename: Option<(&str, &str)>,
) -> Result<(), std::fmt::Error> {
    let short = name.split_once('_').map_or(name, |(_, rest)| rest);
    let mut metric = encoder.encode_descriptor(name, gauge_help(short), None, MetricType::Gauge)?;
    for (labels, value) in series {
        let labels: Labels = labels
            .iter()
            .map(|(k, v)| match rename {
                Some((from, to)) if k == from => (to.to_string(), v.clone()),
                _ => (k.clone(), v.clone()),
            })
            .collect();
        encode_one(&mut metric, &labels, *value)?;
    }
    Ok(())
}

fn encode_one(
    metric: &mut MetricEncoder,
    labels: &Labels,
    value: f64,
) -> Result<(), std::fmt::Error> {
    // The gauges are counts: integral values are written as integers (`1`, not `1.0`).
    if value.fract() == 0.0 && value.abs() < 9.0e15 {
        metric.encode_family(labels)?.encode_gauge(&(value as i64))
    } else {
        metric.encode_family(labels)?.encode_gauge(&value)
    }
}

/// Labels of the effect counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct EffectLabels {
    /// Effect kind (`CreateJob`, `PatchNode`, ...).
    pub effect: String,
    /// Outcome (`applied`, `dropped`, ...).
    pub outcome: String,
}

/// Every metric the operator exports.
pub struct Metrics {
    registry: Registry,
    /// Gauges of the last pass.
    pub plan: Arc<PlanGauges>,
    /// Passes run.
    pub passes: Counter,
    /// Passes whose plan or effects reported errors.
    pub pass_errors: Counter,
    /// Wall time of planning plus applying one pass.
    pub pass_duration: Histogram,
    /// Wall time of the pure planning step alone.
    pub plan_duration: Histogram,
    /// Effects applied, by kind and outcome.
    pub effects: Family<EffectLabels, Counter>,
    /// 1 while this replica holds the reconcile lease.
    pub leader: Gauge,
    /// Objects in the watch caches, by kind.
    pub cache_objects: Family<Vec<(String, String)>, Gauge>,
}

impl Metrics {
    /// A fresh registry; `legacy` also publishes every gauge as `skyhook_*`.
    pub fn new(legacy: bool) -> Self {
        let mut registry = Registry::default();
        let plan = Arc::new(PlanGauges {
            legacy,
            ..PlanGauges::default()
        });
        registry.register_collector(Box::new(plan.clone()));
        registry.register_collector(Box::new(crate::metrics_process::ProcessCollector));
        let sub = registry.sub_registry_with_prefix("nodewright_operator");
        let passes = Counter::default();
        sub.register("passes", "Reconcile passes run", passes.clone());
        let pass_errors = Counter::default();
        sub.register(
            "pass_errors",
            "Passes that reported errors",
            pass_errors.clone(),
        );
        let pass_duration = Histogram::new(exponential_buckets(0.005, 2.0, 14));
        sub.register(
            "pass_duration_seconds",
            "Duration of a pass (plan and apply)",
            pass_duration.clone(),
        );
        let plan_duration = Histogram::new(exponential_buckets(0.0005, 2.0, 14));
        sub.register(
            "plan_duration_seconds",
            "Duration of the pure planning step",
            plan_duration.clone(),
        );
        let effects = Family::<EffectLabels, Counter>::default();
        sub.register(
            "effects",
            "Effects applied by kind and outcome",
            effects.clone(),
        );
        let leader = Gauge::default();
        sub.register(
            "leader",
            "1 while this replica is the leader",
            leader.clone(),
        );
        let cache_objects = Family::<Vec<(String, String)>, Gauge>::default();
        sub.register(
            "cache_objects",
            "Objects held in the watch caches",
            cache_objects.clone(),
        );
        Metrics {
            registry,
            plan,
            passes,
            pass_errors,
            pass_duration,
            plan_duration,
            effects,
            leader,
            cache_objects,
        }
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// The classic text exposition (format 0.0.4), values written as client_golang writes them.
    pub fn encode_classic(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry);
        crate::metrics_format::go_values(&out)
    }

    /// The exposition for a request's `Accept` header and its content type: OpenMetrics only
    /// when the header accepts `application/openmetrics-text`, the classic format otherwise.
    pub fn negotiate(&self, accept: Option<&str>) -> (&'static str, String) {
        if crate::metrics_format::wants_openmetrics(accept) {
            (CONTENT_TYPE, self.encode())
        } else {
            (CLASSIC_CONTENT_TYPE, self.encode_classic())
        }
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str, value: f64) -> MetricSample {
        MetricSample {
            name: name.into(),
            labels: vec![
                ("nodewright_name".into(), "nw".into()),
                ("status".into(), "complete".into()),
            ],
            value,
        }
    }

    #[test]
    fn r12_7_plan_gauges_are_exported_with_prefix_and_replaced() {
        let m = Metrics::new(false);
        m.plan.replace(&[sample("status", 1.0)]);
        let text = m.encode();
        assert!(text.contains("# TYPE nodewright_status gauge"), "{text}");
        assert!(
            text.contains(r#"nodewright_status{nodewright_name="nw",status="complete"} 1"#),
            "{text}"
        );
        assert!(!text.contains("skyhook_"));
        m.plan.replace(&[]);
        assert!(!m.encode().contains("nodewright_status{"));
        assert!(m.encode().ends_with("# EOF\n"));
    }

    #[test]
    fn r12_7_legacy_duplicates_rename_the_name_label() {
        let m = Metrics::new(true);
        m.plan.replace(&[sample("status", 1.0)]);
        let text = m.encode();
        assert!(
            text.contains(r#"skyhook_status{skyhook_name="nw",status="complete"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn the_accept_header_chooses_the_format() {
        let m = Metrics::new(false);
        m.plan.replace(&[sample("status", 1.0)]);
        m.passes.inc();
        let (ct, classic) = m.negotiate(None);
        assert_eq!(ct, CLASSIC_CONTENT_TYPE);
        assert!(
            classic.contains(r#"nodewright_status{nodewright_name="nw",status="complete"} 1"#),
            "{classic}"
        );
        assert!(classic.contains("# TYPE nodewright_operator_passes_total counter"));
        assert!(classic.contains("nodewright_operator_passes_total 1\n"));
        assert!(
            !classic.contains("# EOF") && !classic.contains(" 1.0\n"),
            "{classic}"
        );
        let (ct, open) = m.negotiate(Some("application/openmetrics-text;version=1.0.0"));
        assert_eq!(ct, CONTENT_TYPE);
        assert!(open.ends_with("# EOF\n"));
        assert!(open.contains("# TYPE nodewright_operator_passes counter"));
    }

    #[test]
    fn every_rollout_gauge_has_its_own_help() {
        let names = [
            "status",
            "node_status_count",
            "node_target_count",
            "package_state_count",
            "package_stage_count",
            "package_restarts_count",
        ];
        let all: Vec<&str> = names
            .iter()
            .copied()
            .chain(nodewright_core::rollout::ROLLOUT_METRICS)
            .collect();
        let helps: std::collections::BTreeSet<&str> = all.iter().map(|n| gauge_help(n)).collect();
        assert_eq!(helps.len(), all.len());
        assert!(!helps.contains("NodeWright rollout gauge"));
    }

    #[test]
    fn process_and_build_metrics_are_exported() {
        let text = Metrics::new(false).encode_classic();
        assert!(
            text.contains("nodewright_operator_build_info{version="),
            "{text}"
        );
        #[cfg(target_os = "linux")]
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
        ] {
            assert!(text.contains(&format!("\n{name} ")), "{name}: {text}");
        }
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        for name in [
            "nodewright_operator_heap_in_use_bytes",
            "nodewright_operator_heap_free_bytes",
        ] {
            assert!(text.contains(&format!("\n{name} ")), "{name}: {text}");
        }
    }

    #[test]
    fn self_metrics_are_registered() {
        let m = Metrics::new(false);
        m.passes.inc();
        let text = m.encode();
        assert!(
            text.contains("nodewright_operator_passes_total 1"),
            "{text}"
        );
        assert!(
            text.contains("nodewright_operator_pass_duration_seconds"),
            "{text}"
        );
    }
}
