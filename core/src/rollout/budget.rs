//! Ceilings from budgets with exact integer arithmetic (05-rollout.md §4.3, §10; decision D23).

use nodewright_crds::{DeploymentBudget, InterruptionBudget};

/// `floor(nodes × percent / 100)` computed exactly in integers (D23: 57 % of 100 is 57).
pub fn percent_of(nodes: i64, percent: i64) -> i64 {
    nodes.saturating_mul(percent).div_euclid(100)
}

/// The ceiling of a budget over `matched` nodes: `count` as is, else `max(1, ⌊matched·percent/100⌋)`
/// (0 when nothing matched), else 0.
pub fn ceiling(budget: &DeploymentBudget, matched: i64) -> i64 {
    if let Some(count) = budget.count {
        return i64::from(count);
    }
    match budget.percent {
        Some(_) if matched <= 0 => 0,
        Some(percent) => percent_of(matched, i64::from(percent)).max(1),
        None => 0,
    }
}

/// The budget of the synthetic legacy compartment: `percent` if set, else `count`, else 100 %.
pub fn legacy_budget(budget: Option<&InterruptionBudget>) -> DeploymentBudget {
    let budget = budget.cloned().unwrap_or_default();
    match (budget.percent, budget.count) {
        (Some(percent), _) => DeploymentBudget {
            percent: Some(percent),
            count: None,
        },
        (None, Some(count)) => DeploymentBudget {
            percent: None,
            count: Some(count),
        },
        (None, None) => DeploymentBudget {
            percent: Some(100),
            count: None,
        },
    }
}

/// The legacy `initialBatch` over `nodes` selected nodes (05-rollout.md §10 step 2, D23).
pub fn legacy_initial_batch(budget: &DeploymentBudget, nodes: i64) -> i64 {
    match (budget.count, budget.percent) {
        (Some(count), _) => nodes.min(i64::from(count)).max(1),
        (None, Some(_)) if nodes <= 0 => 1,
        (None, Some(percent)) => percent_of(nodes, i64::from(percent)).max(1),
        (None, None) => 1,
    }
}
