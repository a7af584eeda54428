//! Batch evaluation and scoring (05-rollout.md §7, 02-lifecycle.md §6.7, decision D17).
//!
//! Only terminal verdicts count: a node fails a batch only when its node status is `erroring`,
//! which the lifecycle sets only once a stage's retry budget is spent (D17). Blocked, waiting,
//! unknown and in-flight erroring nodes never fail a batch.

use nodewright_crds::{BatchProcessingState, Status};

use super::NodeView;
use super::strategy::{Strategy, progress};

/// What evaluating one compartment did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evaluation {
    /// Some member is `in_progress`: the batch is not finished.
    Unfinished,
    /// `currentBatch` was 0 (field omitted) and was set to 1.
    Initialised,
    /// Checkpoints were resynchronised or nothing happened; no score.
    NoScore,
    /// A batch of `size` nodes was scored.
    Scored {
        /// `successes + failures`.
        size: i64,
        /// Nodes completed since the last checkpoint.
        successes: i64,
        /// Whether the batch failed (`successPct < batchThreshold`).
        failed: bool,
    },
}

/// Terminal counts of a compartment: complete, failed (status `erroring`), blocked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Members satisfying the node-complete predicate.
    pub complete: i64,
    /// Not-complete members with node status `erroring` (terminal verdict, D17).
    pub failed: i64,
    /// Not-complete members with node status `blocked`.
    pub blocked: i64,
}

/// Counts the members' terminal outcomes.
pub fn counts<'a>(members: impl IntoIterator<Item = &'a NodeView<'a>>) -> Counts {
    let mut c = Counts::default();
    for node in members {
        if node.complete {
            c.complete += 1;
        } else if node.status == Status::Erroring {
            c.failed += 1;
        } else if node.status == Status::Blocked {
            c.blocked += 1;
        }
    }
    c
}

/// Membership churn (02-lifecycle.md §6.7 step 1 \[Fix\]): when the persisted `matched` differs
/// from the current member count, the checkpoints absorb every terminal node except those that
/// became terminal during this pass (status before introspection was an active one), so nodes
/// joining or leaving are not read as batch progress or failure.
pub fn absorb_churn(state: &mut BatchProcessingState, members: &[&NodeView]) {
    let fresh = |n: &&&NodeView, active: &[Status]| active.contains(&n.status_before);
    let now = counts(members.iter().copied());
    let fresh_complete = members
        .iter()
        .filter(|n| n.complete)
        .filter(|n| {
            fresh(
                n,
                &[
                    Status::InProgress,
                    Status::Waiting,
                    Status::Blocked,
                    Status::Erroring,
                ],
            )
        })
        .count();
    let fresh_failed = members
        .iter()
        .filter(|n| !n.complete && n.status == Status::Erroring)
        .filter(|n| fresh(n, &[Status::InProgress, Status::Waiting, Status::Blocked]))
        .count();
    state.completed_nodes = to_i32(now.complete - fresh_complete as i64);
    state.failed_nodes = to_i32(now.failed - fresh_failed as i64);
}

/// `EvaluateCurrentBatch` for one compartment (02-lifecycle.md §6.7 steps 2–8). `strategy` is
/// `None` for a ceiling-only compartment (only `currentBatch` and `lastBatchSize` move).
///
/// A negative delta resynchronises only its own checkpoint (\[Fix\]), so a real outcome seen in
/// the same pass is still scored; completions that match a drop in failures are read as
/// recoveries and never scored, so a recovery does not erase the failure count.
pub fn evaluate(
    state: &mut BatchProcessingState,
    strategy: Option<&Strategy>,
    members: &[&NodeView],
) -> Evaluation {
    if members.iter().any(|n| n.status == Status::InProgress) {
        return Evaluation::Unfinished;
    }
    if state.current_batch == 0 {
        state.current_batch = 1;
        return Evaluation::Initialised;
    }
    let now = counts(members.iter().copied());
    let mut delta_complete = now.complete - i64::from(state.completed_nodes);
    let mut delta_failed = now.failed - i64::from(state.failed_nodes);
    if delta_failed < 0 {
        // Failed nodes that recovered: their completion is not a new batch outcome, and the
        // failure memory (lastBatchFailed, consecutiveFailures) is kept (05-rollout.md §7.4).
        let recovered = (-delta_failed).min(delta_complete.max(0));
        delta_complete -= recovered;
        state.completed_nodes = to_i32(i64::from(state.completed_nodes) + recovered);
        state.failed_nodes = to_i32(now.failed);
        delta_failed = 0;
    }
    if delta_complete < 0 {
        state.completed_nodes = to_i32(now.complete);
        delta_complete = 0;
    }
    if delta_complete == 0 && delta_failed == 0 {
        // Blocked-only or idle: checkpoints already equal the counts; never a score.
        return Evaluation::NoScore;
    }
    state.completed_nodes = to_i32(now.complete);
    state.failed_nodes = to_i32(now.failed);
    let size = delta_complete + delta_failed;
    let total = members.len() as i64;
    let failed = score(state, strategy, size, delta_complete, total);
    Evaluation::Scored {
        size,
        successes: delta_complete,
        failed,
    }
}

/// `EvaluateBatchResult` (05-rollout.md §7.2) on checkpoints that already include the batch;
/// returns whether the batch failed. A zero-size batch changes nothing.
pub fn score(
    state: &mut BatchProcessingState,
    strategy: Option<&Strategy>,
    size: i64,
    successes: i64,
    total: i64,
) -> bool {
    if size <= 0 {
        return false;
    }
    let Some(strategy) = strategy else {
        state.current_batch = state.current_batch.saturating_add(1);
        state.last_batch_size = to_i32(size);
        return false;
    };
    let success_pct = successes * 100 / size;
    let processed = i64::from(state.completed_nodes) + i64::from(state.failed_nodes);
    let progress = progress(processed, total);
    let failed = success_pct < strategy.batch_threshold;
    state.last_batch_size = to_i32(size);
    state.last_batch_failed = failed;
    if failed {
        state.consecutive_failures = state.consecutive_failures.saturating_add(1);
        let stop = strategy.failure_threshold.is_some_and(|threshold| {
            progress < strategy.safety_limit && i64::from(state.consecutive_failures) >= threshold
        });
        if stop {
            state.should_stop = true;
        }
    } else {
        state.consecutive_failures = 0;
    }
    state.current_batch = state.current_batch.saturating_add(1);
    failed
}

/// Narrows a non-negative count to the API's `i32`, saturating.
pub(crate) fn to_i32(value: i64) -> i32 {
    i32::try_from(value.max(0)).unwrap_or(i32::MAX)
}
