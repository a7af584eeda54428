//! Invariants of 02-lifecycle.md §16, checked after every step (state), on every plan (against
//! the snapshot it was computed from) and on every write the interpreter applied.

use std::collections::{BTreeMap, BTreeSet};

use nodewright_core::lifecycle::interrupts::{DrainAction, classify};
use nodewright_core::{Effect, Plan, Snapshot};
use nodewright_crds::{NodeWright, PackageStatus, Stage, State, keys};
use serde::{Deserialize, Serialize};

use crate::facts::{self, job_facts};
use crate::objects::Objects;
use crate::port::Written;
use crate::time::SimTime;
use nodewright_core::effect::EntryTransition;

mod merge_safety;
mod single_writer;

pub use single_writer::ReplicaView;

/// One broken invariant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// Virtual time.
    pub at: SimTime,
    /// Invariant id (`I1` ... as in 02-lifecycle.md §16) and short name.
    pub rule: String,
    /// What was seen.
    pub message: String,
}

/// State carried between checks (monotonic counters, user cordons).
#[derive(Clone, Debug, Default)]
pub struct Checker {
    /// Nodes cordoned by someone other than the operator (scenario setup or user action).
    pub user_cordoned: BTreeSet<String>,
    /// The operator namespace (its own pods are never in the way of a drain).
    pub operator_namespace: String,
    node_order_offset: BTreeMap<String, i32>,
    /// Violations found so far.
    pub violations: Vec<Violation>,
}

impl Checker {
    fn report(&mut self, at: SimTime, rule: &str, message: String) {
        if self.violations.len() < 1000 {
            self.violations.push(Violation {
                at,
                rule: rule.into(),
                message,
            });
        }
    }

    /// Checks the cluster state after a step.
    pub fn check_state(&mut self, objects: &Objects, at: SimTime) {
        self.one_executor(objects, at);
        for node in objects.nodes.values() {
            let name = node.metadata.name.clone().unwrap_or_default();
            if facts::unschedulable(node)
                && !facts::holds_operator_cordon(node)
                && !self.user_cordoned.contains(&name)
            {
                self.report(
                    at,
                    "I5 cordon-ownership",
                    format!("node {name} is unschedulable without any cordon annotation"),
                );
            }
            for nw in objects.nodewrights.values() {
                let nw_name = nw.metadata.name.clone().unwrap_or_default();
                if facts::annotation(node, &keys::node_status(&nw_name)) == Some("complete")
                    && facts::annotation(node, &keys::cordon(&nw_name)) == Some("true")
                {
                    self.report(
                        at,
                        "I6 complete-uncordoned",
                        format!("node {name} is complete for {nw_name} but still holds its cordon"),
                    );
                }
                for (key, entry) in facts::node_state(node, &nw_name).0 {
                    if entry.state == Some(State::Skipped) && entry.stage != Stage::Interrupt {
                        self.report(
                            at,
                            "I11 stage-legality",
                            format!(
                                "node {name} {nw_name} entry {key} is skipped at stage {}",
                                entry.stage
                            ),
                        );
                    }
                }
            }
        }
        for nw in objects.nodewrights.values() {
            self.budget(nw, objects, at);
            let uid = nw.metadata.uid.clone().unwrap_or_default();
            let offset = nw.status.as_ref().map_or(0, |s| s.node_order_offset);
            let previous = self.node_order_offset.insert(uid, offset).unwrap_or(0);
            if offset < previous {
                self.report(
                    at,
                    "I20 monotonic",
                    format!(
                        "{} nodeOrderOffset went from {previous} to {offset}",
                        nw.metadata.name.clone().unwrap_or_default()
                    ),
                );
            }
        }
    }

    fn one_executor(&mut self, objects: &Objects, at: SimTime) {
        let mut seen: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
        for job in objects.jobs.values() {
            if let Some(f) = job_facts(job).filter(|f| f.unfinished) {
                seen.entry((f.nodewright, f.node, f.package))
                    .or_default()
                    .push(job.metadata.name.clone().unwrap_or_default());
            }
        }
        for ((nw, node, pkg), jobs) in seen {
            if jobs.len() > 1 {
                self.report(
                    at,
                    "I1 one-executor",
                    format!(
                        "{nw} has {} unfinished executors for package {pkg} on {node}: {}",
                        jobs.len(),
                        jobs.join(", ")
                    ),
                );
            }
        }
    }

    fn budget(&mut self, nw: &NodeWright, objects: &Objects, at: SimTime) {
        if nw.metadata.deletion_timestamp.is_some() || !nw.spec.deployment_policy.is_empty() {
            return;
        }
        let name = nw.metadata.name.clone().unwrap_or_default();
        let selected = facts::selected(nw, objects.nodes.values());
        let n = selected.len() as i32;
        let bound = match &nw.spec.interruption_budget {
            Some(b) if b.percent.is_some() => (n * b.percent.unwrap_or(100) / 100).max(1),
            Some(b) if b.count.is_some() => b.count.unwrap_or(n).min(n).max(1),
            _ => n.max(1),
        };
        let busy: BTreeSet<String> = objects
            .jobs
            .values()
            .filter_map(job_facts)
            .filter(|f| f.unfinished && f.nodewright == name)
            .map(|f| f.node)
            .collect();
        let out: Vec<String> = selected
            .iter()
            .filter_map(|node| {
                let node_name = node.metadata.name.clone().unwrap_or_default();
                let cordoned = facts::annotation(node, &keys::cordon(&name)) == Some("true");
                (cordoned || busy.contains(&node_name)).then_some(node_name)
            })
            .collect();
        if out.len() as i32 > bound {
            self.report(
                at,
                "I7 budget",
                format!(
                    "{name} has {} nodes out ({}) with a budget of {bound}",
                    out.len(),
                    out.join(", ")
                ),
            );
        }
    }

    /// Checks the writes the interpreter applied.
    pub fn check_written(&mut self, written: &[Written], objects: &Objects, at: SimTime) {
        for w in written {
            match w {
                Written::JobCreated(job) => {
                    let Some(f) = job_facts(job) else { continue };
                    if f.interrupt {
                        let others: Vec<String> = objects
                            .jobs
                            .values()
                            .filter(|j| j.metadata.uid != job.metadata.uid)
                            .filter_map(job_facts)
                            .filter(|o| o.unfinished && o.node == f.node)
                            .map(|o| format!("{}/{}/{}", o.nodewright, o.package, o.stage))
                            .collect();
                        if !others.is_empty() {
                            self.report(
                                at,
                                "I2 no-interrupt-beside-work",
                                format!(
                                    "interrupt executor for {} on {} created while {} unfinished",
                                    f.package,
                                    f.node,
                                    others.join(", ")
                                ),
                            );
                        }
                    }
                }
                Written::Node {
                    before,
                    after,
                    entries,
                } => {
                    let node = after.metadata.name.clone().unwrap_or_default();
                    let (was, is) = (facts::unschedulable(before), facts::unschedulable(after));
                    if was != is {
                        if !facts::holds_operator_cordon(before)
                            && !facts::holds_operator_cordon(after)
                        {
                            self.report(at, "I5 cordon-ownership", format!("operator changed unschedulable on {node} without holding a cordon annotation"));
                        } else if is && !facts::holds_operator_cordon(after) {
                            self.report(
                                at,
                                "I5 cordon-ownership",
                                format!("operator cordoned {node} without a cordon annotation"),
                            );
                        } else if !is && facts::holds_operator_cordon(after) {
                            self.report(
                                at,
                                "I5 cordon-ownership",
                                format!(
                                    "operator uncordoned {node} while a cordon annotation remains"
                                ),
                            );
                        }
                    }
                    for t in entries {
                        if let Some(why) = illegal_transition(t) {
                            self.report(
                                at,
                                "I11 stage-legality",
                                format!("{} {} {}: {why}", t.nodewright, t.node, t.key),
                            );
                        }
                    }
                }
            }
        }
    }

    /// Checks a plan against the snapshot it was computed from.
    pub fn check_plan(&mut self, snapshot: &Snapshot, plan: &Plan, at: SimTime) {
        let nws: BTreeMap<String, &NodeWright> = snapshot
            .nodewrights
            .iter()
            .map(|nw| (nw.metadata.name.clone().unwrap_or_default(), &**nw))
            .collect();
        let unfinished: Vec<_> = snapshot
            .jobs
            .iter()
            .filter_map(job_facts)
            .filter(|f| f.unfinished)
            .collect();
        let mut deleted: BTreeSet<String> = BTreeSet::new();
        let mut started: BTreeSet<(String, String, String)> = BTreeSet::new();
        let mut interrupts: BTreeSet<(String, String)> = BTreeSet::new();
        for effect in &plan.effects {
            match effect {
                Effect::DeleteJob { name, .. } => {
                    deleted.insert(name.clone());
                }
                Effect::CreateJob { job, .. } => {
                    let Some(f) = job_facts(&job.to_job()) else {
                        continue;
                    };
                    if let Some(nw) = nws.get(&f.nodewright) {
                        if facts::flag(nw, keys::PAUSE) || facts::flag(nw, keys::DISABLE) {
                            self.report(
                                at,
                                "I14 paused-disabled",
                                format!(
                                    "executor started for paused/disabled {} on {}",
                                    f.nodewright, f.node
                                ),
                            );
                        }
                        self.dependencies(nw, &f, snapshot, at);
                        self.priority_gate(nw, &f, snapshot, at);
                        if !f.interrupt {
                            self.cordon_first(nw, &f, snapshot, at);
                        }
                    }
                    let live_same: Vec<_> = snapshot
                        .jobs
                        .iter()
                        .filter(|j| {
                            !deleted.contains(j.metadata.name.as_deref().unwrap_or_default())
                        })
                        .filter_map(job_facts)
                        .filter(|o| o.unfinished && o.node == f.node)
                        .collect();
                    if live_same
                        .iter()
                        .any(|o| o.nodewright == f.nodewright && o.package == f.package)
                    {
                        self.report(
                            at,
                            "I1 one-executor",
                            format!(
                                "start of {}/{} on {} while one is unfinished",
                                f.nodewright, f.package, f.node
                            ),
                        );
                    }
                    if !started.insert((f.nodewright.clone(), f.node.clone(), f.package.clone())) {
                        self.report(
                            at,
                            "I1 one-executor",
                            format!(
                                "two starts of {}/{} on {} in one pass",
                                f.nodewright, f.package, f.node
                            ),
                        );
                    }
                    if f.interrupt {
                        if !live_same.is_empty() {
                            self.report(at, "I2 no-interrupt-beside-work", format!("interrupt start on {} while the snapshot shows unfinished executors", f.node));
                        }
                        if !interrupts.insert((f.nodewright.clone(), f.node.clone())) {
                            self.report(
                                at,
                                "I2 no-interrupt-beside-work",
                                format!(
                                    "two interrupt starts for {} on {} in one pass",
                                    f.nodewright, f.node
                                ),
                            );
                        }
                    }
                }
                Effect::Evict {
                    namespace,
                    name,
                    context,
                    ..
                } => {
                    let node = snapshot
                        .workload_pods
                        .iter()
                        .find(|p| {
                            p.metadata.name.as_deref() == Some(name)
                                && p.metadata.namespace.as_deref() == Some(namespace)
                        })
                        .and_then(|p| p.spec.as_ref()?.node_name.clone())
                        .or_else(|| context.node.clone())
                        .unwrap_or_default();
                    let cordoned = node_in(snapshot, &node).is_some_and(|n| {
                        facts::unschedulable(n) && facts::holds_operator_cordon(n)
                    });
                    if !cordoned {
                        self.report(
                            at,
                            "I4 drain-after-cordon",
                            format!(
                                "eviction of {namespace}/{name} on {node} before a durable cordon"
                            ),
                        );
                    }
                    if let Some(nw) = context.nodewright.as_ref().and_then(|n| nws.get(n))
                        && (facts::flag(nw, keys::PAUSE) || facts::flag(nw, keys::DISABLE))
                    {
                        self.report(
                            at,
                            "I14 paused-disabled",
                            format!(
                                "eviction for paused/disabled {}",
                                context.nodewright.clone().unwrap_or_default()
                            ),
                        );
                    }
                }
                Effect::PatchJob {
                    name,
                    suspend: Some(false),
                    ..
                } => {
                    let owner = snapshot
                        .jobs
                        .iter()
                        .find(|j| j.metadata.name.as_deref() == Some(name))
                        .and_then(job_facts)
                        .map(|f| f.nodewright);
                    if let Some(nw) = owner.as_ref().and_then(|o| nws.get(o))
                        && (facts::flag(nw, keys::PAUSE) || facts::flag(nw, keys::DISABLE))
                    {
                        self.report(
                            at,
                            "I15 disabled-never-resumes",
                            format!(
                                "job {name} of paused/disabled {} un-suspended",
                                owner.unwrap_or_default()
                            ),
                        );
                    }
                }
                Effect::RemoveFinalizer { nodewright, .. } => {
                    if let Some(nw) = nws.get(nodewright) {
                        self.finalizer(nw, snapshot, at);
                    }
                }
                Effect::PatchNode(patch) => {
                    if let Some(node) = node_in(snapshot, &patch.node) {
                        self.deletion_sent_as_is(patch, node, at);
                    }
                    for (key, value) in &patch.annotations {
                        if let Some(nw) = key.strip_prefix(&format!("{}/cordon_", keys::PREFIX))
                            && value.is_some()
                            && nws.get(nw).is_some_and(|n| {
                                facts::flag(n, keys::PAUSE) || facts::flag(n, keys::DISABLE)
                            })
                        {
                            self.report(
                                at,
                                "I14 paused-disabled",
                                format!("cordon of {} for paused/disabled {nw}", patch.node),
                            );
                        }
                    }
                }
                _ => {}
            }
        }
        let _ = unfinished;
    }

    fn dependencies(
        &mut self,
        nw: &NodeWright,
        f: &facts::JobFacts,
        snapshot: &Snapshot,
        at: SimTime,
    ) {
        let Ok(stage) = serde_json::from_value::<Stage>(serde_json::Value::String(f.stage.clone()))
        else {
            return;
        };
        if stage.in_uninstall_cycle() {
            return;
        }
        let (Some(pkg), Some(node)) = (spec_package(nw, &f.package), node_in(snapshot, &f.node))
        else {
            return;
        };
        let nw_name = nw.metadata.name.clone().unwrap_or_default();
        let state = facts::node_state(node, &nw_name);
        for (dep, version) in &pkg.depends_on {
            let done = state.get(dep, version).is_some_and(|e| {
                e.state == Some(State::Complete)
                    && matches!(e.stage, Stage::Config | Stage::PostInterrupt)
            });
            if !done {
                self.report(at, "I9 dependencies", format!("{nw_name}: {} {} started on {} before dependency {dep}|{version} is complete", f.package, f.stage, f.node));
            }
        }
    }
}

impl Checker {
    /// I3 (02-lifecycle.md §16.3): an apply, upgrade, uninstall or config re-entry executor of a
    /// package with an interrupt starts only on a node the snapshot shows durably cordoned by its
    /// NodeWright and already drained. A `config` that follows the package's `apply` or `upgrade`
    /// (the snapshot's entry is still at that stage: NextStage, §7.5 gate step 1) is no re-entry:
    /// it runs under the cordon and drain its first stage took, so only the cordon is checked;
    /// the pods are checked again before the interrupt fires (Q15).
    fn cordon_first(
        &mut self,
        nw: &NodeWright,
        f: &facts::JobFacts,
        snapshot: &Snapshot,
        at: SimTime,
    ) {
        let stage = serde_json::from_value::<Stage>(serde_json::Value::String(f.stage.clone()));
        if !matches!(
            stage,
            Ok(Stage::Apply | Stage::Upgrade | Stage::Uninstall | Stage::Config)
        ) {
            return;
        }
        let updates = nw
            .status
            .as_ref()
            .map(|s| s.config_updates.clone())
            .unwrap_or_default();
        let Some(pkg) = spec_package(nw, &f.package) else {
            return;
        };
        if !nodewright_core::lifecycle::predicates::has_interrupt(pkg, &updates) {
            return;
        }
        let nw_name = nw.metadata.name.clone().unwrap_or_default();
        let Some(node) = node_in(snapshot, &f.node) else {
            return;
        };
        let cordoned = facts::unschedulable(node)
            && facts::annotation(node, &keys::cordon(&nw_name)) == Some("true");
        let follows_first_stage = matches!(stage, Ok(Stage::Config))
            && facts::node_state(node, &nw_name)
                .get(&f.package, &pkg.version)
                .is_some_and(|e| matches!(e.stage, Stage::Apply | Stage::Upgrade));
        let in_the_way: Vec<String> = snapshot
            .workload_pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&f.node))
            .filter(|p| {
                let drain = nw.spec.drain_config.as_ref();
                !matches!(
                    classify(p, &self.operator_namespace, drain),
                    DrainAction::Ignore
                )
            })
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        if !cordoned || (!in_the_way.is_empty() && !follows_first_stage) {
            self.report(
                at,
                "I3 cordon-before-interrupt-work",
                format!(
                    "{nw_name} started {} {} on {} (cordoned: {cordoned}, pods in the way: [{}])",
                    f.package,
                    f.stage,
                    f.node,
                    in_the_way.join(", ")
                ),
            );
        }
    }

    /// I17: the finalizer goes only when no Enabled package has an entry on a selected node
    /// (the cleanup patches of the same plan remove the operator's own annotations, not entries).
    fn finalizer(&mut self, nw: &NodeWright, snapshot: &Snapshot, at: SimTime) {
        let nw_name = nw.metadata.name.clone().unwrap_or_default();
        for node in facts::selected(nw, snapshot.nodes.iter().map(|n| &**n)) {
            let state = facts::node_state(node, &nw_name);
            for (key, pkg) in &nw.spec.packages {
                let name = package_name(key, pkg);
                let enabled = pkg.uninstall.as_ref().is_some_and(|u| u.enabled);
                let node_name = node.metadata.name.as_deref().unwrap_or_default();
                let entry = state.get(name, &pkg.version);
                // The same pass may record the uninstall executor's success (T11/T12) and then
                // remove the finalizer: an entry whose uninstall-cycle Job succeeded counts as gone.
                let finished = entry.is_some_and(|e| {
                    e.stage.in_uninstall_cycle()
                        && snapshot.jobs.iter().any(|j| {
                            facts::succeeded(j)
                                && job_facts(j).is_some_and(|f| {
                                    f.nodewright == nw_name
                                        && f.node == node_name
                                        && f.package == name
                                        && f.stage == e.stage.as_str()
                                })
                        })
                });
                if enabled && entry.is_some() && !finished {
                    self.report(
                        at,
                        "I17 finalizer",
                        format!(
                            "{nw_name} finalizer removed while {name}|{} is still installed on {}",
                            pkg.version,
                            node.metadata.name.clone().unwrap_or_default()
                        ),
                    );
                }
            }
        }
    }

    /// I8: an executor of B starts on n only if NodeReady(B, n) (02-lifecycle.md §5): every
    /// non-disabled NodeWright preceding B is complete on n (or everywhere, for `sequencing: all`).
    /// Completeness is approximated from entries: every installed spec package complete at
    /// `config` or `post-interrupt`.
    fn priority_gate(
        &mut self,
        b: &NodeWright,
        f: &facts::JobFacts,
        snapshot: &Snapshot,
        at: SimTime,
    ) {
        let order = |nw: &NodeWright| {
            (
                nw.spec.priority,
                nw.metadata.name.clone().unwrap_or_default(),
            )
        };
        let b_name = b.metadata.name.clone().unwrap_or_default();
        for a in &snapshot.nodewrights {
            if order(a) >= order(b)
                || facts::flag(a, keys::DISABLE)
                || a.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            let a_name = a.metadata.name.clone().unwrap_or_default();
            let selected = facts::selected(a, snapshot.nodes.iter().map(|n| &**n));
            let nodes: Vec<_> = if a.spec.sequencing == nodewright_crds::SequencingMode::All {
                selected
            } else {
                selected
                    .into_iter()
                    .filter(|n| n.metadata.name.as_deref() == Some(f.node.as_str()))
                    .collect()
            };
            for node in nodes {
                let state = facts::node_state(node, &a_name);
                let done = a
                    .spec
                    .packages
                    .values()
                    .filter(|p| !p.is_uninstalling())
                    .all(|p| {
                        let name = if p.name.is_empty() {
                            ""
                        } else {
                            p.name.as_str()
                        };
                        state.get(name, &p.version).is_some_and(|e| {
                            e.state == Some(State::Complete)
                                && matches!(e.stage, Stage::Config | Stage::PostInterrupt)
                        })
                    });
                if !done {
                    self.report(at, "I8 priority-gating", format!(
                        "{b_name} started {} {} on {} before {a_name} (priority {}) is complete on {}",
                        f.package, f.stage, f.node, a.spec.priority, node.metadata.name.clone().unwrap_or_default()
                    ));
                    return;
                }
            }
        }
    }
}

/// The spec package called `name` (by its `name` field, or its key before defaulting).
fn spec_package<'a>(nw: &'a NodeWright, name: &str) -> Option<&'a nodewright_crds::Package> {
    nw.spec
        .packages
        .iter()
        .find(|(key, p)| package_name(key, p) == name)
        .map(|(_, p)| p)
}

/// The snapshot's node called `name`.
fn node_in<'a>(snapshot: &'a Snapshot, name: &str) -> Option<&'a k8s_openapi::api::core::v1::Node> {
    snapshot
        .nodes
        .iter()
        .map(|n| &**n)
        .find(|n| n.metadata.name.as_deref() == Some(name))
}

/// A package's name: the `name` field once defaulted, else its key in `spec.packages`.
fn package_name<'a>(key: &'a str, pkg: &'a nodewright_crds::Package) -> &'a str {
    if pkg.name.is_empty() { key } else { &pkg.name }
}

fn is_install(stage: Stage) -> bool {
    !stage.in_uninstall_cycle()
}

fn next_stage(stage: Stage) -> Option<Stage> {
    match stage {
        Stage::Apply | Stage::Upgrade => Some(Stage::Config),
        Stage::Config => Some(Stage::Interrupt),
        Stage::Interrupt => Some(Stage::PostInterrupt),
        _ => None,
    }
}

/// Why an applied entry change is not one of T1–T20 (02-lifecycle.md §7.2), if it is not.
pub fn illegal_transition(t: &EntryTransition) -> Option<String> {
    let (Some(from), Some(to)) = (&t.from, &t.to) else {
        return match (&t.from, &t.to) {
            (None, Some(to)) if to.state == Some(State::Skipped) => {
                Some("created as skipped".into())
            }
            // I12, I23: only a started executor creates an entry (T1, T16, T17).
            (None, Some(to)) if to.state != Some(State::InProgress) || to.restarts != 0 => {
                Some(format!(
                    "entry created as ({}, {}) restarts {}",
                    to.stage,
                    to.state.map_or("-", |s| s.as_str()),
                    to.restarts
                ))
            }
            _ => None,
        };
    };
    let show =
        |e: &PackageStatus| format!("({}, {})", e.stage, e.state.map_or("-", |s| s.as_str()));
    if to.state == Some(State::Skipped) && to.stage != Stage::Interrupt {
        return Some(format!("skipped at {}", to.stage));
    }
    if from.stage == to.stage {
        if from.state == Some(State::Complete)
            && to.state != Some(State::Complete)
            && to.stage != Stage::Config
        {
            return Some(format!(
                "complete entry regressed {} -> {}",
                show(from),
                show(to)
            ));
        }
        return None;
    }
    let ok = match (from.stage, to.stage) {
        (_, Stage::Config) if to.state == Some(State::InProgress) => true,
        (Stage::Uninstall, Stage::UninstallInterrupt) => true,
        (Stage::Uninstall, Stage::Apply) => true,
        (Stage::UninstallInterrupt, s) if is_install(s) => false,
        (s, Stage::Uninstall) => is_install(s) && from.state == Some(State::Complete),
        (s, n) if next_stage(s) == Some(n) => from.state == Some(State::Complete),
        (_, s) => {
            from.state != Some(State::Complete)
                && to.state == Some(State::InProgress)
                && to.restarts == 0
                && is_install(s)
        }
    };
    (!ok).then(|| format!("illegal transition {} -> {}", show(from), show(to)))
}
