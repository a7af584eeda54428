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

fn lin(init: i32, delta: i32, safety: Option<i32>) -> Strategy {
    resolve(thresholds(linear(init, delta), None, None, safety))
}

fn exp(init: i32, growth: i32, safety: Option<i32>) -> Strategy {
    resolve(thresholds(exponential(init, growth), None, None, safety))
}

macro_rules! batch_size_vector {
    ($($name:ident: $strategy:expr, $total:expr, $state:expr => $expected:expr;)+) => {$(
        #[test]
        fn $name() {
            assert_eq!($strategy.batch_size($total, &$state), $expected);
        }
    )+};
}

batch_size_vector! {
    s01_linear_shrinks_below_safety_limit: lin(1, 2, Some(50)), 20, state(4, 1, 5, true) => 3;
    s02_linear_grows_at_safety_limit: lin(1, 2, Some(50)), 20, state(9, 1, 5, true) => 7;
    s03_exponential_divides_below_safety_limit: exp(1, 2, Some(50)), 20, state(3, 1, 4, true) => 2;
    s04_exponential_shrink_floors_at_one: exp(1, 3, None), 20, state(1, 1, 2, true) => 1;
    s05_exponential_grows_past_safety_limit: exp(1, 2, None), 20, state(9, 1, 4, true) => 8;
    s06_exponential_capped_by_total_then_remaining: exp(1, 10, None), 20, state(0, 0, 8, false) => 20;
    s07_fixed_nothing_remaining_still_one: resolve(fixed(3)), 5, state(5, 0, 0, false) => 1;
    s08_linear_empty_compartment_zero: lin(1, 1, None), 0, BatchProcessingState::fresh() => 0;
    s09_fixed_has_no_zero_total_guard: resolve(fixed(1)), 0, BatchProcessingState::fresh() => 1;
    s10_linear_initial_capped_by_remaining: lin(4, 1, None), 3, BatchProcessingState::fresh() => 3;
    s11_linear_shrink_floors_at_one: lin(1, 1, Some(50)), 3, state(0, 1, 1, true) => 1;
    s12_linear_growth_capped_by_remaining: lin(1, 1, Some(50)), 3, state(1, 1, 1, true) => 1;
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

/// Scores a batch of `ok`/`bad` nodes from checkpoints `(c, f)` (which already include it)
/// with `cf` consecutive failures; returns the state and whether the batch failed.
fn scored(
    strategy: Strategy,
    total: i64,
    (c, f, cf): (i32, i32, i32),
    (ok, bad): (i64, i64),
) -> (BatchProcessingState, bool) {
    let mut st = BatchProcessingState {
        current_batch: 3,
        completed_nodes: c,
        failed_nodes: f,
        consecutive_failures: cf,
        ..Default::default()
    };
    let failed = score(&mut st, Some(&strategy), ok + bad, ok, total);
    assert_eq!(i64::from(st.last_batch_size), ok + bad);
    assert_eq!(st.last_batch_failed, failed);
    assert_eq!(st.current_batch, 4);
    (st, failed)
}

fn thr(batch: i32, failure: Option<i32>, safety: Option<i32>) -> Strategy {
    resolve(thresholds(fixed(1), failure, Some(batch), safety))
}

macro_rules! score_vector {
    ($($name:ident: $strategy:expr, $total:expr, $before:expr, $batch:expr
        => failed $failed:expr, cf $cf:expr, stop $stop:expr;)+) => {$(
        #[test]
        fn $name() {
            let (st, failed) = scored($strategy, $total, $before, $batch);
            assert_eq!(failed, $failed);
            assert_eq!(st.consecutive_failures, $cf);
            assert_eq!(st.should_stop, $stop);
        }
    )+};
}

score_vector! {
    e01_failed_batch_at_safety_limit_no_stop: thr(100, Some(2), Some(50)), 10, (4, 1, 0), (4, 1)
        => failed true, cf 1, stop false;
    e02_progress_50_is_not_below_safety_50: thr(100, Some(1), Some(50)), 10, (4, 1, 0), (4, 1)
        => failed true, cf 1, stop false;
    e03_failure_below_safety_limit_stops: thr(100, Some(1), Some(50)), 10, (0, 1, 0), (0, 1)
        => failed true, cf 1, stop true;
    e04_threshold_80_passes_and_resets_failures: thr(80, Some(1), None), 10, (4, 1, 1), (4, 1)
        => failed false, cf 0, stop false;
    e05_threshold_81_fails_four_of_five: thr(81, Some(1), Some(50)), 10, (4, 1, 0), (4, 1)
        => failed true, cf 1, stop false;
    e06_no_failure_threshold_never_stops: thr(100, None, None), 10, (0, 3, 5), (0, 3)
        => failed true, cf 6, stop false;
    e08_safety_limit_100_stops_at_90: thr(100, Some(2), Some(100)), 10, (7, 2, 1), (2, 1)
        => failed true, cf 2, stop true;
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

/// R1–R5: the idealised sequence and the same rollout driven through `plan_rollout`.
fn all_succeed(strategy: DeploymentStrategy, n: usize, expected: &[i64], current_batch: i32) {
    let (sizes, st) = sequence(resolve(strategy.clone()), n as i64, &|_, _| 0);
    assert_eq!(sizes, expected);
    assert_eq!(st.current_batch, current_batch);
    assert_eq!(st.completed_nodes as usize, n);
    assert_eq!(i64::from(st.last_batch_size), *expected.last().unwrap());
    let mut sim = Sim::new(
        nodewright("policy"),
        Some(policy(count(1), strategy, vec![])),
        nodes(n),
    );
    sim.run(50);
    let batches: Vec<i64> = sim.batches["__default__"]
        .iter()
        .map(|&b| b as i64)
        .collect();
    assert_eq!(batches, expected);
    let st = sim.batch_state("__default__");
    assert_eq!(st.current_batch, current_batch);
    assert_eq!(st.completed_nodes as usize, n);
    let cs = &sim.status().compartment_statuses["__default__"];
    assert_eq!((cs.completed, cs.progress_percent), (n as i32, 100));
}

#[test]
fn r01_linear_1_plus_2_over_10() {
    all_succeed(linear(1, 2), 10, &[1, 3, 5, 1], 5);
}

#[test]
fn r02_exponential_times_2_over_10() {
    all_succeed(exponential(1, 2), 10, &[1, 2, 4, 3], 5);
}

#[test]
fn r03_fixed_3_over_10() {
    all_succeed(fixed(3), 10, &[3, 3, 3, 1], 5);
}

#[test]
fn r04_linear_1_plus_1_over_8_chainsaw_linear_strategy() {
    all_succeed(linear(1, 1), 8, &[1, 2, 3, 2], 5);
}

#[test]
fn r05_exponential_times_3_over_100() {
    all_succeed(exponential(1, 3), 100, &[1, 3, 9, 27, 60], 6);
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
