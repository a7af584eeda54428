//! The `DeploymentPolicy` custom resource (01-api.md §3, 05-rollout.md).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a NodeWright's nodes are paced: a default budget and strategy plus named compartments.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "nodewright.nvidia.com",
    version = "v1alpha1",
    kind = "DeploymentPolicy",
    plural = "deploymentpolicies",
    singular = "deploymentpolicy",
    derive = "PartialEq",
    derive = "Default",
    doc = "DeploymentPolicy is the Schema for the deploymentpolicies API"
)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentPolicySpec {
    /// Budget and strategy for nodes matching no compartment (`__default__`).
    pub default: PolicyDefault,
    /// Named node groups with their own budget and strategy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compartments: Vec<Compartment>,
    /// Reset batch state when the rollout completes or a package version changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub reset_batch_state_on_completion: Option<bool>,
}

/// Budget and strategy of the default compartment.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PolicyDefault {
    /// Ceiling for the default compartment; exactly one of percent or count.
    #[serde(default)]
    #[schemars(transform = drop_default)]
    pub budget: DeploymentBudget,
    /// Strategy for the default compartment (the key must be present; may be null).
    #[schemars(required)]
    pub strategy: Option<DeploymentStrategy>,
}

/// Schema transform: no `default:` (upstream's `default.budget` has none).
fn drop_default(schema: &mut schemars::Schema) {
    schema.remove("default");
}

/// A named group of nodes with its own budget and strategy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Compartment {
    /// Compartment identity; not `__default__`, unique in the policy.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Node labels selecting members among the NodeWright's nodes.
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub selector: LabelSelector,
    /// Ceiling; exactly one of percent or count.
    pub budget: DeploymentBudget,
    /// Batch strategy; absent means ceiling-only batches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<DeploymentStrategy>,
}

/// A ceiling, as a percentage of nodes or a count (exactly one).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct DeploymentBudget {
    /// Percentage of the compartment's nodes (1..100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub percent: Option<i32>,
    /// Absolute node count (≥ 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub count: Option<i32>,
}

/// Exactly one of the three batch strategies.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct DeploymentStrategy {
    /// Constant batch size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed: Option<FixedStrategy>,
    /// Batch size grows by `delta` after each passing batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear: Option<LinearStrategy>,
    /// Batch size multiplies by `growthFactor` after each passing batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exponential: Option<ExponentialStrategy>,
}

/// Parameters of the fixed strategy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FixedStrategy {
    /// First (and every) batch size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub initial_batch: Option<i32>,
    /// Minimum % of a batch that must succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub batch_threshold: Option<i32>,
    /// Consecutive failed batches tolerated before stopping; unset never stops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub failure_threshold: Option<i32>,
    /// Progress % at or above which failures no longer stop or slow the rollout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub safety_limit: Option<i32>,
}

/// Parameters of the linear strategy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LinearStrategy {
    /// First batch size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub initial_batch: Option<i32>,
    /// Growth per passing batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub delta: Option<i32>,
    /// Minimum % of a batch that must succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub batch_threshold: Option<i32>,
    /// Consecutive failed batches tolerated before stopping; unset never stops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub failure_threshold: Option<i32>,
    /// Progress % at or above which failures no longer stop or slow the rollout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub safety_limit: Option<i32>,
}

/// Parameters of the exponential strategy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExponentialStrategy {
    /// First batch size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub initial_batch: Option<i32>,
    /// Multiplier per passing batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2))]
    pub growth_factor: Option<i32>,
    /// Minimum % of a batch that must succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub batch_threshold: Option<i32>,
    /// Consecutive failed batches tolerated before stopping; unset never stops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub failure_threshold: Option<i32>,
    /// Progress % at or above which failures no longer stop or slow the rollout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub safety_limit: Option<i32>,
}

/// Strategy names used in metrics and overlap tie-breaking, safest first.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum StrategyType {
    /// Fixed batches.
    Fixed,
    /// Linear growth.
    Linear,
    /// Exponential growth.
    Exponential,
    /// No strategy (ceiling-only); least safe.
    Unknown,
}

impl StrategyType {
    /// The metric label spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fixed => "fixed",
            Self::Linear => "linear",
            Self::Exponential => "exponential",
            Self::Unknown => "unknown",
        }
    }
}

impl DeploymentStrategy {
    /// Number of variants set (valid strategies have exactly one).
    pub fn variants_set(&self) -> usize {
        [
            self.fixed.is_some(),
            self.linear.is_some(),
            self.exponential.is_some(),
        ]
        .iter()
        .filter(|set| **set)
        .count()
    }

    /// The first set variant's type, checked in order fixed, linear, exponential.
    pub fn strategy_type(&self) -> StrategyType {
        if self.fixed.is_some() {
            StrategyType::Fixed
        } else if self.linear.is_some() {
            StrategyType::Linear
        } else if self.exponential.is_some() {
            StrategyType::Exponential
        } else {
            StrategyType::Unknown
        }
    }
}
