//! Leader election in the simulation: every replica drives the operator's own lease state machine
//! (`nodewright_shell::leader::Machine`) against a Lease in the simulated apiserver, on its own
//! virtual clock, with the writes the operator's driver would send (`leader::lease::write_for`)
//! and the operator's write fence (`leader::Window`). Faults delay, hang or conflict its lease
//! writes; a replica's clock may run fast or slow and its wall clock may be skewed.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use nodewright_shell::leader::lease::{self, LeaseWrite};
use nodewright_shell::leader::{Change, LeaderConfig, Machine, Timings, Window, view_of};
use serde::{Deserialize, Serialize};

use crate::actions::{Action, TimedAction};
use crate::rng::Rng;
use crate::store::Store;
use crate::time::{Dur, SimTime, timestamp};

/// Leader election settings of a scenario: several replicas campaign for one Lease.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Election {
    /// Operator replicas (each a full operator with its own cache).
    #[serde(default = "two")]
    pub replicas: usize,
    /// Lease duration (15 s, as in the operator).
    #[serde(default = "lease_duration")]
    pub lease_duration: Dur,
    /// Renew deadline (10 s).
    #[serde(default = "renew_deadline")]
    pub renew_deadline: Dur,
    /// Retry period (2 s).
    #[serde(default = "retry_period")]
    pub retry_period: Dur,
    /// Per-replica clocks (missing entries: exact clocks).
    #[serde(default)]
    pub clocks: Vec<Clock>,
    /// Per-replica lease faults from the start (missing entries: none).
    #[serde(default)]
    pub faults: Vec<LeaseFaults>,
}

fn two() -> usize {
    2
}
fn lease_duration() -> Dur {
    Dur(15_000)
}
fn renew_deadline() -> Dur {
    Dur(10_000)
}
fn retry_period() -> Dur {
    Dur(2_000)
}

impl Default for Election {
    fn default() -> Self {
        Election {
            replicas: two(),
            lease_duration: lease_duration(),
            renew_deadline: renew_deadline(),
            retry_period: retry_period(),
            clocks: Vec::new(),
            faults: Vec::new(),
        }
    }
}

impl Election {
    /// The machine timings.
    pub fn timings(&self) -> Timings {
        Timings {
            lease_duration: Duration::from_millis(self.lease_duration.0),
            renew_deadline: Duration::from_millis(self.renew_deadline.0),
            retry_period: Duration::from_millis(self.retry_period.0),
        }
    }
}

/// One replica's clocks.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Clock {
    /// How fast its monotonic clock runs against virtual time (1.0: exact; 1.02: 2 % fast).
    #[serde(default = "one")]
    pub rate: f64,
    /// Its wall clock's offset in seconds (negative: behind); only `renewTime` shows it.
    #[serde(default)]
    pub skew_seconds: i64,
}

fn one() -> f64 {
    1.0
}

impl Default for Clock {
    fn default() -> Self {
        Clock {
            rate: 1.0,
            skew_seconds: 0,
        }
    }
}

impl Clock {
    /// The replica's monotonic reading at virtual time `t`.
    pub fn local(&self, t: SimTime) -> Duration {
        Duration::from_millis((t as f64 * self.rate.max(1e-3)) as u64)
    }

    /// The first virtual time at which the monotonic reading reaches `local`.
    pub fn virtual_at(&self, local: Duration) -> SimTime {
        (local.as_millis() as f64 / self.rate.max(1e-3)).ceil() as SimTime
    }

    fn wall(&self, t: SimTime) -> MicroTime {
        let at = timestamp(t);
        let shifted = at
            .checked_add(jiff::SignedDuration::from_secs(self.skew_seconds))
            .unwrap_or(at);
        MicroTime(shifted)
    }
}

/// What goes wrong with one replica's lease writes; all off by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaseFaults {
    /// Lease writes never answer and never land (the attempt times out at its bound).
    #[serde(default)]
    pub hang: bool,
    /// Lease writes land and answer this late (an answer past the attempt's bound is a timeout;
    /// the write still lands then).
    #[serde(default)]
    pub delay: Dur,
    /// Probability that another writer updates the Lease right before this replica's write, so the
    /// write fails with a 409 conflict.
    #[serde(default)]
    pub conflicts: f64,
}

/// A lease write on its way.
#[derive(Clone, Debug)]
struct Inflight {
    /// Local time the write was sent (the machine's `started`).
    started: Duration,
    /// Virtual time the attempt's bound runs out.
    timeout_at: SimTime,
    /// Virtual time the write reaches the apiserver and its answer comes back (`None`: never).
    lands_at: Option<SimTime>,
    write: LeaseWrite,
}

/// One replica's campaign: the operator's machine, its fence window and the write in flight.
#[derive(Clone, Debug)]
pub struct Candidate {
    machine: Machine,
    config: LeaderConfig,
    /// Its clocks.
    pub clock: Clock,
    /// Its lease faults.
    pub faults: LeaseFaults,
    window: Window<Duration>,
    leading: bool,
    next_attempt: SimTime,
    inflight: Option<Inflight>,
    /// Writes that timed out locally but still reach the apiserver later.
    late: Vec<(SimTime, LeaseWrite)>,
    /// Leadership transitions: (virtual time, identity, change).
    pub changes: Vec<(SimTime, String, Change)>,
}

impl Candidate {
    /// A candidate `identity` for the lease `name` in `namespace`, first attempting at `now`.
    pub fn new(identity: &str, namespace: &str, election: &Election, now: SimTime) -> Self {
        let mut config = LeaderConfig::new(namespace, identity);
        config.timings = election.timings();
        Candidate {
            machine: Machine::new(identity, config.timings),
            config,
            clock: Clock::default(),
            faults: LeaseFaults::default(),
            window: Window::closed(),
            leading: false,
            next_attempt: now,
            inflight: None,
            late: Vec::new(),
            changes: Vec::new(),
        }
    }

    /// The same replica after a restart: a new process, campaigning afresh under the identity
    /// `<identity>-r<restarts>` with the same clock, timings and faults.
    pub fn restarted(&self, restarts: u32, now: SimTime) -> Self {
        let base = self.config.identity.split("-r").next().unwrap_or_default();
        let identity = format!("{base}-r{restarts}");
        let mut next = Candidate::new(&identity, &self.config.namespace, &Election::default(), now);
        next.config.timings = self.config.timings;
        next.machine = Machine::new(&identity, self.config.timings);
        next.clock = self.clock;
        next.faults = self.faults;
        next.changes = self.changes.clone();
        next
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        self.machine.identity()
    }

    /// True while the pass loop runs (between announced `Acquired` and `Lost`).
    pub fn leading(&self) -> bool {
        self.leading
    }

    /// True when the machine itself says this candidate may act as leader at virtual time `t`.
    pub fn machine_leads(&self, t: SimTime) -> bool {
        self.machine.leading(self.clock.local(t))
    }

    /// True when the write fence lets a write through at virtual time `t`.
    pub fn admits(&self, t: SimTime) -> bool {
        self.window.admits(self.clock.local(t))
    }

    /// When this candidate next acts on its own.
    pub fn next_wakeup(&self) -> SimTime {
        let mut next = self.next_attempt;
        if let Some(f) = &self.inflight {
            next = next.min(f.timeout_at);
            next = f.lands_at.map_or(next, |l| next.min(l));
        }
        self.late.iter().map(|(t, _)| *t).fold(next, SimTime::min)
    }

    /// Advances to virtual time `now`: late writes land, the write in flight answers or times
    /// out, a due attempt runs. Returns the leadership change announced, if any.
    pub fn step(&mut self, store: &mut Store, rng: &mut Rng, now: SimTime) -> Option<Change> {
        let due: Vec<LeaseWrite> = drain_due(&mut self.late, now);
        for write in due {
            let _ = send(store, &write);
        }
        if let Some(f) = self.inflight.take() {
            match f.lands_at {
                Some(l) if l <= now && l <= f.timeout_at => {
                    match send(store, &f.write) {
                        true => self.machine.on_write_ok(f.started),
                        false => self.machine.on_write_failed(),
                    }
                    return self.finish(now);
                }
                _ if now >= f.timeout_at => {
                    self.machine.on_write_failed();
                    if let Some(l) = f.lands_at {
                        self.late.push((l, f.write));
                    }
                    return self.finish(now);
                }
                _ => {
                    self.inflight = Some(f);
                    return None;
                }
            }
        }
        if now < self.next_attempt {
            return None;
        }
        self.attempt(store, rng, now)
    }

    /// One read and, when the machine asks for it, one write.
    fn attempt(&mut self, store: &mut Store, rng: &mut Rng, now: SimTime) -> Option<Change> {
        let local = self.clock.local(now);
        let bound = self.machine.attempt_bound(local);
        let read = store
            .get::<Lease>(Some(&self.config.namespace), &self.config.name)
            .cloned();
        let action = self
            .machine
            .on_read(local, read.as_ref().map(view_of).as_ref());
        let Some(write) = lease::write_for(action, read, &self.config, self.clock.wall(now)) else {
            return self.finish(now);
        };
        if rng.chance(self.faults.conflicts) {
            foreign_update(store, &self.config);
        }
        let lands_at = (!self.faults.hang).then_some(now + self.faults.delay.0);
        self.inflight = Some(Inflight {
            started: local,
            timeout_at: self.clock.virtual_at(local + bound),
            lands_at,
            write,
        });
        self.step(store, rng, now)
    }

    /// Sets the fence from the machine and schedules the next attempt, as the operator's driver
    /// does after each attempt.
    fn finish(&mut self, now: SimTime) -> Option<Change> {
        let local = self.clock.local(now);
        self.window.set(self.machine.fence_until(local));
        let change = self.machine.change(local);
        match change {
            Some(Change::Acquired) => self.leading = true,
            Some(Change::Lost) => {
                self.window.close();
                self.leading = false;
            }
            None => {}
        }
        if let Some(c) = change {
            self.changes.push((now, self.identity().to_string(), c));
        }
        self.next_attempt = self.clock.virtual_at(self.machine.next_attempt(local));
        change
    }

    /// The process stops (crash): the fence closes with it.
    pub fn stop(&mut self) {
        self.window.close();
        self.leading = false;
        self.inflight = None;
    }
}

fn drain_due(late: &mut Vec<(SimTime, LeaseWrite)>, now: SimTime) -> Vec<LeaseWrite> {
    let (due, keep): (Vec<_>, Vec<_>) = late.drain(..).partition(|(t, _)| *t <= now);
    *late = keep;
    due.into_iter().map(|(_, w)| w).collect()
}

/// Sends a lease write to the apiserver: a create, or an update guarded by the resourceVersion
/// it carries. True when it was accepted.
fn send(store: &mut Store, write: &LeaseWrite) -> bool {
    match write {
        LeaseWrite::Create(lease) => store.create(lease.clone()).is_ok(),
        LeaseWrite::Replace(lease) => {
            let rv = lease.metadata.resource_version.clone();
            store.update(lease.clone(), rv.as_deref()).is_ok()
        }
    }
}

/// Another writer touches the Lease (a label), moving its resourceVersion but not its record.
fn foreign_update(store: &mut Store, config: &LeaderConfig) {
    let _ = store.modify::<Lease>(Some(&config.namespace), &config.name, |l| {
        let labels = l.metadata.labels.get_or_insert_with(Default::default);
        let n: u64 = labels
            .get("sim/touched")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        labels.insert("sim/touched".into(), (n + 1).to_string());
    });
}

/// A random election for exploration: 2–3 replicas with clocks up to 5 % fast or slow and wall
/// clocks up to an hour off, and lease faults (hung or late writes, conflicts) on random
/// replicas until `faults_stop`.
pub fn random_election(rng: &mut Rng, faults_stop: SimTime) -> (Election, Vec<TimedAction>) {
    let replicas = rng.range(2, 3) as usize;
    let clocks = (0..replicas)
        .map(|_| Clock {
            rate: 0.95 + rng.below(11) as f64 / 100.0,
            skew_seconds: rng.range(0, 7200) as i64 - 3600,
        })
        .collect();
    let mut actions = Vec::new();
    for _ in 0..rng.range(0, 2) {
        let replica = Some(rng.below(replicas as u64) as usize);
        let faults = match rng.below(3) {
            0 => LeaseFaults {
                hang: true,
                ..Default::default()
            },
            1 => LeaseFaults {
                delay: Dur(rng.range(1, 12) * 1000),
                ..Default::default()
            },
            _ => LeaseFaults {
                conflicts: 0.5,
                ..Default::default()
            },
        };
        let at = Dur(rng.range(1, (faults_stop / 1000).max(2)) * 1000);
        actions.push(TimedAction {
            at,
            action: Action::LeaseFaults { replica, faults },
        });
        actions.push(TimedAction {
            at: Dur(faults_stop),
            action: Action::LeaseFaults {
                replica,
                faults: LeaseFaults::default(),
            },
        });
    }
    let election = Election {
        replicas,
        clocks,
        ..Election::default()
    };
    (election, actions)
}
