//! Executor outcomes (04-jobs-rules.md §3, §4, §8.10; 02-lifecycle.md §7.9): what the reference's
//! Job controller and pod watch decide, computed from the snapshot in the pass.
//!
//! [`outcomes`] classifies every executor Job; [`entry_changes`] turns one outcome into guarded
//! node-state changes (the guards of 04 §3.3 and §4.3.4); the outcome's `after_state` effects
//! (marker + TTL, archive pruning, evidence annotations) go after the node write.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, Pod};
use nodewright_crds::{NodeState, NodeWright, PackageStatus, Stage, State, keys};

use super::classify::{
    self, BACKOFF_LIMIT_EXCEEDED, JobState, benign_waiting, image_pull_waiting,
    live_genuine_failure, pod_failed_genuinely,
};
use super::index::{ExecutorIndex, ExecutorJob};
use super::matching::{job_deadline, spec_package};
use crate::effect::{DeletionReason, Effect, EntryChange, EventSpec, ObjectRef};
use crate::{Options, Snapshot};

/// How long `FailureTarget` may stand before the stage is recorded erroring (04 §4.6.2).
pub const FAILURE_TARGET_GRACE: Duration = Duration::from_secs(300);

/// Why a live attempt is considered failing or stuck.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evidence {
    /// The attempt pod.
    pub pod: String,
    /// The failing or waiting container (empty for a never-started pod).
    pub container: String,
    /// Terminated/waiting reason (`Error`, `CrashLoopBackOff`, `ImagePullBackOff`, `DeadlineExceeded`).
    pub reason: String,
    /// Registry error or other message.
    pub message: String,
}

/// What one executor Job means for node state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutcomeKind {
    /// A package Job completed (T5, T10, T11, T12); `attempts` = `status.failed`.
    Completed {
        /// Failed attempts before success.
        attempts: i32,
    },
    /// An interrupt Job completed (T9 promotion of skipped siblings, then T5/T12 for its own entry).
    InterruptCompleted {
        /// Failed attempts before success.
        attempts: i32,
    },
    /// A live attempt failed genuinely or waits on an image past the grace (T3): entry erroring,
    /// node status untouched (D17). `restarts` = `None` keeps the entry's value.
    AttemptFailed {
        /// Restart count to write, if any.
        restarts: Option<i32>,
        /// What was seen.
        evidence: Evidence,
    },
    /// An active package Job's `status.failed` changed (D17, 04 §4.5.4): entry restarts only.
    Restarts {
        /// `status.failed`.
        restarts: i32,
    },
    /// Terminal genuine failure (T4): entry erroring, node status erroring; the Job is kept as
    /// the timed-out marker. `restarts` = `None` keeps the entry's value (interrupt Jobs).
    TerminalFailed {
        /// Job failure reason (`BackoffLimitExceeded`, `DeadlineExceeded`, `FailureTarget`).
        reason: String,
        /// Restart count to write, if any.
        restarts: Option<i32>,
    },
    /// Nothing to record in node state; only the `after_state` effects apply.
    JobOnly,
}

/// One executor's outcome for the lifecycle pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// NodeWright name.
    pub nodewright: String,
    /// Full node name.
    pub node: String,
    /// Package name (empty when the Job has no readable package annotation).
    pub package: String,
    /// Package version.
    pub version: String,
    /// Stage the Job ran.
    pub stage: Option<Stage>,
    /// Job name.
    pub job: String,
    /// What to record.
    pub kind: OutcomeKind,
    /// Image and digest the Job ran (for a recorded completion).
    pub image: String,
    /// Digest the Job ran.
    pub container_sha: String,
    /// Effects to emit after this node's node-state write (in order), or alone when
    /// [`entry_changes`] yields nothing.
    pub after_state: Vec<Effect>,
}

/// All outcomes of a pass plus the earliest moment something time-based becomes due.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcomes {
    /// Outcomes, sorted by Job name.
    pub items: Vec<Outcome>,
    /// Requeue hint (image-pull grace, FailureTarget window, never-started pods).
    pub requeue_after: Option<Duration>,
}

impl Outcomes {
    fn requeue(&mut self, after: Duration) {
        self.requeue_after = Some(self.requeue_after.map_or(after, |c| c.min(after)));
    }
}

/// Reads the node-state document of `nw` on `node` from the snapshot; `None` when the node is
/// missing or the annotation absent or unreadable.
pub fn snapshot_node_state(snapshot: &Snapshot, nw: &str, node: &str) -> Option<NodeState> {
    let n = snapshot
        .nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(node))?;
    let text = n
        .metadata
        .annotations
        .as_ref()?
        .get(&keys::node_state(nw))?;
    NodeState::parse(text).ok()
}

/// The node status annotation `<P>/status_<nw>` of a node.
fn node_status<'n>(node: Option<&'n Node>, nw: &str) -> Option<&'n str> {
    node?
        .metadata
        .annotations
        .as_ref()?
        .get(&keys::node_status(nw))
        .map(String::as_str)
}

/// Reads the node-state document of `nw` from a node; `None` when absent or unreadable.
fn node_state_of(node: &Node, nw: &str) -> Option<NodeState> {
    let text = node
        .metadata
        .annotations
        .as_ref()?
        .get(&keys::node_state(nw))?;
    NodeState::parse(text).ok()
}

fn ttl_seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs()).unwrap_or(i32::MAX)
}

/// The processed marker with the outcome TTL, one merge patch (04 §3.5, 03 §3.6).
pub fn marker(job: &ExecutorJob, ttl: Duration) -> Effect {
    Effect::PatchJob {
        name: job.name.clone(),
        uid: job.uid.clone(),
        suspend: None,
        ttl_seconds_after_finished: Some(ttl_seconds(ttl)),
        annotations: [(keys::STATE_RECORDED.to_string(), Some("true".to_string()))].into(),
        context: job.context(),
    }
}

/// Archive pruning (04 §4.5.1): among genuinely failed, non-terminating child pods keep the first
/// and the last, delete the ones between (normal delete, reason `archive-prune`).
pub fn prune_archives(job: &ExecutorJob) -> Vec<Effect> {
    let archives: Vec<&&Pod> = job
        .pods
        .iter()
        .filter(|p| pod_failed_genuinely(p) && !classify::is_terminating(p))
        .collect();
    if archives.len() <= 2 {
        return Vec::new();
    }
    archives[1..archives.len() - 1]
        .iter()
        .map(|p| Effect::DeletePod {
            namespace: p.metadata.namespace.clone().unwrap_or_default(),
            name: p.metadata.name.clone().unwrap_or_default(),
            uid: p.metadata.uid.clone().unwrap_or_default(),
            reason: DeletionReason::ArchivePrune,
            context: job.context(),
        })
        .collect()
}

fn nodewright_ref(name: &str) -> ObjectRef {
    ObjectRef {
        kind: "NodeWright".to_string(),
        name: name.to_string(),
        namespace: None,
        uid: None,
    }
}

fn node_ref(name: &str) -> ObjectRef {
    ObjectRef {
        kind: "Node".to_string(),
        name: name.to_string(),
        namespace: None,
        uid: None,
    }
}

fn event(
    regarding: ObjectRef,
    warning: bool,
    reason: &str,
    action: &str,
    message: String,
) -> Effect {
    Effect::Event(Box::new(EventSpec {
        regarding,
        warning,
        reason: reason.to_string(),
        action: action.to_string(),
        message,
    }))
}

/// The `<P>/last-failure` patch and its Event, only when the value changes (04 §4.3.9).
fn last_failure(job: &ExecutorJob, value: String) -> Vec<Effect> {
    if job.annotation(keys::LAST_FAILURE) == Some(value.as_str()) {
        return Vec::new();
    }
    vec![
        Effect::PatchJob {
            name: job.name.clone(),
            uid: job.uid.clone(),
            suspend: None,
            ttl_seconds_after_finished: None,
            annotations: [(keys::LAST_FAILURE.to_string(), Some(value.clone()))].into(),
            context: job.context(),
        },
        event(
            nodewright_ref(&job.nodewright),
            true,
            "Apply",
            "ExecutorStuck",
            format!("Job [{}] on node [{}]: {value}", job.name, job.node),
        ),
    ]
}

fn entry_at<'s>(state: Option<&'s NodeState>, job: &ExecutorJob) -> Option<&'s PackageStatus> {
    let p = job.package.as_ref()?;
    state?.get(&p.name, &p.version)
}

/// Open = present, at the Job's stage and not complete (the shared guard of 04 §3.3 / §4.3.4).
fn open_at_stage(entry: Option<&PackageStatus>, stage: Option<Stage>) -> bool {
    entry.is_some_and(|e| Some(e.stage) == stage && e.state != Some(State::Complete))
}

fn base(job: &ExecutorJob, kind: OutcomeKind, after_state: Vec<Effect>) -> Outcome {
    let p = job.package.as_ref();
    Outcome {
        nodewright: job.nodewright.clone(),
        node: job.node.clone(),
        package: p.map(|p| p.name.clone()).unwrap_or_default(),
        version: p.map(|p| p.version.clone()).unwrap_or_default(),
        stage: job.stage,
        job: job.name.clone(),
        kind,
        image: p.map(|p| p.image.clone()).unwrap_or_default(),
        container_sha: p.map(|p| p.container_sha.clone()).unwrap_or_default(),
        after_state,
    }
}

/// Classifies every executor Job of the snapshot (dispatch order of 04 §3.1).
pub fn outcomes(
    index: &ExecutorIndex,
    snapshot: &Snapshot,
    options: &Options,
    now: Timestamp,
) -> Outcomes {
    let nodes: BTreeMap<&str, &Node> = snapshot
        .nodes
        .iter()
        .filter_map(|n| Some((n.metadata.name.as_deref()?, n)))
        .collect();
    let mut states: BTreeMap<(&str, &str), Option<NodeState>> = BTreeMap::new();
    let mut out = Outcomes::default();
    for job in index.all() {
        if job.terminating {
            continue;
        }
        if job.invalid {
            out.items.push(base(
                job,
                OutcomeKind::JobOnly,
                vec![super::create::delete(job, DeletionReason::StaleSpec)],
            ));
            continue;
        }
        if job.processed {
            continue;
        }
        let node = nodes.get(job.node.as_str()).copied();
        if matches!(job.state, JobState::Complete) {
            out.items.push(completed(job, node.is_some(), options));
            continue;
        }
        let state = states
            .entry((job.nodewright.as_str(), job.node.as_str()))
            .or_insert_with(|| node.and_then(|n| node_state_of(n, &job.nodewright)))
            .as_ref();
        match &job.state {
            JobState::Failed { reason } => {
                out.items
                    .push(failed(job, reason, state, node.is_some(), options));
            }
            _ => active(job, state, node, options, now, &mut out),
        }
    }
    out
}

fn completed(job: &ExecutorJob, node_known: bool, options: &Options) -> Outcome {
    let mut after = prune_archives(job);
    after.push(marker(job, options.job_ttl_succeeded));
    let attempts = classify::failed_attempts(job.job);
    let kind = if job.package.is_none() || !node_known {
        OutcomeKind::JobOnly
    } else if job.interrupt {
        OutcomeKind::InterruptCompleted { attempts }
    } else {
        OutcomeKind::Completed { attempts }
    };
    base(job, kind, after)
}

/// `jobFailureIsGenuine` (04 §4.4.1, D18).
pub fn failure_is_genuine(job: &ExecutorJob, reason: &str, entry: Option<&PackageStatus>) -> bool {
    reason != BACKOFF_LIMIT_EXCEEDED
        || job.annotation(keys::RESTART_LIMIT_EXCEEDED).is_some()
        || job.pods.iter().any(|p| pod_failed_genuinely(p))
        || entry.is_some_and(|e| Some(e.stage) == job.stage && e.state == Some(State::Erroring))
}

fn failed(
    job: &ExecutorJob,
    reason: &str,
    state: Option<&NodeState>,
    node_known: bool,
    options: &Options,
) -> Outcome {
    let entry = entry_at(state, job);
    let mut after = prune_archives(job);
    after.push(marker(job, options.job_ttl_failed));
    let kind = if job.package.is_none() || !node_known || !failure_is_genuine(job, reason, entry) {
        OutcomeKind::JobOnly
    } else {
        OutcomeKind::TerminalFailed {
            reason: reason.to_string(),
            restarts: (!job.interrupt).then(|| classify::failed_attempts(job.job)),
        }
    };
    base(job, kind, after)
}

/// The newest child pod that is not terminating (the live attempt), if any.
fn live_pod<'p>(job: &ExecutorJob<'p>) -> Option<&'p Pod> {
    job.pods
        .iter()
        .rev()
        .find(|p| !classify::is_terminating(p) && !classify::has_disruption_target(p))
        .copied()
}

fn since(now: Timestamp, then: Timestamp) -> Duration {
    let d: SignedDuration = now.duration_since(then);
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

fn active(
    job: &ExecutorJob,
    state: Option<&NodeState>,
    node: Option<&Node>,
    options: &Options,
    now: Timestamp,
    out: &mut Outcomes,
) {
    let entry = entry_at(state, job);
    let open = open_at_stage(entry, job.stage) && job.package.is_some();
    let mut job_only = prune_archives(job);
    let mut state_kind: Option<OutcomeKind> = None;
    let mut state_after: Vec<Effect> = Vec::new();
    let JobState::Unfinished {
        suspended,
        failure_target_since,
    } = &job.state
    else {
        return;
    };
    if let Some(pod) = live_pod(job).filter(|_| !*suspended) {
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        if live_genuine_failure(pod) {
            let (container, reason, message) = failing_container(pod);
            let restarts = if job.interrupt {
                Some(classify::init_restart_count(pod, "interrupt"))
            } else {
                Some(classify::failed_attempts(job.job))
            };
            if open {
                state_kind = Some(OutcomeKind::AttemptFailed {
                    restarts,
                    evidence: Evidence {
                        pod: pod_name.clone(),
                        container,
                        reason,
                        message,
                    },
                });
            }
            if let Some(end) = end_interrupt(job, pod, open, failure_target_since.is_some()) {
                job_only.extend(end);
            }
        } else if let Some((container, reason, message)) =
            classify::stuck_container(pod).filter(|(_, r, _)| !benign_waiting(r))
        {
            let value = format!("{container}: {reason}: {message}");
            let grace = options.job_image_pull_grace;
            let pull_expired = image_pull_waiting(&reason)
                && !grace.is_zero()
                && classify::waiting_since(pod).is_some_and(|t| {
                    let waited = since(now, t);
                    if waited < grace {
                        out.requeue(grace - waited);
                    }
                    waited >= grace
                });
            if pull_expired && open {
                state_kind = Some(OutcomeKind::AttemptFailed {
                    restarts: (!job.interrupt).then(|| classify::failed_attempts(job.job)),
                    evidence: Evidence {
                        pod: pod_name.clone(),
                        container,
                        reason,
                        message,
                    },
                });
                state_after.extend(last_failure(job, value));
            } else {
                job_only.extend(last_failure(job, value));
            }
        } else if classify::never_started(pod) {
            let deadline = job_deadline(job.job);
            if deadline > 0 {
                let limit = Duration::from_secs(deadline.unsigned_abs());
                if let Some(created) = pod.metadata.creation_timestamp.as_ref() {
                    let waited = since(now, created.0);
                    if waited > limit {
                        job_only.extend(last_failure(
                            job,
                            format!("{pod_name}: not started by the kubelet"),
                        ));
                    } else {
                        out.requeue(limit - waited + Duration::from_secs(1));
                    }
                }
            }
        }
    }
    if let Some(since_ft) = failure_target_since {
        let waited = since(now, *since_ft);
        if job.interrupt && job.annotation(keys::LAST_LOGS).is_none() {
            job_only.extend(last_logs_waiting(job));
        }
        if waited > FAILURE_TARGET_GRACE {
            // No marker follows this verdict, so it is re-derived every pass: emit it only
            // while it still changes something (entry or node status not yet erroring).
            let recorded = entry.is_some_and(|e| e.state == Some(State::Erroring))
                && node_status(node, &job.nodewright)
                    == Some(nodewright_crds::Status::Erroring.as_str());
            if open && !recorded {
                state_kind = Some(OutcomeKind::TerminalFailed {
                    reason: "FailureTarget".to_string(),
                    restarts: (!job.interrupt).then(|| classify::failed_attempts(job.job)),
                });
            }
        } else {
            out.requeue(FAILURE_TARGET_GRACE - waited + Duration::from_secs(1));
        }
    }
    if state_kind.is_none() && open && !job.interrupt {
        let failed = classify::failed_attempts(job.job);
        if entry.is_some_and(|e| e.restarts != failed) {
            state_kind = Some(OutcomeKind::Restarts { restarts: failed });
        }
    }
    if let Some(kind) = state_kind {
        out.items.push(base(job, kind, state_after));
    }
    if !job_only.is_empty() {
        out.items.push(base(job, OutcomeKind::JobOnly, job_only));
    }
}

fn failing_container(pod: &Pod) -> (String, String, String) {
    if classify::deadline_kill(pod) {
        let message = pod
            .status
            .as_ref()
            .and_then(|s| s.message.clone())
            .unwrap_or_default();
        return (
            String::new(),
            classify::DEADLINE_EXCEEDED.to_string(),
            message,
        );
    }
    let Some(cs) = classify::first_unsuccessful_init(pod) else {
        return Default::default();
    };
    let state = cs.state.as_ref();
    if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
        let reason = t
            .reason
            .clone()
            .unwrap_or_else(|| format!("exit code {}", t.exit_code));
        return (
            cs.name.clone(),
            reason,
            t.message.clone().unwrap_or_default(),
        );
    }
    let w = state.and_then(|s| s.waiting.as_ref());
    (
        cs.name.clone(),
        w.and_then(|w| w.reason.clone()).unwrap_or_default(),
        w.and_then(|w| w.message.clone()).unwrap_or_default(),
    )
}

/// D18 (04 §8.10): end a crash-looping non-reboot interrupt Job past its restart allowance.
fn end_interrupt(
    job: &ExecutorJob,
    pod: &Pod,
    open: bool,
    failure_target: bool,
) -> Option<Vec<Effect>> {
    if !job.interrupt
        || !open
        || failure_target
        || job.annotation(keys::RESTART_LIMIT_EXCEEDED).is_some()
    {
        return None;
    }
    if matches!(
        job.state,
        JobState::Unfinished {
            suspended: true,
            ..
        }
    ) {
        return None;
    }
    let allowance: i32 = job.annotation(keys::RESTART_ALLOWANCE)?.parse().ok()?;
    let restarts = classify::init_restart_count(pod, "interrupt");
    if restarts < allowance {
        return None;
    }
    let message = format!(
        "interrupt Job [{}] on node [{}] restarted {restarts} times (allowance {allowance}); ending it",
        job.name, job.node
    );
    Some(vec![
        Effect::EndInterruptJob {
            name: job.name.clone(),
            uid: job.uid.clone(),
            resource_version: job.job.metadata.resource_version.clone(),
            restarts,
            context: job.context(),
        },
        event(
            node_ref(&job.node),
            true,
            "Interrupt",
            "RestartLimitExceeded",
            message.clone(),
        ),
        event(
            nodewright_ref(&job.nodewright),
            true,
            "Interrupt",
            "RestartLimitExceeded",
            message,
        ),
    ])
}

/// The waiting-reason form of the `last-logs` snapshot for interrupt Jobs at `FailureTarget`
/// (03 §6.5 steps 2-4, 6); the log-tail form needs the pod-log API and is the shell's.
fn last_logs_waiting(job: &ExecutorJob) -> Vec<Effect> {
    if job.pods.iter().any(|p| pod_failed_genuinely(p)) {
        return Vec::new();
    }
    let phase = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default()
    };
    let Some(target) = job
        .pods
        .iter()
        .find(|p| matches!(phase(p).as_str(), "Running" | "Pending"))
    else {
        return Vec::new();
    };
    let Some((container, reason, message)) = classify::stuck_container(target) else {
        return Vec::new();
    };
    if reason.is_empty() || reason == "CrashLoopBackOff" {
        return Vec::new();
    }
    vec![Effect::PatchJob {
        name: job.name.clone(),
        uid: job.uid.clone(),
        suspend: None,
        ttl_seconds_after_finished: None,
        annotations: [(
            keys::LAST_LOGS.to_string(),
            Some(format!("{container}: {reason}: {message}")),
        )]
        .into(),
        context: job.context(),
    }]
}

fn set(entry: &PackageStatus, stage: Stage, state: State, restarts: i32) -> PackageStatus {
    PackageStatus {
        stage,
        state: Some(state),
        restarts,
        ..entry.clone()
    }
}

fn change(nw: &str, entry: &PackageStatus, set: Option<PackageStatus>) -> EntryChange {
    EntryChange {
        nodewright: nw.to_string(),
        key: entry.unique_name(),
        expect: Some(entry.clone()),
        set,
    }
}

/// Guarded node-state changes for one outcome against the pass's view of the node's document
/// for that NodeWright (04 §3.3–3.4, §4.3.3–4.3.4, §4.4.2, §4.5.4; 02 T3–T5, T9–T12, T20).
/// `nw` is `None` when the NodeWright is gone (no promotion, 04 §3.4). Empty = nothing to write.
pub fn entry_changes(
    outcome: &Outcome,
    nw: Option<&NodeWright>,
    state: &NodeState,
) -> Vec<EntryChange> {
    let own = state.get(&outcome.package, &outcome.version);
    let open = open_at_stage(own, outcome.stage);
    let name = outcome.nodewright.as_str();
    match &outcome.kind {
        OutcomeKind::JobOnly => Vec::new(),
        OutcomeKind::Restarts { restarts } => match own {
            Some(e) if open && e.restarts != *restarts => {
                vec![change(
                    name,
                    e,
                    Some(PackageStatus {
                        restarts: *restarts,
                        ..e.clone()
                    }),
                )]
            }
            _ => Vec::new(),
        },
        OutcomeKind::AttemptFailed { restarts, .. } => match own {
            Some(e) if open => {
                let r = restarts.unwrap_or(e.restarts);
                let new = set(e, e.stage, State::Erroring, r);
                if new == *e {
                    Vec::new()
                } else {
                    vec![change(name, e, Some(new))]
                }
            }
            _ => Vec::new(),
        },
        OutcomeKind::TerminalFailed { restarts, .. } => match own {
            // 04 §4.4.2 guard plus the port's refusal to regress a completion (4.4.6). The
            // write happens even when already erroring: node status must still turn erroring.
            Some(e) if open => {
                let new = set(e, e.stage, State::Erroring, restarts.unwrap_or(e.restarts));
                vec![change(name, e, Some(new))]
            }
            _ => Vec::new(),
        },
        OutcomeKind::Completed { attempts } => completion(outcome, nw, state, *attempts),
        OutcomeKind::InterruptCompleted { attempts } => {
            let mut changes = Vec::new();
            if nw.is_some() {
                for e in state.0.values() {
                    if e.stage == Stage::Interrupt && e.state == Some(State::Skipped) {
                        changes.push(change(
                            name,
                            e,
                            Some(set(e, Stage::Interrupt, State::Complete, e.restarts)),
                        ));
                    }
                }
            }
            let promoted_own = changes
                .iter()
                .any(|c| Some(&c.key) == own.map(|e| e.unique_name()).as_ref());
            if let Some(e) = own.filter(|_| open && !promoted_own) {
                changes.push(change(
                    name,
                    e,
                    Some(completed_entry(e, outcome, *attempts)),
                ));
            }
            changes
        }
    }
}

fn completed_entry(e: &PackageStatus, outcome: &Outcome, attempts: i32) -> PackageStatus {
    PackageStatus {
        stage: e.stage,
        state: Some(State::Complete),
        restarts: attempts,
        image: if outcome.image.is_empty() {
            e.image.clone()
        } else {
            outcome.image.clone()
        },
        container_sha: outcome.container_sha.clone(),
        ..e.clone()
    }
}

fn completion(
    outcome: &Outcome,
    nw: Option<&NodeWright>,
    state: &NodeState,
    attempts: i32,
) -> Vec<EntryChange> {
    let name = outcome.nodewright.as_str();
    let Some(e) = state.get(&outcome.package, &outcome.version) else {
        return Vec::new();
    };
    if !open_at_stage(Some(e), outcome.stage) {
        return Vec::new();
    }
    match outcome.stage {
        Some(Stage::Upgrade) => {
            let mut changes: Vec<EntryChange> = state
                .entries_of(&outcome.package)
                .filter(|other| other.version != outcome.version)
                .map(|other| change(name, other, None))
                .collect();
            changes.push(change(name, e, Some(completed_entry(e, outcome, attempts))));
            changes
        }
        Some(Stage::Uninstall) => {
            let spec = nw.and_then(|nw| spec_package(nw, &outcome.package));
            match spec {
                Some(p) if p.version == outcome.version && p.interrupt.is_some() => {
                    vec![change(
                        name,
                        e,
                        Some(set(e, Stage::UninstallInterrupt, State::InProgress, 0)),
                    )]
                }
                _ => vec![change(name, e, None)],
            }
        }
        _ => vec![change(name, e, Some(completed_entry(e, outcome, attempts)))],
    }
}

/// Events E13–E15 (02 §12.6) for an outcome whose entry changes were written; none when nothing
/// was written. Emit them after the node write, before `after_state`.
pub fn record_events(outcome: &Outcome, changes: &[EntryChange]) -> Vec<Effect> {
    if changes.is_empty() {
        return Vec::new();
    }
    let nw = &outcome.nodewright;
    let pkg = format!("{}:{}", outcome.package, outcome.version);
    let own_written = changes.iter().any(|c| {
        c.key == nodewright_crds::nodewright::unique_name(&outcome.package, &outcome.version)
    });
    let message = match &outcome.kind {
        OutcomeKind::Completed { .. } => {
            format!("Package [{pkg}] state complete on [nodewright:{nw}]")
        }
        OutcomeKind::InterruptCompleted { .. } if own_written => {
            format!("Package [{pkg}] state complete on [nodewright:{nw}]")
        }
        OutcomeKind::InterruptCompleted { .. } => format!(
            "Interrupt complete on [nodewright:{nw}]: promoted packages skipped during interrupt sequencing"
        ),
        OutcomeKind::TerminalFailed { reason, .. } => format!(
            "Package [{pkg}] stage {} failed on [nodewright:{nw}]: {reason}",
            outcome.stage.map(Stage::as_str).unwrap_or_default()
        ),
        OutcomeKind::AttemptFailed { .. } => {
            format!("Package [{pkg}] state erroring on [nodewright:{nw}]")
        }
        OutcomeKind::Restarts { .. } | OutcomeKind::JobOnly => return Vec::new(),
    };
    let (reason, action) = match &outcome.kind {
        OutcomeKind::TerminalFailed { .. } => ("State", "JobFailed"),
        OutcomeKind::AttemptFailed { .. } => ("Apply", "UpdateNodeState"),
        _ => ("State", "JobComplete"),
    };
    vec![event(
        node_ref(&outcome.node),
        false,
        reason,
        action,
        message,
    )]
}
