//! Conditions the rollout reports: `TaintNotTolerable`, `NodesIgnored` and
//! `DeploymentPolicyNotFound` (05-rollout.md §5.2, §6.2; 02-lifecycle.md §12.4).

use nodewright_crds::Status;

/// Condition type raised when the referenced policy does not exist.
pub const POLICY_NOT_FOUND: &str = "DeploymentPolicyNotFound";
/// Condition type about untolerated taints.
pub const TAINT_NOT_TOLERABLE: &str = "TaintNotTolerable";
/// Condition type about the ignore label.
pub const NODES_IGNORED: &str = "NodesIgnored";
/// Above this many nodes a message gives a count instead of names.
pub const NAME_LIST_LIMIT: usize = 10;

/// A NodeWright condition as data; the lifecycle turns it into a `metav1.Condition` (keeping
/// `lastTransitionTime` while the status is unchanged). The lifecycle may also mirror it under
/// `nodewright.nvidia.com/<type>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RolloutCondition {
    /// Condition type.
    pub type_: String,
    /// `True` or `False`.
    pub status: bool,
    /// Reason (equal to the type for all rollout conditions).
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

/// What a NodeWright whose policy is missing must report (05-rollout.md §5.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyMissing {
    /// The policy name that was not found.
    pub policy: String,
    /// Condition `DeploymentPolicyNotFound=True`.
    pub condition: RolloutCondition,
    /// NodeWright status forced on it, even when every node is complete.
    pub forced_status: Status,
    /// Node status for nodes that would otherwise be `waiting` (no compartment exists).
    pub waiting_node_status: Status,
}

/// The report for a missing policy named `policy`.
pub fn policy_missing(policy: &str) -> PolicyMissing {
    PolicyMissing {
        policy: policy.to_string(),
        condition: RolloutCondition {
            type_: POLICY_NOT_FOUND.to_string(),
            status: true,
            reason: POLICY_NOT_FOUND.to_string(),
            message: format!("DeploymentPolicy \"{policy}\" not found"),
        },
        forced_status: Status::Blocked,
        waiting_node_status: Status::Unknown,
    }
}

/// `TaintNotTolerable` over the names of nodes with untolerated taints.
pub fn taint_not_tolerable(nodes: &[&str]) -> RolloutCondition {
    node_list_condition(
        TAINT_NOT_TOLERABLE,
        nodes,
        "has taints that are not tolerable. Skipping.",
        "have taints that are not tolerable. Skipping.",
        "All nodes have tolerable taints.",
    )
}

/// `NodesIgnored` over the names of nodes carrying the ignore label.
pub fn nodes_ignored(nodes: &[&str]) -> RolloutCondition {
    node_list_condition(
        NODES_IGNORED,
        nodes,
        "has ignore label set. Skipping.",
        "have ignore label set. Skipping.",
        "No nodes have ignore label set.",
    )
}

fn node_list_condition(
    type_: &str,
    nodes: &[&str],
    listed: &str,
    counted: &str,
    none: &str,
) -> RolloutCondition {
    let mut sorted = nodes.to_vec();
    sorted.sort_unstable();
    let message = match sorted.len() {
        0 => none.to_string(),
        n if n > NAME_LIST_LIMIT => format!("{n} nodes {counted}"),
        _ => format!("Node [{}] {listed}", sorted.join(", ")),
    };
    RolloutCondition {
        type_: type_.to_string(),
        status: !sorted.is_empty(),
        reason: type_.to_string(),
        message,
    }
}
