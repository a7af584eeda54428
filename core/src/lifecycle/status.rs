//! Status derivation (02-lifecycle.md §12.1–§12.4): NodeWright status, node statuses, the
//! Ready/Transition conditions, counters, and condition helpers.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use nodewright_crds::{NodeWrightStatus, Status, keys};

/// Sets a condition: `lastTransitionTime` is kept while the status is unchanged; an identical
/// condition is left untouched. Returns true when something changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: i64,
    now: Timestamp,
) -> bool {
    let status_text = if status { "True" } else { "False" };
    let observed = (generation != 0).then_some(generation);
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if existing.status == status_text
            && existing.reason == reason
            && existing.message == message
            && existing.observed_generation == observed
        {
            return false;
        }
        // The legacy Transition condition keeps its time only while status, reason and message
        // are all unchanged (§12.4); every other condition while its status is unchanged.
        let strict = type_.ends_with("/Transition");
        if existing.status != status_text
            || (strict && (existing.reason != reason || existing.message != message))
        {
            existing.last_transition_time = Time(now);
        }
        existing.status = status_text.to_string();
        existing.reason = reason.to_string();
        existing.message = message.to_string();
        existing.observed_generation = observed;
        return true;
    }
    conditions.push(Condition {
        type_: type_.to_string(),
        status: status_text.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        observed_generation: observed,
        last_transition_time: Time(now),
    });
    conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
    true
}

/// Removes a condition by type; true when it was present.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    before != conditions.len()
}

/// The condition of a type, if present.
pub fn condition<'c>(conditions: &'c [Condition], type_: &str) -> Option<&'c Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// §12.2 aggregate over (complete?, node status) of the selected nodes.
pub fn aggregate(nodes: impl IntoIterator<Item = (bool, Status)>) -> Status {
    let mut total = 0usize;
    let mut complete = 0usize;
    let mut by: BTreeMap<Status, usize> = BTreeMap::new();
    for (done, status) in nodes {
        total += 1;
        if done {
            complete += 1;
        } else {
            *by.entry(status).or_default() += 1;
        }
    }
    let remaining = total - complete;
    let count = |s: Status| by.get(&s).copied().unwrap_or(0);
    if complete == total {
        return Status::Complete;
    }
    if count(Status::InProgress) > 0 {
        return Status::InProgress;
    }
    for s in [
        Status::Erroring,
        Status::Blocked,
        Status::Unknown,
        Status::Waiting,
    ] {
        if count(s) > 0 && count(s) == remaining {
            return s;
        }
    }
    Status::Unknown
}

/// What §12.1 needs to decide one node's status.
#[derive(Clone, Copy, Debug)]
pub struct NodeFacts {
    /// Current node Status.
    pub current: Status,
    /// IsNodeComplete.
    pub complete: bool,
    /// Ignored or has untolerated taints (§6.4).
    pub ineligible: bool,
    /// NodeReady(NW, node) (§5).
    pub ready: bool,
}

/// §12.1 N1–N5 for one node given the NodeWright status.
pub fn node_status(nw_status: Status, has_compartments: bool, f: NodeFacts) -> Status {
    if matches!(nw_status, Status::Disabled | Status::Paused) {
        return nw_status;
    }
    if !f.complete && f.ineligible {
        return Status::Blocked;
    }
    if !f.complete && nw_status != Status::Waiting && !f.ready {
        return Status::Waiting;
    }
    let fallback = if has_compartments {
        Status::Waiting
    } else {
        Status::Unknown
    };
    if matches!(
        f.current,
        Status::Disabled | Status::Paused | Status::Waiting | Status::Blocked
    ) {
        return if f.complete {
            Status::Complete
        } else {
            fallback
        };
    }
    match (f.current, f.complete) {
        (s, true) if s != Status::Complete => Status::Complete,
        (Status::Complete, false) => Status::Unknown,
        (Status::Unknown, false) if has_compartments => Status::Waiting,
        (s, _) => s,
    }
}

/// Ready reason from the NodeWright status (§12.4).
pub fn ready_reason(status: Status) -> &'static str {
    match status {
        Status::Complete => "NodesConverged",
        Status::InProgress => "Progressing",
        Status::Blocked => "Blocked",
        Status::Erroring => "Erroring",
        Status::Paused => "Paused",
        Status::Waiting => "Waiting",
        Status::Disabled => "Disabled",
        Status::Unknown => "Unknown",
    }
}

/// The Ready message: `<c>/<t> nodes complete (names), <k> in progress (names), ...`.
pub fn ready_message(nodes: &[String], statuses: &BTreeMap<String, Status>) -> String {
    let mut buckets: BTreeMap<Status, Vec<&str>> = BTreeMap::new();
    for n in nodes {
        let s = statuses.get(n).copied().unwrap_or(Status::Unknown);
        buckets.entry(s).or_default().push(n);
    }
    let names = |list: &mut Vec<&str>| -> String {
        if list.len() > 10 {
            " (list truncated; see controller logs)".to_string()
        } else {
            list.sort();
            format!(" ({})", list.join(", "))
        }
    };
    let mut complete = buckets.remove(&Status::Complete).unwrap_or_default();
    let mut out = format!("{}/{} nodes complete", complete.len(), nodes.len());
    if !complete.is_empty() {
        out.push_str(&names(&mut complete));
    }
    for (s, label) in [
        (Status::InProgress, "in progress"),
        (Status::Blocked, "blocked"),
        (Status::Erroring, "erroring"),
        (Status::Waiting, "waiting"),
        (Status::Paused, "paused"),
        (Status::Disabled, "disabled"),
        (Status::Unknown, "unknown"),
    ] {
        if let Some(mut list) = buckets.remove(&s) {
            out.push_str(&format!(", {} {label}", list.len()));
            out.push_str(&names(&mut list));
        }
    }
    out
}

/// Writes Ready, its mirror and the legacy Transition condition (§12.4); true on change.
pub fn set_ready(
    status: &mut NodeWrightStatus,
    complete: bool,
    nodes: &[String],
    prior: Option<Status>,
    generation: i64,
    now: Timestamp,
) -> bool {
    let current = status.status.unwrap_or(Status::Unknown);
    let message = ready_message(nodes, &status.node_status);
    let reason = ready_reason(current);
    let mut changed = false;
    for ty in ["Ready".to_string(), format!("{}/Ready", keys::PREFIX)] {
        changed |= set_condition(
            &mut status.conditions,
            &ty,
            complete,
            reason,
            &message,
            generation,
            now,
        );
    }
    let transition = match prior {
        Some(p) if p != current => format!("Transitioned [{p}] -> [{current}]"),
        _ => message,
    };
    changed |= set_condition(
        &mut status.conditions,
        &format!("{}/Transition", keys::PREFIX),
        complete,
        current.as_str(),
        &transition,
        generation,
        now,
    );
    changed
}

/// §12.3.3 printer fields.
pub fn set_counters(status: &mut NodeWrightStatus, nodes: &[String], packages: &[String]) {
    let (mut complete, mut in_progress) = (0usize, 0usize);
    for n in nodes {
        match status.node_status.get(n) {
            Some(Status::Complete) => complete += 1,
            Some(Status::InProgress | Status::Erroring) => in_progress += 1,
            _ => {}
        }
    }
    status.complete_nodes = format!("{complete}/{}", nodes.len());
    status.nodes_in_progress = i32::try_from(in_progress).unwrap_or(i32::MAX);
    let mut list = packages.to_vec();
    list.sort();
    status.package_list = list.join(",");
}
