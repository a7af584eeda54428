//! One reconcile pass over large clusters: 1,000 nodes × 5 packages and 10,000 nodes × 10
//! packages, mid-rollout with a 10 % budget: 90 % of the nodes complete, 10 % with `apply` in
//! flight; boot ids already recorded so the pass runs through introspection.
//!
//! Run: `cargo bench -p nodewright-core --bench plan`

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, NodeSystemInfo};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use nodewright_core::{NodeStateCache, Options, Snapshot, reconcile, reconcile_with};
use nodewright_crds::{
    InterruptionBudget, NodeState, NodeWright, NodeWrightSpec, Package, PackageStatus, Stage,
    State, keys,
};

fn main() {
    divan::main();
}

fn cluster(nodes: usize, packages: usize) -> Snapshot {
    let mut nw = NodeWright::new(
        "bench",
        NodeWrightSpec {
            priority: 200,
            interruption_budget: Some(InterruptionBudget {
                percent: Some(10),
                count: None,
            }),
            ..NodeWrightSpec::default()
        },
    );
    nw.metadata.uid = Some("uid".into());
    nw.metadata.generation = Some(1);
    nw.metadata.finalizers = Some(vec![keys::FINALIZER.into()]);
    for p in 0..packages {
        let name = format!("pkg{p:02}");
        nw.spec.packages.insert(
            name.clone(),
            Package {
                name: name.clone(),
                version: "1.0.0".into(),
                image: format!("ghcr.io/example/{name}"),
                ..Package::default()
            },
        );
    }
    let mut status = nodewright_crds::NodeWrightStatus::default();
    for i in 0..nodes {
        status
            .node_boot_ids
            .insert(format!("node-{i:05}"), "boot".into());
    }
    nw.status = Some(status);
    let nodes: Vec<Node> = (0..nodes)
        .map(|i| {
            let name = format!("node-{i:05}");
            let mut doc = NodeState::default();
            for p in 0..packages {
                let (stage, state) = if i % 10 != 0 {
                    (Stage::Config, State::Complete)
                } else {
                    (Stage::Apply, State::InProgress)
                };
                doc.upsert(PackageStatus {
                    name: format!("pkg{p:02}"),
                    version: "1.0.0".into(),
                    image: format!("ghcr.io/example/pkg{p:02}"),
                    container_sha: String::new(),
                    stage,
                    state: Some(state),
                    restarts: 0,
                });
            }
            let status = if i % 2 == 0 {
                "complete"
            } else {
                "in_progress"
            };
            Node {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    creation_timestamp: Some(Time("2025-01-01T00:00:00Z".parse().unwrap())),
                    labels: Some(BTreeMap::from([(
                        keys::node_status("bench"),
                        status.into(),
                    )])),
                    annotations: Some(BTreeMap::from([
                        (keys::node_state("bench"), doc.to_annotation()),
                        (keys::node_status("bench"), status.into()),
                    ])),
                    ..ObjectMeta::default()
                },
                spec: Some(NodeSpec::default()),
                status: Some(NodeStatus {
                    node_info: Some(NodeSystemInfo {
                        boot_id: "boot".into(),
                        ..NodeSystemInfo::default()
                    }),
                    ..NodeStatus::default()
                }),
            }
        })
        .collect();
    Snapshot {
        nodewrights: nodewright_core::shared([nw]),
        nodes: nodewright_core::shared(nodes),
        ..Snapshot::default()
    }
}

/// Applies the status and node-metadata writes of a plan (enough to reach a steady state in
/// which introspection finds nothing to change).
fn settle(snapshot: &mut Snapshot, passes: usize) {
    let options = Options::default();
    let now = "2026-01-01T00:00:00Z".parse().unwrap();
    let index: BTreeMap<String, usize> = snapshot
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.metadata.name.clone().unwrap_or_default(), i))
        .collect();
    for _ in 0..passes {
        let plan = reconcile(snapshot, &options, now);
        let quiet = !plan.effects.iter().any(|e| {
            matches!(
                e,
                nodewright_core::Effect::PatchStatus { .. }
                    | nodewright_core::Effect::CreateJob { .. }
            )
        });
        if quiet {
            return;
        }
        for effect in plan.effects {
            match effect {
                nodewright_core::Effect::PatchStatus { status, .. } => {
                    std::sync::Arc::make_mut(&mut snapshot.nodewrights[0]).status = Some(*status);
                }
                nodewright_core::Effect::CreateJob { job, .. } => {
                    let mut job = *job;
                    job.metadata.uid = job.metadata.name.clone();
                    job.metadata.namespace = Some(options.namespace.clone());
                    snapshot.jobs.push(job.into());
                }
                nodewright_core::Effect::PatchNode(patch) => {
                    let Some(&i) = index.get(&patch.node) else {
                        continue;
                    };
                    let node = std::sync::Arc::make_mut(&mut snapshot.nodes[i]);
                    let annotations = node.metadata.annotations.get_or_insert_with(BTreeMap::new);
                    for (k, v) in patch.annotations {
                        match v {
                            Some(v) => annotations.insert(k, v),
                            None => annotations.remove(&k),
                        };
                    }
                    let labels = node.metadata.labels.get_or_insert_with(BTreeMap::new);
                    for (k, v) in patch.labels {
                        match v {
                            Some(v) => labels.insert(k, v),
                            None => labels.remove(&k),
                        };
                    }
                }
                _ => {}
            }
        }
    }
}

/// A cold pass: statuses not yet derived (the first pass after the operator starts).
#[divan::bench(args = [(1_000, 5), (10_000, 10)], sample_count = 5, sample_size = 1)]
fn plan_one_pass(bencher: divan::Bencher, (nodes, packages): (usize, usize)) {
    let snapshot = cluster(nodes, packages);
    let options = Options::default();
    let now = "2026-01-01T00:00:00Z".parse().unwrap();
    bencher.bench(|| reconcile(divan::black_box(&snapshot), &options, now));
}

/// A steady pass: statuses settled and the in-flight nodes' Jobs running; the pass walks the
/// whole fleet and finds nothing new to start.
#[divan::bench(args = [(1_000, 5), (10_000, 10)], sample_count = 5, sample_size = 1)]
fn plan_steady_pass(bencher: divan::Bencher, (nodes, packages): (usize, usize)) {
    let mut snapshot = cluster(nodes, packages);
    settle(&mut snapshot, 12);
    let options = Options::default();
    let now = "2026-01-01T00:00:00Z".parse().unwrap();
    bencher.bench(|| reconcile(divan::black_box(&snapshot), &options, now));
}

/// The steady pass with a fresh parse cache (the shell keeps one between passes, so only
/// changed node-state annotations are parsed).
#[divan::bench(args = [(1_000, 5), (10_000, 10)], sample_count = 5, sample_size = 1)]
fn plan_steady_pass_cached(bencher: divan::Bencher, (nodes, packages): (usize, usize)) {
    let mut snapshot = cluster(nodes, packages);
    settle(&mut snapshot, 12);
    let mut cache = NodeStateCache::new();
    cache.update(&snapshot.nodes);
    let options = Options::default();
    let now = "2026-01-01T00:00:00Z".parse().unwrap();
    bencher.bench(|| reconcile_with(divan::black_box(&snapshot), &options, now, &cache));
}

/// Bringing a warm parse cache up to date when no annotation changed (the shell's cost per pass).
#[divan::bench(args = [(1_000, 5), (10_000, 10)], sample_count = 5, sample_size = 1)]
fn cache_update_unchanged(bencher: divan::Bencher, (nodes, packages): (usize, usize)) {
    let snapshot = cluster(nodes, packages);
    let mut cache = NodeStateCache::new();
    cache.update(&snapshot.nodes);
    bencher.bench_local(|| cache.update(divan::black_box(&snapshot.nodes)));
}
