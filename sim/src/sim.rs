//! The simulation loop: world, operator, timeline actions and invariant checks, advanced from
//! one interesting instant to the next.

use crate::actions::{Action, TimedAction, run_world_action};
use crate::invariants::Checker;
use crate::operator::Operator;
use crate::time::SimTime;
use crate::timeline::Timeline;
use crate::world::World;

/// How long controllers take to react to a write.
pub const REACTION: SimTime = 100;

/// A running simulation.
pub struct Simulation {
    /// The cluster.
    pub world: World,
    /// The operator.
    pub operator: Operator,
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
    pub fn new(world: World, operator: Operator, mut actions: Vec<TimedAction>) -> Self {
        actions.sort_by_key(|a| a.at);
        let mut checker = Checker::default();
        checker.operator_namespace = operator.options.namespace.clone();
        for node in world.store.objects.nodes.values() {
            if crate::facts::unschedulable(node) {
                checker
                    .user_cordoned
                    .insert(node.metadata.name.clone().unwrap_or_default());
            }
        }
        Simulation {
            world,
            operator,
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
        self.operator.start(&self.world, self.now);
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
        self.operator.step(&mut self.world, &mut self.checker, now);
        if self.world.store.log.len() != self.checked_at_log {
            self.checked_at_log = self.world.store.log.len();
            self.checker.check_state(&self.world.store.objects, now);
        }
        if let Some(t) = self.timeline.as_mut() {
            t.observe(&self.world.store.objects, now);
        }
        let mut next: Vec<SimTime> = Vec::new();
        next.extend(self.world.next_wakeup(now));
        next.extend(self.operator.next_wakeup());
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
                } => {
                    self.operator.crash_next_pass = Some((*after_effects, down.0, false));
                    self.operator.next_pass.get_or_insert(now);
                }
                Action::LeaderChange {
                    after_effects,
                    down,
                    late_effects,
                } => {
                    self.operator.crash_next_pass = Some((*after_effects, down.0, *late_effects));
                    self.operator.next_pass.get_or_insert(now);
                }
                Action::Faults { faults } => self.operator.faults = faults.clone(),
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
