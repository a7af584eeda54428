//! Metric values of the pass (§12.7): every gauge of every NodeWright, zero-filled over the
//! canonical orders, state and stage counts summed over the other dimension [Fix].

use std::collections::BTreeMap;

use nodewright_crds::{Stage, State, Status};

use super::ctx::Ctx;
use super::view::NwView;
use crate::plan::MetricSample;

fn sample(name: &str, labels: Vec<(&str, String)>, value: f64) -> MetricSample {
    MetricSample {
        name: name.to_string(),
        labels: labels
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        value,
    }
}

/// Per package: nodes per state, nodes per stage, summed restarts.
type PackageCounts = (BTreeMap<State, usize>, BTreeMap<Stage, usize>, i64);

/// Every gauge of every NodeWright.
pub fn collect(ctx: &Ctx, views: &[NwView]) -> Vec<MetricSample> {
    let mut out = Vec::new();
    for v in views {
        let nw = || ("nodewright_name", v.name.clone());
        let status = ctx.status(v);
        let current = status.status.unwrap_or(Status::Unknown);
        for s in Status::ALL {
            let value = if *s == current { 1.0 } else { 0.0 };
            out.push(sample(
                "status",
                vec![nw(), ("status", s.as_str().into())],
                value,
            ));
        }
        let mut by_status: BTreeMap<Status, usize> = BTreeMap::new();
        for n in &v.nodes {
            let s = ctx
                .node(n)
                .map_or(Status::Unknown, |node| ctx.work.node_status(node, &v.name));
            *by_status.entry(s).or_default() += 1;
        }
        for s in Status::ALL {
            let value = by_status.get(s).copied().unwrap_or(0) as f64;
            out.push(sample(
                "node_status_count",
                vec![nw(), ("status", s.as_str().into())],
                value,
            ));
        }
        out.push(sample(
            "node_target_count",
            vec![nw()],
            v.nodes.len() as f64,
        ));
        let mut per_pkg: BTreeMap<&str, PackageCounts> = BTreeMap::new();
        for n in &v.nodes {
            let Some(doc) = ctx.doc(v, n) else { continue };
            for e in doc.0.values() {
                let Some(p) = v.packages.get(&e.name) else {
                    continue;
                };
                if p.version != e.version {
                    continue;
                }
                let slot = per_pkg.entry(p.name.as_str()).or_default();
                *slot.0.entry(e.state.unwrap_or(State::Unknown)).or_default() += 1;
                *slot.1.entry(e.stage).or_default() += 1;
                slot.2 += i64::from(e.restarts);
            }
        }
        let empty = (BTreeMap::new(), BTreeMap::new(), 0);
        for p in v.packages.values() {
            let (states, stages, restarts) = per_pkg.get(p.name.as_str()).unwrap_or(&empty);
            let restarts = *restarts;
            let pkg = || {
                vec![
                    nw(),
                    ("package_name", p.name.clone()),
                    ("package_version", p.version.clone()),
                ]
            };
            for s in State::ALL {
                let mut labels = pkg();
                labels.push(("state", s.as_str().into()));
                out.push(sample(
                    "package_state_count",
                    labels,
                    states.get(s).copied().unwrap_or(0) as f64,
                ));
            }
            for s in Stage::ALL {
                let mut labels = pkg();
                labels.push(("stage", s.as_str().into()));
                out.push(sample(
                    "package_stage_count",
                    labels,
                    stages.get(s).copied().unwrap_or(0) as f64,
                ));
            }
            out.push(sample("package_restarts_count", pkg(), restarts as f64));
        }
        if let Some(rollout) = ctx.rollout_metrics.get(&v.name) {
            out.extend(rollout.iter().cloned());
        }
    }
    out
}
