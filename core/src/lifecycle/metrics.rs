//! Metric values of the pass (§12.7): every gauge of every NodeWright, zero-filled over the
//! canonical orders, state and stage counts summed over the other dimension [Fix].

use nodewright_crds::{NodeState, Stage, State, Status};

use super::ctx::Ctx;
use super::predicates::PackageCursor;
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

/// Per package: nodes per state and per stage (indexed as in `State::ALL`, `Stage::ALL`),
/// summed restarts.
#[derive(Clone, Default)]
struct PackageCounts {
    states: Vec<usize>,
    stages: Vec<usize>,
    restarts: i64,
}

/// Adds `n` to the count of `x` (counts indexed as `all`, the enum's canonical order).
fn bump<T: PartialEq>(counts: &mut [usize], all: &[T], x: &T, n: usize) {
    if let Some(i) = all.iter().position(|a| a == x) {
        counts[i] += n;
    }
}

/// The readable documents of `v`'s nodes, each distinct document object once with the number
/// of nodes that hold it (nodes with equal documents share one object, see
/// [`crate::NodeStateCache`]), in the order first met.
fn distinct_docs<'c>(ctx: &'c Ctx, v: &'c NwView) -> Vec<(&'c NodeState, usize)> {
    let mut at: foldhash::HashMap<*const NodeState, usize> = foldhash::HashMap::default();
    let mut out: Vec<(&NodeState, usize)> = Vec::new();
    for i in 0..v.nodes.len() {
        let Some(doc) = ctx.doc_at(v, i) else {
            continue;
        };
        let k = *at.entry(std::ptr::from_ref(doc)).or_insert(out.len());
        match out.get_mut(k) {
            Some((_, n)) => *n += 1,
            None => out.push((doc, 1)),
        }
    }
    out
}

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
        let mut by_status = vec![0usize; Status::ALL.len()];
        for node in &v.refs {
            let s = ctx.work.node_status(node, &v.name);
            bump(&mut by_status, Status::ALL, &s, 1);
        }
        for (i, s) in Status::ALL.iter().enumerate() {
            out.push(sample(
                "node_status_count",
                vec![nw(), ("status", s.as_str().into())],
                by_status[i] as f64,
            ));
        }
        out.push(sample(
            "node_target_count",
            vec![nw()],
            v.nodes.len() as f64,
        ));
        // Counts are kept per package name: packages of the same name share one slot.
        let packages: Vec<&nodewright_crds::Package> = v.packages.values().collect();
        let slot_of: Vec<usize> = packages
            .iter()
            .map(|p| {
                packages
                    .iter()
                    .position(|q| q.name == p.name)
                    .unwrap_or_default()
            })
            .collect();
        let zero = PackageCounts {
            states: vec![0; State::ALL.len()],
            stages: vec![0; Stage::ALL.len()],
            restarts: 0,
        };
        let mut per_pkg = vec![zero; packages.len()];
        let mut cursor =
            PackageCursor::new(v.packages.keys().map(String::as_str).zip(0..).collect());
        for (doc, nodes) in distinct_docs(ctx, v) {
            for e in doc.0.values() {
                let Some(j) = cursor.get(&e.name) else {
                    continue;
                };
                if packages[j].version != e.version {
                    continue;
                }
                let slot = &mut per_pkg[slot_of[j]];
                bump(
                    &mut slot.states,
                    State::ALL,
                    &e.state.unwrap_or(State::Unknown),
                    nodes,
                );
                bump(&mut slot.stages, Stage::ALL, &e.stage, nodes);
                slot.restarts += i64::from(e.restarts) * nodes as i64;
            }
        }
        for (j, p) in packages.iter().enumerate() {
            let counts = &per_pkg[slot_of[j]];
            let pkg = || {
                vec![
                    nw(),
                    ("package_name", p.name.clone()),
                    ("package_version", p.version.clone()),
                ]
            };
            for (k, s) in State::ALL.iter().enumerate() {
                let mut labels = pkg();
                labels.push(("state", s.as_str().into()));
                out.push(sample(
                    "package_state_count",
                    labels,
                    counts.states[k] as f64,
                ));
            }
            for (k, s) in Stage::ALL.iter().enumerate() {
                let mut labels = pkg();
                labels.push(("stage", s.as_str().into()));
                out.push(sample(
                    "package_stage_count",
                    labels,
                    counts.stages[k] as f64,
                ));
            }
            out.push(sample(
                "package_restarts_count",
                pkg(),
                counts.restarts as f64,
            ));
        }
        if let Some(rollout) = ctx.rollout_metrics.get(&v.name) {
            out.extend(rollout.iter().cloned());
        }
    }
    out
}
