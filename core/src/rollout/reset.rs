//! Batch-state resets: automatic (on completion or a version change) and the CLI's
//! (05-rollout.md §9, 02-lifecycle.md §6.8).

use std::collections::BTreeMap;

use nodewright_crds::{BatchProcessingState, CompartmentStatus, DeploymentPolicy, NodeWright};
use serde_json::{Map, Value, json};

/// Whether an automatic reset happens: the NodeWright's
/// `deploymentPolicyOptions.resetBatchStateOnCompletion`, else the policy's
/// `resetBatchStateOnCompletion`, else false.
pub fn reset_on_completion(nw: &NodeWright, policy: Option<&DeploymentPolicy>) -> bool {
    nw.spec
        .deployment_policy_options
        .as_ref()
        .and_then(|o| o.reset_batch_state_on_completion)
        .or_else(|| policy.and_then(|p| p.spec.reset_batch_state_on_completion))
        .unwrap_or(false)
}

/// Resets every compartment's batch state to `{currentBatch: 1}`; `nodePriority` and
/// `nodeOrderOffset` are untouched.
pub fn reset_batch_states(statuses: &mut BTreeMap<String, CompartmentStatus>) {
    for status in statuses.values_mut() {
        status.batch_state = Some(BatchProcessingState::fresh());
    }
}

/// Every field of a reset batch state written out explicitly, so a JSON merge patch clears
/// stale counters (the zero fields are otherwise omitted).
pub fn explicit_fresh_batch_state() -> Value {
    json!({
        "currentBatch": 1,
        "consecutiveFailures": 0,
        "completedNodes": 0,
        "failedNodes": 0,
        "shouldStop": false,
        "lastBatchSize": 0,
        "lastBatchFailed": false,
    })
}

/// The status merge patch of a CLI reset: `deployment-policy reset` (`full = false`) resets the
/// batch state of every compartment in `statuses`; `reset` (`full = true`) also removes
/// `nodePriority` and zeroes `nodeOrderOffset`.
pub fn cli_reset_patch(statuses: &BTreeMap<String, CompartmentStatus>, full: bool) -> Value {
    let compartments: Map<String, Value> = statuses
        .keys()
        .map(|name| {
            (
                name.clone(),
                json!({ "batchState": explicit_fresh_batch_state() }),
            )
        })
        .collect();
    let mut status = Map::new();
    if !compartments.is_empty() {
        status.insert("compartmentStatuses".into(), Value::Object(compartments));
    }
    if full {
        status.insert("nodePriority".into(), Value::Null);
        status.insert("nodeOrderOffset".into(), json!(0));
    }
    json!({ "status": status })
}
