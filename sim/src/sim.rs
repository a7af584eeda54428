//! The simulation loop: world, operator replicas, timeline actions and invariant checks, advanced
//! from one interesting instant to the next.

use crate::actions::{Action, TimedAction, run_world_action};
use nodewright_core::EventSpec;

use crate::invariants::{Checker, ReplicaView};
use crate::operator::{Interrupt, Operator};
use crate::time::SimTime;
use crate::timeline::Timeline;
use crate::world::World;

/// How long controllers take to react to a write.
pub const REACTION: SimTime = 100;

/// A running simulation.
pub struct Simulation {
    /// The cluster.
    pub world: World,
    /// The operator replicas (one unless the scenario turns leader election on).
    pub replicas: Vec<Operator>,
    /// Events every replica emitted, in order.
    pub events: Vec<EventSpec>,
    /// Log lines every replica's interpreter wrote, in order (replicas with a log sink).
    pub logs: Vec<crate::logs::LogLine>,
    /// Invariant state and violations.
    pub checker: Checker,
    /// Stage timeline, when recorded.
    pub timeline: Option<Timeline>,
    /// Current virtual time.
    pub now: SimTime,
    /// Scheduled actions, sorted by time.
    pub actions: Vec<TimedAction>,
    next_action: usize,
    /// Actions that could not be carried out.
    pub action_errors: Vec<String>,
    /// Timeline edits the admission webhook refused (the object stays as it was).
    pub denials: Vec<String>,
    /// Steps taken.
    pub steps: u64,
    checked_at_log: usize,
}

impl Simulation {
    /// A simulation at time 0; call [`Simulation::start`] before stepping.
    pub fn new(world: World, replicas: Vec<Operator>, mut actions: Vec<TimedAction>) -> Self {
        actions.sort_by_key(|a| a.at);
        let mut checker = Checker::default();
        checker.operator_namespace = replicas
            .first()
            .map(|o| o.options.namespace.clone())
            .unwrap_or_default();
        for node in world.store.objects.nodes.values() {
            if crate::facts::unschedulable(node) {
                checker
                    .user_cordoned
                    .insert(node.metadata.name.clone().unwrap_or_default());
            }
        }
        Simulation {
            world,
            replicas,
            events: Vec::new(),
            logs: Vec::new(),
            checker,
            timeline: None,
            now: 0,
            actions,
            next_action: 0,
            action_errors: Vec::new(),
            denials: Vec::new(),
            steps: 0,
            checked_at_log: usize::MAX,
        }
    }

    /// Starts the operator (initial list).
    pub fn start(&mut self) {
        for operator in &mut self.replicas {
            operator.start(&self.world, self.now);
        }
    }

    /// Core passes run by all replicas.
    pub fn passes(&self) -> u64 {
        self.replicas.iter().map(|o| o.passes).sum()
    }

    /// The replicas that became leader so far, in order.
    pub fn leaders(&self) -> Vec<String> {
        let mut acquired: Vec<(SimTime, String)> = self
            .replicas
            .iter()
            .filter_map(|o| o.candidate.as_ref())
            .flat_map(|c| c.changes.iter())
            .filter(|(_, _, change)| *change == nodewright_shell::leader::Change::Acquired)
            .map(|(at, who, _)| (*at, who.clone()))
            .collect();
        acquired.sort();
        acquired.into_iter().map(|(_, who)| who).collect()
    }

    /// The replica `index`, or the one running passes now (the first when none does).
    fn target(&self, index: Option<usize>) -> usize {
        index
            .filter(|i| *i < self.replicas.len())
            .or_else(|| self.replicas.iter().position(Operator::runs_passes))
            .unwrap_or(0)
    }

    /// Time of the last scheduled action.
    pub fn last_action_at(&self) -> SimTime {
        self.actions.last().map_or(0, |a| a.at.0)
    }

    /// True when every scheduled action ran.
    pub fn actions_done(&self) -> bool {
        self.next_action >= self.actions.len()
    }

    /// Processes the current instant and moves to the next one; false when nothing is left.
    pub fn step(&mut self) -> bool {
        let now = self.now;
        self.steps += 1;
        let log_before = self.world.store.log.len();
        self.run_due_actions(now);
        self.world.step(now);
        for operator in &mut self.replicas {
            operator.step(&mut self.world, &mut self.checker, now);
            self.events.append(&mut operator.events);
            self.logs
                .extend(operator.logs.iter().flat_map(|sink| sink.take()));
        }
        self.check_leadership(now);
        if self.world.store.log.len() != self.checked_at_log {
            self.checked_at_log = self.world.store.log.len();
            self.checker.check_state(&self.world.store.objects, now);
        }
        if let Some(t) = self.timeline.as_mut() {
            t.observe(&self.world.store.objects, now);
        }
        let mut next: Vec<SimTime> = Vec::new();
        next.extend(self.world.next_wakeup(now));
        next.extend(self.replicas.iter().filter_map(Operator::next_wakeup));
        next.extend(self.actions.get(self.next_action).map(|a| a.at.0));
        if self.world.store.log.len() != log_before {
            next.push(now + REACTION);
        }
        match next.into_iter().min() {
            Some(t) => {
                self.now = t.max(now + 1);
                true
            }
            None => false,
        }
    }

    fn run_due_actions(&mut self, now: SimTime) {
        while let Some(a) = self
            .actions
            .get(self.next_action)
            .filter(|a| a.at.0 <= now)
            .cloned()
        {
            self.next_action += 1;
            match &a.action {
                Action::CrashOperator {
                    after_effects,
                    down,
                    replica,
                } => {
                    let i = self.target(*replica);
                    let cut = Interrupt::Crash {
                        after: *after_effects,
                        down: down.0,
                    };
                    self.interrupt(i, cut, now);
                }
                Action::PauseReplica {
                    replica,
                    after_effects,
                    pause_for,
                    in_flight,
                } => {
                    let i = self.target(*replica);
                    match after_effects {
                        Some(after) => {
                            let cut = Interrupt::Pause {
                                after: *after,
                                pause_for: pause_for.0,
                                in_flight: *in_flight,
                            };
                            self.interrupt(i, cut, now);
                        }
                        None => self.replicas[i].pause(now, pause_for.0),
                    }
                }
                Action::LeaseFaults { replica, faults } => {
                    let i = self.target(*replica);
                    if let Some(c) = self.replicas[i].candidate.as_mut() {
                        c.faults = *faults;
                    }
                }
                Action::Faults { faults } => {
                    for operator in &mut self.replicas {
                        operator.faults = faults.clone();
                    }
                }
                Action::Cordon { node } => {
                    self.checker.user_cordoned.insert(node.clone());
                    let result = run_world_action(&mut self.world, &a.action, now);
                    self.record(result, now);
                }
                other => match crate::admission::admit(&self.world, other) {
                    Ok(()) => {
                        let result = run_world_action(&mut self.world, other, now);
                        self.record(result, now);
                    }
                    Err(why) => self
                        .denials
                        .push(format!("at {}: denied: {why}", crate::time::show(now))),
                },
            }
        }
    }

    /// Cuts replica `i`'s next pass short; a replica that runs passes runs one now.
    fn interrupt(&mut self, i: usize, cut: Interrupt, now: SimTime) {
        let operator = &mut self.replicas[i];
        operator.interrupt_next_pass = Some(cut);
        if operator.runs_passes() {
            operator.next_pass.get_or_insert(now);
        }
    }

    /// L1 single writer, when replicas campaign for the lease.
    fn check_leadership(&mut self, now: SimTime) {
        let views: Vec<ReplicaView> = self
            .replicas
            .iter()
            .filter_map(|o| {
                let c = o.candidate.as_ref()?;
                Some(ReplicaView {
                    identity: c.identity().to_string(),
                    machine_leads: o.down_until.is_none() && c.machine_leads(now),
                    fence_open: o.down_until.is_none() && c.admits(now),
                    wrote: o.last_write == Some(now),
                })
            })
            .collect();
        if views.len() > 1 {
            self.checker.check_single_writer(&views, now);
        }
    }

    fn record(&mut self, result: Result<(), String>, now: SimTime) {
        if let Err(e) = result {
            self.action_errors
                .push(format!("at {}: {e}", crate::time::show(now)));
        }
    }

    /// Runs until `end` or until nothing is left to do.
    pub fn run_until(&mut self, end: SimTime) {
        while self.now <= end && self.step() {}
    }
}
