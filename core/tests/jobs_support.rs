//! Shared fixtures for the `jobs_*` tests: the 03-executor.md §0.8 NodeWright, nodes, Jobs and
//! pods in the shapes the apiserver returns them.
#![allow(dead_code)]

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, Node, Pod,
    PodCondition, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use nodewright_core::jobs::{self, JobInputs};
use nodewright_core::{Options, Snapshot};
use nodewright_crds::{
    Interrupt, InterruptType, NodeState, NodeWright, NodeWrightSpec, Package, PackageStatus, Stage,
    State, keys,
};

pub const UID: &str = "0f1e2d3c-aaaa-bbbb-cccc-123456789abc";
pub const IMAGE: &str = "ghcr.io/nvidia/skyhook-packages/shellscript";

pub fn ts(text: &str) -> Timestamp {
    text.parse().expect("timestamp")
}

pub fn t0() -> Timestamp {
    ts("2026-01-01T00:00:00Z")
}

pub fn at(secs: i64) -> Timestamp {
    t0() + jiff::SignedDuration::from_secs(secs)
}

pub fn package(name: &str, version: &str) -> Package {
    Package {
        name: name.into(),
        version: version.into(),
        image: IMAGE.into(),
        ..Package::default()
    }
}

/// NodeWright `demo` (uid of 03 §0.8, generation 4) with package `baz` 1.1.0.
pub fn demo() -> NodeWright {
    demo_with(vec![package("baz", "1.1.0")])
}

pub fn demo_with(packages: Vec<Package>) -> NodeWright {
    let mut nw = NodeWright::new(
        "demo",
        NodeWrightSpec {
            packages: packages.into_iter().map(|p| (p.name.clone(), p)).collect(),
            ..NodeWrightSpec::default()
        },
    );
    nw.metadata.uid = Some(UID.into());
    nw.metadata.generation = Some(4);
    nw
}

pub fn options() -> Options {
    Options::default()
}

pub fn inputs<'a>(
    nw: &'a NodeWright,
    pkg: &'a Package,
    stage: Stage,
    node: &'a str,
    options: &'a Options,
) -> JobInputs<'a> {
    JobInputs {
        nodewright: nw,
        package: pkg,
        stage,
        node,
        node_order: 0,
        options,
    }
}

pub fn package_job(nw: &NodeWright, pkg: &str, stage: Stage, node: &str, uid: &str) -> Job {
    let options = options();
    let p = nw.spec.packages[pkg].clone();
    let mut job = jobs::build_package_job(&inputs(nw, &p, stage, node, &options));
    job.metadata.uid = Some(uid.into());
    job.metadata.resource_version = Some("1".into());
    job
}

pub fn service_interrupt(services: &[&str]) -> Interrupt {
    Interrupt {
        type_: InterruptType::Service,
        services: services.iter().map(|s| s.to_string()).collect(),
    }
}

pub fn interrupt_job(
    nw: &NodeWright,
    pkg: &str,
    interrupt: &Interrupt,
    node: &str,
    uid: &str,
) -> Job {
    let options = options();
    let p = nw.spec.packages[pkg].clone();
    let mut job =
        jobs::build_interrupt_job(&inputs(nw, &p, Stage::Interrupt, node, &options), interrupt);
    job.metadata.uid = Some(uid.into());
    job
}

fn condition(kind: &str, reason: Option<&str>, since: Timestamp) -> JobCondition {
    JobCondition {
        type_: kind.into(),
        status: "True".into(),
        reason: reason.map(str::to_string),
        last_transition_time: Some(Time(since)),
        ..JobCondition::default()
    }
}

pub fn complete(mut job: Job, failed: i32) -> Job {
    job.status = Some(JobStatus {
        conditions: Some(vec![condition("Complete", None, t0())]),
        failed: Some(failed),
        succeeded: Some(1),
        ..JobStatus::default()
    });
    job
}

pub fn failed(mut job: Job, reason: &str, failed: i32) -> Job {
    job.status = Some(JobStatus {
        conditions: Some(vec![condition("Failed", Some(reason), t0())]),
        failed: Some(failed),
        ..JobStatus::default()
    });
    job
}

pub fn active(mut job: Job, failed: i32) -> Job {
    job.status = Some(JobStatus {
        active: Some(1),
        failed: Some(failed),
        ..JobStatus::default()
    });
    job
}

pub fn failure_target(mut job: Job, since: Timestamp) -> Job {
    job.status = Some(JobStatus {
        conditions: Some(vec![condition(
            "FailureTarget",
            Some("DeadlineExceeded"),
            since,
        )]),
        ..JobStatus::default()
    });
    job
}

pub fn suspended(mut job: Job) -> Job {
    job.spec.as_mut().unwrap().suspend = Some(true);
    job
}

pub fn processed(mut job: Job) -> Job {
    job.metadata
        .annotations
        .get_or_insert_default()
        .insert(keys::STATE_RECORDED.into(), "true".into());
    job
}

pub fn annotate(mut job: Job, key: &str, value: &str) -> Job {
    job.metadata
        .annotations
        .get_or_insert_default()
        .insert(key.into(), value.into());
    job
}

/// A child pod of `job` (labels copied from the template plus the controller uid).
pub fn pod_of(job: &Job, name: &str, created: Timestamp, status: PodStatus) -> Pod {
    let template = &job.spec.as_ref().unwrap().template;
    let mut labels = template.metadata.as_ref().unwrap().labels.clone().unwrap();
    labels.insert(
        "batch.kubernetes.io/controller-uid".into(),
        job.metadata.uid.clone().unwrap(),
    );
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("nodewright".into()),
            uid: Some(format!("uid-{name}")),
            labels: Some(labels),
            annotations: template.metadata.as_ref().unwrap().annotations.clone(),
            creation_timestamp: Some(Time(created)),
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(status),
    }
}

pub fn terminated(name: &str, exit: i32, reason: &str, finished: Timestamp) -> ContainerStatus {
    ContainerStatus {
        name: name.into(),
        restart_count: 0,
        state: Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: exit,
                reason: Some(reason.into()),
                finished_at: Some(Time(finished)),
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    }
}

pub fn waiting(name: &str, reason: &str, message: &str, restarts: i32) -> ContainerStatus {
    ContainerStatus {
        name: name.into(),
        restart_count: restarts,
        state: Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.into()),
                message: Some(message.into()),
            }),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    }
}

pub fn status(phase: &str, started: Option<Timestamp>, init: Vec<ContainerStatus>) -> PodStatus {
    PodStatus {
        phase: Some(phase.into()),
        start_time: started.map(Time),
        init_container_statuses: (!init.is_empty()).then_some(init),
        ..PodStatus::default()
    }
}

/// A genuinely failed attempt: the apply step exited 1.
pub fn genuine_failure() -> PodStatus {
    status(
        "Failed",
        Some(t0()),
        vec![
            terminated("baz-init", 0, "Completed", t0()),
            terminated("baz-apply", 1, "Error", t0()),
        ],
    )
}

/// A kubelet admission refusal: Failed, `OutOfcpu`, no container statuses.
pub fn admission_refusal() -> PodStatus {
    PodStatus {
        phase: Some("Failed".into()),
        reason: Some("OutOfcpu".into()),
        ..PodStatus::default()
    }
}

/// A per-attempt deadline kill.
pub fn deadline_kill() -> PodStatus {
    PodStatus {
        phase: Some("Failed".into()),
        reason: Some("DeadlineExceeded".into()),
        start_time: Some(Time(t0())),
        init_container_statuses: Some(vec![terminated(
            "baz-init",
            137,
            "ContainerStatusUnknown",
            t0(),
        )]),
        ..PodStatus::default()
    }
}

/// An evicted attempt (`DisruptionTarget=True`).
pub fn disrupted() -> PodStatus {
    let mut s = genuine_failure();
    s.conditions = Some(vec![PodCondition {
        type_: "DisruptionTarget".into(),
        status: "True".into(),
        ..PodCondition::default()
    }]);
    s
}

pub fn entry(pkg: &str, version: &str, stage: Stage, state: State, restarts: i32) -> PackageStatus {
    PackageStatus {
        name: pkg.into(),
        version: version.into(),
        image: IMAGE.into(),
        container_sha: String::new(),
        stage,
        state: Some(state),
        restarts,
    }
}

pub fn doc(entries: Vec<PackageStatus>) -> NodeState {
    let mut state = NodeState::default();
    for e in entries {
        state.upsert(e);
    }
    state
}

/// A node carrying `demo`'s node-state document.
pub fn node(name: &str, state: Option<&NodeState>) -> Node {
    let mut annotations = BTreeMap::new();
    if let Some(s) = state {
        annotations.insert(keys::node_state("demo"), s.to_annotation());
    }
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([(
                "kubernetes.io/hostname".to_string(),
                name.to_string(),
            )])),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        ..Node::default()
    }
}

pub fn snapshot(nw: NodeWright, nodes: Vec<Node>, jobs: Vec<Job>, pods: Vec<Pod>) -> Snapshot {
    Snapshot {
        nodewrights: nodewright_core::shared([nw]),
        nodes: nodewright_core::shared(nodes),
        jobs: nodewright_core::shared(jobs),
        executor_pods: nodewright_core::shared(pods),
        ..Snapshot::default()
    }
}
