//! Building a NodeWright's compartments and assigning its nodes to them (05-rollout.md §4, §10).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use nodewright_crds::{DeploymentBudget, DeploymentPolicy, NodeWright, StrategyType, keys};

use super::NodeView;
use super::budget::{ceiling, legacy_budget, legacy_initial_batch};
use super::strategy::{Strategy, safety_rank};
use nodewright_crds::selector;

/// Name of the compartment for nodes matching no named compartment.
pub const DEFAULT_COMPARTMENT: &str = keys::DEFAULT_COMPARTMENT;
/// `policy_name` metric label of a NodeWright without a policy.
pub const LEGACY_POLICY_NAME: &str = "legacy";

/// One compartment of one NodeWright, strategy defaults applied.
#[derive(Clone, Debug, PartialEq)]
pub struct CompartmentSpec {
    /// Compartment name (`__default__` for the default).
    pub name: String,
    /// Member selector; `None` for `__default__` (it takes what no other compartment takes).
    pub selector: Option<LabelSelector>,
    /// Ceiling budget.
    pub budget: DeploymentBudget,
    /// Strategy; `None` means ceiling-only batches.
    pub strategy: Option<Strategy>,
}

impl CompartmentSpec {
    /// The strategy label of metrics (`unknown` without a strategy).
    pub fn strategy_type(&self) -> StrategyType {
        self.strategy
            .as_ref()
            .map_or(StrategyType::Unknown, Strategy::strategy_type)
    }
}

/// The compartments of a NodeWright, or why there are none.
#[derive(Clone, Debug, PartialEq)]
pub enum Compartments {
    /// Built from a policy (named compartments in policy order, then `__default__`).
    Policy(Vec<CompartmentSpec>),
    /// The synthetic legacy `__default__` compartment from `interruptionBudget`.
    Legacy(CompartmentSpec),
    /// `spec.deploymentPolicy` names a policy that does not exist: nothing may be scheduled.
    PolicyMissing(String),
}

impl Compartments {
    /// All compartments, in order (empty when the policy is missing).
    pub fn specs(&self) -> &[CompartmentSpec] {
        match self {
            Compartments::Policy(specs) => specs,
            Compartments::Legacy(spec) => std::slice::from_ref(spec),
            Compartments::PolicyMissing(_) => &[],
        }
    }
}

/// Builds the compartments of `nw` from its policy (looked up by the caller by
/// `spec.deploymentPolicy`) or from its legacy `interruptionBudget` over `node_count` nodes.
pub fn build_compartments(
    nw: &NodeWright,
    policy: Option<&DeploymentPolicy>,
    node_count: usize,
) -> Compartments {
    let name = &nw.spec.deployment_policy;
    if name.is_empty() {
        let budget = legacy_budget(nw.spec.interruption_budget.as_ref());
        let initial = legacy_initial_batch(&budget, count(node_count));
        return Compartments::Legacy(CompartmentSpec {
            name: DEFAULT_COMPARTMENT.to_string(),
            selector: None,
            budget,
            strategy: Some(Strategy::fixed(initial)),
        });
    }
    let Some(policy) = policy.filter(|p| p.metadata.name.as_deref() == Some(name.as_str())) else {
        return Compartments::PolicyMissing(name.clone());
    };
    let mut specs: Vec<CompartmentSpec> = policy
        .spec
        .compartments
        .iter()
        .filter(|c| c.name != DEFAULT_COMPARTMENT)
        .map(|c| CompartmentSpec {
            name: c.name.clone(),
            selector: Some(c.selector.clone()),
            budget: c.budget.clone(),
            strategy: c.strategy.as_ref().and_then(Strategy::resolve),
        })
        .collect();
    specs.push(CompartmentSpec {
        name: DEFAULT_COMPARTMENT.to_string(),
        selector: None,
        budget: policy.spec.default.budget.clone(),
        strategy: policy
            .spec
            .default
            .strategy
            .as_ref()
            .and_then(Strategy::resolve),
    });
    Compartments::Policy(specs)
}

/// The index into `specs` of the compartment `node` belongs to (05-rollout.md §4.2): the safest
/// matching named compartment (strategy rank, then capacity, then name), else `__default__`.
/// `nodes` are all of the NodeWright's nodes (capacity counts every selector match).
pub fn assign(specs: &[CompartmentSpec], nodes: &[NodeView], node: &NodeView) -> Option<usize> {
    let capacities: Vec<i64> = specs.iter().map(|s| capacity(s, nodes)).collect();
    assign_with(specs, &capacities, node)
}

fn assign_with(specs: &[CompartmentSpec], capacities: &[i64], node: &NodeView) -> Option<usize> {
    let default = specs.iter().position(|s| s.selector.is_none());
    let key = |i: usize| {
        let spec = &specs[i];
        let cap = capacities.get(i).copied().unwrap_or_default();
        (safety_rank(spec.strategy.as_ref()), cap, spec.name.as_str())
    };
    (0..specs.len())
        .filter(|&i| {
            specs[i]
                .selector
                .as_ref()
                .is_some_and(|sel| selector::matches(sel, &node.labels))
        })
        .min_by(|&a, &b| key(a).cmp(&key(b)))
        .or(default)
}

/// Assigns every node (in the given order) and returns each compartment's members as indices
/// into `nodes`, keeping node order.
pub fn partition(specs: &[CompartmentSpec], nodes: &[NodeView]) -> Vec<Vec<usize>> {
    let capacities: Vec<i64> = specs.iter().map(|s| capacity(s, nodes)).collect();
    let mut members = vec![Vec::new(); specs.len()];
    for (index, node) in nodes.iter().enumerate() {
        if let Some(c) = assign_with(specs, &capacities, node) {
            members[c].push(index);
        }
    }
    members
}

/// Capacity for the overlap tie-break: the ceiling over the NodeWright's nodes matching the
/// compartment's selector, at least 1.
pub fn capacity(spec: &CompartmentSpec, nodes: &[NodeView]) -> i64 {
    let matched = match &spec.selector {
        Some(sel) => nodes
            .iter()
            .filter(|n| selector::matches(sel, &n.labels))
            .count(),
        None => nodes.len(),
    };
    ceiling(&spec.budget, count(matched).max(1))
}

/// A node count as `i64` (saturating; counts never reach `i64::MAX`).
pub(crate) fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
