//! Compartments, node assignment, missing policies, status and metrics (05-rollout.md §4, §5.2,
//! §8, §10, §11, §12.5).

#[path = "rollout_support.rs"]
mod support;

use nodewright_core::rollout::{
    Compartments, DEFAULT_COMPARTMENT, build_compartments, plan_rollout, policy_missing,
};
use nodewright_crds::{InterruptionBudget, Status};
use support::*;

fn vector_a_nodes() -> Vec<nodewright_core::rollout::NodeView<'static>> {
    (0..6)
        .map(|i| {
            let n = node(&format!("node-{i}"));
            match i {
                0 | 1 => label(n, "region", "us-west"),
                2 | 3 => label(n, "env", "production"),
                _ => label(label(n, "region", "us-west"), "env", "production"),
            }
        })
        .collect()
}

fn vector_a_policy() -> nodewright_crds::DeploymentPolicy {
    policy(
        count(1),
        fixed(1),
        vec![
            compartment(
                "us-west",
                &[("region", "us-west")],
                count(2),
                Some(exponential(1, 2)),
            ),
            compartment(
                "production",
                &[("env", "production")],
                count(2),
                Some(exponential(1, 2)),
            ),
            compartment(
                "prod-us-west",
                &[("region", "us-west"), ("env", "production")],
                count(1),
                Some(fixed(1)),
            ),
        ],
    )
}

#[test]
fn rollout_4_2_vector_a_overlapping_selectors() {
    let nodes = vector_a_nodes();
    let d = plan_rollout(
        &nodewright("policy"),
        Some(&vector_a_policy()),
        &nodes,
        t0(),
        &settings(),
    );
    let expect = [
        "us-west",
        "us-west",
        "production",
        "production",
        "prod-us-west",
        "prod-us-west",
    ];
    for (i, compartment) in expect.iter().enumerate() {
        assert_eq!(d.assignment(&nodes)[&format!("node-{i}")], *compartment);
    }
    let mc = |name: &str| {
        let s = &d.compartment_statuses[name];
        (s.matched, s.ceiling)
    };
    assert_eq!(mc("us-west"), (2, 2));
    assert_eq!(mc("production"), (2, 2));
    assert_eq!(mc("prod-us-west"), (2, 1));
    assert_eq!(mc(DEFAULT_COMPARTMENT), (0, 1));
    // One node per compartment right after the first selection.
    assert_eq!(d.selected_nodes, vec!["node-0", "node-2", "node-4"]);
}

#[test]
fn rollout_4_2_vector_b_safest_strategy_wins() {
    let p = policy(
        count(1),
        fixed(1),
        vec![
            compartment(
                "us-west",
                &[("region", "us-west")],
                count(20),
                Some(exponential(1, 2)),
            ),
            compartment(
                "production",
                &[("env", "production")],
                count(10),
                Some(linear(1, 1)),
            ),
            compartment(
                "critical",
                &[("priority", "critical")],
                count(3),
                Some(fixed(1)),
            ),
        ],
    );
    let a = label(
        label(label(node("a"), "region", "us-west"), "env", "production"),
        "priority",
        "critical",
    );
    let b = label(label(node("b"), "region", "us-west"), "env", "production");
    let nodes = [a, b];
    let d = plan_rollout(&nodewright("policy"), Some(&p), &nodes, t0(), &settings());
    assert_eq!(d.assignment(&nodes)["a"], "critical");
    assert_eq!(d.assignment(&nodes)["b"], "production");
}

#[test]
fn rollout_4_2_vector_c_capacity_then_name() {
    let both = |a_budget, b_budget| {
        policy(
            count(1),
            fixed(1),
            vec![
                compartment("b", &[("x", "1")], b_budget, Some(linear(1, 1))),
                compartment("a", &[("y", "1")], a_budget, Some(linear(1, 1))),
            ],
        )
    };
    let n = label(label(node("n"), "x", "1"), "y", "1");
    let assigned = |p: nodewright_crds::DeploymentPolicy, nodes: Vec<_>| {
        plan_rollout(&nodewright("policy"), Some(&p), &nodes, t0(), &settings()).assignment(&nodes)
            ["n"]
            .clone()
    };
    assert_eq!(assigned(both(count(2), count(2)), vec![n.clone()]), "a");
    assert_eq!(assigned(both(count(2), count(1)), vec![n.clone()]), "b");
    // Percent capacities: `a` 50 % of 10 matching nodes = 5, `b` 50 % of 4 = 2 → `b`.
    let mut nodes = vec![n];
    for i in 0..9 {
        nodes.push(label(node(&format!("y{i}")), "y", "1"));
    }
    for i in 0..3 {
        nodes.push(label(node(&format!("x{i}")), "x", "1"));
    }
    assert_eq!(assigned(both(percent(50), percent(50)), nodes), "b");
}

#[test]
fn rollout_4_2_no_strategy_is_least_safe() {
    let p = policy(
        count(1),
        fixed(1),
        vec![
            compartment("bare", &[("x", "1")], count(1), None),
            compartment(
                "exp",
                &[("x", "1"), ("z", "1")],
                count(9),
                Some(exponential(1, 2)),
            ),
        ],
    );
    let n = label(label(node("n"), "x", "1"), "z", "1");
    let nodes = [n];
    let d = plan_rollout(&nodewright("policy"), Some(&p), &nodes, t0(), &settings());
    assert_eq!(d.assignment(&nodes)["n"], "exp");
}

#[test]
fn rollout_4_1_policy_compartments_plus_default_in_order() {
    let c = build_compartments(&nodewright("policy"), Some(&vector_a_policy()), 6);
    let names: Vec<_> = c.specs().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["us-west", "production", "prod-us-west", "__default__"]
    );
}

#[test]
fn rollout_10_legacy_single_default_compartment() {
    let mut nw = nodewright("");
    nw.spec.interruption_budget = Some(InterruptionBudget {
        percent: None,
        count: Some(3),
    });
    let nodes = nodes(6);
    let d = plan_rollout(&nw, None, &nodes, t0(), &settings());
    let s = &d.compartment_statuses[DEFAULT_COMPARTMENT];
    assert_eq!((s.matched, s.ceiling), (6, 3));
    assert_eq!(d.selected_nodes.len(), 3);
    assert_eq!(d.compartment_statuses.len(), 1);
    let labels = &d.metrics[0].labels;
    assert!(labels.contains(&("policy_name".into(), "legacy".into())));
    assert!(labels.contains(&("strategy".into(), "fixed".into())));
    assert!(labels.contains(&("compartment_name".into(), "__default__".into())));
}

#[test]
fn rollout_5_2_missing_policy_blocks_and_selects_nothing() {
    let nodes = nodes(3);
    let d = plan_rollout(&nodewright("gone"), None, &nodes, t0(), &settings());
    assert!(!d.has_compartments());
    assert!(d.selected_nodes.is_empty());
    assert!(d.compartment_statuses.is_empty());
    let missing = d.policy_missing.expect("reported");
    assert_eq!(missing.forced_status, Status::Blocked);
    assert_eq!(missing.waiting_node_status, Status::Unknown);
    assert_eq!(missing.condition.type_, "DeploymentPolicyNotFound");
    assert_eq!(missing.condition.reason, "DeploymentPolicyNotFound");
    assert_eq!(
        missing.condition.message,
        "DeploymentPolicy \"gone\" not found"
    );
    assert!(missing.condition.status);
    assert!(
        d.conditions
            .iter()
            .any(|c| c.type_ == "DeploymentPolicyNotFound" && c.status)
    );
    assert_eq!(policy_missing("gone").condition, missing.condition);
    // A policy with another name does not count.
    let other = vector_a_policy();
    let c = build_compartments(&nodewright("gone"), Some(&other), 3);
    assert_eq!(c, Compartments::PolicyMissing("gone".into()));
}

#[test]
fn rollout_5_2_policy_present_removes_not_found_condition() {
    let d = plan_rollout(
        &nodewright("policy"),
        Some(&vector_a_policy()),
        &nodes(2),
        t0(),
        &settings(),
    );
    assert!(d.policy_missing.is_none());
    assert_eq!(d.removed_conditions, vec!["DeploymentPolicyNotFound"]);
}

#[test]
fn rollout_5_4_compartment_without_strategy_uses_ceiling() {
    let p = policy(
        count(1),
        fixed(1),
        vec![compartment("bare", &[("x", "1")], percent(30), None)],
    );
    let nodes: Vec<_> = (0..10)
        .map(|i| label(node(&format!("n{i}")), "x", "1"))
        .collect();
    let d = plan_rollout(&nodewright("policy"), Some(&p), &nodes, t0(), &settings());
    assert_eq!(d.selected_nodes.len(), 3);
    assert_eq!(d.compartment_statuses["bare"].ceiling, 3);
}

#[test]
fn rollout_8_compartment_status_fields_and_removed_entries() {
    let mut nodes = nodes(4);
    nodes[0].complete = true;
    nodes[0].status = Status::Complete;
    nodes[1].status = Status::InProgress;
    let mut nw = nodewright("policy");
    let mut status = nodewright_crds::NodeWrightStatus::default();
    status
        .compartment_statuses
        .insert("stale".into(), Default::default());
    nw.status = Some(status);
    let p = policy(percent(50), fixed(1), vec![]);
    let d = plan_rollout(&nw, Some(&p), &nodes, t0(), &settings());
    assert!(!d.compartment_statuses.contains_key("stale"));
    let s = &d.compartment_statuses[DEFAULT_COMPARTMENT];
    assert_eq!(
        (
            s.matched,
            s.ceiling,
            s.in_progress,
            s.completed,
            s.progress_percent
        ),
        (4, 2, 1, 1, 25)
    );
    assert!(s.batch_state.is_some());
}

#[test]
fn rollout_11_eight_gauges_per_compartment_with_labels() {
    let d = plan_rollout(
        &nodewright("policy"),
        Some(&vector_a_policy()),
        &vector_a_nodes(),
        t0(),
        &settings(),
    );
    assert_eq!(d.metrics.len(), 4 * 8);
    let sample = d
        .metrics
        .iter()
        .find(|m| {
            m.name == "rollout_ceiling"
                && m.labels
                    .contains(&("compartment_name".into(), "prod-us-west".into()))
        })
        .expect("present");
    assert_eq!(sample.value, 1.0);
    let keys: Vec<_> = sample.labels.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        vec![
            "nodewright_name",
            "policy_name",
            "compartment_name",
            "strategy"
        ]
    );
    assert!(
        sample
            .labels
            .contains(&("policy_name".into(), "policy".into()))
    );
    let names: std::collections::BTreeSet<_> = d.metrics.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names.len(), 8);
    assert!(names.iter().all(|n| !n.starts_with("nodewright_")));
    let unknown = plan_rollout(
        &nodewright("policy"),
        Some(&policy(
            count(1),
            fixed(1),
            vec![compartment("bare", &[("x", "1")], count(1), None)],
        )),
        &[],
        t0(),
        &settings(),
    );
    assert!(
        unknown
            .metrics
            .iter()
            .any(|m| m.labels.contains(&("strategy".into(), "unknown".into())))
    );
}

#[test]
fn rollout_12_5_multi_compartment() {
    let nodes: Vec<_> = (0..15)
        .map(|i| {
            let priority = match i {
                0..=4 => "critical",
                5..=10 => "standard",
                _ => "test",
            };
            label(node(&format!("node-{i:02}")), "priority", priority)
        })
        .collect();
    let p = policy(
        count(1),
        fixed(1),
        vec![
            compartment(
                "critical",
                &[("priority", "critical")],
                count(2),
                Some(thresholds(exponential(1, 2), Some(1), None, None)),
            ),
            compartment(
                "standard",
                &[("priority", "standard")],
                percent(33),
                Some(thresholds(exponential(1, 2), Some(2), None, None)),
            ),
            compartment(
                "test",
                &[("priority", "test")],
                percent(50),
                Some(thresholds(exponential(2, 2), Some(3), Some(90), Some(60))),
            ),
        ],
    );
    let mut sim = Sim::new(nodewright("policy"), Some(p), nodes);
    let first = sim.pass();
    let mc = |name: &str| {
        let s = &first.compartment_statuses[name];
        (s.matched, s.ceiling)
    };
    assert_eq!(mc("critical"), (5, 2));
    assert_eq!(mc("standard"), (6, 1));
    assert_eq!(mc("test"), (4, 2));
    sim.finish(&|_| false);
    sim.run(50);
    assert_eq!(sim.batches["critical"][0], 1);
    assert_eq!(sim.batches["standard"][0], 1);
    assert_eq!(sim.batches["test"][0], 2);
    // Ceilings do not cap exponential growth: test's second batch is 4 − 2 = 2 (all remaining),
    // critical's second batch is 2.
    assert_eq!(sim.batches["critical"], vec![1, 2, 2]);
    assert_eq!(sim.batches["test"], vec![2, 2]);
    for (name, completed) in [("critical", 5), ("standard", 6), ("test", 4)] {
        let s = &sim.status().compartment_statuses[name];
        assert_eq!(
            (s.completed, s.progress_percent),
            (completed, 100),
            "{name}"
        );
        assert_eq!(s.batch_state.as_ref().unwrap().consecutive_failures, 0);
    }
}

#[test]
fn rollout_11_metrics_from_persisted_status() {
    let p = vector_a_policy();
    let mut nw = nodewright("policy");
    let d = plan_rollout(&nw, Some(&p), &vector_a_nodes(), t0(), &settings());
    nw.status = Some(nodewright_crds::NodeWrightStatus {
        compartment_statuses: d.compartment_statuses.clone(),
        ..Default::default()
    });
    assert_eq!(
        nodewright_core::rollout::rollout_metrics(&nw, Some(&p)),
        d.metrics
    );
    // Without status entries every series reads 0; a missing policy has none.
    let fresh = nodewright_core::rollout::rollout_metrics(&nodewright("policy"), Some(&p));
    assert_eq!(fresh.len(), 32);
    assert!(fresh.iter().all(|m| m.value == 0.0));
    assert!(nodewright_core::rollout::rollout_metrics(&nodewright("gone"), None).is_empty());
}
