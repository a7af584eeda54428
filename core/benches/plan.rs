//! One reconcile pass over large clusters: 1,000 nodes × 5 packages and 10,000 nodes × 10
//! packages, mid-rollout with a 10 % budget: 90 % of the nodes complete, 10 % with `apply` in
//! flight; boot ids already recorded so the pass runs through introspection.
//!
//! A converged case (`plan_converged_pass`) has every node complete for every package and
//! the finished executor Jobs and pods of the whole rollout retained (default 1 h Job TTL);
//! `plan_converged_pass_settled_dropped` is that pass once the settled pods left the cache (D28).
//!
//! Run: `cargo bench -p nodewright-core --bench plan`

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use nodewright_core::{NodeStateCache, Options, Snapshot, reconcile, reconcile_with};
use nodewright_crds::{NodeState, PackageStatus, Stage, State, keys};

mod fleet;

fn main() {
    divan::main();
}

fn cluster(nodes: usize, packages: usize) -> Snapshot {
    cluster_with(nodes, packages, true)
}

/// `cluster`, with every tenth node in flight (`in_flight`) or every node complete.
fn cluster_with(nodes: usize, packages: usize, in_flight: bool) -> Snapshot {
    let mut nw = fleet::nodewright("bench", 200, 10, packages);
    let mut status = nodewright_crds::NodeWrightStatus::default();
    for i in 0..nodes {
        status
            .node_boot_ids
            .insert(fleet::node_name(i), "boot".into());
    }
    nw.status = Some(status);
    let nodes: Vec<Node> = (0..nodes)
        .map(|i| {
            let mut doc = NodeState::default();
            for p in 0..packages {
                let (stage, state) = if !in_flight || i % 10 != 0 {
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
            let status = if !in_flight || i % 2 == 0 {
                "complete"
            } else {
                "in_progress"
            };
            let mut node = fleet::node(i);
            node.metadata.labels = Some(BTreeMap::from([(
                keys::node_status("bench"),
                status.into(),
            )]));
            node.metadata.annotations = Some(BTreeMap::from([
                (keys::node_state("bench"), doc.to_annotation()),
                (keys::node_status("bench"), status.into()),
            ]));
            node
        })
        .collect();
    Snapshot {
        nodewrights: nodewright_core::shared([nw]),
        nodes: nodewright_core::shared(nodes),
        ..Snapshot::default()
    }
}

/// The finished Jobs and Succeeded pods a plain package leaves behind on every node (one per
/// stage: apply, config), outcomes recorded (`state-recorded`), stripped as the shell caches
/// them (`shell/src/cache/slim.rs`: the template keeps only `nodeName` and the deadline).
fn retain_finished_executors(snapshot: &mut Snapshot) {
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
    use nodewright_core::jobs::{JobInputs, build_package_job, index::CONTROLLER_UID};

    let options = Options::default();
    let nw = snapshot.nodewrights[0].clone();
    let finished = Time("2026-01-01T00:00:00Z".parse().unwrap());
    let mut jobs = Vec::new();
    let mut pods = Vec::new();
    let mut seed = 0x5eed_u64;
    for (order, node) in snapshot.nodes.iter().enumerate() {
        let node = node.metadata.name.as_deref().unwrap_or_default();
        for package in nw.spec.packages.values() {
            for stage in [Stage::Apply, Stage::Config] {
                let mut job = build_package_job(&JobInputs {
                    nodewright: &nw,
                    package,
                    stage,
                    node,
                    node_order: order as i64,
                    options: &options,
                });
                let name = job.metadata.name.clone().unwrap_or_default();
                let uid = uuid(&mut seed);
                job.metadata.uid = Some(uid.clone());
                job.metadata.namespace = Some(options.namespace.clone());
                job.metadata.owner_references = None;
                if let Some(labels) = job.metadata.labels.as_mut() {
                    labels.remove(keys::LABEL_GENERATION);
                }
                if let Some(annotations) = job.metadata.annotations.as_mut() {
                    annotations.remove(keys::RESOURCE_ID);
                    annotations.insert(keys::STATE_RECORDED.into(), "true".into());
                }
                if let Some(spec) = job.spec.as_mut() {
                    spec.selector = None;
                    spec.pod_failure_policy = None;
                    spec.success_policy = None;
                    spec.ttl_seconds_after_finished = Some(3600);
                    spec.template.metadata = None;
                    if let Some(pod) = spec.template.spec.as_mut() {
                        *pod = PodSpec {
                            node_name: pod.node_name.take(),
                            active_deadline_seconds: pod.active_deadline_seconds,
                            ..PodSpec::default()
                        };
                    }
                }
                job.status = Some(JobStatus {
                    succeeded: Some(1),
                    conditions: Some(vec![JobCondition {
                        type_: "Complete".into(),
                        status: "True".into(),
                        last_transition_time: Some(finished.clone()),
                        ..JobCondition::default()
                    }]),
                    ..JobStatus::default()
                });
                let labels = job.metadata.labels.clone().unwrap_or_default();
                pods.push(Pod {
                    metadata: ObjectMeta {
                        name: Some(format!("{name}-x7k2p")),
                        namespace: Some(options.namespace.clone()),
                        uid: Some(uuid(&mut seed)),
                        creation_timestamp: Some(finished.clone()),
                        labels: Some(BTreeMap::from([
                            (
                                keys::LABEL_NAME.to_string(),
                                labels.get(keys::LABEL_NAME).cloned().unwrap_or_default(),
                            ),
                            (
                                keys::PACKAGE.to_string(),
                                labels.get(keys::PACKAGE).cloned().unwrap_or_default(),
                            ),
                            (CONTROLLER_UID.to_string(), uid),
                        ])),
                        ..ObjectMeta::default()
                    },
                    spec: Some(PodSpec {
                        node_name: Some(node.to_string()),
                        ..PodSpec::default()
                    }),
                    status: Some(PodStatus {
                        phase: Some("Succeeded".into()),
                        start_time: Some(finished.clone()),
                        ..PodStatus::default()
                    }),
                });
                jobs.push(job);
            }
        }
    }
    snapshot.jobs = nodewright_core::shared(jobs);
    snapshot.executor_pods = nodewright_core::shared(pods);
}

/// A random-looking object uid (as the apiserver's UUIDs: they differ from the first
/// characters on), deterministic from `seed` (splitmix64).
fn uuid(seed: &mut u64) -> String {
    let mut next = || {
        *seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let (a, b) = (next(), next());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        (b >> 48) & 0x3fff | 0x8000,
        b & 0xffff_ffff_ffff
    )
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
                    let mut job = job.to_job();
                    job.metadata.uid = job.metadata.name.clone();
                    job.metadata.namespace = Some(options.namespace.clone());
                    snapshot.jobs.push(std::sync::Arc::new(job.into()));
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

/// The steady pass with fresh parse and executor caches, as the operator keeps them between
/// passes (only changed node-state annotations are parsed, the executor index is reused).
#[divan::bench(args = [(1_000, 5), (10_000, 10)], sample_count = 5, sample_size = 1)]
fn plan_steady_pass_cached(bencher: divan::Bencher, (nodes, packages): (usize, usize)) {
    let mut snapshot = cluster(nodes, packages);
    settle(&mut snapshot, 12);
    let options = Options::default();
    let mut cache = NodeStateCache::new();
    cache.update(&snapshot.nodes);
    cache.update_executors(&snapshot, &options);
    let now = "2026-01-01T00:00:00Z".parse().unwrap();
    // As the operator: the executor index is checked against the snapshot (kept: nothing
    // changed) before every pass.
    bencher.bench_local(|| {
        cache.update_executors(divan::black_box(&snapshot), &options);
        reconcile_with(divan::black_box(&snapshot), &options, now, &cache)
    });
}

/// Bringing a warm parse cache up to date when no annotation changed (the shell's cost per pass).
#[divan::bench(args = [(1_000, 5), (10_000, 10)], sample_count = 5, sample_size = 1)]
fn cache_update_unchanged(bencher: divan::Bencher, (nodes, packages): (usize, usize)) {
    let snapshot = cluster(nodes, packages);
    let mut cache = NodeStateCache::new();
    cache.update(&snapshot.nodes);
    bencher.bench_local(|| cache.update(divan::black_box(&snapshot.nodes)));
}

/// The converged fixture: every node complete for every package, the rollout's finished Jobs and
/// pods retained, statuses settled, with a parse and executor cache as the operator keeps them.
fn converged(
    nodes: usize,
    packages: usize,
) -> (Snapshot, Options, NodeStateCache, jiff::Timestamp) {
    let mut snapshot = cluster_with(nodes, packages, false);
    retain_finished_executors(&mut snapshot);
    settle(&mut snapshot, 12);
    let options = Options::default();
    let mut cache = NodeStateCache::new();
    cache.update(&snapshot.nodes);
    cache.update_executors(&snapshot, &options);
    let now = "2026-01-01T00:00:00Z".parse().unwrap();
    (snapshot, options, cache, now)
}

/// A converged pass: every node complete for every package, the finished Jobs and pods of the
/// whole rollout retained (the idle full pass of issue 15 at 10,000 × 5).
#[divan::bench(args = [(1_000, 5), (10_000, 5)], sample_count = 5, sample_size = 1)]
fn plan_converged_pass(bencher: divan::Bencher, (nodes, packages): (usize, usize)) {
    let (snapshot, options, mut cache, now) = converged(nodes, packages);
    // The fixture is converged: the pass finds nothing to write.
    let plan = reconcile_with(&snapshot, &options, now, &cache);
    assert!(plan.effects.is_empty(), "not converged: {:?}", plan.effects);
    // As the operator: the executor index is checked against the snapshot (kept: nothing
    // changed) before every pass.
    bencher.bench_local(|| {
        cache.update_executors(divan::black_box(&snapshot), &options);
        reconcile_with(divan::black_box(&snapshot), &options, now, &cache)
    });
}

/// The converged pass as the operator runs it since D28: the executor pods the first pass
/// reports settled have left the cache, only the finished Jobs are retained.
#[divan::bench(args = [(1_000, 5), (10_000, 5)], sample_count = 5, sample_size = 1)]
fn plan_converged_pass_settled_dropped(bencher: divan::Bencher, (nodes, packages): (usize, usize)) {
    let (mut snapshot, options, mut cache, now) = converged(nodes, packages);
    let settled = reconcile_with(&snapshot, &options, now, &cache).settled_pods;
    let gone: std::collections::HashSet<&str> = settled.iter().map(|p| p.uid.as_str()).collect();
    // Every retained pod is settled; they are moved out of the snapshot but kept alive until the
    // end, so that freeing 100,000 records does not leave the allocator fragmented for the timing.
    let held = std::mem::take(&mut snapshot.executor_pods);
    assert!(
        held.iter()
            .all(|p| gone.contains(p.metadata.uid.as_deref().unwrap_or_default())),
        "a retained pod is not settled"
    );
    cache.update_executors(&snapshot, &options);
    let plan = reconcile_with(&snapshot, &options, now, &cache);
    assert!(plan.effects.is_empty(), "not converged: {:?}", plan.effects);
    bencher.bench_local(|| {
        cache.update_executors(divan::black_box(&snapshot), &options);
        reconcile_with(divan::black_box(&snapshot), &options, now, &cache)
    });
    drop(held);
}

/// The converged pass right after `change` replaced one retained record (a new record, as a
/// watch event makes): the cache's entry for it is read again before every pass.
fn converged_pass_after_change(
    bencher: divan::Bencher,
    (nodes, packages): (usize, usize),
    change: impl Fn(&mut Snapshot),
) {
    let (mut snapshot, options, mut cache, now) = converged(nodes, packages);
    bencher.bench_local(|| {
        change(&mut snapshot);
        cache.update_executors(divan::black_box(&snapshot), &options);
        reconcile_with(divan::black_box(&snapshot), &options, now, &cache)
    });
}

/// The converged pass right after one retained Job changed (a new record, as a watch event
/// makes): the entry of that Job is read again before the pass.
#[divan::bench(args = [(1_000, 5), (10_000, 5)], sample_count = 5, sample_size = 1)]
fn plan_converged_pass_job_changed(bencher: divan::Bencher, size: (usize, usize)) {
    // Replace the first Job's record by an equal copy: the cache no longer answers.
    converged_pass_after_change(bencher, size, |snapshot| {
        snapshot.jobs[0] = std::sync::Arc::new((*snapshot.jobs[0]).clone());
    });
}

/// The converged pass right after one retained executor pod changed (a new record, as a watch
/// event makes): the entry of its Job is read again before the pass.
#[divan::bench(args = [(1_000, 5), (10_000, 5)], sample_count = 5, sample_size = 1)]
fn plan_converged_pass_pod_changed(bencher: divan::Bencher, size: (usize, usize)) {
    // Replace the first pod's record by an equal copy: the cache no longer answers.
    converged_pass_after_change(bencher, size, |snapshot| {
        snapshot.executor_pods[0] = std::sync::Arc::new((*snapshot.executor_pods[0]).clone());
    });
}
