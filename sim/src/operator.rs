//! One operator replica: a watch-fed cache (with lag and lost events), the real core run on
//! snapshots of it, the interpreter applying the plan, crashes, restarts and stop-the-world
//! pauses, and (with leader election) the operator's lease machine deciding when it runs passes
//! and its write fence deciding which writes leave it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use nodewright_core::effect::FinalizerChain;
use nodewright_core::{Effect, Options, Plan, Snapshot};
use nodewright_shell::interpret::{EventRecorder, Interpreter, Report};
use nodewright_shell::leader::Change;
use nodewright_shell::runner::{Cadence, DEBOUNCE};
use nodewright_shell::trace::TraceOutcome;
use serde::{Deserialize, Serialize};

use crate::invariants::Checker;
use crate::leader::Candidate;
use crate::objects::AnyObject;
use crate::objects::Objects;
use crate::port::{PortConfig, SimPort};
use crate::rng::Rng;
use crate::snapshot::snapshot_from;
use crate::store::EventType;
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
            memo.update_executors(snapshot, options);
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
    /// Crash right before the first write of each Job's `nodewright.nvidia.com/<marker>`
    /// annotation (`state-recorded`), once per Job; restart after `restartAfter`.
    #[serde(default)]
    pub crash_before: Option<String>,
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
    /// Cut the next pass short.
    pub interrupt_next_pass: Option<Interrupt>,
    /// This replica's campaign for the lease (`None`: leader election off, always leading).
    pub candidate: Option<Candidate>,
    /// Stopped the world until then (a long GC pause, SIGSTOP).
    pub paused_until: Option<SimTime>,
    /// Collects the interpreter's log lines, when the scenario expects some.
    pub logs: Option<crate::logs::LogSink>,
    /// Last virtual time a write of this replica reached the apiserver.
    pub last_write: Option<SimTime>,
    restarts: u32,
    /// Jobs whose marker write a `crashBefore` fault already crashed before.
    marker_crashes: crate::crash_points::MarkerCrashes,
    /// Events emitted.
    pub events: Vec<nodewright_core::EventSpec>,
    cursor: usize,
    dropped_since_relist: bool,
    inflight: Vec<(SimTime, usize)>,
    last_relist: SimTime,
    /// The shell's pass-loop schedule (consecutive failures, requeue).
    cadence: Cadence,
    /// A pass stopped by a pause, finished when the pause ends.
    zombie: Option<Suspended>,
    rng: Rng,
    snapshot: Option<Snapshot>,
    finalizer_chain: Arc<Mutex<FinalizerChain>>,
    recorder: EventRecorder,
    /// Node fingerprints of the shell's node watch filter (`cache::node_changed`).
    node_fingerprints: Mutex<HashMap<String, u64>>,
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
            interrupt_next_pass: None,
            candidate: None,
            paused_until: None,
            last_write: None,
            logs: None,
            restarts: 0,
            marker_crashes: Default::default(),
            events: Vec::new(),
            cursor: 0,
            dropped_since_relist: false,
            inflight: Vec::new(),
            last_relist: 0,
            cadence: Cadence::default(),
            zombie: None,
            rng: Rng::new(seed ^ 0x0b5e_55ed),
            snapshot: None,
            finalizer_chain: Default::default(),
            recorder: EventRecorder::new("nodewright-sim"),
            node_fingerprints: Mutex::default(),
        }
    }

    /// Fills the cache from a full list and schedules the first pass.
    pub fn start(&mut self, world: &World, now: SimTime) {
        self.relist(world, now);
        // A candidate starts passes when it acquires the lease.
        self.next_pass = self.runs_passes().then_some(now);
    }

    fn relist(&mut self, world: &World, now: SimTime) {
        self.snapshot = None;
        self.cache = world.store.objects.clone();
        self.cache.leases.clear();
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
        if let Some(t) = self.down_until.or(self.paused_until) {
            return Some(t);
        }
        let mut times: Vec<SimTime> = self.inflight.iter().map(|(t, _)| *t).collect();
        times.extend(self.candidate.as_ref().map(Candidate::next_wakeup));
        times.extend(self.next_pass);
        times.extend(self.zombie.as_ref().map(|z| z.resume_at));
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

    /// Crashes now and restarts after `down_for`; a crashed process writes nothing, and a
    /// restarted one campaigns under a new identity (the operator's identity carries a
    /// per-process suffix).
    pub fn crash(&mut self, now: SimTime, down_for: SimTime) {
        self.down_until = Some(now + down_for.max(1));
        self.next_pass = None;
        self.inflight.clear();
        self.zombie = None;
        if let Some(c) = self.candidate.as_mut() {
            c.stop();
        }
    }

    /// Stops the world now for `pause_for`: nothing of this replica runs, its lease renewals
    /// included; a pass it was in resumes where it stopped.
    pub fn pause(&mut self, now: SimTime, pause_for: SimTime) {
        self.paused_until = Some(now + pause_for.max(1));
    }

    /// True when this replica runs passes (it leads, or leader election is off).
    pub fn runs_passes(&self) -> bool {
        self.candidate.as_ref().is_none_or(Candidate::leading)
    }

    /// Advances the operator to `now`: deliver watch events, maybe run a pass.
    pub fn step(&mut self, world: &mut World, checker: &mut Checker, now: SimTime) {
        if let Some(t) = self.down_until {
            if now < t {
                self.cursor = world.store.log.len();
                return;
            }
            self.restart(world, now);
        }
        if let Some(t) = self.paused_until {
            if now < t {
                return;
            }
            self.paused_until = None;
        }
        // A pass stopped mid-plan resumes before the lease task notices anything: the fence
        // alone decides whether its remaining writes go out.
        match self.zombie.take() {
            Some(z) if now >= z.resume_at => self.resume(world, checker, z, now),
            z => self.zombie = z,
        }
        self.campaign(world, now);
        let triggered = self.pull_events(world, now);
        let relist = self.relist_period();
        if relist > 0 && now >= self.last_relist + relist {
            self.relist(world, now);
        }
        if triggered && self.runs_passes() {
            let soon = now + DEBOUNCE.as_millis() as SimTime;
            self.next_pass = Some(self.next_pass.map_or(soon, |t| t.min(soon)));
        }
        if self.next_pass.is_some_and(|t| t <= now) {
            self.next_pass = None;
            if self.runs_passes() {
                self.pass(world, checker, now);
            }
        }
    }

    fn restart(&mut self, world: &World, now: SimTime) {
        self.down_until = None;
        self.restarts += 1;
        self.relist(world, now);
        match self.candidate.as_mut() {
            Some(c) => *c = c.restarted(self.restarts, now),
            None => self.next_pass = Some(now),
        }
    }

    /// Sends the rest of a pass stopped by a pause and ends that pass as the shell's pass loop
    /// does: the whole pass's report decides when the next one runs.
    fn resume(&mut self, world: &mut World, checker: &mut Checker, z: Suspended, now: SimTime) {
        let mode = if z.in_flight {
            Sending::InFlight
        } else {
            Sending::Fenced
        };
        let from = Stretch::Resumed(mode);
        let rest = self.apply(world, checker, &z.snapshot, &z.rest, now, from);
        let mut report = z.report;
        report.outcomes.extend(rest.outcomes);
        self.schedule_after(&z.plan, &report, now);
    }

    /// The shell's pass loop after a pass: consecutive failures back off, dropped or skipped
    /// effects retry soon, otherwise the plan's requeue hint (`runner::Cadence`).
    fn schedule_after(&mut self, plan: &Plan, report: &Report, now: SimTime) {
        if let Some(delay) = self.cadence.after_pass(plan, report) {
            let t = now + (delay.as_millis() as SimTime).max(1);
            self.next_pass = Some(self.next_pass.map_or(t, |p| p.min(t)));
        }
    }

    /// One step of the lease driver; passes start on `Acquired` and stop on `Lost`.
    fn campaign(&mut self, world: &mut World, now: SimTime) {
        let Some(c) = self.candidate.as_mut() else {
            return;
        };
        match c.step(&mut world.store, &mut self.rng, now) {
            Some(Change::Acquired) => self.next_pass = Some(now),
            Some(Change::Lost) => self.next_pass = None,
            None => {}
        }
    }

    fn pull_events(&mut self, world: &World, now: SimTime) -> bool {
        let log = &world.store.log;
        for (index, event) in log.iter().enumerate().skip(self.cursor) {
            if event.object.kind() == crate::objects::Kind::Lease {
                continue; // the operator's caches do not watch Leases
            }
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
        let mut relevant = false;
        for (_, index) in &delivered {
            let event = &log[*index];
            relevant |= self.relevant(event.event, &event.object);
            apply_watch(&mut self.cache, event.event, &event.object);
            if let Some(trace) = self.trace.as_mut() {
                trace.push(Record::Watch {
                    at: timestamp(now),
                    event: event.event,
                    object: event.object.clone(),
                });
            }
        }
        relevant
    }

    /// Whether a delivered watch event wakes the pass loop, as in the shell's watches: node
    /// updates only when they change something a pass reads (`cache::node_changed`).
    fn relevant(&self, event: EventType, object: &AnyObject) -> bool {
        match (event, object) {
            (EventType::Deleted, _) => true,
            (_, AnyObject::Node(node)) => {
                nodewright_shell::cache::node_changed(&self.node_fingerprints, node)
            }
            _ => true,
        }
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
            trace.push(Record::pass(at, self.passes, &plan));
        }
        let down = self.faults.restart_after.0.max(1_000);
        let mut cut = self.interrupt_next_pass.take();
        if let Some(pause @ Interrupt::Pause { after, .. }) = cut
            && plan.effects.len() <= after
        {
            // A pause mid-plan waits for a pass it can stop in the middle of.
            self.interrupt_next_pass = Some(pause);
            cut = None;
        }
        if let (None, Some(marker)) = (cut, self.faults.crash_before.as_deref()) {
            cut = (self.marker_crashes.next(marker, &plan.effects))
                .map(|after| Interrupt::Crash { after, down });
        }
        if cut.is_none() && self.rng.chance(self.faults.crash) {
            let after = self.rng.below(plan.effects.len() as u64 + 1) as usize;
            cut = Some(Interrupt::Crash { after, down });
        }
        let limit = cut.map_or(plan.effects.len(), |c| c.after().min(plan.effects.len()));
        let report = self.apply(
            world,
            checker,
            &snapshot,
            &plan.effects[..limit],
            now,
            Stretch::Pass(self.passes),
        );
        match cut {
            Some(Interrupt::Crash { down, .. }) => return self.crash(now, down),
            Some(Interrupt::Pause {
                pause_for,
                in_flight,
                ..
            }) => {
                self.pause(now, pause_for);
                let rest = plan.effects[limit..].to_vec();
                self.zombie = Some(Suspended {
                    resume_at: now + pause_for.max(1),
                    snapshot,
                    rest,
                    in_flight,
                    plan,
                    report,
                });
                return;
            }
            None => {}
        }
        // A snapshot some of whose pods the cache dropped is taken again for the next pass.
        let forgot = self.forget_settled(&plan.settled_pods);
        self.snapshot = (!forgot).then_some(snapshot);
        self.schedule_after(&plan, &report, now);
    }

    /// D28, as the shell's pod cache does: drops the settled executor pods that are unchanged
    /// since the snapshot; true when it dropped any.
    fn forget_settled(&mut self, settled: &[nodewright_core::jobs::SettledPod]) -> bool {
        let mut forgot = false;
        for pod in settled {
            let key = crate::objects::key(Some(&pod.namespace), &pod.name);
            if self
                .cache
                .pods
                .get(&key)
                .is_some_and(|p| pod.is_unchanged(&p.metadata))
            {
                self.cache.pods.remove(&key);
                forgot = true;
            }
        }
        forgot
    }

    /// Applies effects with the shell's interpreter over the simulated apiserver; returns its
    /// report.
    fn apply(
        &mut self,
        world: &mut World,
        checker: &mut Checker,
        snapshot: &Snapshot,
        effects: &[Effect],
        now: SimTime,
        from: Stretch,
    ) -> Report {
        let (pass, mode) = match from {
            Stretch::Pass(pass) => (pass, Sending::Fenced),
            Stretch::Resumed(mode) => (u64::MAX, mode),
        };
        let config = PortConfig {
            namespace: self.options.namespace.clone(),
            conflict_probability: self.faults.conflicts,
            deny_job_deletes: self.faults.deny_job_deletes,
            fenced: mode == Sending::Fenced
                && !self.candidate.as_ref().is_none_or(|c| c.admits(now)),
        };
        let log_before = world.store.log.len();
        let cache = std::mem::take(&mut self.cache);
        let port = SimPort::new(world, &cache, &config, &mut self.rng);
        let interpreter =
            Interpreter::with_port(port, &self.options.namespace, self.recorder.clone())
                .with_finalizer_chain(self.finalizer_chain.clone());
        let run = || futures::executor::block_on(interpreter.apply_effects(snapshot, effects));
        let report = match &self.logs {
            Some(sink) => sink.capture(now, run),
            None => run(),
        };
        let port = interpreter.into_port();
        let written = port.take_written();
        self.events.append(&mut port.take_events());
        drop(port);
        self.cache = cache;
        if world.store.log.len() != log_before && mode == Sending::Fenced {
            self.last_write = Some(now);
        }
        for (index, (kind, outcome)) in report.outcomes.iter().enumerate() {
            *self
                .outcomes
                .entry(format!("{kind}/{}", outcome.label()))
                .or_default() += 1;
            if let Some(trace) = self.trace.as_mut() {
                trace.push(Record::Outcome {
                    at: timestamp(now),
                    pass,
                    index,
                    outcome: TraceOutcome::from(outcome),
                });
            }
        }
        checker.check_written(&written, &world.store.objects, now);
        report
    }
}

/// A pass stopped by a pause: the rest of its plan is sent when the pause ends, and only then
/// does the pass end (its whole report schedules the next one, as in the shell's loop).
struct Suspended {
    /// When the pause ends.
    resume_at: SimTime,
    /// The snapshot the pass planned on.
    snapshot: Snapshot,
    /// The effects not sent before the pause.
    rest: Vec<Effect>,
    /// The rest had already passed the fence and lands when the pause ends.
    in_flight: bool,
    /// The pass's plan (its requeue hint and errors).
    plan: Plan,
    /// What the effects sent before the pause did.
    report: Report,
}

/// How a pass is cut short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interrupt {
    /// The process dies after `after` effects and restarts after `down`.
    Crash {
        /// Effects sent before.
        after: usize,
        /// Downtime.
        down: SimTime,
    },
    /// The process stops the world after `after` effects for `pause_for`; the rest of the plan
    /// is sent when it resumes (through the write fence).
    Pause {
        /// Effects sent before.
        after: usize,
        /// Length of the pause.
        pause_for: SimTime,
        /// The rest was already sent (it passed the fence before the pause) and lands when the
        /// pause ends.
        in_flight: bool,
    },
}

impl Interrupt {
    /// Effects sent before the interruption.
    pub fn after(&self) -> usize {
        match self {
            Interrupt::Crash { after, .. } | Interrupt::Pause { after, .. } => *after,
        }
    }
}

/// How a stretch of effects meets the write fence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sending {
    /// Each write is checked against the fence right before it is sent.
    Fenced,
    /// The writes passed the fence before a pause and were in flight since: they land now,
    /// unchecked, and are not this replica's writes of this instant (L1 looks at sends).
    InFlight,
}

/// Where a stretch of effects comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stretch {
    /// The plan of pass number `n`.
    Pass(u64),
    /// The rest of a plan, when a pause ends.
    Resumed(Sending),
}
