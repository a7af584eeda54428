//! Shared builders and an idealised rollout driver for the rollout tests (included with
//! `#[path]` by the `rollout_*` test files).
#![allow(dead_code)]

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use nodewright_core::rollout::{NodeView, RolloutDecision, RolloutSettings, plan_rollout};
use nodewright_crds::{
    Compartment, DeploymentBudget, DeploymentPolicy, DeploymentPolicySpec, DeploymentStrategy,
    ExponentialStrategy, FixedStrategy, LinearStrategy, NodeWright, NodeWrightSpec,
    NodeWrightStatus, PolicyDefault, Status,
};

/// A waiting, not complete node without labels or taints.
pub fn node(name: &str) -> NodeView<'static> {
    NodeView {
        name: name.to_string().into(),
        status: Status::Waiting,
        status_before: Status::Waiting,
        ..NodeView::default()
    }
}

/// `n` waiting nodes `node-00`, `node-01`, ...
pub fn nodes(n: usize) -> Vec<NodeView<'static>> {
    (0..n).map(|i| node(&format!("node-{i:02}"))).collect()
}

/// Adds a label to a node.
pub fn label(mut node: NodeView<'static>, key: &str, value: &str) -> NodeView<'static> {
    node.labels
        .to_mut()
        .insert(key.to_string(), value.to_string());
    node
}

/// A NodeWright named `nw` referencing `policy` ("" for legacy mode).
pub fn nodewright(policy: &str) -> NodeWright {
    NodeWright::new(
        "nw",
        NodeWrightSpec {
            deployment_policy: policy.to_string(),
            ..NodeWrightSpec::default()
        },
    )
}

/// `count` budget.
pub fn count(count: i32) -> DeploymentBudget {
    DeploymentBudget {
        count: Some(count),
        percent: None,
    }
}

/// `percent` budget.
pub fn percent(percent: i32) -> DeploymentBudget {
    DeploymentBudget {
        count: None,
        percent: Some(percent),
    }
}

/// `fixed` with `initialBatch`.
pub fn fixed(initial: i32) -> DeploymentStrategy {
    DeploymentStrategy {
        fixed: Some(FixedStrategy {
            initial_batch: Some(initial),
            ..FixedStrategy::default()
        }),
        ..DeploymentStrategy::default()
    }
}

/// `linear` with `initialBatch` and `delta`.
pub fn linear(initial: i32, delta: i32) -> DeploymentStrategy {
    DeploymentStrategy {
        linear: Some(LinearStrategy {
            initial_batch: Some(initial),
            delta: Some(delta),
            ..LinearStrategy::default()
        }),
        ..DeploymentStrategy::default()
    }
}

/// `exponential` with `initialBatch` and `growthFactor`.
pub fn exponential(initial: i32, growth: i32) -> DeploymentStrategy {
    DeploymentStrategy {
        exponential: Some(ExponentialStrategy {
            initial_batch: Some(initial),
            growth_factor: Some(growth),
            ..ExponentialStrategy::default()
        }),
        ..DeploymentStrategy::default()
    }
}

/// Sets `failureThreshold`, `batchThreshold` and `safetyLimit` on whichever variant is set.
pub fn thresholds(
    mut s: DeploymentStrategy,
    failure: Option<i32>,
    batch: Option<i32>,
    safety: Option<i32>,
) -> DeploymentStrategy {
    if let Some(f) = s.fixed.as_mut() {
        (f.failure_threshold, f.batch_threshold, f.safety_limit) = (failure, batch, safety);
    }
    if let Some(l) = s.linear.as_mut() {
        (l.failure_threshold, l.batch_threshold, l.safety_limit) = (failure, batch, safety);
    }
    if let Some(e) = s.exponential.as_mut() {
        (e.failure_threshold, e.batch_threshold, e.safety_limit) = (failure, batch, safety);
    }
    s
}

/// A selector matching all the `key=value` pairs.
pub fn selector(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        match_expressions: None,
    }
}

/// A named compartment.
pub fn compartment(
    name: &str,
    pairs: &[(&str, &str)],
    budget: DeploymentBudget,
    strategy: Option<DeploymentStrategy>,
) -> Compartment {
    Compartment {
        name: name.to_string(),
        selector: selector(pairs),
        budget,
        strategy,
    }
}

/// A policy named `policy` (auto-reset off) with a default and compartments.
pub fn policy(
    default_budget: DeploymentBudget,
    default_strategy: DeploymentStrategy,
    compartments: Vec<Compartment>,
) -> DeploymentPolicy {
    DeploymentPolicy::new(
        "policy",
        DeploymentPolicySpec {
            default: PolicyDefault {
                budget: default_budget,
                strategy: Some(default_strategy),
            },
            compartments,
            reset_batch_state_on_completion: Some(false),
        },
    )
}

/// Settings without runtime-required taints: evaluate and select.
pub fn settings() -> RolloutSettings {
    RolloutSettings {
        runtime_required_taints: Vec::new(),
        evaluate: true,
        select: true,
        reset_trigger: false,
    }
}

/// A fixed point in time.
pub fn t0() -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap()
}

/// A `Time` at `second` seconds after `t0`.
pub fn at(second: i64) -> Time {
    Time(Timestamp::from_second(t0().as_second() + second).unwrap())
}

/// An idealised cluster: every started node finishes at the next pass, all together.
pub struct Sim {
    /// The NodeWright, its status fed back after every pass.
    pub nw: NodeWright,
    /// Its policy, if any.
    pub policy: Option<DeploymentPolicy>,
    /// Its nodes.
    pub nodes: Vec<NodeView<'static>>,
    /// Current time; one second per pass.
    pub now: Timestamp,
    /// Newly started nodes per pass, per compartment (only passes that started something).
    pub batches: BTreeMap<String, Vec<usize>>,
    /// Every decision so far.
    pub decisions: Vec<RolloutDecision>,
    /// The NodeWright status was `complete` at the end of the last pass.
    pub was_complete: bool,
}

impl Sim {
    /// A simulation of `nw` over `nodes`.
    pub fn new(
        nw: NodeWright,
        policy: Option<DeploymentPolicy>,
        nodes: Vec<NodeView<'static>>,
    ) -> Self {
        Self {
            nw,
            policy,
            nodes,
            now: t0(),
            batches: BTreeMap::new(),
            decisions: Vec::new(),
            was_complete: false,
        }
    }

    /// The NodeWright's status (always present after the first pass).
    pub fn status(&self) -> NodeWrightStatus {
        self.nw.status.clone().unwrap_or_default()
    }

    /// Every node is complete.
    pub fn all_complete(&self) -> bool {
        self.nodes.iter().all(|n| n.complete)
    }

    /// One pass as the lifecycle makes it: evaluate unless the rollout was already complete,
    /// reset trigger on the transition into complete, feed the status back, start the
    /// selected nodes.
    pub fn pass(&mut self) -> RolloutDecision {
        let complete = self.all_complete();
        let mut settings = settings();
        settings.evaluate = !self.was_complete;
        settings.reset_trigger = complete && !self.was_complete;
        self.was_complete = complete;
        let decision = plan_rollout(
            &self.nw,
            self.policy.as_ref(),
            &self.nodes,
            self.now,
            &settings,
        );
        let mut status = self.status();
        status.compartment_statuses = decision.compartment_statuses.clone();
        status.node_priority = decision.node_priority.clone();
        status.node_order_offset = decision.node_order_offset;
        self.nw.status = Some(status);
        let mut started: BTreeMap<String, usize> = BTreeMap::new();
        let assignment = decision.assignment(&self.nodes);
        for node in self.nodes.iter_mut() {
            node.status_before = node.status;
            let picked = decision.selected_nodes.contains(&node.name.to_string());
            // A terminally failed node is not restarted without a rerun.
            let idle = !matches!(node.status, Status::InProgress | Status::Erroring);
            if picked && idle {
                node.status = Status::InProgress;
                let compartment = assignment[&*node.name].clone();
                *started.entry(compartment).or_default() += 1;
            }
        }
        for (compartment, n) in started {
            self.batches.entry(compartment).or_default().push(n);
        }
        self.now = Timestamp::from_second(self.now.as_second() + 1).unwrap();
        self.decisions.push(decision.clone());
        decision
    }

    /// Finishes every in-progress node: `fails(name)` decides erroring instead of complete.
    pub fn finish(&mut self, fails: &dyn Fn(&str) -> bool) {
        for node in self.nodes.iter_mut() {
            if node.status == Status::InProgress {
                node.status_before = node.status;
                if fails(&node.name) {
                    node.status = Status::Erroring;
                } else {
                    node.status = Status::Complete;
                    node.complete = true;
                }
            }
        }
    }

    /// Runs pass/finish until every node is complete (then one last pass), at most `limit`
    /// passes.
    pub fn run(&mut self, limit: usize) {
        for _ in 0..limit {
            let done = self.all_complete();
            self.pass();
            if done {
                return;
            }
            self.finish(&|_| false);
        }
    }

    /// The batch state of a compartment after the last pass.
    pub fn batch_state(&self, compartment: &str) -> nodewright_crds::BatchProcessingState {
        self.status().compartment_statuses[compartment]
            .batch_state
            .clone()
            .unwrap_or_default()
    }
}
