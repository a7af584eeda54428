//! Why a node will not move on the next pass, in one sentence (`plan`, `status`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use nodewright_core::{SlimJob, Snapshot};
use nodewright_crds::node_state::NodeState;
use nodewright_crds::{NodeWright, NodeWrightStatus, SequencingMode, State, Status, keys};

/// The reason `node` does not move for `nw`, given every NodeWright's status after the pass.
pub fn blocking_reason(
    snap: &Snapshot,
    desired: &BTreeMap<String, NodeWrightStatus>,
    nw: &NodeWright,
    node: &str,
    status: Status,
) -> String {
    let name = nw.metadata.name.as_deref().unwrap_or_default();
    match status {
        Status::Disabled => {
            format!("the NodeWright is disabled (kubectl nodewright enable {name})")
        }
        Status::Paused => format!("the NodeWright is paused (kubectl nodewright resume {name})"),
        Status::Blocked => blocked(snap, nw, node),
        Status::Waiting => waiting(snap, desired, nw, node),
        Status::Erroring => erroring(snap, nw, node),
        Status::InProgress => in_progress(snap, nw, node),
        Status::Unknown => "not evaluated yet".into(),
        Status::Complete => "complete".into(),
    }
}

fn node_of<'a>(snap: &'a Snapshot, node: &str) -> Option<&'a Node> {
    snap.nodes
        .iter()
        .map(|n| &**n)
        .find(|n| n.metadata.name.as_deref() == Some(node))
}

fn state_of(snap: &Snapshot, nw: &str, node: &str) -> NodeState {
    node_of(snap, node)
        .and_then(|n| n.metadata.annotations.as_ref())
        .and_then(|a| a.get(&keys::node_state(nw)))
        .and_then(|text| NodeState::parse(text).ok())
        .unwrap_or_default()
}

fn blocked(snap: &Snapshot, nw: &NodeWright, node: &str) -> String {
    let policy = &nw.spec.deployment_policy;
    if !policy.is_empty()
        && !snap
            .policies
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(policy))
    {
        return format!("DeploymentPolicy {policy:?} does not exist");
    }
    let Some(n) = node_of(snap, node) else {
        return "the node is gone".into();
    };
    let labels = n.metadata.labels.clone().unwrap_or_default();
    if labels.get(keys::IGNORE).map(String::as_str) == Some("true") {
        return format!("the node is ignored (label {}=true)", keys::IGNORE);
    }
    let taints: Vec<String> = n
        .spec
        .iter()
        .flat_map(|s| s.taints.iter().flatten())
        .filter(|t| t.effect != "PreferNoSchedule")
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    if taints.is_empty() {
        "blocked".into()
    } else {
        format!(
            "the node has taints the NodeWright may not tolerate: {}",
            taints.join(", ")
        )
    }
}

fn waiting(
    snap: &Snapshot,
    desired: &BTreeMap<String, NodeWrightStatus>,
    nw: &NodeWright,
    node: &str,
) -> String {
    let me = (
        nw.spec.priority,
        nw.metadata.name.clone().unwrap_or_default(),
    );
    for other in &snap.nodewrights {
        let key = (
            other.spec.priority,
            other.metadata.name.clone().unwrap_or_default(),
        );
        let disabled = other
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(keys::DISABLE))
            == Some(&"true".to_string());
        if key >= me || disabled {
            continue;
        }
        let status = desired.get(&key.1);
        let overall = status.and_then(|s| s.status);
        let on_node = status.and_then(|s| s.node_status.get(node)).copied();
        match other.spec.sequencing {
            SequencingMode::All if overall != Some(Status::Complete) => {
                return format!(
                    "waiting for NodeWright {} (priority {}, sequencing all) to complete on every node",
                    key.1, key.0
                );
            }
            SequencingMode::Node if on_node.is_some_and(|s| s != Status::Complete) => {
                return format!(
                    "waiting for NodeWright {} (priority {}) to complete on this node",
                    key.1, key.0
                );
            }
            _ => {}
        }
    }
    let name = nw.metadata.name.clone().unwrap_or_default();
    let Some(status) = desired.get(&name) else {
        return "waiting".into();
    };
    let compartment = compartment_of(snap, nw, node);
    let Some(c) = status.compartment_statuses.get(&compartment) else {
        return "waiting".into();
    };
    let batch = c.batch_state.clone().unwrap_or_default();
    if batch.should_stop {
        return format!(
            "compartment {compartment} stopped after {} failed batch(es) (kubectl nodewright deployment-policy reset {name})",
            batch.consecutive_failures
        );
    }
    // The current batch: nodes picked into it (sticky), members of this compartment.
    let batch_members: Vec<&String> = status
        .node_priority
        .keys()
        .filter(|n| compartment_of(snap, nw, n) == compartment)
        .collect();
    let busy = batch_members
        .len()
        .max(usize::try_from(c.in_progress).unwrap_or(0));
    if busy >= usize::try_from(c.ceiling).unwrap_or(0) {
        let names: Vec<&str> = batch_members.iter().map(|s| s.as_str()).collect();
        return format!(
            "budget full: compartment {compartment} allows {} node(s) at a time, taken by [{}]",
            c.ceiling,
            names.join(", ")
        );
    }
    format!(
        "outside the current batch (batch {} of compartment {compartment})",
        batch.current_batch.max(1)
    )
}

/// The compartment a node belongs to: the first policy compartment whose selector matches, else
/// `__default__` (capacity tie-breaks between overlapping compartments are not modelled).
pub fn compartment_of(snap: &Snapshot, nw: &NodeWright, node: &str) -> String {
    let labels = node_of(snap, node)
        .and_then(|n| n.metadata.labels.clone())
        .unwrap_or_default();
    let policy = snap
        .policies
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(nw.spec.deployment_policy.as_str()));
    policy
        .and_then(|p| {
            p.spec
                .compartments
                .iter()
                .find(|c| nodewright_crds::selector::matches(&c.selector, &labels))
                .map(|c| c.name.clone())
        })
        .unwrap_or_else(|| keys::DEFAULT_COMPARTMENT.to_string())
}

fn jobs_of<'a>(snap: &'a Snapshot, nw: &str, node: &'a str) -> impl Iterator<Item = &'a SlimJob> {
    let nw = nw.to_string();
    snap.jobs.iter().map(|j| &**j).filter(move |j| {
        j.metadata.label(keys::LABEL_NAME) == Some(nw.as_str())
            && j.metadata.label(keys::LABEL_NODE) == Some(node)
    })
}

fn finished(j: &SlimJob) -> Option<String> {
    let status = j.status.as_ref()?;
    let c = status
        .condition_true("Complete")
        .or_else(|| status.condition_true("Failed"))?;
    let reason = c.reason.as_deref().unwrap_or(&c.type_);
    Some(match c.message.as_deref() {
        Some(m) => format!("{reason}: {m}"),
        None => reason.to_string(),
    })
}

fn label(j: &SlimJob, key: &str) -> String {
    j.metadata.label(key).unwrap_or_default().to_string()
}

fn in_progress(snap: &Snapshot, nw: &NodeWright, node: &str) -> String {
    let name = nw.metadata.name.clone().unwrap_or_default();
    if let Some(j) = jobs_of(snap, &name, node).find(|j| finished(j).is_none()) {
        return format!(
            "Job {} running ({} of {})",
            j.metadata.name.as_deref().unwrap_or("?"),
            label(j, keys::LABEL_STAGE),
            label(j, keys::PACKAGE)
        );
    }
    if let Some(selector) = &nw.spec.pod_non_interrupt_labels {
        let blocking = snap.workload_pods.iter().find(|p| {
            p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
                && nodewright_crds::selector::matches(
                    selector,
                    &p.metadata.labels.clone().unwrap_or_default(),
                )
        });
        if let Some(p) = blocking {
            return format!(
                "non-interrupt pod {}/{} is on the node: the interrupt waits",
                p.metadata.namespace.as_deref().unwrap_or_default(),
                p.metadata.name.as_deref().unwrap_or_default()
            );
        }
    }
    let state = state_of(snap, &name, node);
    let done = |pkg: &str| {
        nw.spec.packages.get(pkg).is_some_and(|p| {
            state
                .get(&p.name, &p.version)
                .is_some_and(|e| e.state == Some(State::Complete))
        })
    };
    for p in nw.spec.packages.values() {
        if done(&p.name) {
            continue;
        }
        if let Some(dep) = p.depends_on.keys().find(|d| !done(d)) {
            return format!("package {} waits for package {dep}", p.name);
        }
    }
    "in progress; nothing to write until a Job or the node changes".into()
}

fn erroring(snap: &Snapshot, nw: &NodeWright, node: &str) -> String {
    let name = nw.metadata.name.clone().unwrap_or_default();
    let state = state_of(snap, &name, node);
    let failed = super::status::failed_entries(&state);
    let last = jobs_of(snap, &name, node)
        .filter_map(|j| {
            let annotated = j
                .metadata
                .annotation(keys::LAST_FAILURE)
                .map(str::to_string);
            annotated.or_else(|| finished(j).filter(|f| !f.starts_with("Complete")))
        })
        .last();
    let mut why = if failed.is_empty() {
        "erroring".to_string()
    } else {
        format!("erroring: {}", failed.join(", "))
    };
    if let Some(last) = last {
        why.push_str(&format!("; last failure: {last}"));
    }
    why
}
