//! Compartment statuses and the eight rollout gauges (05-rollout.md §8, §11; 02-lifecycle.md
//! §12.3, §12.7).

use nodewright_crds::{BatchProcessingState, CompartmentStatus, Status};

use super::NodeView;
use super::budget::ceiling;
use super::compartment::{CompartmentSpec, count};
use super::evaluate::to_i32;
use crate::plan::MetricSample;

/// Rebuilds a compartment's status from its members and batch state (batch state always
/// published, 02-lifecycle.md §12.3 \[Fix\]).
pub fn compartment_status(
    spec: &CompartmentSpec,
    members: &[&NodeView],
    state: &BatchProcessingState,
) -> CompartmentStatus {
    let matched = count(members.len());
    let completed = count(members.iter().filter(|n| n.complete).count());
    let in_progress = members
        .iter()
        .filter(|n| n.status == Status::InProgress)
        .count();
    CompartmentStatus {
        matched: to_i32(matched),
        ceiling: to_i32(ceiling(&spec.budget, matched)),
        in_progress: to_i32(count(in_progress)),
        completed: to_i32(completed),
        progress_percent: to_i32(if matched == 0 {
            0
        } else {
            completed * 100 / matched
        }),
        batch_state: Some(state.clone()),
    }
}

/// Metric names of the rollout gauges, without the `nodewright_` prefix.
pub const ROLLOUT_METRICS: [&str; 8] = [
    "rollout_matched_nodes",
    "rollout_ceiling",
    "rollout_in_progress",
    "rollout_completed",
    "rollout_progress_percent",
    "rollout_current_batch",
    "rollout_consecutive_failures",
    "rollout_should_stop",
];

/// The eight gauges of one compartment, labelled `nodewright_name`, `policy_name` (`legacy`
/// without a policy), `compartment_name`, `strategy`.
pub fn compartment_metrics(
    nodewright: &str,
    policy_name: &str,
    spec: &CompartmentSpec,
    status: &CompartmentStatus,
) -> Vec<MetricSample> {
    let labels = vec![
        ("nodewright_name".to_string(), nodewright.to_string()),
        ("policy_name".to_string(), policy_name.to_string()),
        ("compartment_name".to_string(), spec.name.clone()),
        (
            "strategy".to_string(),
            spec.strategy_type().as_str().to_string(),
        ),
    ];
    let batch = status.batch_state.clone().unwrap_or_default();
    let values = [
        status.matched,
        status.ceiling,
        status.in_progress,
        status.completed,
        status.progress_percent,
        batch.current_batch,
        batch.consecutive_failures,
        i32::from(batch.should_stop),
    ];
    ROLLOUT_METRICS
        .iter()
        .zip(values)
        .map(|(name, value)| MetricSample {
            name: (*name).to_string(),
            labels: labels.clone(),
            value: f64::from(value),
        })
        .collect()
}

/// The eight gauges of every current compartment of `nw`, read from its
/// `status.compartmentStatuses` (zero for a compartment without an entry). No compartments (policy
/// missing) gives no series.
pub fn rollout_metrics(
    nw: &nodewright_crds::NodeWright,
    policy: Option<&nodewright_crds::DeploymentPolicy>,
) -> Vec<MetricSample> {
    let compartments = super::build_compartments(nw, policy, 0);
    let policy_name = match &compartments {
        super::Compartments::Legacy(_) => super::LEGACY_POLICY_NAME,
        _ => nw.spec.deployment_policy.as_str(),
    };
    let name = nw.metadata.name.clone().unwrap_or_default();
    let statuses = nw
        .status
        .as_ref()
        .map(|s| &s.compartment_statuses)
        .cloned()
        .unwrap_or_default();
    compartments
        .specs()
        .iter()
        .flat_map(|spec| {
            let status = statuses.get(&spec.name).cloned().unwrap_or_default();
            compartment_metrics(&name, policy_name, spec, &status)
        })
        .collect()
}
