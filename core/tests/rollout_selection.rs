//! Batch selection, eligibility, nodePriority and node order (05-rollout.md §6; 02-lifecycle.md
//! §6.4–6.6; decisions D3, D5, D9).

#[path = "rollout_support.rs"]
mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use nodewright_core::rollout::{
    Ineligible, NodePriority, NodeView, RolloutDecision, plan_rollout, taint_not_tolerable,
    tolerates,
};
use nodewright_crds::{BatchProcessingState, CompartmentStatus, NodeWright, Status};
use support::*;

fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        value: value.map(Into::into),
        effect: effect.into(),
        time_added: None,
    }
}

fn with_status(mut n: NodeView<'static>, status: Status) -> NodeView<'static> {
    n.status = status;
    n.status_before = status;
    n.complete = status == Status::Complete;
    n
}

fn legacy_count(count: i32) -> NodeWright {
    let mut nw = nodewright("");
    nw.spec.interruption_budget = Some(nodewright_crds::InterruptionBudget {
        percent: None,
        count: Some(count),
    });
    nw
}

fn with_priority(mut nw: NodeWright, entries: &[(&str, i64)], offset: i32) -> NodeWright {
    let mut status = nw.status.take().unwrap_or_default();
    status.node_priority = entries
        .iter()
        .map(|(n, s)| (n.to_string(), at(*s)))
        .collect();
    status.node_order_offset = offset;
    nw.status = Some(status);
    nw
}

fn with_state(
    mut nw: NodeWright,
    name: &str,
    matched: i32,
    state: BatchProcessingState,
) -> NodeWright {
    let mut status = nw.status.take().unwrap_or_default();
    status.compartment_statuses.insert(
        name.to_string(),
        CompartmentStatus {
            matched,
            batch_state: Some(state),
            ..CompartmentStatus::default()
        },
    );
    nw.status = Some(status);
    nw
}

fn plan(
    nw: &NodeWright,
    p: Option<&nodewright_crds::DeploymentPolicy>,
    nodes: &[NodeView<'static>],
) -> RolloutDecision {
    plan_rollout(nw, p, nodes, t0(), &settings())
}

#[test]
fn rollout_6_1_new_batch_takes_waiting_unknown_blocked_erroring_in_order() {
    let nodes = vec![
        with_status(node("a-erroring"), Status::Erroring),
        with_status(node("b-blocked"), Status::Blocked),
        with_status(node("c-unknown"), Status::Unknown),
        with_status(node("d-waiting"), Status::Waiting),
        with_status(node("e-paused"), Status::Paused),
        with_status(node("f-disabled"), Status::Disabled),
        with_status(node("g-complete"), Status::Complete),
    ];
    let picks = |n| plan(&legacy_count(n), None, &nodes).selected_nodes;
    assert_eq!(picks(1), vec!["d-waiting"]);
    assert_eq!(picks(2), vec!["c-unknown", "d-waiting"]);
    assert_eq!(picks(3), vec!["b-blocked", "c-unknown", "d-waiting"]);
    assert_eq!(
        picks(7),
        vec!["a-erroring", "b-blocked", "c-unknown", "d-waiting"]
    );
}

#[test]
fn rollout_6_1_in_progress_nodes_are_the_batch() {
    let nodes = vec![
        with_status(node("a"), Status::Waiting),
        with_status(node("b"), Status::InProgress),
        with_status(node("c"), Status::Waiting),
    ];
    let d = plan(&legacy_count(3), None, &nodes);
    assert_eq!(d.selected_nodes, vec!["b"]);
}

#[test]
fn rollout_6_1_sticky_batch_keeps_node_between_packages() {
    // `a` finished one package and waits for the next: still its batch, no new node.
    let nodes = vec![with_status(node("a"), Status::Waiting), node("b")];
    let nw = with_priority(legacy_count(1), &[("a", 0)], 0);
    let d = plan(&nw, None, &nodes);
    assert_eq!(d.selected_nodes, vec!["a"]);
}

#[test]
fn rollout_7_4_failed_node_holds_its_batch() {
    let nodes = vec![
        with_status(node("a"), Status::Erroring),
        node("b"),
        node("c"),
    ];
    let nw = with_priority(legacy_count(1), &[("a", 0)], 0);
    let d = plan(&nw, None, &nodes);
    assert_eq!(d.selected_nodes, vec!["a"]);
    assert!(!d.node_priority.contains_key("b"));
}

#[test]
fn rollout_6_2_ignored_and_tainted_nodes_are_blocked_not_selected() {
    let ignored = label(node("a-ignored"), "nodewright.nvidia.com/ignore", "true");
    let mut tainted = node("b-tainted");
    tainted.taints = vec![taint("gpu", Some("broken"), "NoSchedule")].into();
    let mut cordoned = node("c-cordoned");
    cordoned.taints = vec![taint(
        "node.kubernetes.io/unschedulable",
        None,
        "NoSchedule",
    )]
    .into();
    let nodes = vec![ignored, tainted, cordoned, node("d")];
    let d = plan(&legacy_count(2), None, &nodes);
    assert_eq!(d.selected_nodes, vec!["c-cordoned", "d"]);
    assert_eq!(d.blocked_nodes, vec!["a-ignored", "b-tainted"]);
    assert_eq!(d.ineligible["a-ignored"], Ineligible::Ignored);
    assert_eq!(d.ineligible["b-tainted"], Ineligible::TaintNotTolerated);
    let cond = |t: &str| d.conditions.iter().find(|c| c.type_ == t).unwrap().clone();
    let taints = cond("TaintNotTolerable");
    assert!(taints.status);
    assert_eq!(
        taints.message,
        "Node [b-tainted] has taints that are not tolerable. Skipping."
    );
    assert_eq!(
        cond("NodesIgnored").message,
        "Node [a-ignored] has ignore label set. Skipping."
    );
}

#[test]
fn rollout_6_2_condition_messages_when_clear_and_when_many() {
    let d = plan(&legacy_count(2), None, &nodes(2));
    let msg = |t: &str| {
        let c = d.conditions.iter().find(|c| c.type_ == t).unwrap();
        (c.status, c.message.clone())
    };
    assert_eq!(
        msg("TaintNotTolerable"),
        (false, "All nodes have tolerable taints.".into())
    );
    assert_eq!(
        msg("NodesIgnored"),
        (false, "No nodes have ignore label set.".into())
    );
    let names: Vec<String> = (0..11).map(|i| format!("n{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(
        taint_not_tolerable(&refs).message,
        "11 nodes have taints that are not tolerable. Skipping."
    );
    assert_eq!(
        taint_not_tolerable(&["b", "a"]).message,
        "Node [a, b] has taints that are not tolerable. Skipping."
    );
}

#[test]
fn rollout_6_2_additional_tolerations_make_nodes_eligible() {
    let mut tainted = node("a");
    tainted.taints = vec![taint("gpu", Some("x"), "NoExecute")].into();
    let mut nw = legacy_count(1);
    nw.spec.additional_tolerations = vec![Toleration {
        key: Some("gpu".into()),
        operator: Some("Exists".into()),
        ..Toleration::default()
    }];
    assert_eq!(plan(&nw, None, &[tainted]).selected_nodes, vec!["a"]);
}

#[test]
fn d05_runtime_required_taint_tolerated_for_every_nodewright() {
    let rr = taint(
        "nodewright.nvidia.com",
        Some("runtime-required"),
        "NoSchedule",
    );
    let mut n = node("a");
    n.taints = vec![rr.clone()].into();
    let nw = legacy_count(1);
    assert!(!nw.spec.runtime_required);
    let mut s = settings();
    s.runtime_required_taints = vec![rr];
    let d = plan_rollout(&nw, None, &[n.clone()], t0(), &s);
    assert_eq!(d.selected_nodes, vec!["a"]);
    // Without it configured the taint is not tolerated.
    assert_eq!(plan(&nw, None, &[n]).blocked_nodes, vec!["a"]);
}

#[test]
fn rollout_6_2_toleration_semantics() {
    let t = taint("k", Some("v"), "NoSchedule");
    let tol = |key: Option<&str>, op: Option<&str>, value: Option<&str>, effect: Option<&str>| {
        Toleration {
            key: key.map(Into::into),
            operator: op.map(Into::into),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            ..Toleration::default()
        }
    };
    assert!(tolerates(
        &tol(Some("k"), Some("Equal"), Some("v"), None),
        &t
    ));
    assert!(tolerates(
        &tol(Some("k"), None, Some("v"), Some("NoSchedule")),
        &t
    ));
    assert!(!tolerates(
        &tol(Some("k"), Some("Equal"), Some("w"), None),
        &t
    ));
    assert!(!tolerates(
        &tol(Some("k"), Some("Exists"), None, Some("NoExecute")),
        &t
    ));
    assert!(tolerates(&tol(None, Some("Exists"), None, None), &t));
    assert!(!tolerates(&tol(Some("j"), Some("Exists"), None, None), &t));
    assert!(!tolerates(&tol(Some("k"), Some("Bogus"), None, None), &t));
}

#[test]
fn rollout_6_5_eligibility_applied_before_counting() {
    // 02-lifecycle.md §6.5 step 5 [Fix]: ineligible nodes do not waste batch slots.
    let ignored = label(node("a"), "nodewright.nvidia.com/ignore", "true");
    let nodes = vec![ignored, node("b"), node("c")];
    let d = plan(&legacy_count(1), None, &nodes);
    assert_eq!(d.selected_nodes, vec!["b"]);
}

#[test]
fn d03_strict_budget_ineligible_sticky_node_keeps_its_slot() {
    // `a` was admitted, then got an untolerated taint: it still holds one of the 2 slots.
    let mut a = node("a");
    a.taints = vec![taint("gpu", None, "NoSchedule")].into();
    let nodes = vec![a, node("b"), node("c"), node("d")];
    let nw = with_priority(legacy_count(2), &[("a", 0)], 0);
    let d = plan(&nw, None, &nodes);
    assert_eq!(d.selected_nodes, vec!["b"]);
    // When `a` becomes eligible again the admitted set is {a, b}: never more than 2.
    let mut nodes = nodes;
    nodes[0].taints = Vec::new().into();
    let nw = with_priority(legacy_count(2), &[("a", 0), ("b", 1)], 0);
    let d = plan(&nw, None, &nodes);
    assert_eq!(d.selected_nodes, vec!["a", "b"]);
}

#[test]
fn d03_strict_budget_sticky_nodes_capped_at_batch_size() {
    // Three admitted nodes but a batch size of 2 (e.g. shrunk after a failure): the two
    // earliest continue, the third waits; nothing new is admitted.
    let nodes = vec![node("a"), node("b"), node("c"), node("d")];
    let nw = with_priority(legacy_count(2), &[("a", 0), ("b", 1), ("c", 2)], 0);
    let d = plan(&nw, None, &nodes);
    assert_eq!(d.selected_nodes, vec!["a", "b"]);
    // With one in progress, room for one sticky.
    let mut nodes = nodes;
    nodes[2].status = Status::InProgress;
    let d = plan(&nw, None, &nodes);
    assert_eq!(d.selected_nodes, vec!["a", "c"]);
}

/// Explore seed 5760: the status write that recorded `d` in `nodePriority` was dropped (the
/// NodeWright changed), but the node patch that cordoned `d` landed. A node that holds the
/// cordon or an unfinished executor is out whatever `nodePriority` says: it is in the current
/// batch (no new batch starts beside it) and the stickies only get the rest of the budget.
#[test]
fn d03_strict_budget_a_node_out_without_a_priority_entry_keeps_its_slot() {
    let mut nodes = vec![node("a"), node("b"), node("c"), node("d")];
    nodes[3].out = true;
    let d = plan(&legacy_count(3), None, &nodes);
    assert_eq!(
        d.selected_nodes,
        vec!["d"],
        "no new batch beside a running node"
    );
    assert!(d.node_priority.contains_key("d"), "its entry is restored");
    let sticky = with_priority(legacy_count(3), &[("a", 0), ("b", 1), ("c", 2)], 0);
    let d = plan(&sticky, None, &nodes);
    assert_eq!(d.selected_nodes, vec!["a", "b", "d"]);
    nodes[3].complete = true;
    let d = plan(&sticky, None, &nodes);
    assert_eq!(
        d.selected_nodes,
        vec!["a", "b", "c"],
        "a complete node releases its cordon and holds no slot"
    );
}

#[test]
fn d09_stopped_compartment_in_flight_nodes_only_finish_their_stage() {
    let stopped = BatchProcessingState {
        current_batch: 3,
        should_stop: true,
        ..Default::default()
    };
    let nodes = vec![
        with_status(node("a"), Status::InProgress),
        with_status(node("b"), Status::Erroring),
        node("c"),
    ];
    let nw = with_priority(
        with_state(nodewright("policy"), "__default__", 3, stopped),
        &[("a", 0), ("b", 0)],
        0,
    );
    let p = policy(count(3), fixed(3), vec![]);
    let d = plan(&nw, Some(&p), &nodes);
    assert!(d.selected_nodes.is_empty());
    assert_eq!(d.finishing_nodes, vec!["a"]);
    assert!(!d.node_priority.contains_key("c"));
}

#[test]
fn rollout_7_4_stop_applies_to_one_compartment_only() {
    let stopped = BatchProcessingState {
        current_batch: 2,
        should_stop: true,
        ..Default::default()
    };
    let p = policy(
        count(1),
        fixed(1),
        vec![compartment(
            "gpu",
            &[("gpu", "1")],
            count(1),
            Some(fixed(1)),
        )],
    );
    let nodes = vec![label(node("a"), "gpu", "1"), node("b")];
    let nw = with_state(nodewright("policy"), "gpu", 1, stopped);
    let d = plan(&nw, Some(&p), &nodes);
    assert_eq!(d.selected_nodes, vec!["b"]);
    let gauge = d
        .metrics
        .iter()
        .find(|m| {
            m.name == "rollout_should_stop"
                && m.labels
                    .contains(&("compartment_name".into(), "gpu".into()))
        })
        .unwrap();
    assert_eq!(gauge.value, 1.0);
}

#[test]
fn rollout_6_3_node_priority_added_kept_and_pruned() {
    let nodes = vec![
        with_status(node("a"), Status::Complete),
        node("b"),
        node("c"),
    ];
    // `a` completed and `gone` left the NodeWright: both pruned, offset +2; `b` kept.
    let nw = with_priority(legacy_count(2), &[("a", 0), ("gone", 0), ("b", 5)], 3);
    let now = jiff::Timestamp::from_second(t0().as_second() + 100).unwrap();
    let later = jiff::Timestamp::from_millisecond(now.as_millisecond() + 700).unwrap();
    let d = plan_rollout(&nw, None, &nodes, later, &settings());
    assert_eq!(d.node_order_offset, 5);
    assert_eq!(d.selected_nodes, vec!["b"]);
    assert_eq!(d.node_priority["b"], at(5));
    // A sticky batch never admits new nodes, even below the batch size.
    assert!(!d.node_priority.contains_key("c"));
    let d = plan_rollout(&legacy_count(2), None, &nodes, later, &settings());
    assert_eq!(d.node_priority["b"].0, now, "whole seconds");
}

#[test]
fn rollout_6_3_node_order_is_monotonic_across_batches() {
    let mut sim = Sim::new(legacy_count(2), None, nodes(5));
    let mut seen = Vec::new();
    for _ in 0..10 {
        let d = sim.pass();
        for name in &d.selected_nodes {
            let order = d.node_order[name];
            if !seen.contains(&(name.clone(), order)) {
                seen.push((name.clone(), order));
            }
        }
        sim.finish(&|_| false);
    }
    let orders: Vec<i32> = seen.iter().map(|(_, o)| *o).collect();
    assert_eq!(orders, vec![0, 1, 2, 3, 4]);
}

#[test]
fn rollout_6_3_node_order_sorted_by_time_then_name() {
    let mut p = NodePriority {
        entries: BTreeMap::new(),
        offset: 7,
    };
    p.add("b", t0());
    p.add("a", t0());
    p.add(
        "0",
        jiff::Timestamp::from_second(t0().as_second() + 1).unwrap(),
    );
    let order = p.node_order();
    assert_eq!((order["a"], order["b"], order["0"]), (7, 8, 9));
    assert!(p.remove("a"));
    assert!(!p.remove("a"));
    assert_eq!(p.offset, 8);
}

#[test]
fn rollout_5_1_no_selection_when_select_is_off() {
    let mut s = settings();
    s.select = false;
    let d = plan_rollout(&legacy_count(2), None, &nodes(3), t0(), &s);
    assert!(d.selected_nodes.is_empty());
    assert!(d.node_priority.is_empty());
}
