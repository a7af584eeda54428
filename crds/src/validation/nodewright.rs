//! NodeWright object checks, CREATE and UPDATE (01-api.md §4.3 checks 1–6, D1, D9).
//!
//! Order: decode-level checks (durations, quantities), check 1 and the D9 budget range, the
//! drain settings, check 2, `podNonInterruptLabels`, check 3, then per package in key order
//! 4a, 4c, 4d, image and `containerSHA`, 4f, 4g–4j, 4k, 4l, then the graph checks 5, 6 and
//! the D9 cycle check. The first failure wins.

use crate::NodeWright;
use crate::duration::GoDuration;
use crate::limits;
use crate::nodewright::{DrainConfig, InterruptionBudget, NodeWrightSpec, Package};
use crate::selector;

use super::ValidationError;
use super::graph;
use super::package;

/// Runs every object check on a NodeWright (§4.3 checks 1–6 plus D1 and D9), first failure wins.
pub fn validate_nodewright(nw: &NodeWright) -> Result<(), ValidationError> {
    validate_spec(&nw.spec)
}

/// [`validate_nodewright`] on a bare spec.
pub fn validate_spec(spec: &NodeWrightSpec) -> Result<(), ValidationError> {
    check_sizes(spec)?;
    check_decode(spec)?;
    if let Some(budget) = &spec.interruption_budget {
        check_budget(budget)?;
    }
    if let Some(drain) = &spec.drain_config {
        check_drain(drain)?;
    }
    check_policy_exclusive(spec)?;
    if let Some(labels) = &spec.pod_non_interrupt_labels {
        selector::validate(labels).map_err(|e| ValidationError::PodNonInterruptLabels(e.0))?;
    }
    if let Some(nodes) = &spec.node_selector {
        selector::validate(nodes).map_err(|e| ValidationError::NodeSelectors(e.0))?;
    }
    for (key, pkg) in &spec.packages {
        package::check_package(key, pkg)?;
    }
    graph::check_graph(&spec.packages)
}

/// The size bounds of [`crate::limits`], checked before anything walks the maps.
fn check_sizes(spec: &NodeWrightSpec) -> Result<(), ValidationError> {
    if spec.packages.len() > limits::MAX_PACKAGES {
        return Err(ValidationError::TooManyPackages {
            count: spec.packages.len(),
            max: limits::MAX_PACKAGES,
        });
    }
    for (key, pkg) in &spec.packages {
        let fields = [
            ("dependsOn", pkg.depends_on.len(), limits::MAX_DEPENDS_ON),
            (
                "configInterrupts",
                pkg.config_interrupts.len(),
                limits::MAX_CONFIG_INTERRUPTS,
            ),
        ];
        if let Some((field, count, max)) = fields.into_iter().find(|(_, n, max)| n > max) {
            return Err(ValidationError::TooManyEntries {
                key: limits::clip(key, 64),
                field,
                count,
                max,
            });
        }
        check_glob_work(key, pkg)?;
    }
    Ok(())
}

/// [`limits::MAX_GLOB_CHECKS`]: check 4d tries each glob against the `configMap` keys.
fn check_glob_work(key: &str, pkg: &Package) -> Result<(), ValidationError> {
    let globs = pkg
        .config_interrupts
        .keys()
        .filter(|k| k.contains('*') && !pkg.config_map.contains_key(*k))
        .count();
    let keys = pkg.config_map.len();
    let checks = globs.saturating_mul(keys);
    if checks > limits::MAX_GLOB_CHECKS {
        return Err(ValidationError::TooManyGlobChecks {
            key: limits::clip(key, 64),
            globs,
            keys,
            checks,
            max: limits::MAX_GLOB_CHECKS,
        });
    }
    Ok(())
}

/// Durations and quantities must parse (the Go webhook fails to decode the object otherwise).
fn check_decode(spec: &NodeWrightSpec) -> Result<(), ValidationError> {
    if let Some(drain) = &spec.drain_config {
        parse_duration("drain config: drainConfig.timeout", drain.timeout.as_ref())?;
        parse_duration(
            "drain config: drainConfig.gracePeriod",
            drain.grace_period.as_ref(),
        )?;
    }
    for (key, pkg) in &spec.packages {
        check_package_decode(key, pkg)?;
    }
    Ok(())
}

fn check_package_decode(key: &str, pkg: &Package) -> Result<(), ValidationError> {
    let context = |field: &str| format!("package {key:?}: {field}");
    parse_duration(&context("gracefulShutdown"), pkg.graceful_shutdown.as_ref())?;
    parse_duration(&context("stageTimeout"), pkg.stage_timeout.as_ref())?;
    package::parse_resources(key, pkg.resources.as_ref()).map(|_| ())
}

/// Parses an optional duration, reporting it under `context`; absent is `None`.
pub(super) fn parse_duration(
    context: &str,
    value: Option<&GoDuration>,
) -> Result<Option<i64>, ValidationError> {
    value
        .map(|d| {
            d.nanos().map_err(|_| ValidationError::InvalidDuration {
                context: context.to_string(),
                value: d.0.clone(),
            })
        })
        .transpose()
}

/// Check 1 and D9: not both set; a set value must be a non-zero budget.
fn check_budget(budget: &InterruptionBudget) -> Result<(), ValidationError> {
    if budget.percent.is_some() && budget.count.is_some() {
        return Err(ValidationError::BudgetBothSet);
    }
    if let Some(percent) = budget.percent.filter(|p| !(1..=100).contains(p)) {
        return Err(ValidationError::BudgetPercentOutOfRange(percent));
    }
    if let Some(count) = budget.count.filter(|c| *c < 1) {
        return Err(ValidationError::BudgetCountTooSmall(count));
    }
    Ok(())
}

/// D1 (§11 item 1): drain timeout and grace period must not be negative.
fn check_drain(drain: &DrainConfig) -> Result<(), ValidationError> {
    let fields = [
        ("timeout", drain.timeout.as_ref()),
        ("gracePeriod", drain.grace_period.as_ref()),
    ];
    for (field, value) in fields {
        if value.and_then(|d| d.nanos().ok()).is_some_and(|n| n < 0) {
            return Err(ValidationError::DrainNegative { field });
        }
    }
    Ok(())
}

/// Check 2: a policy reference excludes any interruption-budget value.
fn check_policy_exclusive(spec: &NodeWrightSpec) -> Result<(), ValidationError> {
    let budget_set = spec
        .interruption_budget
        .as_ref()
        .is_some_and(|b| b.percent.is_some() || b.count.is_some());
    if !spec.deployment_policy.is_empty() && budget_set {
        return Err(ValidationError::PolicyAndBudget);
    }
    Ok(())
}

/// Check 7: the referenced DeploymentPolicy must exist. `lookup` answers "does a policy of this
/// name exist?" (an `Err` is a failed lookup); it is not called when no policy is referenced.
pub fn validate_policy_reference<F>(nw: &NodeWright, lookup: F) -> Result<(), ValidationError>
where
    F: FnOnce(&str) -> Result<bool, String>,
{
    let policy = &nw.spec.deployment_policy;
    if policy.is_empty() {
        return Ok(());
    }
    match lookup(policy) {
        Ok(true) => Ok(()),
        Ok(false) => Err(ValidationError::PolicyNotFound(policy.clone())),
        Err(error) => Err(ValidationError::PolicyLookupFailed {
            policy: policy.clone(),
            error,
        }),
    }
}
