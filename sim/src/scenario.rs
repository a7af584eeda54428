//! Scenario files: a cluster, objects, scripted package behaviour, a timeline of user actions
//! and faults, and expectations; plus the runner that checks them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Node, NodeSpec, Pod, PodSpec, PodStatus, Taint};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nodewright_core::Options;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::actions::{TimedAction, apply_object};
use crate::expect::{Always, Expect, History, Report};
use crate::leader::{Candidate, Election};
use crate::operator::{Faults, Operator, ReconcileFn};
use crate::rng::Rng;
use crate::sim::Simulation;
use crate::store::Store;
use crate::time::{Dur, SimTime, show};
use crate::timeline::Timeline;
use crate::trace::Record;
use crate::world::{Attempt, NodeRun, PackageScript, Scripts, World, WorldSettings};

/// A scenario file.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Short name.
    pub name: String,
    /// The spec scenario or flow it implements (`04-jobs-rules.md §14 A1`).
    pub spec: String,
    /// What it shows.
    #[serde(default)]
    pub description: String,
    /// Why it is expected to fail today (the core lacks the behaviour); reported separately.
    #[serde(default)]
    pub pending: Option<String>,
    /// Seed for fault randomness.
    #[serde(default)]
    pub seed: u64,
    /// Operator environment (`JOB_BACKOFF_LIMIT: "3"`).
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    /// Nodes, workload pods and PDBs.
    #[serde(default)]
    pub cluster: Cluster,
    /// Objects created at time 0 (NodeWrights, DeploymentPolicies, ConfigMaps, ...).
    #[serde(default)]
    pub objects: Vec<Value>,
    /// Scripted package behaviour (first match wins).
    #[serde(default)]
    pub packages: Vec<PackageScript>,
    /// User actions and faults.
    #[serde(default)]
    pub timeline: Vec<TimedAction>,
    /// Operator faults from the start.
    #[serde(default)]
    pub faults: Faults,
    /// Run several operator replicas that campaign for the reconcile Lease with the operator's
    /// lease machine (default: one replica, leader election off).
    #[serde(default)]
    pub leader_election: Option<Election>,
    /// World knobs.
    #[serde(default)]
    pub world: WorldKnobs,
    /// Give up at this virtual time (default 2h).
    #[serde(default)]
    pub end: Option<Dur>,
    /// Final expectations; the run stops as soon as they hold after the last action.
    #[serde(default)]
    pub expect: Expect,
    /// Expectations at given times.
    #[serde(default)]
    pub checkpoints: Vec<Checkpoint>,
    /// Checked after every step.
    #[serde(default)]
    pub always: Always,
    /// Keep running at least this long even when the expectations already hold.
    #[serde(default)]
    pub run_for: Option<Dur>,
}

/// What a run records.
#[derive(Clone, Copy, Debug)]
pub struct RunConfig {
    /// Record a JSONL trace.
    pub trace: bool,
    /// Record the stage timeline.
    pub timeline: bool,
    /// Check determinism (I21) on every pass.
    pub determinism: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            trace: false,
            timeline: true,
            determinism: true,
        }
    }
}

/// Expectations at a time.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// When.
    pub at: Dur,
    /// What must hold then.
    pub expect: Expect,
}

/// World settings a scenario may change.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorldKnobs {
    /// Kubelet heartbeat period (node resourceVersion churn).
    #[serde(default)]
    pub heartbeat: Option<Dur>,
    /// Pod termination time.
    #[serde(default)]
    pub termination: Option<Dur>,
    /// Randomise every attempt's duration (scripted ones and the default 5 s) by up to this
    /// fraction either way, drawn from the scenario `seed` (`run --seed`, `run --seeds`).
    #[serde(default)]
    pub jitter: Option<f64>,
}

/// The cluster at time 0.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    /// Nodes.
    #[serde(default)]
    pub nodes: Vec<NodeDef>,
    /// Workload pods.
    #[serde(default)]
    pub pods: Vec<PodDef>,
    /// PodDisruptionBudgets.
    #[serde(default)]
    pub pdbs: Vec<PdbDef>,
}

/// One node, or `count` nodes named `<prefix><i>`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeDef {
    /// Node name.
    #[serde(default)]
    pub name: Option<String>,
    /// Number of nodes (with `prefix`).
    #[serde(default)]
    pub count: Option<u32>,
    /// Name prefix for `count` nodes (default `worker-`).
    #[serde(default)]
    pub prefix: Option<String>,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Taints.
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// Cordoned by the user.
    #[serde(default)]
    pub unschedulable: bool,
}

/// A workload pod (or `count` of them).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodDef {
    /// Name (with `count`, a prefix).
    pub name: String,
    /// Namespace (default `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Node it runs on.
    pub node: String,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Controller kind: `ReplicaSet` (default, replaced elsewhere on eviction), `DaemonSet`, `none`.
    #[serde(default)]
    pub owner: Option<String>,
    /// Number of pods.
    #[serde(default)]
    pub count: Option<u32>,
}

/// A PodDisruptionBudget.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PdbDef {
    /// Name.
    pub name: String,
    /// Namespace (default `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// matchLabels.
    pub selector: BTreeMap<String, String>,
    /// minAvailable.
    #[serde(default)]
    pub min_available: Option<i32>,
    /// maxUnavailable.
    #[serde(default)]
    pub max_unavailable: Option<i32>,
}

/// Outcome of one scenario run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunResult {
    /// Scenario name.
    pub name: String,
    /// Spec reference.
    pub spec: String,
    /// Pending reason, if pending.
    pub pending: Option<String>,
    /// All expectations met and no invariant violated.
    pub passed: bool,
    /// Unmet expectations and action errors.
    pub failures: Vec<String>,
    /// Invariant violations.
    pub violations: Vec<crate::invariants::Violation>,
    /// Timeline edits the simulated admission webhook refused.
    pub denials: Vec<String>,
    /// When the final expectations were first met.
    pub met_at: Option<SimTime>,
    /// Virtual time at the end.
    pub ended_at: SimTime,
    /// Core passes.
    pub passes: u64,
    /// Simulation steps.
    pub steps: u64,
    /// Stage timeline.
    #[serde(skip)]
    pub timeline: Timeline,
    /// Trace records, when recorded.
    #[serde(skip)]
    pub trace: Vec<Record>,
    /// Every object at the end of the run.
    #[serde(skip)]
    pub final_objects: Vec<crate::objects::AnyObject>,
    /// The operator's log lines (when the scenario expects some).
    pub logs: Vec<crate::logs::LogLine>,
}

impl Scenario {
    /// Parses a scenario from YAML.
    /// Errors name the line and column where the parser can tell (syntax errors, unknown or
    /// mistyped fields).
    pub fn from_yaml(text: &str) -> Result<Scenario, String> {
        let value: Value = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        serde_json::from_value(value).map_err(|e| {
            // The JSON value has no positions: parse again straight into the scenario for one.
            match serde_saphyr::from_str::<Scenario>(text) {
                Err(located) => located.to_string(),
                Ok(_) => e.to_string(),
            }
        })
    }

    /// Builds the world at time 0.
    pub fn build_world(&self) -> Result<World, String> {
        let mut settings = WorldSettings::default();
        if let Some(h) = self.world.heartbeat {
            settings.heartbeat = h.0;
        }
        if let Some(t) = self.world.termination {
            settings.termination = t.0;
        }
        let mut world = World::new(Store::default(), Scripts(self.scripts()), settings);
        for def in &self.cluster.nodes {
            for name in node_names(def) {
                let node = Node {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        labels: Some(def.labels.clone()),
                        annotations: Some(def.annotations.clone()).filter(|a| !a.is_empty()),
                        ..Default::default()
                    },
                    spec: Some(NodeSpec {
                        taints: Some(def.taints.clone()).filter(|t| !t.is_empty()),
                        unschedulable: def.unschedulable.then_some(true),
                        ..Default::default()
                    }),
                    status: None,
                };
                let mut node = node;
                crate::world::set_ready_for_start(&mut node, &name);
                world
                    .store
                    .create(node)
                    .map_err(|e| format!("node {name}: {e:?}"))?;
                world.nodes.insert(name, NodeRun::default());
            }
        }
        for def in &self.cluster.pdbs {
            world
                .store
                .create(pdb(def))
                .map_err(|e| format!("pdb {}: {e:?}", def.name))?;
        }
        for def in &self.cluster.pods {
            for pod in pods(def) {
                world
                    .store
                    .create(pod)
                    .map_err(|e| format!("pod {}: {e:?}", def.name))?;
            }
        }
        for object in &self.objects {
            apply_object(&mut world, object.clone())?;
        }
        Ok(world)
    }

    /// The operator replicas: one, or `leaderElection.replicas` candidates with their clocks and
    /// lease faults. The first keeps the scenario seed (the trace is recorded from it).
    fn replicas(
        &self,
        options: &Options,
        reconcile: &ReconcileFn,
        config: RunConfig,
    ) -> Vec<Operator> {
        let count = self
            .leader_election
            .as_ref()
            .map_or(1, |e| e.replicas.max(1));
        (0..count)
            .map(|i| {
                let seed = self.seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                let mut operator = Operator::new(options.clone(), reconcile.clone(), seed);
                operator.faults = self.faults.clone();
                operator.check_determinism = config.determinism;
                let logs = !self.expect.logs.is_empty()
                    || self.checkpoints.iter().any(|c| !c.expect.logs.is_empty());
                operator.logs = logs.then(crate::logs::LogSink::default);
                if let Some(e) = &self.leader_election {
                    let mut c = Candidate::new(&format!("replica-{i}"), &options.namespace, e, 0);
                    c.clock = e.clocks.get(i).copied().unwrap_or_default();
                    c.faults = e.faults.get(i).copied().unwrap_or_default();
                    operator.candidate = Some(c);
                }
                operator
            })
            .collect()
    }

    /// Runs the scenario against `reconcile` (the real core unless testing).
    pub fn run(&self, reconcile: ReconcileFn, record: bool) -> Result<RunResult, String> {
        self.run_with(
            reconcile,
            RunConfig {
                trace: record,
                ..RunConfig::default()
            },
        )
    }

    /// Runs the scenario with explicit recording settings.
    pub fn run_with(&self, reconcile: ReconcileFn, config: RunConfig) -> Result<RunResult, String> {
        let record = config.trace;
        let options = Options::from_env(&self.options).map_err(|e| e.to_string())?;
        let world = self.build_world()?;
        let mut replicas = self.replicas(&options, &reconcile, config);
        if let (true, Some(operator)) = (record, replicas.first_mut()) {
            operator.trace = Some(vec![Record::Header {
                version: crate::trace::TRACE_VERSION,
                source: format!("nodewright-sim scenario {}", self.name),
                namespace: operator.options.namespace.clone(),
                options_env: self.options.clone(),
            }]);
        }
        let mut actions = self.timeline.clone();
        actions.extend(self.checkpoints.iter().map(|c| TimedAction {
            at: c.at,
            action: crate::actions::Action::Mark,
        }));
        let mut sim = Simulation::new(world, replicas, actions);
        if config.timeline {
            sim.timeline = Some(Timeline::default());
        }
        let run_for = self.run_for.map_or(0, |d| d.0);
        sim.start();
        let end = self.end.map_or(2 * 3_600_000, |d| d.0);
        let mut report = Report::default();
        let mut checkpoints: Vec<&Checkpoint> = self.checkpoints.iter().collect();
        checkpoints.sort_by_key(|c| c.at);
        let mut next_checkpoint = 0;
        let mut met_at = None;
        let mut history = History::default();
        history.observe(&sim.world.store.objects);
        loop {
            while let Some(c) = checkpoints
                .get(next_checkpoint)
                .filter(|c| c.at.0 <= sim.now)
            {
                let mut r = Report::default();
                c.expect
                    .check_run(&sim.world.store.objects, &history, &mut r);
                for f in r.failures {
                    report.failures.push(format!("at {}: {f}", show(c.at.0)));
                }
                next_checkpoint += 1;
            }
            let at = sim.now;
            let more = sim.step();
            history.observe(&sim.world.store.objects);
            history.observe_events(&sim.events);
            history.leaders = sim.leaders();
            history.observe_logs(&sim.logs);
            self.always.check(&sim.world.store.objects, at, &mut report);
            if sim.actions_done()
                && next_checkpoint >= checkpoints.len()
                && at >= sim.last_action_at()
                && at >= run_for
            {
                let mut r = Report::default();
                self.expect
                    .check_run(&sim.world.store.objects, &history, &mut r);
                if r.failures.is_empty() {
                    met_at = Some(at);
                    break;
                }
            }
            if !more || sim.now > end {
                break;
            }
        }
        for c in &checkpoints[next_checkpoint.min(checkpoints.len())..] {
            let mut r = Report::default();
            c.expect
                .check_run(&sim.world.store.objects, &history, &mut r);
            for f in r.failures {
                report.failures.push(format!(
                    "at {} (run ended at {}): {f}",
                    show(c.at.0),
                    show(sim.now)
                ));
            }
        }
        let mut final_report = Report::default();
        self.expect
            .check_run(&sim.world.store.objects, &history, &mut final_report);
        report.failures.extend(final_report.failures);
        if let (Some(within), Some(met)) = (self.expect.within, met_at)
            && met > within.0
        {
            report.failures.push(format!(
                "expectations met at {} but required within {}",
                show(met),
                show(within.0)
            ));
        }
        report.failures.extend(
            sim.action_errors
                .iter()
                .map(|e| format!("action failed {e}")),
        );
        let mut timeline = sim.timeline.take().unwrap_or_default();
        timeline.finish(sim.now);
        let violations = sim.checker.violations.clone();
        Ok(RunResult {
            name: self.name.clone(),
            spec: self.spec.clone(),
            pending: self.pending.clone(),
            passed: report.failures.is_empty() && violations.is_empty(),
            failures: report.failures,
            violations,
            denials: sim.denials.clone(),
            met_at,
            ended_at: sim.now,
            passes: sim.passes(),
            steps: sim.steps,
            timeline,
            trace: sim.replicas[0].trace.take().unwrap_or_default(),
            final_objects: sim.world.store.objects.all(),
            logs: std::mem::take(&mut sim.logs),
        })
    }
}

/// The outcome of one scenario run over a range of seeds.
#[derive(Clone, Debug, Default)]
pub struct SeedSweep {
    /// Seeds run.
    pub seeds: Vec<u64>,
    /// The runs that did not pass, with their seed.
    pub failing: Vec<(u64, RunResult)>,
}

impl Scenario {
    /// Runs the scenario once per seed in `first..first + count` (the seed drives fault
    /// randomness and `world.jitter`), each with a fresh core from `core`.
    pub fn sweep(
        &self,
        core: impl Fn() -> ReconcileFn,
        first: u64,
        count: u64,
    ) -> Result<SeedSweep, String> {
        let mut out = SeedSweep::default();
        for seed in first..first.saturating_add(count) {
            let run = Scenario {
                seed,
                ..self.clone()
            };
            let result = run.run_with(
                core(),
                RunConfig {
                    timeline: false,
                    ..RunConfig::default()
                },
            )?;
            out.seeds.push(seed);
            if !result.passed {
                out.failing.push((seed, result));
            }
        }
        Ok(out)
    }

    /// The package scripts, with durations randomised by `world.jitter` from the seed; a
    /// catch-all script gives unscripted packages a randomised default duration too.
    fn scripts(&self) -> Vec<PackageScript> {
        let Some(jitter) = self.world.jitter.filter(|j| *j > 0.0) else {
            return self.packages.clone();
        };
        let jitter = jitter.min(0.95);
        let mut rng = Rng::new(self.seed ^ 0x6A17_7E25);
        let mut scripts = self.packages.clone();
        scripts.push(PackageScript::default());
        for script in &mut scripts {
            if script.attempts.is_empty() {
                script.attempts.push(Attempt::default());
            }
            for attempt in &mut script.attempts {
                let u = rng.below(1_000_001) as f64 / 1_000_000.0;
                let factor = 1.0 - jitter + 2.0 * jitter * u;
                attempt.duration = Dur((attempt.duration.0 as f64 * factor).round() as u64);
            }
        }
        scripts
    }
}

fn node_names(def: &NodeDef) -> Vec<String> {
    match (&def.name, def.count) {
        (Some(name), None) => vec![name.clone()],
        (name, count) => {
            let prefix = def
                .prefix
                .clone()
                .or(name.clone())
                .unwrap_or_else(|| "worker-".into());
            (1..=count.unwrap_or(1))
                .map(|i| format!("{prefix}{i}"))
                .collect()
        }
    }
}

fn pdb(def: &PdbDef) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(def.name.clone()),
            namespace: Some(def.namespace.clone().unwrap_or_else(|| "default".into())),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(LabelSelector {
                match_labels: Some(def.selector.clone()),
                ..Default::default()
            }),
            min_available: def.min_available.map(IntOrString::Int),
            max_unavailable: def.max_unavailable.map(IntOrString::Int),
            ..Default::default()
        }),
        status: None,
    }
}

fn pods(def: &PodDef) -> Vec<Pod> {
    let names: Vec<String> = match def.count {
        None => vec![def.name.clone()],
        Some(n) => (1..=n).map(|i| format!("{}-{i}", def.name)).collect(),
    };
    let owner = def.owner.clone().unwrap_or_else(|| "ReplicaSet".into());
    names
        .into_iter()
        .map(|name| Pod {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(def.namespace.clone().unwrap_or_else(|| "default".into())),
                labels: Some(def.labels.clone()),
                owner_references: (owner != "none").then(|| {
                    vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: owner.clone(),
                        name: def.name.clone(),
                        uid: format!("{}-owner", def.name),
                        controller: Some(true),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some(def.node.clone()),
                containers: vec![Container {
                    name: "app".into(),
                    image: Some("registry.example/app:1".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                ..Default::default()
            }),
        })
        .collect()
}
