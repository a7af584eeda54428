//! Defaulting (01-api.md §4.5, 05-rollout.md §2.1): the DeploymentPolicy mutating webhook, and
//! the same defaults applied at read time for policies stored without them (webhook bypassed).
//!
//! NodeWright has no defaulting beyond its CRD schema.

use crate::nodewright::NodeWrightSpec;
use crate::policy::{DeploymentPolicy, DeploymentPolicySpec, DeploymentStrategy, StrategyType};

/// Default `initialBatch`.
pub const DEFAULT_INITIAL_BATCH: i32 = 1;
/// Default `delta` (linear).
pub const DEFAULT_DELTA: i32 = 1;
/// Default `growthFactor` (exponential).
pub const DEFAULT_GROWTH_FACTOR: i32 = 2;
/// Default `batchThreshold` (percent).
pub const DEFAULT_BATCH_THRESHOLD: i32 = 100;
/// Default `safetyLimit` (percent).
pub const DEFAULT_SAFETY_LIMIT: i32 = 50;

/// The mutating webhook: fills the missing parameters of `default.strategy` and of every
/// compartment strategy. `failureThreshold` is never defaulted.
pub fn default_policy(policy: &mut DeploymentPolicy) {
    if let Some(strategy) = policy.spec.default.strategy.as_mut() {
        default_strategy(strategy);
    }
    for compartment in &mut policy.spec.compartments {
        if let Some(strategy) = compartment.strategy.as_mut() {
            default_strategy(strategy);
        }
    }
}

/// Fills the first set variant (checked in order fixed, linear, exponential) only.
pub fn default_strategy(strategy: &mut DeploymentStrategy) {
    if let Some(f) = strategy.fixed.as_mut() {
        fill_common(
            &mut f.initial_batch,
            &mut f.batch_threshold,
            &mut f.safety_limit,
        );
    } else if let Some(l) = strategy.linear.as_mut() {
        fill_common(
            &mut l.initial_batch,
            &mut l.batch_threshold,
            &mut l.safety_limit,
        );
        l.delta.get_or_insert(DEFAULT_DELTA);
    } else if let Some(e) = strategy.exponential.as_mut() {
        fill_common(
            &mut e.initial_batch,
            &mut e.batch_threshold,
            &mut e.safety_limit,
        );
        e.growth_factor.get_or_insert(DEFAULT_GROWTH_FACTOR);
    }
}

fn fill_common(initial: &mut Option<i32>, threshold: &mut Option<i32>, safety: &mut Option<i32>) {
    initial.get_or_insert(DEFAULT_INITIAL_BATCH);
    threshold.get_or_insert(DEFAULT_BATCH_THRESHOLD);
    safety.get_or_insert(DEFAULT_SAFETY_LIMIT);
}

/// A strategy's parameters with every default applied: what the batch-size and batch-evaluation
/// formulas read (05-rollout.md §5, §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EffectiveStrategy {
    /// Which variant (the first set one).
    pub strategy_type: StrategyType,
    /// First batch size (every batch for `fixed`).
    pub initial_batch: i32,
    /// Linear growth step (meaningful for `linear` only).
    pub delta: i32,
    /// Exponential multiplier (meaningful for `exponential` only).
    pub growth_factor: i32,
    /// Minimum success percentage of a batch.
    pub batch_threshold: i32,
    /// Consecutive failed batches before stopping; `None` never stops.
    pub failure_threshold: Option<i32>,
    /// Progress percentage from which failures no longer slow or stop the rollout.
    pub safety_limit: i32,
}

/// The effective parameters of the first set variant, or `None` when no variant is set
/// (a ceiling-only compartment).
pub fn effective_strategy(strategy: &DeploymentStrategy) -> Option<EffectiveStrategy> {
    let mut filled = strategy.clone();
    default_strategy(&mut filled);
    let base = |t, i: Option<i32>, b: Option<i32>, f, s: Option<i32>| EffectiveStrategy {
        strategy_type: t,
        initial_batch: i.unwrap_or(DEFAULT_INITIAL_BATCH),
        delta: DEFAULT_DELTA,
        growth_factor: DEFAULT_GROWTH_FACTOR,
        batch_threshold: b.unwrap_or(DEFAULT_BATCH_THRESHOLD),
        failure_threshold: f,
        safety_limit: s.unwrap_or(DEFAULT_SAFETY_LIMIT),
    };
    if let Some(f) = &filled.fixed {
        let (i, b, ft, s) = (
            f.initial_batch,
            f.batch_threshold,
            f.failure_threshold,
            f.safety_limit,
        );
        return Some(base(StrategyType::Fixed, i, b, ft, s));
    }
    if let Some(l) = &filled.linear {
        let (i, b, ft, s) = (
            l.initial_batch,
            l.batch_threshold,
            l.failure_threshold,
            l.safety_limit,
        );
        let delta = l.delta.unwrap_or(DEFAULT_DELTA);
        return Some(EffectiveStrategy {
            delta,
            ..base(StrategyType::Linear, i, b, ft, s)
        });
    }
    let e = filled.exponential.as_ref()?;
    let (i, b, ft, s) = (
        e.initial_batch,
        e.batch_threshold,
        e.failure_threshold,
        e.safety_limit,
    );
    let growth_factor = e.growth_factor.unwrap_or(DEFAULT_GROWTH_FACTOR);
    Some(EffectiveStrategy {
        growth_factor,
        ..base(StrategyType::Exponential, i, b, ft, s)
    })
}

/// Whether batch state resets on completion (01-api.md §3.6): the NodeWright's
/// `deploymentPolicyOptions` value if present, else the policy's value if present, else `false`.
pub fn reset_batch_state_on_completion(
    spec: &NodeWrightSpec,
    policy: Option<&DeploymentPolicySpec>,
) -> bool {
    spec.deployment_policy_options
        .as_ref()
        .and_then(|o| o.reset_batch_state_on_completion)
        .or_else(|| policy.and_then(|p| p.reset_batch_state_on_completion))
        .unwrap_or(false)
}
