//! DeploymentPolicy rollouts (05-rollout.md; 02-lifecycle.md §6): compartments, budgets,
//! strategies, batch evaluation and batch selection. Pure functions, no I/O, deterministic.
//!
//! # The seam with the lifecycle pass
//!
//! The lifecycle calls [`plan_rollout`] once per NodeWright per pass, after it has derived the
//! node statuses of this pass (02-lifecycle.md §12.1 N0–N5) and before the work phase:
//!
//! ```text
//! pub fn plan_rollout(nw: &NodeWright, policy: Option<&DeploymentPolicy>, nodes: &[NodeView],
//!                     now: jiff::Timestamp, settings: &RolloutSettings) -> RolloutDecision
//! ```
//!
//! * `policy`: the DeploymentPolicy named by `nw.spec.deploymentPolicy` ([`find_policy`]); any
//!   other policy is ignored. `None` with a name set means the policy is missing.
//! * `nodes`: the NodeWright's selected nodes in NodeWright order (creationTimestamp, then
//!   name), as [`NodeView`]s: labels, taints, node status for this NodeWright after
//!   introspection, the status before it, and the node-complete predicate.
//! * `settings`: runtime-required taints (tolerated for selection, D5), and what this pass does:
//!   `evaluate` (false while paused, and when the NodeWright status was already `complete`
//!   before this pass, so a finished and reset rollout is not scored again), `select` (false
//!   when the work phase will not run: paused, disabled, nothing to do) and `reset_trigger` (the
//!   status becomes `complete` in this pass, or a package version change was detected; the
//!   reset happens only if [`reset_on_completion`] says so). Evaluation runs before the reset,
//!   so on the pass that completes the rollout the last batch is scored first (the reference
//!   skips it).
//!
//! It returns a [`RolloutDecision`]: the nodes that may start or continue work
//! (`selected_nodes`), the in-flight nodes of stopped compartments that may only finish their
//! current stage (`finishing_nodes`, D9), the nodes to mark `blocked`, the new
//! `status.compartmentStatuses`, `status.nodePriority`, `status.nodeOrderOffset`, the node order
//! handed to executors (`SKYHOOK_NODE_ORDER`), the rollout conditions to set or remove, the
//! missing-policy report and the eight rollout gauges. The lifecycle writes these into the
//! NodeWright status; nothing here emits effects.
//!
//! Calling it twice with the same inputs gives the same decision, so the lifecycle may call it
//! with `select = false` during introspection and, when `introspection_changed` is false, again
//! with `select = true` for the work phase.
//!
//! The building blocks are public too: [`build_compartments`], [`partition`], [`ceiling`],
//! [`Strategy::batch_size`], [`evaluate()`], [`select_batch`], [`NodePriority`].

mod budget;
mod compartment;
mod conditions;
mod eligibility;
mod evaluate;
mod pass;
mod priority;
mod report;
mod reset;
mod select;
mod strategy;

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Taint};
use nodewright_crds::{DeploymentPolicy, NodeWright, Status};

pub use budget::{ceiling, legacy_budget, legacy_initial_batch, percent_of};
pub use compartment::{
    CompartmentSpec, Compartments, DEFAULT_COMPARTMENT, LEGACY_POLICY_NAME, assign,
    build_compartments, capacity, partition,
};
pub use conditions::{
    NODES_IGNORED, POLICY_NOT_FOUND, PolicyMissing, RolloutCondition, TAINT_NOT_TOLERABLE,
    nodes_ignored, policy_missing, taint_not_tolerable,
};
pub use eligibility::{
    Ineligible, UNSCHEDULABLE_TAINT, ineligibility, is_ignored, selection_tolerations,
    taints_tolerated, tolerates,
};
pub use evaluate::{Counts, Evaluation, absorb_churn, counts, evaluate, score};
pub use pass::{RolloutDecision, RolloutSettings, plan_rollout};
pub use priority::{NodePriority, truncate_to_second};
pub use report::{ROLLOUT_METRICS, compartment_metrics, compartment_status, rollout_metrics};
pub use reset::{
    cli_reset_patch, explicit_fresh_batch_state, reset_batch_states, reset_on_completion,
};
pub use select::{BatchSelection, CANDIDATE_ORDER, Member, members, select_batch};
pub use strategy::{Growth, Strategy, progress, safety_rank};

/// What the rollout needs to know about one selected node of a NodeWright; name, labels and
/// taints are borrowed from the Node when built by [`NodeView::from_node`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeView<'a> {
    /// Node name.
    pub name: Cow<'a, str>,
    /// Node labels (compartment selectors, the ignore label).
    pub labels: Cow<'a, BTreeMap<String, String>>,
    /// Node taints (eligibility).
    pub taints: Cow<'a, [Taint]>,
    /// Node status for this NodeWright after this pass's introspection.
    pub status: Status,
    /// Node status before this pass's introspection (membership-churn absorption); use
    /// `status` when unknown.
    pub status_before: Status,
    /// The node-complete predicate for this NodeWright (02-lifecycle.md D5).
    pub complete: bool,
    /// The node holds this NodeWright's cordon or an unfinished executor of it: it is out, so it
    /// takes a slot of the budget whatever its status and `nodePriority` say (D3 strict budget).
    pub out: bool,
}

impl<'a> NodeView<'a> {
    /// A view of `node` with the given statuses and completeness.
    pub fn from_node(
        node: &'a Node,
        status: Status,
        status_before: Status,
        complete: bool,
    ) -> Self {
        Self {
            name: Cow::Borrowed(node.metadata.name.as_deref().unwrap_or_default()),
            labels: match &node.metadata.labels {
                Some(labels) => Cow::Borrowed(labels),
                None => Cow::Owned(BTreeMap::new()),
            },
            taints: Cow::Borrowed(
                node.spec
                    .as_ref()
                    .and_then(|s| s.taints.as_deref())
                    .unwrap_or_default(),
            ),
            status,
            status_before,
            complete,
            out: false,
        }
    }

    /// The same view, marked out (holding a cordon or an unfinished executor) or not.
    pub fn with_out(self, out: bool) -> Self {
        Self { out, ..self }
    }
}

/// The policy `nw` references, if it exists among `policies`.
pub fn find_policy<'a, P: std::borrow::Borrow<DeploymentPolicy>>(
    nw: &NodeWright,
    policies: &'a [P],
) -> Option<&'a DeploymentPolicy> {
    let name = nw.spec.deployment_policy.as_str();
    if name.is_empty() {
        return None;
    }
    policies
        .iter()
        .map(|p| p.borrow())
        .find(|p| p.metadata.name.as_deref() == Some(name))
}
