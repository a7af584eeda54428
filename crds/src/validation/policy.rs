//! DeploymentPolicy admission: P1–P9 on CREATE/UPDATE and the DELETE guard (01-api.md §4.6).

use crate::NodeWright;
use crate::keys::DEFAULT_COMPARTMENT;
use crate::policy::{Compartment, DeploymentBudget, DeploymentPolicy, DeploymentStrategy};
use crate::selector;

use super::ValidationError;

/// Runs P1–P9 in order (compartments in list order), first failure wins.
pub fn validate_policy(policy: &DeploymentPolicy) -> Result<(), ValidationError> {
    let spec = &policy.spec;
    check_budget(&spec.default.budget, "default ")?;
    if let Some(strategy) = &spec.default.strategy {
        check_strategy(strategy, "default ")?;
    }
    for (index, compartment) in spec.compartments.iter().enumerate() {
        let earlier = &spec.compartments[..index];
        check_compartment(compartment, earlier)?;
    }
    Ok(())
}

/// P4–P9 for one compartment, given the compartments before it.
fn check_compartment(c: &Compartment, earlier: &[Compartment]) -> Result<(), ValidationError> {
    if c.name == DEFAULT_COMPARTMENT {
        return Err(ValidationError::CompartmentReserved);
    }
    if earlier.iter().any(|e| e.name == c.name) {
        return Err(ValidationError::CompartmentDuplicate(c.name.clone()));
    }
    let prefix = format!("compartment {:?} ", c.name);
    check_budget(&c.budget, &prefix)?;
    if let Some(strategy) = &c.strategy {
        check_strategy(strategy, &prefix)?;
    }
    selector::validate(&c.selector).map_err(|e| ValidationError::CompartmentSelector {
        name: c.name.clone(),
        detail: e.0,
    })?;
    if let Some(other) = earlier.iter().find(|e| e.selector == c.selector) {
        return Err(ValidationError::CompartmentIdenticalSelector {
            name: c.name.clone(),
            other: other.name.clone(),
        });
    }
    Ok(())
}

/// P1/P2/P6: exactly one of percent or count.
fn check_budget(budget: &DeploymentBudget, prefix: &str) -> Result<(), ValidationError> {
    match (budget.percent, budget.count) {
        (None, None) => Err(ValidationError::PolicyBudgetUnset(prefix.to_string())),
        (Some(_), Some(_)) => Err(ValidationError::PolicyBudgetBoth(prefix.to_string())),
        _ => Ok(()),
    }
}

/// P3/P7: exactly one strategy variant.
fn check_strategy(strategy: &DeploymentStrategy, prefix: &str) -> Result<(), ValidationError> {
    if strategy.variants_set() == 1 {
        Ok(())
    } else {
        Err(ValidationError::PolicyStrategy(prefix.to_string()))
    }
}

/// DELETE: a policy still named by some NodeWright's `spec.deploymentPolicy` cannot be deleted.
/// `nodewrights` is the full list (its order is kept in the message).
pub fn validate_policy_delete(
    policy_name: &str,
    nodewrights: &[NodeWright],
) -> Result<(), ValidationError> {
    let names: Vec<String> = nodewrights
        .iter()
        .filter(|nw| nw.spec.deployment_policy == policy_name)
        .map(|nw| nw.metadata.name.clone().unwrap_or_default())
        .collect();
    if names.is_empty() {
        Ok(())
    } else {
        Err(ValidationError::PolicyInUse {
            policy: policy_name.to_string(),
            names,
        })
    }
}
