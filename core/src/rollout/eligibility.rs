//! Node eligibility: the ignore label and taint tolerations (01-api.md §6.7, 02-lifecycle.md §10.1).

use k8s_openapi::api::core::v1::{Taint, Toleration};
use nodewright_crds::{NodeWright, keys};

use super::NodeView;

/// Key of the taint a cordon puts on a node.
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Why a node may not be picked for a NodeWright.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ineligible {
    /// The node carries `nodewright.nvidia.com/ignore=true`.
    Ignored,
    /// Some taint on the node is not tolerated by the selection set.
    TaintNotTolerated,
}

/// The selection toleration set: cordon, `additionalTolerations`, and the runtime-required
/// tolerations (decision D5: tolerated by every NodeWright).
pub fn selection_tolerations(
    nw: &NodeWright,
    runtime_required_taints: &[Taint],
) -> Vec<Toleration> {
    let mut tolerations = vec![Toleration {
        key: Some(UNSCHEDULABLE_TAINT.to_string()),
        operator: Some("Exists".to_string()),
        effect: Some("NoSchedule".to_string()),
        ..Toleration::default()
    }];
    tolerations.extend(nw.spec.additional_tolerations.iter().cloned());
    tolerations.extend(runtime_required_taints.iter().map(|taint| Toleration {
        key: Some(taint.key.clone()),
        operator: Some("Equal".to_string()),
        value: taint.value.clone(),
        effect: Some(taint.effect.clone()),
        ..Toleration::default()
    }));
    tolerations
}

/// Kubernetes toleration semantics: empty effect matches every effect, `Exists` with an empty
/// key matches every key, `Equal` (or no operator) compares values.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}

/// True when every taint (any effect) is tolerated by some toleration of the set.
pub fn taints_tolerated(taints: &[Taint], tolerations: &[Toleration]) -> bool {
    taints
        .iter()
        .all(|taint| tolerations.iter().any(|t| tolerates(t, taint)))
}

/// True when the node carries the ignore label with value `"true"`.
pub fn is_ignored(node: &NodeView) -> bool {
    node.labels.get(keys::IGNORE).is_some_and(|v| v == "true")
}

/// Why the node may not be picked, if it may not (ignore label checked first).
pub fn ineligibility(node: &NodeView, tolerations: &[Toleration]) -> Option<Ineligible> {
    if is_ignored(node) {
        Some(Ineligible::Ignored)
    } else if !taints_tolerated(&node.taints, tolerations) {
        Some(Ineligible::TaintNotTolerated)
    } else {
        None
    }
}
