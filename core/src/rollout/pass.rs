//! [`plan_rollout`]: one NodeWright's rollout decisions for one pass.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nodewright_crds::{
    BatchProcessingState, CompartmentStatus, DeploymentPolicy, NodeWright, NodeWrightStatus,
};

use super::compartment::{CompartmentSpec, Compartments, LEGACY_POLICY_NAME, count};
use super::conditions::{
    POLICY_NOT_FOUND, PolicyMissing, RolloutCondition, nodes_ignored, policy_missing,
    taint_not_tolerable,
};
use super::eligibility::{Ineligible, ineligibility, selection_tolerations};
use super::evaluate::{Evaluation, absorb_churn, evaluate};
use super::priority::NodePriority;
use super::report::{compartment_metrics, compartment_status};
use super::reset::reset_on_completion;
use super::select::{members, select_batch};
use super::{NodeView, budget, build_compartments, partition};
use crate::options::Options;
use crate::plan::MetricSample;

/// What this pass does with the rollout, and the operator facts it needs.
#[derive(Clone, Debug, PartialEq)]
pub struct RolloutSettings {
    /// Runtime-required taints; tolerated for node selection by every NodeWright (D5).
    pub runtime_required_taints: Vec<Taint>,
    /// Evaluate finished batches (false while the NodeWright status is `complete`, or paused).
    pub evaluate: bool,
    /// Select nodes (false when the work phase does not run for this NodeWright).
    pub select: bool,
    /// A reset trigger fired: status became `complete`, or a package version change.
    pub reset_trigger: bool,
}

impl RolloutSettings {
    /// Evaluate and select, no reset trigger, with the operator's runtime-required taint.
    pub fn new(options: &Options) -> Self {
        Self {
            runtime_required_taints: vec![options.runtime_required_taint.clone()],
            evaluate: true,
            select: true,
            reset_trigger: false,
        }
    }
}

/// The rollout part of one pass for one NodeWright.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RolloutDecision {
    /// The compartment specs (empty when the policy is missing).
    pub compartments: Vec<CompartmentSpec>,
    /// The members of each compartment: indices into the `nodes` given, one group per entry of
    /// `compartments` (see [`RolloutDecision::assignment`]).
    pub groups: Vec<Vec<usize>>,
    /// Nodes that may start or continue work this pass, in NodeWright node order.
    pub selected_nodes: Vec<String>,
    /// In-flight nodes of stopped compartments: they may finish their current stage only (D9).
    pub finishing_nodes: Vec<String>,
    /// Not-complete nodes that are ignored or have untolerated taints: node status `blocked`.
    pub blocked_nodes: Vec<String>,
    /// Why each ineligible node (complete or not) may not be picked.
    pub ineligible: BTreeMap<String, Ineligible>,
    /// New `status.compartmentStatuses` (entries of removed compartments are gone).
    pub compartment_statuses: BTreeMap<String, CompartmentStatus>,
    /// New `status.nodePriority`.
    pub node_priority: BTreeMap<String, Time>,
    /// New `status.nodeOrderOffset`.
    pub node_order_offset: i32,
    /// `SKYHOOK_NODE_ORDER` of every node in `nodePriority`; absent nodes have order 0.
    pub node_order: BTreeMap<String, i32>,
    /// What batch evaluation did, per compartment (only when `settings.evaluate`).
    pub evaluations: BTreeMap<String, Evaluation>,
    /// The batch states were reset this pass.
    pub reset_applied: bool,
    /// Conditions to set.
    pub conditions: Vec<RolloutCondition>,
    /// Condition types to remove.
    pub removed_conditions: Vec<String>,
    /// Set when the referenced policy does not exist.
    pub policy_missing: Option<PolicyMissing>,
    /// Batch state or `nodePriority` changed before selection (introspection changed status).
    pub introspection_changed: bool,
    /// The eight rollout gauges per compartment.
    pub metrics: Vec<MetricSample>,
}

impl RolloutDecision {
    /// False when the NodeWright has no compartment (policy missing): waiting nodes read
    /// `unknown`.
    pub fn has_compartments(&self) -> bool {
        !self.compartments.is_empty()
    }

    /// Node name → compartment name, for the `nodes` the decision was planned over (positions
    /// past the end of `nodes` are skipped).
    pub fn assignment(&self, nodes: &[NodeView]) -> BTreeMap<String, String> {
        self.compartments
            .iter()
            .zip(&self.groups)
            .flat_map(|(spec, group)| {
                group
                    .iter()
                    .filter_map(|&i| nodes.get(i))
                    .map(|node| (node.name.to_string(), spec.name.clone()))
            })
            .collect()
    }
}

/// Plans the rollout of `nw` for one pass; see the module documentation for the contract.
pub fn plan_rollout(
    nw: &NodeWright,
    policy: Option<&DeploymentPolicy>,
    nodes: &[NodeView],
    now: Timestamp,
    settings: &RolloutSettings,
) -> RolloutDecision {
    let status = nw.status.clone().unwrap_or_default();
    let tolerations = selection_tolerations(nw, &settings.runtime_required_taints);
    let mut priority = NodePriority {
        entries: status.node_priority.clone(),
        offset: status.node_order_offset,
    };
    let keep: BTreeSet<&str> = nodes
        .iter()
        .filter(|n| !n.complete && n.status != nodewright_crds::Status::Complete)
        .map(|n| &*n.name)
        .collect();
    priority.prune(&keep);
    let mut decision = RolloutDecision::default();
    let why: Vec<Option<Ineligible>> = nodes
        .iter()
        .map(|n| ineligibility(n, &tolerations))
        .collect();
    decision.ineligible = nodes
        .iter()
        .zip(&why)
        .filter_map(|(n, why)| why.map(|why| (n.name.to_string(), why)))
        .collect();
    decision.blocked_nodes = nodes
        .iter()
        .zip(&why)
        .filter(|(n, why)| !n.complete && why.is_some())
        .map(|(n, _)| n.name.to_string())
        .collect();
    let compartments = build_compartments(nw, policy, nodes.len());
    let policy_name = match &compartments {
        Compartments::Legacy(_) => LEGACY_POLICY_NAME.to_string(),
        _ => nw.spec.deployment_policy.clone(),
    };
    if let Compartments::PolicyMissing(name) = &compartments {
        let missing = policy_missing(name);
        decision.conditions.push(missing.condition.clone());
        decision.policy_missing = Some(missing);
    } else {
        decision
            .removed_conditions
            .push(POLICY_NOT_FOUND.to_string());
    }
    let specs = compartments.specs().to_vec();
    let groups = partition(&specs, nodes);
    let reset = settings.reset_trigger && reset_on_completion(nw, policy);
    let mut states = Vec::with_capacity(specs.len());
    // Group indices come from `partition(&specs, nodes)`, so indexing `nodes` cannot fail.
    for (spec, group) in specs.iter().zip(&groups) {
        let group: Vec<&NodeView> = group.iter().map(|&i| &nodes[i]).collect();
        let mut state = persisted_state(&status, spec, &group);
        if settings.evaluate {
            let outcome = evaluate(&mut state, spec.strategy.as_ref(), &group);
            decision.evaluations.insert(spec.name.clone(), outcome);
        }
        if reset {
            state = BatchProcessingState::fresh();
        }
        states.push(state);
    }
    decision.reset_applied = reset && !specs.is_empty();
    let before_selection: BTreeMap<String, CompartmentStatus> =
        statuses(&specs, &groups, nodes, &states);
    decision.introspection_changed = before_selection != status.compartment_statuses
        || priority.entries != status.node_priority
        || priority.offset != status.node_order_offset;
    if settings.select {
        select_all(
            &mut decision,
            &specs,
            &groups,
            nodes,
            &states,
            &why,
            &mut priority,
            now,
        );
    }
    finish(
        &mut decision,
        nw,
        &policy_name,
        specs,
        groups,
        &why,
        nodes,
        before_selection,
        priority,
    );
    decision
}

/// The persisted batch state of a compartment (fresh when absent), with membership churn
/// absorbed when the persisted `matched` differs from the current member count.
fn persisted_state(
    status: &NodeWrightStatus,
    spec: &CompartmentSpec,
    group: &[&NodeView],
) -> BatchProcessingState {
    let persisted = status.compartment_statuses.get(&spec.name);
    let mut state = persisted
        .and_then(|p| p.batch_state.clone())
        .unwrap_or_else(BatchProcessingState::fresh);
    if persisted.is_some_and(|p| i64::from(p.matched) != count(group.len())) {
        absorb_churn(&mut state, group);
    }
    state
}

fn statuses(
    specs: &[CompartmentSpec],
    groups: &[Vec<usize>],
    nodes: &[NodeView],
    states: &[BatchProcessingState],
) -> BTreeMap<String, CompartmentStatus> {
    specs
        .iter()
        .zip(groups)
        .zip(states)
        .map(|((spec, group), state)| {
            let group: Vec<&NodeView> = group.iter().map(|&i| &nodes[i]).collect();
            (spec.name.clone(), compartment_status(spec, &group, state))
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn select_all(
    decision: &mut RolloutDecision,
    specs: &[CompartmentSpec],
    groups: &[Vec<usize>],
    nodes: &[NodeView],
    states: &[BatchProcessingState],
    why: &[Option<Ineligible>],
    priority: &mut NodePriority,
    now: Timestamp,
) {
    let mut selected = BTreeSet::new();
    let mut finishing = BTreeSet::new();
    for ((spec, group), state) in specs.iter().zip(groups).zip(states) {
        let total = count(group.len());
        let size = match &spec.strategy {
            Some(strategy) => strategy.batch_size(total, state),
            None => budget::ceiling(&spec.budget, total),
        };
        let stopped = spec.strategy.is_some() && state.should_stop;
        let view = members(
            group.iter().map(|&i| (&nodes[i], why[i].is_none())),
            &priority.entries,
        );
        let batch = select_batch(&view, size, stopped);
        selected.extend(batch.selected);
        finishing.extend(batch.finishing);
    }
    for name in &selected {
        priority.add(name, now);
    }
    let in_order = |set: &BTreeSet<String>| -> Vec<String> {
        nodes
            .iter()
            .filter(|n| set.contains(&*n.name))
            .map(|n| n.name.to_string())
            .collect()
    };
    decision.selected_nodes = in_order(&selected);
    decision.finishing_nodes = in_order(&finishing);
}

#[allow(clippy::too_many_arguments)]
fn finish(
    decision: &mut RolloutDecision,
    nw: &NodeWright,
    policy_name: &str,
    specs: Vec<CompartmentSpec>,
    groups: Vec<Vec<usize>>,
    why: &[Option<Ineligible>],
    nodes: &[NodeView],
    statuses: BTreeMap<String, CompartmentStatus>,
    priority: NodePriority,
) {
    let mut ignored = Vec::new();
    let mut tainted = Vec::new();
    for group in &groups {
        for &i in group {
            let node = &nodes[i];
            match why[i] {
                Some(Ineligible::Ignored) => ignored.push(&*node.name),
                Some(Ineligible::TaintNotTolerated) => tainted.push(&*node.name),
                None => {}
            }
        }
    }
    decision.conditions.push(taint_not_tolerable(&tainted));
    decision.conditions.push(nodes_ignored(&ignored));
    let nw_name = nw.metadata.name.clone().unwrap_or_default();
    for spec in &specs {
        if let Some(status) = statuses.get(&spec.name) {
            let samples = compartment_metrics(&nw_name, policy_name, spec, status);
            decision.metrics.extend(samples);
        }
    }
    decision.node_order = priority.node_order();
    decision.node_priority = priority.entries;
    decision.node_order_offset = priority.offset;
    decision.compartment_statuses = statuses;
    decision.compartments = specs;
    decision.groups = groups;
}
