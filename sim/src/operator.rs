//! The operator model: a watch-fed cache (with lag and lost events), the real core run on
//! snapshots of it, the interpreter applying the plan, and crashes, restarts and leader changes.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use nodewright_core::{Effect, Options, Plan, Snapshot};
use serde::{Deserialize, Serialize};

use crate::interpreter::{Interpreter, InterpreterConfig, Outcome, Scope, Written};
use crate::invariants::Checker;
use crate::objects::Objects;
use crate::rng::Rng;
use crate::snapshot::snapshot_from;
use crate::time::{Dur, SimTime, timestamp};
use crate::trace::{Record, apply_watch};
use crate::world::World;

/// A reconcile function: the real core by default.
pub type ReconcileFn = Arc<dyn Fn(&Snapshot, &Options, Timestamp) -> Plan + Send + Sync>;

/// The real core, planning like the shell does: with a memo of parsed node-state documents
/// kept between passes (`reconcile_with`; a pure memo, so plans equal `reconcile`'s).
pub fn real_core() -> ReconcileFn {
    let memo = std::sync::Mutex::new(nodewright_core::NodeStateCache::new());
    Arc::new(
        move |snapshot: &Snapshot, options: &Options, now: Timestamp| {
            // A poisoned lock means a panicking pass; `update` rebuilds the memo from the snapshot.
            let mut memo = memo.lock().unwrap_or_else(|p| p.into_inner());
            memo.update(&snapshot.nodes);
            nodewright_core::reconcile_with(snapshot, options, now, &memo)
        },
    )
}

/// Faults the operator and its connection to the apiserver suffer; all off by default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Faults {
    /// Watch events reach the cache this late.
    #[serde(default)]
    pub cache_lag: Dur,
    /// Probability that a watch event is lost (the cache stays stale until a relist).
    #[serde(default)]
    pub drop_watch: f64,
    /// Full relist period (0: only at start and restart; forced to 60s when events are dropped).
    #[serde(default)]
    pub relist_every: Dur,
    /// Probability that a foreign writer moves a node's resourceVersion right before a node write.
    #[serde(default)]
    pub conflicts: f64,
    /// Probability per pass that the operator crashes at a random point of its plan.
    #[serde(default)]
    pub crash: f64,
    /// Downtime after a crash.
    #[serde(default)]
    pub restart_after: Dur,
    /// Job deletions are refused (as by a denying admission webhook).
    #[serde(default)]
    pub deny_job_deletes: bool,
}

/// The simulated operator.
pub struct Operator {
    /// Operator options handed to the core.
    pub options: Options,
    /// The core.
    pub reconcile: ReconcileFn,
    /// The reflector cache.
    pub cache: Objects,
    /// Current faults.
    pub faults: Faults,
    /// Next scheduled pass.
    pub next_pass: Option<SimTime>,
    /// Down (crashed or between leaders) until then.
    pub down_until: Option<SimTime>,
    /// Passes run.
    pub passes: u64,
    /// Effect outcomes by effect kind and outcome label.
    pub outcomes: BTreeMap<String, u64>,
    /// Trace records, when recording.
    pub trace: Option<Vec<Record>>,
    /// Check that two runs of the core on one snapshot agree (I21).
    pub check_determinism: bool,
    /// Crash during the next pass after this many effects.
    pub crash_next_pass: Option<(usize, SimTime, bool)>,
    /// Events emitted.
    pub events: Vec<nodewright_core::EventSpec>,
    cursor: usize,
    dropped_since_relist: bool,
    inflight: Vec<(SimTime, usize)>,
    last_relist: SimTime,
    error_backoff: SimTime,
    zombie: Option<(SimTime, Snapshot, Vec<Effect>)>,
    rng: Rng,
    snapshot: Option<Snapshot>,
    finalizer_chain: nodewright_core::effect::FinalizerChain,
}

impl Operator {
    /// An operator with the given core and options; it starts on [`Operator::start`].
    pub fn new(options: Options, reconcile: ReconcileFn, seed: u64) -> Self {
        Operator {
            options,
            reconcile,
            cache: Objects::default(),
            faults: Faults::default(),
            next_pass: None,
            down_until: None,
            passes: 0,
            outcomes: BTreeMap::new(),
            trace: None,
            check_determinism: true,
            crash_next_pass: None,
            events: Vec::new(),
            cursor: 0,
            dropped_since_relist: false,
            inflight: Vec::new(),
            last_relist: 0,
            error_backoff: 1_000,
            zombie: None,
            rng: Rng::new(seed ^ 0x0b5e_55ed),
            snapshot: None,
            finalizer_chain: Default::default(),
        }
    }

    /// Fills the cache from a full list and schedules the first pass.
    pub fn start(&mut self, world: &World, now: SimTime) {
        self.relist(world, now);
        self.next_pass = Some(now);
    }

    fn relist(&mut self, world: &World, now: SimTime) {
        self.snapshot = None;
        self.cache = world.store.objects.clone();
        self.cursor = world.store.log.len();
        self.inflight.clear();
        self.last_relist = now;
        self.dropped_since_relist = false;
        if let Some(trace) = self.trace.as_mut() {
            trace.push(Record::Relist {
                at: timestamp(now),
                objects: self.cache.all(),
            });
        }
    }

    /// When the operator next does something on its own.
    pub fn next_wakeup(&self) -> Option<SimTime> {
        if let Some(t) = self.down_until {
            return Some(t);
        }
        let mut times: Vec<SimTime> = self.inflight.iter().map(|(t, _)| *t).collect();
        times.extend(self.next_pass);
        times.extend(self.zombie.as_ref().map(|z| z.0));
        let relist = self.relist_period();
        if relist > 0 {
            times.push(self.last_relist + relist);
        }
        times.into_iter().min()
    }

    fn relist_period(&self) -> SimTime {
        if self.faults.relist_every.0 > 0 {
            self.faults.relist_every.0
        } else if self.faults.drop_watch > 0.0 || self.dropped_since_relist {
            60_000
        } else {
            0
        }
    }

    /// Crashes now; with `late_effects` the remaining effects of the interrupted plan are applied
    /// later by the deposed leader.
    pub fn crash(&mut self, now: SimTime, down_for: SimTime) {
        self.down_until = Some(now + down_for.max(1));
        self.next_pass = None;
        self.inflight.clear();
    }

    /// Advances the operator to `now`: deliver watch events, maybe run a pass.
    pub fn step(&mut self, world: &mut World, checker: &mut Checker, now: SimTime) {
        if let Some(t) = self.down_until {
            if now < t {
                self.cursor = world.store.log.len();
                return;
            }
            self.down_until = None;
            self.relist(world, now);
            self.next_pass = Some(now);
        }
        let triggered = self.pull_events(world, now);
        let relist = self.relist_period();
        if relist > 0 && now >= self.last_relist + relist {
            self.relist(world, now);
        }
        if triggered {
            let soon = now + 50;
            self.next_pass = Some(self.next_pass.map_or(soon, |t| t.min(soon)));
        }
        if let Some((t, snapshot, effects)) = self.zombie.take() {
            if now >= t {
                self.apply(world, checker, &snapshot, &effects, now, u64::MAX, None);
            } else {
                self.zombie = Some((t, snapshot, effects));
            }
        }
        if self.next_pass.is_some_and(|t| t <= now) {
            self.next_pass = None;
            self.pass(world, checker, now);
        }
    }

    fn pull_events(&mut self, world: &World, now: SimTime) -> bool {
        let log = &world.store.log;
        for (index, event) in log.iter().enumerate().skip(self.cursor) {
            if self.rng.chance(self.faults.drop_watch) {
                self.dropped_since_relist = true;
                continue;
            }
            // A watch delivers in order: when the lag shrinks, a new event still waits for the
            // ones queued before it.
            let queued = self.inflight.last().map_or(0, |(t, _)| *t);
            let due = (event.at + self.faults.cache_lag.0).max(queued);
            self.inflight.push((due, index));
        }
        self.cursor = log.len();
        self.inflight.sort();
        let due = self.inflight.partition_point(|(t, _)| *t <= now);
        let delivered: Vec<(SimTime, usize)> = self.inflight.drain(..due).collect();
        if !delivered.is_empty() {
            self.snapshot = None;
        }
        for (_, index) in &delivered {
            let event = &log[*index];
            apply_watch(&mut self.cache, event.event, &event.object);
            if let Some(trace) = self.trace.as_mut() {
                trace.push(Record::Watch {
                    at: timestamp(now),
                    event: event.event,
                    object: event.object.clone(),
                });
            }
        }
        !delivered.is_empty()
    }

    fn pass(&mut self, world: &mut World, checker: &mut Checker, now: SimTime) {
        self.passes += 1;
        let snapshot = match self.snapshot.take() {
            Some(s) => s,
            None => snapshot_from(&self.cache, &self.options.namespace),
        };
        let at = timestamp(now);
        let plan = (self.reconcile)(&snapshot, &self.options, at);
        if self.check_determinism {
            let again = (self.reconcile)(&snapshot, &self.options, at);
            if again != plan {
                checker.violations.push(crate::invariants::Violation {
                    at: now,
                    rule: "I21 determinism".into(),
                    message: "two runs of the core on the same snapshot produced different plans"
                        .into(),
                });
            }
        }
        checker.check_plan(&snapshot, &plan, now);
        if let Some(trace) = self.trace.as_mut() {
            trace.push(Record::Pass {
                at,
                pass: self.passes,
                effects: plan.effects.clone(),
                requeue_after_ms: plan.requeue_after.map(|d| d.as_millis() as u64),
                errors: plan.error_messages(),
            });
        }
        let mut crash_at = self.crash_next_pass.take();
        if crash_at.is_none() && self.rng.chance(self.faults.crash) {
            let k = self.rng.below(plan.effects.len() as u64 + 1) as usize;
            crash_at = Some((k, self.faults.restart_after.0.max(1_000), false));
        }
        let limit = crash_at.map(|c| c.0);
        let wants_requeue = self.apply(
            world,
            checker,
            &snapshot,
            &plan.effects,
            now,
            self.passes,
            limit,
        );
        if let Some((k, down, late)) = crash_at {
            self.crash(now, down);
            if late && k < plan.effects.len() {
                self.zombie = Some((now + down + 1_000, snapshot, plan.effects[k..].to_vec()));
            }
            return;
        }
        self.snapshot = Some(snapshot);
        let mut next: Option<SimTime> = plan
            .requeue_after
            .map(|d| now + (d.as_millis() as SimTime).max(1));
        if !plan.errors.is_empty() {
            next = Some(now + self.error_backoff);
            self.error_backoff = (self.error_backoff * 2).min(60_000);
        } else {
            self.error_backoff = 1_000;
        }
        if wants_requeue {
            next = Some(next.map_or(now + 2_000, |t| t.min(now + 2_000)));
        }
        if let Some(t) = next {
            self.next_pass = Some(self.next_pass.map_or(t, |p| p.min(t)));
        }
    }

    /// Applies effects in order with the shell's scope rule; returns whether a requeue is wanted.
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        world: &mut World,
        checker: &mut Checker,
        snapshot: &Snapshot,
        effects: &[Effect],
        now: SimTime,
        pass: u64,
        limit: Option<usize>,
    ) -> bool {
        let config = InterpreterConfig {
            namespace: self.options.namespace.clone(),
            conflict_attempts: 5,
            conflict_probability: self.faults.conflicts,
            deny_job_deletes: self.faults.deny_job_deletes,
        };
        let mut scope = Scope::default();
        let mut wants_requeue = false;
        let mut written: Vec<Written> = Vec::new();
        let cache = std::mem::take(&mut self.cache);
        let mut interpreter = Interpreter {
            world,
            cache: &cache,
            config: &config,
            rng: &mut self.rng,
            written: Vec::new(),
            events: Vec::new(),
            finalizer_chain: &mut self.finalizer_chain,
        };
        for (index, effect) in effects.iter().enumerate() {
            if limit.is_some_and(|k| index >= k) {
                break;
            }
            let outcome = if scope.blocks(effect) {
                Outcome::Skipped
            } else {
                interpreter.apply_one(snapshot, effect)
            };
            scope.record(effect, outcome.ended());
            wants_requeue |= matches!(
                outcome,
                Outcome::Dropped(_) | Outcome::Waiting(_) | Outcome::Skipped
            );
            *self
                .outcomes
                .entry(format!("{}/{}", effect.kind(), outcome.label()))
                .or_default() += 1;
            written.append(&mut interpreter.written);
            if let Some(trace) = self.trace.as_mut() {
                trace.push(Record::Outcome {
                    at: timestamp(now),
                    pass,
                    index,
                    outcome,
                });
            }
        }
        self.events.append(&mut interpreter.events);
        self.cache = cache;
        checker.check_written(&written, &world.store.objects, now);
        wants_requeue
    }
}
