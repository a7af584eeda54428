//! The pass loop: debounced triggers and requeues, snapshot, `reconcile`, interpret, metrics,
//! trace (02-lifecycle.md §3).

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use nodewright_core::{ClusterInfo, NodeStateCache, Options, Plan};
use tokio::sync::{Mutex, watch};
use tracing::{debug, info, warn};

use crate::cache::{Caches, Trigger};
use crate::interpret::{Interpreter, Report};
use crate::metrics::{EffectLabels, Metrics};
use crate::trace::TraceRecorder;

/// Delay that lets a burst of events collapse into one pass.
pub const DEBOUNCE: Duration = Duration::from_millis(50);

/// Requeue after effects were dropped or skipped (the next pass re-decides on fresh state).
pub const RETRY_SOON: Duration = Duration::from_secs(1);

/// Cap of the error backoff.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Everything one pass needs.
pub struct Runner {
    /// Watch caches.
    pub caches: Caches,
    /// Wakes the loop.
    pub trigger: Trigger,
    /// The effect interpreter.
    pub interpreter: Interpreter,
    /// Operator options.
    pub options: Options,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// What the start-up check learned.
    pub cluster: ClusterInfo,
    /// Trace recorder, when `NODEWRIGHT_TRACE` is set.
    pub trace: Option<Arc<Mutex<TraceRecorder>>>,
    /// Turns true once every cache completed its first list.
    pub synced: watch::Receiver<bool>,
    /// Node-state documents parsed in earlier passes, reused while their annotation text is
    /// unchanged (a pure memo: plans are identical with or without it).
    pub parsed: std::sync::Mutex<NodeStateCache>,
    /// Start of the pass in flight (read by `/healthz`).
    pub pass_clock: PassClock,
}

/// The wait before the next pass given this pass's outcome; `failures` counts consecutive
/// failing passes.
pub fn next_delay(plan: &Plan, report: &Report, failures: u32) -> Option<Duration> {
    if failures > 0 {
        let backoff = Duration::from_secs(1).saturating_mul(1u32 << failures.min(9));
        return Some(backoff.min(MAX_BACKOFF));
    }
    let soon = report.wants_requeue().then_some(RETRY_SOON);
    match (plan.requeue_after, soon) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The pass loop's follow-up rule (R9): counts consecutive failing passes and turns each finished
/// pass into the wait before the next one. The operator's loop and the simulator both use it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cadence {
    failures: u32,
}

impl Cadence {
    /// Records a finished pass (its plan and everything applying it did) and returns the wait
    /// before the next pass (`None`: until a trigger).
    pub fn after_pass(&mut self, plan: &Plan, report: &Report) -> Option<Duration> {
        let failed = !plan.errors.is_empty() || !report.errors().is_empty();
        self.failures = if failed { self.failures + 1 } else { 0 };
        next_delay(plan, report, self.failures)
    }
}

/// Why [`Runner::lead`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Shutdown,
    Lost,
}

/// When the pass in flight started, shared with `/healthz` (liveness fails when a pass runs for
/// too long, see `crate::server::Health`).
#[derive(Clone, Debug, Default)]
pub struct PassClock(Arc<std::sync::Mutex<Option<Instant>>>);

impl PassClock {
    /// How long the pass in flight has been running, if one is.
    pub fn running_for(&self) -> Option<Duration> {
        self.lock().map(|t| t.elapsed())
    }

    /// Marks a pass as started; the pass ends when the guard is dropped (also on cancellation).
    pub fn start(&self) -> PassGuard {
        *self.lock() = Some(Instant::now());
        PassGuard(self.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Clears the [`PassClock`] when the pass ends or is cancelled.
pub struct PassGuard(PassClock);

impl Drop for PassGuard {
    fn drop(&mut self) {
        *self.0.lock() = None;
    }
}

impl Runner {
    /// Runs passes while `leading` is true, until `shutdown` turns true. Losing leadership cancels
    /// the pass in flight (effects not yet sent are dropped; the writes fence refuses any that
    /// race) and waits to lead again. Shutdown also cancels the pass in flight, so the lease is
    /// released only after passes stopped.
    pub async fn run(
        self,
        mut leading: watch::Receiver<bool>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                r = leading.wait_for(|l| *l) => if r.is_err() { return; },
                _ = shutdown.wait_for(|s| *s) => return,
            }
            info!("waiting for caches to sync");
            let mut synced = self.synced.clone();
            tokio::select! {
                r = synced.wait_for(|s| *s) => if r.is_err() { return; },
                _ = shutdown.wait_for(|s| *s) => return,
            }
            info!("caches synced; starting passes");
            if self.lead(&mut leading, &mut shutdown).await == Stop::Shutdown {
                return;
            }
            warn!("leadership lost: passes stopped; standing by as a candidate");
        }
    }

    /// The pass loop of one leadership term.
    async fn lead(
        &self,
        leading: &mut watch::Receiver<bool>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Stop {
        let mut cadence = Cadence::default();
        let mut delay: Option<Duration> = Some(Duration::ZERO);
        loop {
            let sleep = async {
                match delay {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = self.trigger.wait() => {}
                _ = sleep => {}
                _ = shutdown.wait_for(|s| *s) => return Stop::Shutdown,
                _ = leading.wait_for(|l| !*l) => return Stop::Lost,
            }
            tokio::time::sleep(DEBOUNCE).await;
            let (plan, report) = tokio::select! {
                done = self.pass() => done,
                _ = shutdown.wait_for(|s| *s) => {
                    warn!("pass cancelled: shutting down; effects not yet sent are dropped");
                    return Stop::Shutdown;
                }
                _ = leading.wait_for(|l| !*l) => {
                    warn!("pass cancelled: leadership lost; effects not yet sent are dropped");
                    return Stop::Lost;
                }
            };
            delay = cadence.after_pass(&plan, &report);
            debug!(next = ?delay, "pass scheduled");
        }
    }

    /// One pass: snapshot, plan, apply; returns the plan and what applying it did.
    pub async fn pass(&self) -> (Plan, Report) {
        let _running = self.pass_clock.start();
        let started = Instant::now();
        let snapshot = self.caches.snapshot(&self.cluster);
        let now = Timestamp::now();
        let plan = {
            // A poisoned lock means an earlier pass panicked; `update` rebuilds the memo from
            // the snapshot and only reuses entries whose text still matches, so it is safe.
            let mut parsed = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
            parsed.update(&snapshot.nodes);
            parsed.update_executors(&snapshot, &self.options);
            nodewright_core::reconcile_with(&snapshot, &self.options, now, &parsed)
        };
        let planned = started.elapsed();
        self.metrics.plan_duration.observe(planned.as_secs_f64());
        self.metrics.plan.replace(&plan.metrics);
        let pass_no = match &self.trace {
            Some(t) => t
                .lock()
                .await
                .pass(now, &snapshot, &plan)
                .map_err(|e| warn!(error = %e, "trace write failed"))
                .ok(),
            None => None,
        };
        let report = self.interpreter.apply(&snapshot, &plan).await;
        self.caches.forget_pods.forget(plan.settled_pods.clone());
        for undecodable in self.caches.undecodable.take_pending() {
            self.interpreter.emit(&undecodable.event()).await;
        }
        if let (Some(t), Some(n)) = (&self.trace, pass_no)
            && let Err(e) = t.lock().await.outcomes(n, &report)
        {
            warn!(error = %e, "trace write failed");
        }
        self.record(&plan, &report, started.elapsed(), planned);
        (plan, report)
    }

    fn record(&self, plan: &Plan, report: &Report, took: Duration, planned: Duration) {
        let m = &self.metrics;
        m.passes.inc();
        m.pass_duration.observe(took.as_secs_f64());
        for (kind, outcome) in &report.outcomes {
            m.effects
                .get_or_create(&EffectLabels {
                    effect: kind.to_string(),
                    outcome: outcome.label().to_string(),
                })
                .inc();
        }
        for (kind, n) in self.caches.sizes() {
            m.cache_objects
                .get_or_create(&vec![("kind".to_string(), kind.to_string())])
                .set(n as i64);
        }
        let errors = report.errors();
        if !plan.errors.is_empty() || !errors.is_empty() {
            m.pass_errors.inc();
            warn!(plan_errors = ?plan.error_messages(), effect_errors = ?errors, "pass reported errors");
        }
        if !plan.effects.is_empty() {
            info!(
                effects = plan.effects.len(),
                applied = report.count("applied"),
                dropped = report.count("dropped"),
                skipped = report.count("skipped"),
                failed = report.count("failed"),
                plan_ms = planned.as_millis() as u64,
                took_ms = took.as_millis() as u64,
                "pass"
            );
        } else {
            debug!(plan_ms = planned.as_millis() as u64, "idle pass");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpret::Outcome;

    #[test]
    fn r3_requeue_takes_the_smaller_delay_and_errors_back_off() {
        let plan = Plan {
            requeue_after: Some(Duration::from_secs(600)),
            ..Plan::default()
        };
        let idle = Report::default();
        assert_eq!(next_delay(&plan, &idle, 0), Some(Duration::from_secs(600)));
        let dropped = Report {
            outcomes: vec![("PatchNode", Outcome::Dropped("x".into()))],
        };
        assert_eq!(next_delay(&plan, &dropped, 0), Some(RETRY_SOON));
        assert_eq!(next_delay(&Plan::default(), &idle, 0), None);
        assert_eq!(next_delay(&plan, &idle, 1), Some(Duration::from_secs(2)));
        assert_eq!(next_delay(&plan, &idle, 30), Some(MAX_BACKOFF));
    }
}
