//! Batch evaluation, failure counting and resets (05-rollout.md §7, §9; 02-lifecycle.md §6.7,
//! §6.8; decision D17).

#[path = "rollout_support.rs"]
mod support;

use std::collections::BTreeMap;

use nodewright_core::rollout::{
    Evaluation, NodeView, Strategy, cli_reset_patch, evaluate, plan_rollout, reset_on_completion,
};
use nodewright_crds::{BatchProcessingState, CompartmentStatus, DeploymentPolicyOptions, Status};
use serde_json::json;
use support::*;

fn with_status(name: &str, status: Status) -> NodeView<'static> {
    let mut n = node(name);
    n.status = status;
    n.status_before = status;
    n.complete = status == Status::Complete;
    n
}

fn checkpoint(c: i32, f: i32) -> BatchProcessingState {
    BatchProcessingState {
        current_batch: 2,
        completed_nodes: c,
        failed_nodes: f,
        ..Default::default()
    }
}

fn strategy() -> Strategy {
    Strategy::resolve(&thresholds(fixed(2), Some(1), None, None)).unwrap()
}

#[test]
fn rollout_7_1_unfinished_while_any_member_in_progress() {
    let nodes = [
        with_status("a", Status::Complete),
        with_status("b", Status::InProgress),
    ];
    let refs: Vec<&NodeView<'static>> = nodes.iter().collect();
    let mut st = checkpoint(0, 0);
    assert_eq!(
        evaluate(&mut st, Some(&strategy()), &refs),
        Evaluation::Unfinished
    );
    assert_eq!(st, checkpoint(0, 0));
}

#[test]
fn rollout_7_1_current_batch_zero_is_initialised() {
    let nodes = [with_status("a", Status::Complete)];
    let refs: Vec<&NodeView<'static>> = nodes.iter().collect();
    let mut st = BatchProcessingState::default();
    assert_eq!(
        evaluate(&mut st, Some(&strategy()), &refs),
        Evaluation::Initialised
    );
    assert_eq!(st.current_batch, 1);
    assert_eq!(st.completed_nodes, 0);
}

#[test]
fn rollout_7_1_scores_deltas_since_checkpoint() {
    let nodes = [
        with_status("a", Status::Complete),
        with_status("b", Status::Complete),
        with_status("c", Status::Erroring),
        with_status("d", Status::Waiting),
    ];
    let refs: Vec<&NodeView<'static>> = nodes.iter().collect();
    let mut st = checkpoint(1, 0);
    let outcome = evaluate(&mut st, Some(&strategy()), &refs);
    assert_eq!(
        outcome,
        Evaluation::Scored {
            size: 2,
            successes: 1,
            failed: true
        }
    );
    assert_eq!((st.completed_nodes, st.failed_nodes), (2, 1));
    assert_eq!(st.current_batch, 3);
    // progress 75 ≥ safety 50: no stop although failureThreshold is 1.
    assert!(!st.should_stop);
}

#[test]
fn rollout_7_1_negative_delta_resynchronises_only_that_checkpoint() {
    // A complete node left (C 2 → 1) while another failed (F 0 → 1): the failure is scored.
    let nodes = [
        with_status("a", Status::Complete),
        with_status("c", Status::Erroring),
        with_status("d", Status::Waiting),
        with_status("e", Status::Waiting),
    ];
    let refs: Vec<&NodeView<'static>> = nodes.iter().collect();
    let mut st = checkpoint(2, 0);
    let outcome = evaluate(&mut st, Some(&strategy()), &refs);
    assert_eq!(
        outcome,
        Evaluation::Scored {
            size: 1,
            successes: 0,
            failed: true
        }
    );
    assert_eq!((st.completed_nodes, st.failed_nodes), (1, 1));
    // A failed node recovered (F 2 → 1, C 1 → 2): a recovery, not a batch outcome.
    let nodes = [
        with_status("a", Status::Complete),
        with_status("b", Status::Complete),
        with_status("c", Status::Erroring),
    ];
    let refs: Vec<&NodeView<'static>> = nodes.iter().collect();
    let mut st = BatchProcessingState {
        consecutive_failures: 1,
        last_batch_failed: true,
        ..checkpoint(1, 2)
    };
    assert_eq!(
        evaluate(&mut st, Some(&strategy()), &refs),
        Evaluation::NoScore
    );
    assert_eq!((st.completed_nodes, st.failed_nodes), (2, 1));
    assert_eq!(st.consecutive_failures, 1);
    // Only a recovery: resynchronise, no score, failure memory kept.
    let nodes = [
        with_status("a", Status::Complete),
        with_status("c", Status::Waiting),
    ];
    let refs: Vec<&NodeView<'static>> = nodes.iter().collect();
    let mut st = BatchProcessingState {
        consecutive_failures: 1,
        last_batch_failed: true,
        ..checkpoint(1, 1)
    };
    assert_eq!(
        evaluate(&mut st, Some(&strategy()), &refs),
        Evaluation::NoScore
    );
    assert_eq!((st.completed_nodes, st.failed_nodes), (1, 0));
    assert_eq!(st.consecutive_failures, 1);
    assert!(st.last_batch_failed);
    assert_eq!(st.current_batch, 2);
}

#[test]
fn rollout_7_3_blocked_nodes_never_score() {
    let nodes = [
        with_status("a", Status::Blocked),
        with_status("b", Status::Blocked),
        with_status("c", Status::Complete),
    ];
    let refs: Vec<&NodeView<'static>> = nodes.iter().collect();
    let mut st = checkpoint(1, 0);
    assert_eq!(
        evaluate(&mut st, Some(&strategy()), &refs),
        Evaluation::NoScore
    );
    assert_eq!(st, checkpoint(1, 0));
}

#[test]
fn d17_only_terminal_erroring_counts_as_failure() {
    // The lifecycle keeps node status `in_progress` while attempts fail with retries left
    // (D17): the batch is not finished and nothing is counted.
    let nodes = [
        with_status("a", Status::Complete),
        with_status("b", Status::InProgress),
    ];
    let refs: Vec<&NodeView<'static>> = nodes.iter().collect();
    let mut st = checkpoint(0, 0);
    assert_eq!(
        evaluate(&mut st, Some(&strategy()), &refs),
        Evaluation::Unfinished
    );
    assert_eq!(st.consecutive_failures, 0);
    // Waiting and unknown nodes are not failures either.
    let nodes = [
        with_status("a", Status::Complete),
        with_status("b", Status::Waiting),
        with_status("c", Status::Unknown),
    ];
    let refs: Vec<&NodeView<'static>> = nodes.iter().collect();
    let mut st = checkpoint(0, 0);
    let outcome = evaluate(&mut st, Some(&strategy()), &refs);
    assert_eq!(
        outcome,
        Evaluation::Scored {
            size: 1,
            successes: 1,
            failed: false
        }
    );
    // Only the terminal verdict (node status `erroring`) fails a batch.
    let nodes = [
        with_status("a", Status::Erroring),
        with_status("b", Status::Waiting),
        with_status("c", Status::Waiting),
    ];
    let refs: Vec<&NodeView<'static>> = nodes.iter().collect();
    let mut st = checkpoint(0, 0);
    let outcome = evaluate(&mut st, Some(&strategy()), &refs);
    assert!(matches!(outcome, Evaluation::Scored { failed: true, .. }));
    // progress 33 < safety limit 50 and failureThreshold 1: the compartment stops.
    assert!(st.should_stop);
}

#[test]
fn rollout_7_1_membership_churn_is_not_read_as_progress() {
    // A complete node joins the compartment (matched 2 → 3): absorbed, no score.
    let mut joined = with_status("z", Status::Complete);
    joined.status_before = Status::Complete;
    let nodes = vec![
        with_status("a", Status::Complete),
        with_status("b", Status::Waiting),
        joined,
    ];
    let mut nw = nodewright("policy");
    let mut status = nodewright_crds::NodeWrightStatus::default();
    status.compartment_statuses.insert(
        "__default__".into(),
        CompartmentStatus {
            matched: 2,
            batch_state: Some(checkpoint(1, 0)),
            ..Default::default()
        },
    );
    nw.status = Some(status);
    let p = policy(count(1), fixed(1), vec![]);
    let mut s = settings();
    s.select = false;
    let d = plan_rollout(&nw, Some(&p), &nodes, t0(), &s);
    assert_eq!(d.evaluations["__default__"], Evaluation::NoScore);
    let st = d.compartment_statuses["__default__"]
        .batch_state
        .clone()
        .unwrap();
    assert_eq!((st.completed_nodes, st.current_batch), (2, 2));
    // A node that completed in this very pass is still scored.
    let mut fresh = with_status("z", Status::Complete);
    fresh.status_before = Status::InProgress;
    let nodes = vec![
        with_status("a", Status::Complete),
        with_status("b", Status::Waiting),
        fresh,
    ];
    let d = plan_rollout(&nw, Some(&p), &nodes, t0(), &s);
    assert!(matches!(
        d.evaluations["__default__"],
        Evaluation::Scored { size: 1, .. }
    ));
}

#[test]
fn rollout_7_4_failing_batch_scored_once_then_waits_on_failed_node() {
    let p = policy(
        count(1),
        thresholds(linear(2, 2), Some(3), None, None),
        vec![],
    );
    let mut sim = Sim::new(nodewright("policy"), Some(p), nodes(10));
    sim.pass();
    sim.finish(&|name| name == "node-00");
    let d = sim.pass();
    let st = sim.batch_state("__default__");
    assert_eq!((st.consecutive_failures, st.last_batch_failed), (1, true));
    assert_eq!(
        d.selected_nodes,
        vec!["node-00"],
        "failed node holds the batch"
    );
    for _ in 0..3 {
        let d = sim.pass();
        assert_eq!(d.selected_nodes, vec!["node-00"]);
    }
    assert_eq!(sim.batch_state("__default__").current_batch, 2);
}

#[test]
fn rollout_9_2_reset_precedence() {
    let mut nw = nodewright("policy");
    let mut p = policy(count(1), fixed(1), vec![]);
    p.spec.reset_batch_state_on_completion = Some(true);
    assert!(reset_on_completion(&nw, Some(&p)));
    nw.spec.deployment_policy_options = Some(DeploymentPolicyOptions {
        reset_batch_state_on_completion: Some(false),
    });
    assert!(!reset_on_completion(&nw, Some(&p)));
    p.spec.reset_batch_state_on_completion = None;
    assert!(!reset_on_completion(&nodewright("policy"), Some(&p)));
    assert!(!reset_on_completion(&nodewright(""), None));
    let mut legacy = nodewright("");
    legacy.spec.deployment_policy_options = Some(DeploymentPolicyOptions {
        reset_batch_state_on_completion: Some(true),
    });
    assert!(reset_on_completion(&legacy, None));
}

#[test]
fn rollout_9_2_batch_state_reset_on_completion() {
    // Chainsaw `batch-state-reset`: 8 nodes, exponential 1 ×2, count 2.
    let mut p = policy(count(2), exponential(1, 2), vec![]);
    p.spec.reset_batch_state_on_completion = Some(true);
    let mut sim = Sim::new(nodewright("policy"), Some(p.clone()), nodes(8));
    sim.run(30);
    let st = sim.batch_state("__default__");
    assert_eq!(st, BatchProcessingState::fresh());
    assert_eq!(
        sim.status().compartment_statuses["__default__"].progress_percent,
        100
    );
    // nodePriority/offset untouched by the auto-reset.
    assert_eq!(sim.status().node_order_offset, 8);
    let mut nw = nodewright("policy");
    nw.spec.deployment_policy_options = Some(DeploymentPolicyOptions {
        reset_batch_state_on_completion: Some(false),
    });
    let mut sim = Sim::new(nw, Some(p), nodes(8));
    sim.run(30);
    assert!(sim.batch_state("__default__").current_batch > 1);
}

#[test]
fn rollout_9_1_reset_on_version_change_trigger() {
    let mut p = policy(count(2), exponential(1, 2), vec![]);
    p.spec.reset_batch_state_on_completion = Some(true);
    let mut nw = nodewright("policy");
    let mut status = nodewright_crds::NodeWrightStatus::default();
    status.compartment_statuses.insert(
        "__default__".into(),
        CompartmentStatus {
            matched: 3,
            batch_state: Some(BatchProcessingState {
                current_batch: 4,
                last_batch_size: 4,
                should_stop: true,
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    status.node_priority.insert("node-00".into(), at(0));
    nw.status = Some(status);
    let mut s = settings();
    s.reset_trigger = true;
    let nodes = nodes(3);
    let d = plan_rollout(&nw, Some(&p), &nodes, t0(), &s);
    assert!(d.reset_applied);
    assert_eq!(
        d.compartment_statuses["__default__"].batch_state,
        Some(BatchProcessingState::fresh())
    );
    assert!(d.node_priority.contains_key("node-00"));
    // After the reset the compartment is no longer stopped and selects again.
    assert!(d.selected_nodes.contains(&"node-00".to_string()));
}

#[test]
fn rollout_9_3_cli_reset_clears_every_field() {
    let mut statuses = BTreeMap::new();
    statuses.insert("a".to_string(), CompartmentStatus::default());
    let fresh = json!({
        "currentBatch": 1, "consecutiveFailures": 0, "completedNodes": 0, "failedNodes": 0,
        "shouldStop": false, "lastBatchSize": 0, "lastBatchFailed": false
    });
    assert_eq!(
        cli_reset_patch(&statuses, false),
        json!({"status": {"compartmentStatuses": {"a": {"batchState": fresh}}}})
    );
    assert_eq!(
        cli_reset_patch(&statuses, true),
        json!({"status": {
            "compartmentStatuses": {"a": {"batchState": fresh}},
            "nodePriority": null,
            "nodeOrderOffset": 0
        }})
    );
    assert_eq!(
        cli_reset_patch(&BTreeMap::new(), false),
        json!({"status": {}})
    );
}

#[test]
fn rollout_7_2_strategyless_compartment_counts_batches_only() {
    let nodes = [with_status("a", Status::Erroring)];
    let refs: Vec<&NodeView<'static>> = nodes.iter().collect();
    let mut st = checkpoint(0, 0);
    let outcome = evaluate(&mut st, None, &refs);
    assert!(matches!(outcome, Evaluation::Scored { size: 1, .. }));
    assert_eq!(st.current_batch, 3);
    assert_eq!(st.last_batch_size, 1);
    assert_eq!(st.consecutive_failures, 0);
    assert!(!st.should_stop);
}

#[test]
fn r06_through_plan_rollout_recovery_keeps_failure_count_and_stops() {
    // 10 nodes, linear 1 Δ2, failureThreshold 2: node-00 fails and holds the batch; after a
    // rerun it completes (a recovery, not scored); the next batch (shrunk to 1) fails too, and
    // with progress 20 % < 50 % the compartment stops and admits nothing more.
    let p = policy(
        count(1),
        thresholds(linear(1, 2), Some(2), None, Some(50)),
        vec![],
    );
    let mut sim = Sim::new(nodewright("policy"), Some(p), nodes(10));
    sim.pass();
    sim.finish(&|_| true);
    sim.pass();
    assert_eq!(sim.batch_state("__default__").consecutive_failures, 1);
    // Rerun: the failed node runs again and completes.
    sim.nodes[0].status = Status::InProgress;
    sim.finish(&|_| false);
    let d = sim.pass();
    let st = sim.batch_state("__default__");
    assert_eq!(d.evaluations["__default__"], Evaluation::NoScore);
    assert_eq!((st.consecutive_failures, st.last_batch_failed), (1, true));
    assert_eq!(d.selected_nodes, vec!["node-01"], "shrunk to max(1, 1 − 2)");
    sim.finish(&|_| true);
    let d = sim.pass();
    let st = sim.batch_state("__default__");
    assert_eq!(st.consecutive_failures, 2);
    assert!(st.should_stop);
    assert!(d.selected_nodes.is_empty());
    assert_eq!(sim.batches["__default__"], vec![1, 1]);
}
