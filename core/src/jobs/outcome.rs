//! Executor outcomes (04-jobs-rules.md §3, §4, §8.10; 02-lifecycle.md §7.9): what the reference's
//! Job controller and pod watch decide, computed from the snapshot in the pass.
//!
//! [`outcomes`] classifies every executor Job (finished ones here, active ones in
//! [`evidence`](super::evidence)); [`entry_changes`] (in [`record`](super::record)) turns one
//! outcome into guarded node-state changes; the outcome's `after_state` effects (marker + TTL,
//! archive pruning, evidence annotations) go after the node write.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use nodewright_crds::{NodeState, PackageStatus, Stage, State, keys};

use super::classify::{self, BACKOFF_LIMIT_EXCEEDED, JobState, pod_failed_genuinely};
use super::index::{ExecutorIndex, ExecutorJob};
use crate::effect::{DeletionReason, Effect, EventSpec, ObjectRef};
use crate::slim::SlimPod;
use crate::{Options, Snapshot};

pub use super::record::{entry_changes, record_events};

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
    pub(super) fn requeue(&mut self, after: Duration) {
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
pub(super) fn node_status<'n>(node: Option<&'n Node>, nw: &str) -> Option<&'n str> {
    node?
        .metadata
        .annotations
        .as_ref()?
        .get(&keys::node_status(nw))
        .map(String::as_str)
}

/// Reads the node-state document of `nw` from a node; `None` when absent or unreadable.
pub fn node_state_of(node: &Node, nw: &str) -> Option<NodeState> {
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
        name: job.name.to_string(),
        uid: job.uid.to_string(),
        suspend: None,
        ttl_seconds_after_finished: Some(ttl_seconds(ttl)),
        annotations: [(keys::STATE_RECORDED.to_string(), Some("true".to_string()))].into(),
        context: job.context(),
    }
}

/// Archive pruning (04 §4.5.1): among genuinely failed, non-terminating child pods keep the first
/// and the last, delete the ones between (normal delete, reason `archive-prune`).
pub fn prune_archives(job: &ExecutorJob) -> Vec<Effect> {
    let archives: Vec<&std::sync::Arc<SlimPod>> = job
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

pub(super) fn nodewright_ref(name: &str) -> ObjectRef {
    ObjectRef {
        kind: "NodeWright".to_string(),
        name: name.to_string(),
        namespace: None,
        uid: None,
    }
}

pub(super) fn node_ref(name: &str) -> ObjectRef {
    ObjectRef {
        kind: "Node".to_string(),
        name: name.to_string(),
        namespace: None,
        uid: None,
    }
}

pub(super) fn event(
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
pub(super) fn last_failure(job: &ExecutorJob, value: String) -> Vec<Effect> {
    if job.annotation(keys::LAST_FAILURE) == Some(value.as_str()) {
        return Vec::new();
    }
    vec![
        Effect::PatchJob {
            name: job.name.to_string(),
            uid: job.uid.to_string(),
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

pub(super) fn entry_at<'s>(
    state: Option<&'s NodeState>,
    job: &ExecutorJob,
) -> Option<&'s PackageStatus> {
    let p = job.package.as_ref()?;
    state?.get(&p.name, &p.version)
}

/// Open = present, at the Job's stage and not complete (the shared guard of 04 §3.3 / §4.3.4).
pub(super) fn open_at_stage(entry: Option<&PackageStatus>, stage: Option<Stage>) -> bool {
    entry.is_some_and(|e| Some(e.stage) == stage && e.state != Some(State::Complete))
}

pub(super) fn base(job: &ExecutorJob, kind: OutcomeKind, after_state: Vec<Effect>) -> Outcome {
    let p = job.package.as_ref();
    Outcome {
        nodewright: job.nodewright.to_string(),
        node: job.node.to_string(),
        package: p.map(|p| p.name.clone()).unwrap_or_default(),
        version: p.map(|p| p.version.clone()).unwrap_or_default(),
        stage: job.stage,
        job: job.name.to_string(),
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
        .filter_map(|n| Some((n.metadata.name.as_deref()?, &**n)))
        .collect();
    let node = |name: &str| nodes.get(name).copied();
    let state = |nw: &str, name: &str| {
        node(name)
            .and_then(|n| node_state_of(n, nw))
            .map(Cow::Owned)
    };
    outcomes_with(index, node, state, options, now)
}

/// [`outcomes`] reading nodes by name through `node` and the snapshot's node-state document of
/// (NodeWright, node) through `state` (`None` when absent or unreadable), so a caller that has
/// already indexed the nodes and parsed their documents does not do it again.
pub fn outcomes_with<'n, 's>(
    index: &ExecutorIndex,
    node: impl Fn(&str) -> Option<&'n Node>,
    state: impl Fn(&str, &str) -> Option<Cow<'s, NodeState>>,
    options: &Options,
    now: Timestamp,
) -> Outcomes {
    let mut states: foldhash::HashMap<(&str, &str), Option<Cow<'s, NodeState>>> =
        foldhash::HashMap::default();
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
        let node = node(job.node.as_ref());
        if matches!(job.state, JobState::Complete) {
            out.items.push(completed(job, node.is_some(), options));
            continue;
        }
        let state = states
            .entry((job.nodewright.as_ref(), job.node.as_ref()))
            .or_insert_with(|| node.and_then(|_| state(&job.nodewright, &job.node)))
            .as_deref();
        match &job.state {
            JobState::Failed { reason } => {
                out.items
                    .push(failed(job, reason, state, node.is_some(), options));
            }
            _ => super::evidence::active(job, state, node, options, now, &mut out),
        }
    }
    out
}

fn completed(job: &ExecutorJob, node_known: bool, options: &Options) -> Outcome {
    let mut after = prune_archives(job);
    after.push(marker(job, options.job_ttl_succeeded));
    let attempts = classify::failed_attempts(&job.job);
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
            restarts: (!job.interrupt).then(|| classify::failed_attempts(&job.job)),
        }
    };
    base(job, kind, after)
}
