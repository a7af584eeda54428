//! The numeric test vectors of 05-rollout.md §4.3, §12.1–12.4 as table tests.

#[path = "rollout_support.rs"]
mod support;

use nodewright_core::rollout::{
    Strategy, ceiling, legacy_budget, legacy_initial_batch, percent_of, score,
};
use nodewright_crds::{BatchProcessingState, DeploymentStrategy, InterruptionBudget};
use support::*;

fn resolve(s: DeploymentStrategy) -> Strategy {
    Strategy::resolve(&s).expect("a variant is set")
}

fn state(c: i32, f: i32, last: i32, lf: bool) -> BatchProcessingState {
    BatchProcessingState {
        current_batch: 1,
        completed_nodes: c,
        failed_nodes: f,
        last_batch_size: last,
        last_batch_failed: lf,
        ..BatchProcessingState::default()
    }
}

#[test]
fn rollout_4_3_ceiling_table_with_d23_exact_percent() {
    // (matched, percent, ceiling); D23 replaces the reference's floating point (57 % of 100 is
    // 57, not 56; 29 % is 29, not 28; 58 % is 58, not 57; 200 × 57 % is 114, not 113).
    let table = [
        (10, 25, 2),
        (10, 30, 3),
        (5, 10, 1),
        (100, 1, 1),
        (6, 33, 1),
        (4, 50, 2),
        (0, 50, 0),
        (100, 57, 57),
        (100, 29, 29),
        (100, 58, 58),
        (200, 57, 114),
        (1000, 57, 570),
        (100, 7, 7),
    ];
    for (matched, pct, expected) in table {
        assert_eq!(
            ceiling(&percent(pct), matched),
            expected,
            "{pct}% of {matched}"
        );
    }
}

#[test]
fn d23_percent_exact_57_of_100_is_57() {
    assert_eq!(percent_of(100, 57), 57);
    assert_eq!(ceiling(&percent(57), 100), 57);
    assert_eq!(legacy_initial_batch(&percent(57), 100), 57);
    for nodes in 0..=1000 {
        for pct in [1, 7, 29, 33, 57, 58, 99, 100] {
            assert_eq!(percent_of(nodes, pct), nodes * pct / 100);
        }
    }
}

#[test]
fn rollout_4_3_count_ceiling_is_unchanged() {
    assert_eq!(ceiling(&count(10), 4), 10);
    assert_eq!(ceiling(&count(0), 4), 0);
    assert_eq!(ceiling(&Default::default(), 4), 0);
}

#[test]
fn s01_to_s12_batch_size_vectors() {
    let l = |init, delta, safety| resolve(thresholds(linear(init, delta), None, None, safety));
    let e = |init, g, safety| resolve(thresholds(exponential(init, g), None, None, safety));
    let f = |init| resolve(fixed(init));
    let fresh = BatchProcessingState::fresh();
    let rows: Vec<(&str, Strategy, i64, BatchProcessingState, i64)> = vec![
        ("S1", l(1, 2, Some(50)), 20, state(4, 1, 5, true), 3),
        ("S2", l(1, 2, Some(50)), 20, state(9, 1, 5, true), 7),
        ("S3", e(1, 2, Some(50)), 20, state(3, 1, 4, true), 2),
        ("S4", e(1, 3, None), 20, state(1, 1, 2, true), 1),
        ("S5", e(1, 2, None), 20, state(9, 1, 4, true), 8),
        ("S6", e(1, 10, None), 20, state(0, 0, 8, false), 20),
        ("S7", f(3), 5, state(5, 0, 0, false), 1),
        ("S8", l(1, 1, None), 0, fresh.clone(), 0),
        ("S9", f(1), 0, fresh.clone(), 1),
        ("S10", l(4, 1, None), 3, fresh.clone(), 3),
        ("S11", l(1, 1, Some(50)), 3, state(0, 1, 1, true), 1),
        ("S12", l(1, 1, Some(50)), 3, state(1, 1, 1, true), 1),
    ];
    for (id, strategy, total, st, expected) in rows {
        assert_eq!(strategy.batch_size(total, &st), expected, "{id}");
    }
}

#[test]
fn rollout_2_1_defaults_applied_when_webhook_bypassed() {
    let bare = DeploymentStrategy {
        exponential: Some(Default::default()),
        ..Default::default()
    };
    let s = resolve(bare);
    assert_eq!(s.initial_batch, 1);
    assert_eq!(s.batch_threshold, 100);
    assert_eq!(s.safety_limit, 50);
    assert_eq!(s.failure_threshold, None);
    assert_eq!(
        s.growth,
        nodewright_core::rollout::Growth::Exponential { growth_factor: 2 }
    );
    let lin = resolve(DeploymentStrategy {
        linear: Some(Default::default()),
        ..Default::default()
    });
    assert_eq!(
        lin.growth,
        nodewright_core::rollout::Growth::Linear { delta: 1 }
    );
    assert!(Strategy::resolve(&DeploymentStrategy::default()).is_none());
}

struct ScoreRow {
    id: &'static str,
    strategy: Strategy,
    total: i64,
    before: (i32, i32, i32),
    batch: (i64, i64),
    after_cf: i32,
    failed: bool,
    stop: bool,
}

#[test]
fn e01_to_e08_scoring_vectors() {
    let s = |thr, ft, safety| resolve(thresholds(fixed(1), ft, Some(thr), safety));
    let rows = [
        ScoreRow {
            id: "E1",
            strategy: s(100, Some(2), Some(50)),
            total: 10,
            before: (4, 1, 0),
            batch: (4, 1),
            after_cf: 1,
            failed: true,
            stop: false,
        },
        ScoreRow {
            id: "E2",
            strategy: s(100, Some(1), Some(50)),
            total: 10,
            before: (4, 1, 0),
            batch: (4, 1),
            after_cf: 1,
            failed: true,
            stop: false,
        },
        ScoreRow {
            id: "E3",
            strategy: s(100, Some(1), Some(50)),
            total: 10,
            before: (0, 1, 0),
            batch: (0, 1),
            after_cf: 1,
            failed: true,
            stop: true,
        },
        ScoreRow {
            id: "E4",
            strategy: s(80, Some(1), None),
            total: 10,
            before: (4, 1, 1),
            batch: (4, 1),
            after_cf: 0,
            failed: false,
            stop: false,
        },
        ScoreRow {
            id: "E5",
            strategy: s(81, Some(1), Some(50)),
            total: 10,
            before: (4, 1, 0),
            batch: (4, 1),
            after_cf: 1,
            failed: true,
            stop: false,
        },
        ScoreRow {
            id: "E6",
            strategy: s(100, None, None),
            total: 10,
            before: (0, 3, 5),
            batch: (0, 3),
            after_cf: 6,
            failed: true,
            stop: false,
        },
        ScoreRow {
            id: "E8",
            strategy: s(100, Some(2), Some(100)),
            total: 10,
            before: (7, 2, 1),
            batch: (2, 1),
            after_cf: 2,
            failed: true,
            stop: true,
        },
    ];
    for row in rows {
        let (c, f, cf) = row.before;
        let mut st = BatchProcessingState {
            current_batch: 3,
            completed_nodes: c,
            failed_nodes: f,
            consecutive_failures: cf,
            ..Default::default()
        };
        let (ok, bad) = row.batch;
        let failed = score(&mut st, Some(&row.strategy), ok + bad, ok, row.total);
        assert_eq!(failed, row.failed, "{}", row.id);
        assert_eq!(st.consecutive_failures, row.after_cf, "{}", row.id);
        assert_eq!(st.should_stop, row.stop, "{}", row.id);
        assert_eq!(st.last_batch_size as i64, ok + bad, "{}", row.id);
        assert_eq!(st.last_batch_failed, row.failed, "{}", row.id);
        assert_eq!(st.current_batch, 4, "{}", row.id);
    }
}

#[test]
fn e07_empty_batch_changes_nothing() {
    let strategy = resolve(fixed(1));
    let mut st = state(3, 2, 4, true);
    st.consecutive_failures = 2;
    let before = st.clone();
    score(&mut st, Some(&strategy), 0, 0, 10);
    assert_eq!(st, before);
}

/// The idealised model of §12.3: each batch is requested, then scored with `failures(i, size)`
/// failed nodes. Returns the batch sizes and the final state.
fn sequence(
    strategy: Strategy,
    total: i64,
    failures: &dyn Fn(usize, i64) -> i64,
) -> (Vec<i64>, BatchProcessingState) {
    let mut st = BatchProcessingState::fresh();
    let mut sizes = Vec::new();
    while i64::from(st.completed_nodes + st.failed_nodes) < total && !st.should_stop {
        let size = strategy.batch_size(total, &st);
        let bad = failures(sizes.len(), size).min(size);
        st.completed_nodes += (size - bad) as i32;
        st.failed_nodes += bad as i32;
        score(&mut st, Some(&strategy), size, size - bad, total);
        sizes.push(size);
    }
    (sizes, st)
}

#[test]
fn r01_to_r05_all_succeed_sequences() {
    let none = |_: usize, _: i64| 0;
    let rows: Vec<(&str, DeploymentStrategy, i64, Vec<i64>, i32)> = vec![
        ("R1", linear(1, 2), 10, vec![1, 3, 5, 1], 5),
        ("R2", exponential(1, 2), 10, vec![1, 2, 4, 3], 5),
        ("R3", fixed(3), 10, vec![3, 3, 3, 1], 5),
        ("R4", linear(1, 1), 8, vec![1, 2, 3, 2], 5),
        ("R5", exponential(1, 3), 100, vec![1, 3, 9, 27, 60], 6),
    ];
    for (id, strategy, total, expected, current_batch) in rows {
        let (sizes, st) = sequence(resolve(strategy), total, &none);
        assert_eq!(sizes, expected, "{id}");
        assert_eq!(st.current_batch, current_batch, "{id}");
        assert_eq!(i64::from(st.completed_nodes), total, "{id}");
        assert_eq!(
            i64::from(st.last_batch_size),
            *expected.last().unwrap(),
            "{id}"
        );
    }
}

#[test]
fn r01_to_r05_through_plan_rollout() {
    let rows: Vec<(&str, DeploymentStrategy, usize, Vec<usize>, i32)> = vec![
        ("R1", linear(1, 2), 10, vec![1, 3, 5, 1], 5),
        ("R2", exponential(1, 2), 10, vec![1, 2, 4, 3], 5),
        ("R3", fixed(3), 10, vec![3, 3, 3, 1], 5),
        ("R4", linear(1, 1), 8, vec![1, 2, 3, 2], 5),
        ("R5", exponential(1, 3), 100, vec![1, 3, 9, 27, 60], 6),
    ];
    for (id, strategy, n, expected, current_batch) in rows {
        let mut sim = Sim::new(
            nodewright("policy"),
            Some(policy(count(1), strategy, vec![])),
            nodes(n),
        );
        sim.run(50);
        assert_eq!(sim.batches["__default__"], expected, "{id}");
        let st = sim.batch_state("__default__");
        assert_eq!(st.current_batch, current_batch, "{id}");
        assert_eq!(st.completed_nodes as usize, n, "{id}");
        let cs = &sim.status().compartment_statuses["__default__"];
        assert_eq!((cs.completed, cs.progress_percent), (n as i32, 100), "{id}");
    }
}

#[test]
fn r06_linear_stops_after_two_failed_batches() {
    let strategy = resolve(thresholds(linear(1, 2), Some(2), None, Some(50)));
    let (sizes, st) = sequence(strategy, 10, &|_, size| size);
    assert_eq!(sizes, vec![1, 1]);
    assert_eq!(st.consecutive_failures, 2);
    assert!(st.should_stop);
}

#[test]
fn r07_exponential_failure_past_safety_limit_keeps_growing() {
    let strategy = resolve(thresholds(exponential(2, 2), Some(2), Some(100), None));
    let (sizes, st) = sequence(strategy, 20, &|i, _| i64::from(i == 2));
    assert_eq!(sizes, vec![2, 4, 8, 6]);
    assert_eq!(st.consecutive_failures, 0);
    assert!(!st.should_stop);
}

#[test]
fn r08_failure_at_full_progress_does_not_stop() {
    let strategy = resolve(thresholds(exponential(1, 2), Some(1), None, None));
    let (sizes, st) = sequence(strategy, 10, &|i, _| i64::from(i == 3));
    assert_eq!(sizes, vec![1, 2, 4, 3]);
    assert!(!st.should_stop);
    assert_eq!(st.consecutive_failures, 1);
}

#[test]
fn r09_batch_threshold_80_passes_four_of_five() {
    let strategy = resolve(thresholds(fixed(5), Some(1), Some(80), None));
    let (sizes, st) = sequence(strategy, 10, &|i, _| i64::from(i == 0));
    assert_eq!(sizes, vec![5, 5]);
    assert_eq!(st.consecutive_failures, 0);
    assert!(!st.should_stop);
}

#[test]
fn rollout_10_legacy_translation_table_with_d23() {
    // (nodes, interruptionBudget, initialBatch, reported ceiling); the last row is D23's 57.
    let budget = |percent, count| InterruptionBudget { percent, count };
    let rows = [
        (6, Some(budget(None, Some(3))), 3, 3),
        (10, Some(budget(Some(25), None)), 2, 2),
        (7, None, 7, 7),
        (4, Some(budget(None, Some(10))), 4, 10),
        (5, Some(budget(None, Some(0))), 1, 0),
        (5, Some(budget(Some(0), None)), 1, 1),
        (0, Some(budget(Some(50), None)), 1, 0),
        (100, Some(budget(Some(57), None)), 57, 57),
    ];
    for (n, ib, initial, ceil) in rows {
        let b = legacy_budget(ib.as_ref());
        assert_eq!(legacy_initial_batch(&b, n), initial, "{n} {ib:?}");
        assert_eq!(ceiling(&b, n), ceil, "{n} {ib:?}");
    }
}
