//! DeploymentPolicy admission (01-api.md §4.5 defaulting, §4.6 P1–P9 and DELETE).

mod common;

use common::{nodewright, policy};
use nodewright_crds::defaults::{
    EffectiveStrategy, default_policy, effective_strategy, reset_batch_state_on_completion,
};
use nodewright_crds::validation::{ValidationError, validate_policy, validate_policy_delete};
use nodewright_crds::{DeploymentPolicy, StrategyType};

const VALID: &str = r#"
apiVersion: nodewright.nvidia.com/v1alpha1
kind: DeploymentPolicy
metadata:
  name: rollout
spec:
  default:
    budget: {percent: 25}
    strategy:
      fixed: {initialBatch: 2}
  compartments:
    - name: canary
      selector:
        matchLabels: {example.com/tier: canary}
      budget: {count: 1}
    - name: production
      selector:
        matchExpressions:
          - {key: example.com/tier, operator: In, values: [prod]}
      budget: {percent: 20}
      strategy:
        exponential: {initialBatch: 1, growthFactor: 2, failureThreshold: 2}
"#;

fn valid() -> DeploymentPolicy {
    policy(VALID)
}

fn reject(p: &DeploymentPolicy) -> String {
    validate_policy(p)
        .expect_err("policy should be rejected")
        .to_string()
}

fn with(edit: impl FnOnce(&mut DeploymentPolicy)) -> DeploymentPolicy {
    let mut p = valid();
    edit(&mut p);
    p
}

#[test]
fn valid_policy_accepted() {
    assert_eq!(validate_policy(&valid()), Ok(()));
}

#[test]
fn p1_default_budget_unset_rejected() {
    let p = with(|p| p.spec.default.budget.percent = None);
    assert_eq!(
        reject(&p),
        "default budget: exactly one of percent or count must be set"
    );
}

#[test]
fn p2_default_budget_both_rejected() {
    let p = with(|p| p.spec.default.budget.count = Some(3));
    assert_eq!(
        reject(&p),
        "default budget: percent and count are mutually exclusive"
    );
}

#[test]
fn p3_default_strategy_not_exactly_one_rejected() {
    let none = with(|p| p.spec.default.strategy.as_mut().unwrap().fixed = None);
    let message = "default strategy: exactly one of fixed, linear, or exponential must be set";
    assert_eq!(reject(&none), message);
    let two = with(|p| p.spec.default.strategy.as_mut().unwrap().linear = Some(Default::default()));
    assert_eq!(reject(&two), message);
    let null = with(|p| p.spec.default.strategy = None);
    assert_eq!(
        validate_policy(&null),
        Ok(()),
        "a null strategy is not checked"
    );
}

#[test]
fn p4_reserved_compartment_name_rejected() {
    let p = with(|p| p.spec.compartments[1].name = "__default__".into());
    assert_eq!(
        reject(&p),
        r#"compartment name "__default__" is reserved and cannot be used"#
    );
}

#[test]
fn p5_duplicate_compartment_name_rejected() {
    let p = with(|p| p.spec.compartments[1].name = "canary".into());
    assert_eq!(reject(&p), r#"compartment name "canary" is not unique"#);
}

#[test]
fn p6_compartment_budget_invalid_rejected() {
    let unset = with(|p| p.spec.compartments[0].budget.count = None);
    assert_eq!(
        reject(&unset),
        r#"compartment "canary" budget: exactly one of percent or count must be set"#
    );
    let both = with(|p| p.spec.compartments[0].budget.percent = Some(5));
    assert_eq!(
        reject(&both),
        r#"compartment "canary" budget: percent and count are mutually exclusive"#
    );
}

#[test]
fn p7_compartment_strategy_not_exactly_one_rejected() {
    let p = with(|p| {
        p.spec.compartments[1].strategy.as_mut().unwrap().fixed = Some(Default::default())
    });
    assert_eq!(
        reject(&p),
        r#"compartment "production" strategy: exactly one of fixed, linear, or exponential must be set"#
    );
}

#[test]
fn p8_compartment_selector_invalid_rejected() {
    let p = with(|p| {
        let exprs = p.spec.compartments[1]
            .selector
            .match_expressions
            .as_mut()
            .unwrap();
        exprs[0].operator = "Has".into();
    });
    assert_eq!(
        reject(&p),
        r#"compartment "production" has invalid selector: "Has" is not a valid label selector operator"#
    );
}

#[test]
fn p9_identical_selector_rejected() {
    let p = with(|p| p.spec.compartments[1].selector = p.spec.compartments[0].selector.clone());
    assert_eq!(
        reject(&p),
        r#"compartment "production" has identical selector to compartment "canary""#
    );
}

#[test]
fn p9_equivalent_but_different_selectors_accepted() {
    // Structural equality only: matchLabels vs an equivalent In expression is allowed (§12 item 23).
    let p = with(|p| {
        let labels = p.spec.compartments[0].selector.match_labels.clone();
        p.spec.compartments[1].selector.match_labels = labels;
        p.spec.compartments[1].selector.match_expressions = None;
        p.spec.compartments[0].selector.match_labels = None;
        p.spec.compartments[0].selector.match_expressions = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                key: "example.com/tier".into(),
                operator: "In".into(),
                values: Some(vec!["canary".into()]),
            },
        ]);
    });
    assert_eq!(validate_policy(&p), Ok(()));
}

#[test]
fn p_rules_run_per_compartment_in_list_order() {
    // The first compartment's selector error is reported before the second's budget error.
    let p = with(|p| {
        p.spec.compartments[0].selector.match_labels =
            Some([("bad key".to_string(), "x".to_string())].into());
        p.spec.compartments[1].budget.percent = None;
    });
    assert!(
        reject(&p).starts_with(r#"compartment "canary" has invalid selector: key: Invalid value"#)
    );
}

#[test]
fn r4_6_delete_referenced_policy_rejected() {
    let a = nodewright("metadata: {name: gpu-a}\nspec: {deploymentPolicy: rollout}");
    let b = nodewright("metadata: {name: other}\nspec: {deploymentPolicy: elsewhere}");
    let c = nodewright("metadata: {name: gpu-c}\nspec: {deploymentPolicy: rollout}");
    let err = validate_policy_delete("rollout", &[a, b, c]).expect_err("referenced");
    assert_eq!(
        err,
        ValidationError::PolicyInUse {
            policy: "rollout".into(),
            names: vec!["gpu-a".into(), "gpu-c".into()]
        }
    );
    assert_eq!(
        err.to_string(),
        r#"cannot delete DeploymentPolicy "rollout": still referenced by 2 NodeWright(s): [gpu-a gpu-c]"#
    );
}

#[test]
fn r4_6_delete_unreferenced_policy_accepted() {
    let b = nodewright("metadata: {name: other}\nspec: {deploymentPolicy: elsewhere}");
    assert_eq!(validate_policy_delete("rollout", &[b]), Ok(()));
    assert_eq!(validate_policy_delete("rollout", &[]), Ok(()));
}

#[test]
fn r4_5_defaults_fill_first_variant_only() {
    let mut p = policy(
        r#"
metadata: {name: d}
spec:
  default:
    budget: {count: 1}
    strategy:
      linear: {initialBatch: 3}
      exponential: {}
  compartments:
    - name: c
      selector: {}
      budget: {count: 1}
      strategy: {exponential: {failureThreshold: 4}}
    - name: plain
      selector: {matchLabels: {a: b}}
      budget: {count: 1}
"#,
    );
    default_policy(&mut p);
    let linear = p
        .spec
        .default
        .strategy
        .as_ref()
        .unwrap()
        .linear
        .clone()
        .unwrap();
    assert_eq!(
        (
            linear.initial_batch,
            linear.delta,
            linear.batch_threshold,
            linear.safety_limit
        ),
        (Some(3), Some(1), Some(100), Some(50))
    );
    assert_eq!(
        linear.failure_threshold, None,
        "failureThreshold is never defaulted"
    );
    let untouched = p
        .spec
        .default
        .strategy
        .as_ref()
        .unwrap()
        .exponential
        .clone()
        .unwrap();
    assert_eq!(
        untouched,
        Default::default(),
        "only the first set variant is defaulted"
    );
    let exp = p.spec.compartments[0]
        .strategy
        .as_ref()
        .unwrap()
        .exponential
        .clone()
        .unwrap();
    assert_eq!(
        (
            exp.initial_batch,
            exp.growth_factor,
            exp.batch_threshold,
            exp.safety_limit
        ),
        (Some(1), Some(2), Some(100), Some(50))
    );
    assert_eq!(exp.failure_threshold, Some(4));
    assert_eq!(
        p.spec.compartments[1].strategy, None,
        "absent strategies stay absent"
    );
}

#[test]
fn r4_5_defaults_are_idempotent() {
    let mut once = valid();
    default_policy(&mut once);
    let mut twice = once.clone();
    default_policy(&mut twice);
    assert_eq!(once, twice);
}

#[test]
fn r4_5_effective_strategy_without_webhook() {
    let p = valid();
    let fixed = effective_strategy(p.spec.default.strategy.as_ref().unwrap()).unwrap();
    assert_eq!(
        fixed,
        EffectiveStrategy {
            strategy_type: StrategyType::Fixed,
            initial_batch: 2,
            delta: 1,
            growth_factor: 2,
            batch_threshold: 100,
            failure_threshold: None,
            safety_limit: 50,
        }
    );
    let exp = effective_strategy(p.spec.compartments[1].strategy.as_ref().unwrap()).unwrap();
    assert_eq!(exp.strategy_type, StrategyType::Exponential);
    assert_eq!(exp.failure_threshold, Some(2));
    assert_eq!(effective_strategy(&Default::default()), None);
}

#[test]
fn r3_6_reset_batch_state_precedence() {
    let p = valid();
    let none = nodewright("metadata: {name: a}\nspec: {}");
    assert!(
        !reset_batch_state_on_completion(&none.spec, None),
        "code default false"
    );
    let mut with_policy = p.spec.clone();
    with_policy.reset_batch_state_on_completion = Some(true);
    assert!(reset_batch_state_on_completion(
        &none.spec,
        Some(&with_policy)
    ));
    let opt_out = nodewright(
        "metadata: {name: a}\nspec: {deploymentPolicyOptions: {resetBatchStateOnCompletion: false}}",
    );
    assert!(!reset_batch_state_on_completion(
        &opt_out.spec,
        Some(&with_policy)
    ));
}
