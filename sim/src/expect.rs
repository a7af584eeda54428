//! Scenario expectations: node states, NodeWright status, Job and pod fields, and conditions
//! that must hold at every step.

use std::collections::{BTreeMap, BTreeSet};

use nodewright_crds::keys;
use serde::{Deserialize, Serialize};

use crate::facts::{self, JobFacts, job_facts};

mod events;
mod history;
mod logs;
mod meta;
mod status;

use crate::objects::Objects;
use crate::time::{Dur, SimTime, show};
use crate::world::{is_terminal, job_condition};
pub use events::EventExpect;
pub use history::{History, HistoryExpect};
pub use logs::LogExpect;
pub use meta::{NodeMetaExpect, TaintExpect};
pub use status::ConditionExpect;

/// Unmet expectations.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// One line per unmet expectation.
    pub failures: Vec<String>,
}

impl Report {
    fn fail(&mut self, text: String) {
        self.failures.push(text);
    }
}

/// True when `n` matches satisfy `count` (exactly), `at_least` and `at_most`; with none of
/// them, at least one must match.
fn counted(
    n: usize,
    count: Option<usize>,
    at_least: Option<usize>,
    at_most: Option<usize>,
) -> bool {
    let at_least = at_least.or((count.is_none() && at_most.is_none()).then_some(1));
    count.is_none_or(|c| c == n)
        && at_least.is_none_or(|l| n >= l)
        && at_most.is_none_or(|m| n <= m)
}

/// What must hold (at the end, or at a checkpoint).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// Node name → NodeWright name → expectations.
    #[serde(default)]
    pub nodes: BTreeMap<String, BTreeMap<String, NodeExpect>>,
    /// Nodes that must be cordoned (true) or schedulable (false).
    #[serde(default)]
    pub cordoned: BTreeMap<String, bool>,
    /// Nodes that must no longer exist.
    #[serde(default)]
    pub nodes_gone: Vec<String>,
    /// NodeWright name → expectations.
    #[serde(default)]
    pub nodewrights: BTreeMap<String, NodeWrightExpect>,
    /// Job expectations (each matches Jobs by its selector fields).
    #[serde(default)]
    pub jobs: Vec<JobExpect>,
    /// Executor pod expectations.
    #[serde(default)]
    pub pods: Vec<PodExpect>,
    /// ConfigMap `namespace/name` (or `name` in the operator namespace `nodewright`) → data
    /// entries that must have these values.
    #[serde(default)]
    pub config_maps: BTreeMap<String, BTreeMap<String, String>>,
    /// Node name → its taints, raw annotations and labels.
    #[serde(default)]
    pub node_meta: BTreeMap<String, NodeMetaExpect>,
    /// Counts over the whole run so far (Job creations, names, attempts).
    #[serde(default)]
    pub history: Vec<HistoryExpect>,
    /// Events the operator emitted over the run so far.
    #[serde(default)]
    pub events: Vec<EventExpect>,
    /// Log lines the operator wrote over the run so far (its interpreter's, with their fields).
    #[serde(default)]
    pub logs: Vec<LogExpect>,
    /// With `leaderElection`: the replicas that became leader, in order (`replica-0`, ...; a
    /// restarted replica is `replica-<i>-r<restarts>`).
    #[serde(default)]
    pub leaders: Option<Vec<String>>,
    /// The final expectations must be met by this time.
    #[serde(default)]
    pub within: Option<Dur>,
}

/// Expectations on one node for one NodeWright.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeExpect {
    /// Node status annotation `status_<nw>`.
    #[serde(default)]
    pub status: Option<String>,
    /// Entries by key: `{stage, state, restarts}`.
    #[serde(default)]
    pub entries: BTreeMap<String, EntryExpect>,
    /// Entry keys that must be absent.
    #[serde(default)]
    pub absent: Vec<String>,
    /// The node-state annotation must be gone entirely.
    #[serde(default)]
    pub no_state: bool,
}

/// Expected entry fields; unset fields are not checked.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryExpect {
    /// Stage.
    #[serde(default)]
    pub stage: Option<String>,
    /// State.
    #[serde(default)]
    pub state: Option<String>,
    /// Restarts.
    #[serde(default)]
    pub restarts: Option<i32>,
}

/// Expectations on a NodeWright.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeWrightExpect {
    /// `status.status`.
    #[serde(default)]
    pub status: Option<String>,
    /// The object is gone (deleted and finalized).
    #[serde(default)]
    pub gone: bool,
    /// The finalizer is present (true) or absent (false).
    #[serde(default)]
    pub finalizer: Option<bool>,
    /// `status.nodeBootIds` entries.
    #[serde(default)]
    pub boot_ids: BTreeMap<String, String>,
    /// Conditions by type (`Ready`, `Blocked`, `nodewright.nvidia.com/...`).
    #[serde(default)]
    pub conditions: BTreeMap<String, ConditionExpect>,
    /// Any status field by JSON pointer (`/completeNodes`,
    /// `/compartmentStatuses/<name>/batchState/currentBatch`); `null` means absent.
    #[serde(default)]
    pub fields: BTreeMap<String, serde_json::Value>,
}

/// Selects executor Jobs; unset fields match anything.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobMatch {
    /// NodeWright.
    #[serde(default)]
    pub nodewright: Option<String>,
    /// Package name.
    #[serde(default)]
    pub package: Option<String>,
    /// Package version.
    #[serde(default)]
    pub version: Option<String>,
    /// Stage.
    #[serde(default)]
    pub stage: Option<String>,
    /// Node.
    #[serde(default)]
    pub node: Option<String>,
    /// Interrupt Jobs only (true) or package Jobs only (false).
    #[serde(default)]
    pub interrupt: Option<bool>,
}

impl JobMatch {
    fn matches(&self, f: &JobFacts) -> bool {
        let ok = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        ok(&self.nodewright, &f.nodewright)
            && ok(&self.package, &f.package)
            && ok(&self.version, &f.version)
            && ok(&self.stage, &f.stage)
            && ok(&self.node, &f.node)
            && self.interrupt.is_none_or(|i| i == f.interrupt)
    }

    fn describe(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Expectations on the Jobs a [`JobMatch`] selects.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobExpect {
    /// Which Jobs.
    #[serde(flatten)]
    pub select: JobMatch,
    /// Exactly this many match.
    #[serde(default)]
    pub count: Option<usize>,
    /// `status.failed` of every match.
    #[serde(default)]
    pub failed: Option<i32>,
    /// A True condition (`Complete`, `Failed`, `Failed/BackoffLimitExceeded`).
    #[serde(default)]
    pub condition: Option<String>,
    /// `spec.suspend`.
    #[serde(default)]
    pub suspended: Option<bool>,
    /// `spec.ttlSecondsAfterFinished`.
    #[serde(default)]
    pub ttl: Option<i32>,
    /// `spec.backoffLimit`.
    #[serde(default)]
    pub backoff_limit: Option<i32>,
    /// Pod template `activeDeadlineSeconds`.
    #[serde(default)]
    pub template_deadline: Option<i64>,
    /// Job-level `activeDeadlineSeconds` (`0` means absent).
    #[serde(default)]
    pub job_deadline: Option<i64>,
    /// Pod template restart policy.
    #[serde(default)]
    pub restart_policy: Option<String>,
    /// Annotations that must have these values.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Annotations that must be present (any value).
    #[serde(default)]
    pub annotations_present: Vec<String>,
    /// Annotations that must be absent.
    #[serde(default)]
    pub annotations_absent: Vec<String>,
}

/// Expectations on executor pods of matching Jobs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodExpect {
    /// Which Jobs' pods.
    #[serde(flatten)]
    pub select: JobMatch,
    /// Only pods in this phase.
    #[serde(default)]
    pub phase: Option<String>,
    /// Exactly this many.
    pub count: usize,
}

/// Conditions checked after every step (within `from`..`until` when given).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Always {
    /// Checked only from this virtual time on.
    #[serde(default)]
    pub from: Option<Dur>,
    /// Checked only up to this virtual time.
    #[serde(default)]
    pub until: Option<Dur>,
    /// More conditions, each with its own `from`/`until` window.
    #[serde(default)]
    pub during: Vec<Always>,
    /// At most this many nodes cordoned at once.
    #[serde(default)]
    pub max_cordoned: Option<usize>,
    /// No entry ever takes one of these states (e.g. `erroring`).
    #[serde(default)]
    pub never_entry_state: Vec<String>,
    /// No node ever has unfinished Jobs of two NodeWrights at once.
    #[serde(default)]
    pub exclusive_nodewrights: bool,
    /// At most this many interrupt Jobs per node over the whole run (counted by name).
    #[serde(default)]
    pub max_interrupt_jobs_per_node: Option<usize>,
    /// No Job of these selectors is ever created.
    #[serde(default)]
    pub no_jobs: Vec<JobMatch>,
}

impl Always {
    /// Checks the state at `at`; only the first failure of each kind is kept.
    pub fn check(&self, objects: &Objects, at: SimTime, report: &mut Report) {
        for window in &self.during {
            window.check(objects, at, report);
        }
        if self.from.is_some_and(|f| at < f.0) || self.until.is_some_and(|u| at > u.0) {
            return;
        }
        let fail = |report: &mut Report, key: &str, text: String| {
            if !report.failures.iter().any(|f| f.contains(key)) {
                report.fail(format!("always [{key}] broken at {}: {text}", show(at)));
            }
        };
        if let Some(max) = self.max_cordoned {
            let cordoned: Vec<String> = objects
                .nodes
                .values()
                .filter(|n| facts::unschedulable(n))
                .filter_map(|n| n.metadata.name.clone())
                .collect();
            if cordoned.len() > max {
                fail(
                    report,
                    "maxCordoned",
                    format!("{} cordoned: {}", cordoned.len(), cordoned.join(", ")),
                );
            }
        }
        if !self.never_entry_state.is_empty() {
            for node in objects.nodes.values() {
                for nw in objects.nodewrights.keys() {
                    for (key, e) in facts::node_state(node, nw).0 {
                        let state = e.state.map_or("", |s| s.as_str()).to_string();
                        if self.never_entry_state.contains(&state) {
                            fail(
                                report,
                                "neverEntryState",
                                format!(
                                    "{} {nw} {key} is {state}",
                                    node.metadata.name.clone().unwrap_or_default()
                                ),
                            );
                        }
                    }
                }
            }
        }
        let jobs: Vec<JobFacts> = objects.jobs.values().filter_map(job_facts).collect();
        if self.exclusive_nodewrights {
            let mut per_node: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
            for f in jobs.iter().filter(|f| f.unfinished) {
                per_node.entry(&f.node).or_default().insert(&f.nodewright);
            }
            for (node, nws) in per_node {
                if nws.len() > 1 {
                    fail(
                        report,
                        "exclusiveNodewrights",
                        format!("{node} runs Jobs of {nws:?}"),
                    );
                }
            }
        }
        if let Some(max) = self.max_interrupt_jobs_per_node {
            let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
            for f in jobs.iter().filter(|f| f.interrupt) {
                *per_node.entry(&f.node).or_default() += 1;
            }
            for (node, n) in per_node {
                if n > max {
                    fail(
                        report,
                        "maxInterruptJobsPerNode",
                        format!("{node} has {n} interrupt Jobs"),
                    );
                }
            }
        }
        for m in &self.no_jobs {
            if jobs.iter().any(|f| m.matches(f)) {
                fail(
                    report,
                    "noJobs",
                    format!("a Job matching {} exists", m.describe()),
                );
            }
        }
    }
}

impl Expect {
    /// Checks every expectation against `objects` and the run's `history`.
    pub fn check_run(&self, objects: &Objects, history: &History, report: &mut Report) {
        self.check(objects, report);
        for h in &self.history {
            h.check(history, report);
        }
        for e in &self.events {
            e.check(&history.events, report);
        }
        for l in &self.logs {
            l.check(&history.logs, report);
        }
        if let Some(want) = self.leaders.as_ref().filter(|w| **w != history.leaders) {
            report.fail(format!("leaders were {:?}, want {want:?}", history.leaders));
        }
    }

    /// Checks every expectation on the current objects (history expectations excepted).
    pub fn check(&self, objects: &Objects, report: &mut Report) {
        for (name, want) in &self.node_meta {
            match objects.nodes.get(name) {
                Some(node) => want.check(name, node, report),
                None => report.fail(format!("node {name} does not exist")),
            }
        }
        for (node_name, per_nw) in &self.nodes {
            let Some(node) = objects.nodes.get(node_name) else {
                report.fail(format!("node {node_name} does not exist"));
                continue;
            };
            for (nw, e) in per_nw {
                if let Some(status) = &e.status {
                    let have = facts::annotation(node, &keys::node_status(nw));
                    if have != Some(status.as_str()) {
                        report.fail(format!(
                            "node {node_name} status_{nw} is {have:?}, want {status}"
                        ));
                    }
                }
                let present = facts::annotation(node, &keys::node_state(nw)).is_some();
                if e.no_state && present {
                    report.fail(format!("node {node_name} still has nodeState_{nw}"));
                }
                let doc = facts::node_state(node, nw);
                for (key, want) in &e.entries {
                    let Some(entry) = doc.0.get(key) else {
                        report.fail(format!("node {node_name} {nw} has no entry {key}"));
                        continue;
                    };
                    let state = entry.state.map_or("", |s| s.as_str());
                    if want
                        .stage
                        .as_deref()
                        .is_some_and(|s| s != entry.stage.as_str())
                        || want.state.as_deref().is_some_and(|s| s != state)
                        || want.restarts.is_some_and(|r| r != entry.restarts)
                    {
                        report.fail(format!(
                            "node {node_name} {nw} {key} is ({}, {state}, restarts {}), want {:?}",
                            entry.stage, entry.restarts, want
                        ));
                    }
                }
                for key in &e.absent {
                    if doc.0.contains_key(key) {
                        report.fail(format!("node {node_name} {nw} still has entry {key}"));
                    }
                }
            }
        }
        for (node, want) in &self.cordoned {
            match objects.nodes.get(node) {
                Some(n) if facts::unschedulable(n) != *want => report.fail(format!(
                    "node {node} cordoned={} want {want}",
                    facts::unschedulable(n)
                )),
                None => report.fail(format!("node {node} does not exist")),
                _ => {}
            }
        }
        for node in &self.nodes_gone {
            if objects.nodes.contains_key(node) {
                report.fail(format!("node {node} still exists"));
            }
        }
        for (name, want) in &self.nodewrights {
            let nw = objects.nodewrights.get(name);
            if want.gone {
                if nw.is_some() {
                    report.fail(format!("NodeWright {name} still exists"));
                }
                continue;
            }
            let Some(nw) = nw else {
                report.fail(format!("NodeWright {name} does not exist"));
                continue;
            };
            if let Some(status) = &want.status {
                let have = nw
                    .status
                    .as_ref()
                    .and_then(|s| s.status)
                    .map(|s| s.as_str().to_string());
                if have.as_deref() != Some(status.as_str()) {
                    report.fail(format!(
                        "NodeWright {name} status is {have:?}, want {status}"
                    ));
                }
            }
            for (node, id) in &want.boot_ids {
                let have = nw.status.as_ref().and_then(|s| s.node_boot_ids.get(node));
                if have != Some(id) {
                    report.fail(format!(
                        "NodeWright {name} nodeBootIds[{node}] is {have:?}, want {id}"
                    ));
                }
            }
            let st = nw.status.as_ref();
            status::check_conditions(name, st, &want.conditions, report);
            status::check_fields(name, st, &want.fields, report);
            if let Some(f) = want.finalizer {
                let has = nw
                    .metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|x| x == keys::FINALIZER);
                if has != f {
                    report.fail(format!(
                        "NodeWright {name} finalizer present={has}, want {f}"
                    ));
                }
            }
        }
        for (name, data) in &self.config_maps {
            let key = if name.contains('/') {
                name.clone()
            } else {
                format!("nodewright/{name}")
            };
            let Some(cm) = objects.config_maps.get(&key) else {
                report.fail(format!("ConfigMap {key} does not exist"));
                continue;
            };
            let have = cm.data.clone().unwrap_or_default();
            for (k, v) in data {
                if have.get(k) != Some(v) {
                    report.fail(format!("ConfigMap {key} {k}={:?}, want {v:?}", have.get(k)));
                }
            }
        }
        for je in &self.jobs {
            check_jobs(je, objects, report);
        }
        for pe in &self.pods {
            let jobs: BTreeSet<String> = objects
                .jobs
                .values()
                .filter(|j| job_facts(j).is_some_and(|f| pe.select.matches(&f)))
                .filter_map(|j| j.metadata.uid.clone())
                .collect();
            let n = objects
                .pods
                .values()
                .filter(|p| {
                    p.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| jobs.contains(&o.uid))
                })
                .filter(|p| {
                    pe.phase
                        .as_deref()
                        .is_none_or(|ph| crate::world::phase(p) == ph)
                })
                .count();
            if n != pe.count {
                report.fail(format!(
                    "{n} pods of Jobs matching {} (phase {:?}), want {}",
                    pe.select.describe(),
                    pe.phase,
                    pe.count
                ));
            }
        }
    }
}

fn check_jobs(je: &JobExpect, objects: &Objects, report: &mut Report) {
    let matching: Vec<_> = objects
        .jobs
        .values()
        .filter(|j| job_facts(j).is_some_and(|f| je.select.matches(&f)))
        .collect();
    let what = je.select.describe();
    if let Some(count) = je.count
        && matching.len() != count
    {
        report.fail(format!(
            "{} Jobs match {what}, want {count}",
            matching.len()
        ));
    }
    if je.count != Some(0) && matching.is_empty() {
        report.fail(format!("no Job matches {what}"));
    }
    for job in matching {
        let name = job.metadata.name.clone().unwrap_or_default();
        let spec = job.spec.clone().unwrap_or_default();
        let status = job.status.clone().unwrap_or_default();
        let mut bad = |what: String| report.fail(format!("Job {name}: {what}"));
        if let Some(f) = je.failed
            && status.failed.unwrap_or(0) != f
        {
            bad(format!("failed={}, want {f}", status.failed.unwrap_or(0)));
        }
        if let Some(c) = &je.condition {
            let (kind, reason) = c
                .split_once('/')
                .map_or((c.as_str(), None), |(k, r)| (k, Some(r)));
            let ok = job_condition(job, kind)
                && reason.is_none_or(|r| {
                    status
                        .conditions
                        .iter()
                        .flatten()
                        .any(|x| x.type_ == kind && x.reason.as_deref() == Some(r))
                });
            if !ok {
                bad(format!("condition {c} not True"));
            }
        }
        if let Some(s) = je.suspended
            && spec.suspend.unwrap_or(false) != s
        {
            bad(format!("suspend={:?}, want {s}", spec.suspend));
        }
        if let Some(t) = je.ttl
            && spec.ttl_seconds_after_finished != Some(t)
        {
            bad(format!(
                "ttlSecondsAfterFinished={:?}, want {t}",
                spec.ttl_seconds_after_finished
            ));
        }
        if let Some(b) = je.backoff_limit
            && spec.backoff_limit != Some(b)
        {
            bad(format!("backoffLimit={:?}, want {b}", spec.backoff_limit));
        }
        let tpl = spec.template.spec.clone().unwrap_or_default();
        if let Some(d) = je.template_deadline
            && tpl.active_deadline_seconds != Some(d)
        {
            bad(format!(
                "template activeDeadlineSeconds={:?}, want {d}",
                tpl.active_deadline_seconds
            ));
        }
        if let Some(d) = je.job_deadline
            && spec.active_deadline_seconds.unwrap_or(0) != d
        {
            bad(format!(
                "activeDeadlineSeconds={:?}, want {d}",
                spec.active_deadline_seconds
            ));
        }
        if let Some(r) = &je.restart_policy
            && tpl.restart_policy.as_deref() != Some(r.as_str())
        {
            bad(format!("restartPolicy={:?}, want {r}", tpl.restart_policy));
        }
        let ann = job.metadata.annotations.clone().unwrap_or_default();
        for (k, v) in &je.annotations {
            if ann.get(k) != Some(v) {
                bad(format!("annotation {k}={:?}, want {v}", ann.get(k)));
            }
        }
        for k in &je.annotations_present {
            if !ann.contains_key(k) {
                bad(format!("annotation {k} missing"));
            }
        }
        for k in &je.annotations_absent {
            if ann.contains_key(k) {
                bad(format!("annotation {k} present"));
            }
        }
    }
}

/// True when a pod is an unfinished executor attempt (for reports).
pub fn live_pod(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    !is_terminal(pod) && pod.metadata.deletion_timestamp.is_none()
}
