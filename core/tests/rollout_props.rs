//! Property tests of rollout pacing (05-rollout.md §4–§7; decisions D3, D9).
//!
//! What the spec bounds: a new batch never exceeds the batch size of its strategy (D3 strict
//! budget); the budget's ceiling bounds batches only of compartments without a strategy and of
//! the legacy compartment (whose fixed `initialBatch` is derived from the budget). A strategy's
//! batches are *not* capped by the ceiling (§4.3).

#[path = "rollout_support.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};

use nodewright_core::rollout::{
    BatchSelection, Member, NodeView, Strategy as RolloutStrategy, ceiling, legacy_budget,
    plan_rollout, select_batch,
};
use nodewright_crds::{
    BatchProcessingState, DeploymentBudget, DeploymentStrategy, InterruptionBudget, Status,
};
use proptest::prelude::*;
use support::*;

fn arb_budget() -> impl Strategy<Value = DeploymentBudget> {
    prop_oneof![(1..6i32).prop_map(count), (1..=100i32).prop_map(percent)]
}

fn arb_strategy() -> impl Strategy<Value = DeploymentStrategy> {
    let kind = prop_oneof![
        (1..6i32).prop_map(fixed),
        (1..6i32, 1..4i32).prop_map(|(i, d)| linear(i, d)),
        (1..6i32, 2..4i32).prop_map(|(i, g)| exponential(i, g)),
    ];
    let failure = proptest::option::of(1..3i32);
    let safety = proptest::option::of(1..=100i32);
    (kind, failure, safety).prop_map(|(s, f, l)| thresholds(s, f, None, l))
}

/// A named compartment per zone in `zones`, optionally without a strategy.
fn arb_policy() -> impl Strategy<Value = nodewright_crds::DeploymentPolicy> {
    let named = (
        arb_budget(),
        proptest::option::weighted(0.8, arb_strategy()),
    );
    (
        arb_budget(),
        arb_strategy(),
        proptest::collection::vec(named, 0..3),
    )
        .prop_map(|(budget, strategy, named)| {
            let compartments = named
                .into_iter()
                .enumerate()
                .map(|(i, (b, s))| {
                    let zone = format!("z{i}");
                    compartment(&zone, &[("zone", &zone)], b, s)
                })
                .collect();
            policy(budget, strategy, compartments)
        })
}

fn zoned_nodes(zones: &[u8]) -> Vec<NodeView<'static>> {
    zones
        .iter()
        .enumerate()
        .map(|(i, z)| label(node(&format!("node-{i:03}")), "zone", &format!("z{z}")))
        .collect()
}

/// Batch-size bound of each compartment at the moment of a pass, from the decision's specs
/// and the batch states the selection used.
fn bounds(
    sim: &Sim,
    decision: &nodewright_core::rollout::RolloutDecision,
) -> BTreeMap<String, i64> {
    let assignment = decision.assignment(&sim.nodes);
    let mut members: BTreeMap<&str, i64> = BTreeMap::new();
    for c in assignment.values() {
        *members.entry(c.as_str()).or_default() += 1;
    }
    decision
        .compartments
        .iter()
        .map(|spec| {
            let total = members.get(spec.name.as_str()).copied().unwrap_or_default();
            let state = decision.compartment_statuses[&spec.name]
                .batch_state
                .clone()
                .unwrap_or_default();
            let bound = match &spec.strategy {
                Some(s) => s.batch_size(total, &state),
                None => ceiling(&spec.budget, total),
            };
            (spec.name.clone(), bound)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every node is started exactly once, the batches of a compartment add up to its
    /// membership, and no new batch exceeds its strategy's batch size (ceiling without one).
    #[test]
    fn prop_batches_cover_every_node_exactly_once(
        p in arb_policy(),
        zones in proptest::collection::vec(0u8..4, 0..40),
    ) {
        let nodes = zoned_nodes(&zones);
        let n = nodes.len();
        let mut sim = Sim::new(nodewright("policy"), Some(p), nodes);
        let mut started: BTreeSet<String> = BTreeSet::new();
        for _ in 0..(2 * n + 4) {
            let in_flight: BTreeSet<String> = sim
                .nodes
                .iter()
                .filter(|x| x.status == Status::InProgress)
                .map(|x| x.name.to_string())
                .collect();
            let before = sim.status().node_priority.clone();
            let d = sim.pass();
            let assignment = d.assignment(&sim.nodes);
            let bound = bounds(&sim, &d);
            let mut new_per_compartment: BTreeMap<&str, i64> = BTreeMap::new();
            for name in &d.selected_nodes {
                if !in_flight.contains(name) && !before.contains_key(name) {
                    prop_assert!(started.insert(name.clone()), "{name} started twice");
                    *new_per_compartment.entry(assignment[name].as_str()).or_default() += 1;
                }
            }
            for (c, k) in new_per_compartment {
                prop_assert!(k <= bound[c], "compartment {c}: batch {k} > bound {}", bound[c]);
            }
            if sim.all_complete() {
                break;
            }
            sim.finish(&|_| false);
        }
        prop_assert!(sim.all_complete());
        prop_assert_eq!(started.len(), n);
        let st = sim.status();
        for (name, batches) in &sim.batches {
            let sum: usize = batches.iter().sum();
            prop_assert_eq!(sum as i32, st.compartment_statuses[name].matched);
        }
    }

    /// With nodes failing terminally, batches stay within their bound and a stopped
    /// compartment admits nothing new, pass after pass.
    #[test]
    fn prop_failures_never_overrun_or_restart_a_stopped_compartment(
        p in arb_policy(),
        zones in proptest::collection::vec(0u8..4, 0..30),
        failing in proptest::collection::btree_set(0usize..30, 0..6),
    ) {
        let nodes = zoned_nodes(&zones);
        let fail_names: BTreeSet<String> = failing.iter().map(|i| format!("node-{i:03}")).collect();
        let mut sim = Sim::new(nodewright("policy"), Some(p), nodes);
        for _ in 0..40 {
            let before = sim.status().node_priority.clone();
            let in_flight: BTreeSet<String> = sim
                .nodes
                .iter()
                .filter(|x| x.status == Status::InProgress)
                .map(|x| x.name.to_string())
                .collect();
            let d = sim.pass();
            let assignment = d.assignment(&sim.nodes);
            let bound = bounds(&sim, &d);
            let mut new_per_compartment: BTreeMap<&str, i64> = BTreeMap::new();
            for name in &d.selected_nodes {
                if !in_flight.contains(name) && !before.contains_key(name) {
                    *new_per_compartment.entry(assignment[name].as_str()).or_default() += 1;
                }
            }
            for (c, k) in new_per_compartment {
                let stopped = d.compartment_statuses[c]
                    .batch_state
                    .as_ref()
                    .is_some_and(|b| b.should_stop);
                let has_strategy = d.compartments.iter().any(|s| s.name == c && s.strategy.is_some());
                prop_assert!(!(stopped && has_strategy), "stopped compartment {c} admitted {k}");
                prop_assert!(k <= bound[c]);
            }
            sim.finish(&|name| fail_names.contains(name));
        }
    }

    /// Legacy mode: every batch is within the `interruptionBudget` ceiling (count ≥ 1).
    #[test]
    fn prop_legacy_batches_within_budget(
        budget_count in proptest::option::of(1..8i32),
        budget_percent in 1..=100i32,
        n in 0usize..40,
    ) {
        let mut nw = nodewright("");
        let ib = match budget_count {
            Some(c) => InterruptionBudget { percent: None, count: Some(c) },
            None => InterruptionBudget { percent: Some(budget_percent), count: None },
        };
        nw.spec.interruption_budget = Some(ib.clone());
        let cap = ceiling(&legacy_budget(Some(&ib)), n as i64) as usize;
        let mut sim = Sim::new(nw, None, nodes(n));
        sim.run(2 * n + 4);
        prop_assert!(sim.all_complete());
        let batches = sim.batches.get("__default__").cloned().unwrap_or_default();
        prop_assert_eq!(batches.iter().sum::<usize>(), n);
        prop_assert!(batches.iter().all(|&b| b <= cap.max(1)), "{batches:?} cap {cap}");
    }

    /// A stopped compartment never starts a node and never continues one beyond its current
    /// stage: nothing is selected; only in-progress nodes may finish (D9).
    #[test]
    fn prop_stopped_compartment_never_starts_a_node(
        statuses in proptest::collection::vec(0usize..8, 0..30),
        sticky in proptest::collection::vec(any::<bool>(), 30),
        strategy in arb_strategy(),
    ) {
        let nodes: Vec<NodeView<'static>> = statuses
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut v = node(&format!("n{i:02}"));
                v.status = Status::ALL[*s];
                v.complete = v.status == Status::Complete;
                v
            })
            .collect();
        let mut nw = nodewright("policy");
        let mut status = nodewright_crds::NodeWrightStatus::default();
        status.compartment_statuses.insert("__default__".into(), nodewright_crds::CompartmentStatus {
            matched: nodes.len() as i32,
            batch_state: Some(BatchProcessingState { current_batch: 2, should_stop: true, ..Default::default() }),
            ..Default::default()
        });
        for (v, s) in nodes.iter().zip(&sticky) {
            if *s {
                status.node_priority.insert(v.name.to_string(), at(0));
            }
        }
        nw.status = Some(status);
        let p = policy(count(3), strategy, vec![]);
        let mut s = settings();
        s.evaluate = false;
        let d = plan_rollout(&nw, Some(&p), &nodes, t0(), &s);
        prop_assert!(d.selected_nodes.is_empty());
        for name in &d.finishing_nodes {
            let v = nodes.iter().find(|v| &v.name == name).unwrap();
            prop_assert_eq!(v.status, Status::InProgress);
        }
        for name in d.node_priority.keys() {
            prop_assert!(nw.status.as_ref().unwrap().node_priority.contains_key(name));
        }
    }

    /// Selection bound for any member mix: new nodes only without a current batch, and then at
    /// most the batch size minus the slots held by ineligible admitted nodes; otherwise at most
    /// max(batch size, #in progress).
    #[test]
    fn prop_selection_respects_batch_size(
        mix in proptest::collection::vec((0usize..8, any::<bool>(), any::<bool>()), 0..30),
        size in 0i64..8,
    ) {
        let views: Vec<NodeView<'static>> = mix
            .iter()
            .enumerate()
            .map(|(i, (s, _, _))| {
                let mut v = node(&format!("n{i:02}"));
                v.status = Status::ALL[*s];
                v.complete = v.status == Status::Complete;
                v
            })
            .collect();
        let times: Vec<_> = (0..views.len()).map(|i| at(i as i64)).collect();
        let members: Vec<Member<'_>> = views
            .iter()
            .zip(&mix)
            .zip(&times)
            .map(|((v, (_, eligible, sticky)), t)| Member {
                node: v,
                eligible: *eligible,
                priority: sticky.then_some(t),
            })
            .collect();
        let BatchSelection { selected, finishing, new_batch } = select_batch(&members, size, false);
        prop_assert!(finishing.is_empty());
        let in_progress = members.iter().filter(|m| m.eligible && m.node.status == Status::InProgress).count() as i64;
        prop_assert!(selected.len() as i64 <= size.max(in_progress));
        for name in &selected {
            let m = members.iter().find(|m| &m.node.name == name).unwrap();
            prop_assert!(m.eligible && !m.node.complete);
        }
        if new_batch {
            let held = members.iter().filter(|m| !m.eligible && !m.node.complete
                && (m.priority.is_some() || m.node.status == Status::InProgress)).count() as i64;
            prop_assert!(selected.len() as i64 + held <= size.max(held));
            prop_assert!(selected.iter().all(|n| members.iter().any(|m| &m.node.name == n && m.priority.is_none())));
        }
    }

    /// Same inputs, same decision.
    #[test]
    fn prop_plan_rollout_is_deterministic(
        p in arb_policy(),
        zones in proptest::collection::vec(0u8..4, 0..20),
    ) {
        let nodes = zoned_nodes(&zones);
        let a = plan_rollout(&nodewright("policy"), Some(&p), &nodes, t0(), &settings());
        let b = plan_rollout(&nodewright("policy"), Some(&p), &nodes, t0(), &settings());
        prop_assert_eq!(&a, &b);
        prop_assert_eq!(a.assignment(&nodes).len(), nodes.len());
    }

    /// Batch sizes of every strategy are at least 1 (total > 0) and never above the remaining
    /// nodes unless nothing remains.
    #[test]
    fn prop_batch_size_within_remaining(
        strategy in arb_strategy(),
        total in 0i64..50,
        completed in 0i32..50,
        failed in 0i32..10,
        last in 0i32..40,
        lf in any::<bool>(),
    ) {
        let s = RolloutStrategy::resolve(&strategy).unwrap();
        let state = BatchProcessingState {
            current_batch: 1,
            completed_nodes: completed,
            failed_nodes: failed,
            last_batch_size: last,
            last_batch_failed: lf,
            ..Default::default()
        };
        let size = s.batch_size(total, &state);
        let remaining = total - i64::from(completed) - i64::from(failed);
        if total > 0 || s.growth == nodewright_core::rollout::Growth::Fixed {
            prop_assert!(size >= 1);
            prop_assert!(size <= remaining.max(1));
        } else {
            prop_assert_eq!(size, 0);
        }
    }
}

#[test]
fn rollout_4_3_budget_does_not_cap_strategy_batches() {
    // Ceiling 1, exponential ×2 over 10 nodes: batches 1, 2, 4, 3 (above the ceiling).
    let mut sim = Sim::new(
        nodewright("policy"),
        Some(policy(count(1), exponential(1, 2), vec![])),
        nodes(10),
    );
    sim.run(30);
    assert_eq!(sim.batches["__default__"], vec![1, 2, 4, 3]);
    assert_eq!(sim.status().compartment_statuses["__default__"].ceiling, 1);
}

#[test]
fn rollout_scale_10k_nodes_in_one_pass() {
    let zones: Vec<u8> = (0..10_000).map(|i| (i % 4) as u8).collect();
    let p = policy(
        percent(10),
        linear(1, 1),
        vec![
            compartment("z0", &[("zone", "z0")], count(5), Some(fixed(5))),
            compartment("z1", &[("zone", "z1")], percent(5), Some(exponential(2, 2))),
            compartment("z2", &[("zone", "z2")], percent(50), None),
        ],
    );
    let nodes = zoned_nodes(&zones);
    let started = std::time::Instant::now();
    let d = plan_rollout(&nodewright("policy"), Some(&p), &nodes, t0(), &settings());
    let elapsed = started.elapsed();
    assert_eq!(d.assignment(&nodes).len(), 10_000);
    // z0: 5, z1: 2, z2: 50 % of 2500, default (z3): 1.
    assert_eq!(d.selected_nodes.len(), 5 + 2 + 1250 + 1);
    eprintln!("plan_rollout over 10k nodes: {elapsed:?}");
}
