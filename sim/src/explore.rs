//! Random exploration: random clusters, NodeWright specs, package behaviour, user actions and
//! fault schedules, each run with invariant checks after every step.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::{Value, json};

use crate::actions::{Action, TimedAction};
use crate::expect::{Expect, NodeWrightExpect};
use crate::operator::{Faults, ReconcileFn, real_core};
use crate::rng::Rng;
use crate::scenario::{Cluster, NodeDef, PdbDef, PodDef, RunConfig, RunResult, Scenario};
use crate::time::{Dur, show};
use crate::world::{Attempt, PackageScript};

/// Exploration settings.
#[derive(Clone)]
pub struct ExploreConfig {
    /// Number of seeds.
    pub seeds: u64,
    /// First seed.
    pub first: u64,
    /// Require every rollout to converge once faults stop.
    pub require_convergence: bool,
    /// The core to drive.
    pub reconcile: ReconcileFn,
}

impl Default for ExploreConfig {
    fn default() -> Self {
        ExploreConfig {
            seeds: 100,
            first: 0,
            require_convergence: false,
            reconcile: real_core(),
        }
    }
}

/// One failing seed.
#[derive(Clone, Debug)]
pub struct SeedFailure {
    /// The seed (re-run it with `--first <seed> --seeds 1`).
    pub seed: u64,
    /// The generated scenario (JSON is valid scenario YAML).
    pub scenario: Box<Scenario>,
    /// What went wrong.
    pub result: RunResult,
}

/// Totals of an exploration.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Seeds run.
    pub seeds: u64,
    /// Core passes.
    pub passes: u64,
    /// Simulation steps.
    pub steps: u64,
    /// Seeds that converged.
    pub converged: u64,
    /// Seeds with violations (or, when required, without convergence).
    pub failures: Vec<SeedFailure>,
}

impl Summary {
    /// One line per failing seed: the first violation or unmet expectation.
    pub fn render_all(&self) -> String {
        let mut out = String::new();
        for f in &self.failures {
            let first = f
                .result
                .violations
                .first()
                .map(|v| format!("{} at {}: {}", v.rule, show(v.at), v.message))
                .or_else(|| f.result.failures.first().cloned())
                .unwrap_or_default();
            let _ = writeln!(out, "seed {}: {first}", f.seed);
        }
        out
    }

    /// Human-readable summary with the first failure in detail.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "explored {} seeds: {} core passes, {} steps, {} converged, {} failing",
            self.seeds,
            self.passes,
            self.steps,
            self.converged,
            self.failures.len()
        );
        if let Some(f) = self.failures.first() {
            let _ = writeln!(out, "first failing seed {}:", f.seed);
            if let Some(v) = f.result.violations.first() {
                let _ = writeln!(
                    out,
                    "  invariant {} at {}: {}",
                    v.rule,
                    show(v.at),
                    v.message
                );
            }
            for u in f.result.failures.iter().take(5) {
                let _ = writeln!(out, "  unmet: {u}");
            }
        }
        out
    }
}

/// Runs `config.seeds` random scenarios.
pub fn explore(config: &ExploreConfig) -> Summary {
    let mut summary = Summary::default();
    for seed in config.first..config.first + config.seeds {
        let scenario = random_scenario(seed, config.require_convergence);
        let run = RunConfig {
            trace: false,
            timeline: false,
            determinism: seed % 8 == 0,
        };
        summary.seeds += 1;
        match scenario.run_with(config.reconcile.clone(), run) {
            Ok(result) => {
                summary.passes += result.passes;
                summary.steps += result.steps;
                if result.met_at.is_some() && config.require_convergence {
                    summary.converged += 1;
                }
                let bad =
                    !result.violations.is_empty() || (config.require_convergence && !result.passed);
                if bad {
                    summary.failures.push(SeedFailure {
                        seed,
                        scenario: Box::new(scenario),
                        result,
                    });
                }
            }
            Err(e) => summary.failures.push(SeedFailure {
                seed,
                scenario: Box::new(scenario),
                result: RunResult {
                    failures: vec![format!("setup: {e}")],
                    ..Default::default()
                },
            }),
        }
    }
    summary
}

const PACKAGES: [&str; 3] = ["alpha", "bravo", "charlie"];

/// A random scenario for `seed`: 1–4 nodes, 1–2 NodeWrights, 1–3 packages, faults for the first
/// minutes, user actions, then a quiet period.
pub fn random_scenario(seed: u64, converge: bool) -> Scenario {
    let mut rng = Rng::new(seed);
    let node_count = rng.range(1, 4) as u32;
    let nodes: Vec<String> = (1..=node_count).map(|i| format!("worker-{i}")).collect();
    let mut cluster = Cluster::default();
    for name in &nodes {
        let role = if rng.chance(0.5) { "a" } else { "b" };
        cluster.nodes.push(NodeDef {
            name: Some(name.clone()),
            labels: [("role".to_string(), role.to_string())].into(),
            ..Default::default()
        });
    }
    if rng.chance(0.5) {
        let node = rng.pick(&nodes).cloned().unwrap_or_default();
        cluster.pods.push(PodDef {
            name: "web".into(),
            node,
            labels: [("app".to_string(), "web".to_string())].into(),
            count: Some(rng.range(1, 2) as u32),
            ..Default::default()
        });
        if rng.chance(0.5) {
            cluster.pdbs.push(PdbDef {
                name: "web".into(),
                selector: [("app".to_string(), "web".to_string())].into(),
                max_unavailable: Some(1),
                ..Default::default()
            });
        }
    }
    let nw_count = if rng.chance(0.3) { 2 } else { 1 };
    let mut objects = Vec::new();
    let mut scripts = Vec::new();
    let mut names = Vec::new();
    for i in 0..nw_count {
        let name = format!("nw{i}");
        names.push(name.clone());
        objects.push(random_nodewright(&mut rng, &name, node_count));
    }
    for pkg in PACKAGES {
        if rng.chance(0.3) {
            let fails = rng.range(1, 2) as usize;
            let mut attempts: Vec<Attempt> = (0..fails)
                .map(|_| Attempt {
                    duration: Dur(rng.range(1, 20) * 1000),
                    exit: 1,
                    ..Default::default()
                })
                .collect();
            attempts.push(Attempt {
                duration: Dur(rng.range(1, 20) * 1000),
                ..Default::default()
            });
            scripts.push(PackageScript {
                package: Some(pkg.into()),
                stage: Some(if rng.chance(0.5) { "apply" } else { "config" }.into()),
                attempts,
                ..Default::default()
            });
        }
    }
    scripts.push(PackageScript {
        attempts: vec![Attempt {
            duration: Dur(rng.range(2, 15) * 1000),
            ..Default::default()
        }],
        reboot_down: Some(Dur(rng.range(10, 40) * 1000)),
        ..Default::default()
    });
    let faults_stop = rng.range(60, 300) * 1000;
    let mut timeline = vec![TimedAction {
        at: Dur(0),
        action: Action::Faults {
            faults: random_faults(&mut rng),
        },
    }];
    for _ in 0..rng.range(0, 3) {
        let at = Dur(rng.range(5, faults_stop / 1000) * 1000);
        if let Some(action) = random_action(&mut rng, &nodes, &names, &objects) {
            timeline.push(TimedAction { at, action });
        }
    }
    timeline.push(TimedAction {
        at: Dur(faults_stop),
        action: Action::Faults {
            faults: Faults::default(),
        },
    });
    // Once faults stop, lift any pause so the rollout can converge.
    for name in &names {
        timeline.push(TimedAction {
            at: Dur(faults_stop),
            action: Action::Patch {
                kind: "NodeWright".into(),
                name: name.clone(),
                namespace: None,
                patch: json!({"metadata": {"annotations": {"nodewright.nvidia.com/pause": null}}}),
            },
        });
    }
    // Drawn last, so seeds without uninstall cycles keep their earlier scenarios.
    let cycles = crate::cycles::uninstall_cycles(&mut rng, &mut objects, faults_stop + 120_000);
    timeline.extend(cycles);
    // Also drawn last: replicas campaigning for the lease, with lease faults while faults last.
    let pauses = timeline
        .iter()
        .any(|a| matches!(a.action, Action::PauseReplica { .. }));
    let leader_election = (pauses || rng.chance(0.2)).then(|| {
        let (election, faults) = crate::leader::random_election(&mut rng, faults_stop);
        timeline.extend(faults);
        election
    });
    let mut expect = Expect::default();
    if converge {
        for name in &names {
            expect.nodewrights.insert(
                name.clone(),
                NodeWrightExpect {
                    status: Some("complete".into()),
                    ..Default::default()
                },
            );
        }
    }
    Scenario {
        name: format!("seed-{seed}"),
        spec: "random".into(),
        seed,
        cluster,
        objects,
        packages: scripts,
        timeline,
        end: Some(Dur(faults_stop + 30 * 60_000)),
        run_for: (!converge).then_some(Dur(faults_stop + 3 * 60_000)),
        expect,
        options: BTreeMap::new(),
        leader_election,
        ..Default::default()
    }
}

/// Upgrades `alpha` to 1.1.0 and moves every `dependsOn: {alpha: 1.0.0}` along in the same edit, so
/// the admission webhook accepts it (a bump alone leaves dependents pointing at a missing version).
fn upgrade_alpha(objects: &[Value], nw: &str) -> Value {
    let mut packages = json!({"alpha": {"version": "1.1.0"}});
    let spec = objects
        .iter()
        .find(|o| o.pointer("/metadata/name").and_then(Value::as_str) == Some(nw))
        .and_then(|o| o.pointer("/spec/packages"))
        .and_then(Value::as_object);
    for (name, pkg) in spec.into_iter().flatten() {
        if pkg.pointer("/dependsOn/alpha").is_some() {
            packages[name.as_str()] = json!({"dependsOn": {"alpha": "1.1.0"}});
        }
    }
    json!({"spec": {"packages": packages}})
}

fn random_faults(rng: &mut Rng) -> Faults {
    Faults {
        cache_lag: Dur(rng.range(0, 3) * 500),
        drop_watch: if rng.chance(0.3) { 0.05 } else { 0.0 },
        relist_every: Dur(0),
        conflicts: if rng.chance(0.5) { 0.2 } else { 0.0 },
        crash: if rng.chance(0.3) { 0.05 } else { 0.0 },
        restart_after: Dur(rng.range(1, 10) * 1000),
        deny_job_deletes: false,
        crash_before: None,
    }
}

fn random_nodewright(rng: &mut Rng, name: &str, nodes: u32) -> Value {
    let mut packages = serde_json::Map::new();
    let count = rng.range(1, 3) as usize;
    for (i, pkg) in PACKAGES.iter().take(count).enumerate() {
        let mut p = json!({"version": "1.0.0", "image": format!("registry.example/{pkg}")});
        if i > 0 && rng.chance(0.5) {
            p["dependsOn"] = json!({PACKAGES[i - 1]: "1.0.0"});
        }
        match rng.below(4) {
            0 => p["interrupt"] = json!({"type": "reboot"}),
            1 => p["interrupt"] = json!({"type": "service", "services": ["containerd"]}),
            _ => {}
        }
        if rng.chance(0.4) {
            p["configMap"] = json!({"config.yaml": format!("value: {}", rng.below(100))});
        }
        packages.insert(pkg.to_string(), p);
    }
    let mut spec = json!({"packages": packages, "priority": 100 + rng.below(3) * 50});
    match rng.below(3) {
        0 => spec["interruptionBudget"] = json!({"count": rng.range(1, nodes as u64)}),
        1 => spec["interruptionBudget"] = json!({"percent": rng.range(25, 100)}),
        _ => {}
    }
    if rng.chance(0.3) {
        spec["nodeSelectors"] = json!({"matchLabels": {"role": "a"}});
    }
    json!({
        "apiVersion": "nodewright.nvidia.com/v1alpha1",
        "kind": "NodeWright",
        "metadata": {"name": name},
        "spec": spec,
    })
}

fn random_action(
    rng: &mut Rng,
    nodes: &[String],
    nws: &[String],
    objects: &[Value],
) -> Option<Action> {
    let node = rng.pick(nodes)?.clone();
    let nw = rng.pick(nws)?.clone();
    Some(match rng.below(7) {
        0 => Action::RebootNode {
            node,
            down: Dur(rng.range(5, 60) * 1000),
        },
        1 => Action::Patch {
            kind: "NodeWright".into(),
            name: nw,
            namespace: None,
            patch: json!({"metadata": {"annotations": {"nodewright.nvidia.com/pause": "true"}}}),
        },
        2 => Action::Patch {
            kind: "NodeWright".into(),
            name: nw,
            namespace: None,
            patch: json!({"metadata": {"annotations": {"nodewright.nvidia.com/pause": null}}}),
        },
        3 => Action::Patch {
            kind: "NodeWright".into(),
            patch: upgrade_alpha(objects, &nw),
            name: nw,
            namespace: None,
        },
        4 => Action::Patch {
            kind: "NodeWright".into(),
            name: nw,
            namespace: None,
            patch: json!({"spec": {"packages": {"alpha": {"configMap": {"config.yaml": format!("value: {}", rng.below(1000))}}}}}),
        },
        5 => Action::CrashOperator {
            after_effects: rng.below(4) as usize,
            down: Dur(rng.range(1, 20) * 1000),
            replica: None,
        },
        // The leader stops the world mid-pass: long enough for a standby to take over, or
        // short enough that it keeps the lease but its window may have passed.
        _ => Action::PauseReplica {
            replica: None,
            after_effects: Some(rng.below(4) as usize),
            pause_for: Dur(if rng.chance(0.5) { 25_000 } else { 8_000 }),
            in_flight: false,
        },
    })
}
