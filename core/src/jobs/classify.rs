//! Job and pod classification (03-executor.md §3.9, §6.1–6.2; 04-jobs-rules.md §4.2–4.3).

use crate::slim::{SlimContainerStatus, SlimJob, SlimJobCondition, SlimPod};
use jiff::Timestamp;

/// The lifecycle state of a Job as read from its conditions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobState {
    /// Neither `Complete` nor `Failed` (includes suspended and terminating Jobs, 04 rule 2.2).
    Unfinished {
        /// `spec.suspend` is true.
        suspended: bool,
        /// When `FailureTarget=True` was raised, if it is.
        failure_target_since: Option<Timestamp>,
    },
    /// `Complete=True`.
    Complete,
    /// `Failed=True`, with the condition's reason (`BackoffLimitExceeded`, `DeadlineExceeded`, ...).
    Failed {
        /// The failure reason.
        reason: String,
    },
}

impl JobState {
    /// True for `Complete` and `Failed`.
    pub fn is_finished(&self) -> bool {
        !matches!(self, JobState::Unfinished { .. })
    }
}

/// Failure reason the Job controller sets when the retry budget is spent.
pub const BACKOFF_LIMIT_EXCEEDED: &str = "BackoffLimitExceeded";
/// Pod-level reason of a per-attempt (or Job-level) deadline kill.
pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";

fn condition_true<'a>(job: &'a SlimJob, kind: &str) -> Option<&'a SlimJobCondition> {
    job.status.as_ref()?.condition_true(kind)
}

/// Classifies a Job by its conditions.
pub fn job_state(job: &SlimJob) -> JobState {
    if condition_true(job, "Complete").is_some() {
        return JobState::Complete;
    }
    if let Some(c) = condition_true(job, "Failed") {
        return JobState::Failed {
            reason: c.reason.as_deref().unwrap_or_default().to_string(),
        };
    }
    JobState::Unfinished {
        suspended: job.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false),
        failure_target_since: condition_true(job, "FailureTarget").map(|c| {
            c.last_transition_time
                .as_ref()
                .map_or(Timestamp::UNIX_EPOCH, |t| t.0)
        }),
    }
}

/// `status.failed` of a Job (the attempt count recorded as `restarts`, 04 rule 3.10).
pub fn failed_attempts(job: &SlimJob) -> i32 {
    job.status.as_ref().and_then(|s| s.failed).unwrap_or(0)
}

/// The three classes of Failed package pods (04 §4.2), plus "failed without a verdict".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodFailureClass {
    /// Class 1: `DisruptionTarget=True`; ignored by the pod failure policy.
    Disruption,
    /// Class 2: kubelet admission refusal, no container statuses; spends budget, not the package's failure.
    AdmissionRefusal,
    /// Class 3: genuine step failure or per-attempt deadline kill.
    Genuine,
    /// Failed with container statuses but no verdict (e.g. `ContainerStatusUnknown`).
    NoVerdict,
}

fn pod_phase(pod: &SlimPod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// True when the pod carries `DisruptionTarget=True`.
pub fn has_disruption_target(pod: &SlimPod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "DisruptionTarget" && c.status == "True")
        })
}

/// True when the pod has a deletion timestamp.
pub fn is_terminating(pod: &SlimPod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Deadline kill: phase `Failed` and pod-level reason `DeadlineExceeded` (04 rule 4.3.2).
pub fn deadline_kill(pod: &SlimPod) -> bool {
    pod_phase(pod) == "Failed"
        && pod.status.as_ref().and_then(|s| s.reason.as_deref()) == Some(DEADLINE_EXCEEDED)
}

fn init_statuses(pod: &SlimPod) -> &[SlimContainerStatus] {
    pod.status
        .as_ref()
        .and_then(|s| s.init_container_statuses.as_deref())
        .unwrap_or_default()
}

/// The first init container that has not terminated with exit code 0, if any.
pub fn first_unsuccessful_init(pod: &SlimPod) -> Option<&SlimContainerStatus> {
    init_statuses(pod).iter().find(|cs| {
        cs.state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .is_none_or(|t| t.exit_code != 0)
    })
}

/// The container half of 4.3.1: the first unsuccessful init container terminated with a reason
/// other than `ContainerStatusUnknown`, or waits in `CrashLoopBackOff`.
pub fn genuine_verdict(pod: &SlimPod) -> bool {
    let Some(cs) = first_unsuccessful_init(pod) else {
        return false;
    };
    let Some(state) = cs.state.as_ref() else {
        return false;
    };
    if let Some(t) = state.terminated.as_ref() {
        return t.reason.as_deref() != Some("ContainerStatusUnknown");
    }
    state
        .waiting
        .as_ref()
        .is_some_and(|w| w.reason.as_deref() == Some("CrashLoopBackOff"))
}

/// `podFailedGenuinely` (04 rule 4.3.1): the one predicate every "is this the package's failure"
/// question uses.
pub fn pod_failed_genuinely(pod: &SlimPod) -> bool {
    pod_phase(pod) == "Failed"
        && !has_disruption_target(pod)
        && (deadline_kill(pod) || genuine_verdict(pod))
}

/// Classifies a pod in phase `Failed`; `None` for any other phase.
pub fn failure_class(pod: &SlimPod) -> Option<PodFailureClass> {
    if pod_phase(pod) != "Failed" {
        return None;
    }
    Some(if has_disruption_target(pod) {
        PodFailureClass::Disruption
    } else if pod_failed_genuinely(pod) {
        PodFailureClass::Genuine
    } else if init_statuses(pod).is_empty()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_none_or(|c| c.is_empty())
    {
        PodFailureClass::AdmissionRefusal
    } else {
        PodFailureClass::NoVerdict
    })
}

/// The in-flight genuine-failure test of 4.3.3: live (not terminating, no disruption) and a
/// deadline kill or a genuine container verdict; the phase need not be `Failed` yet.
pub fn live_genuine_failure(pod: &SlimPod) -> bool {
    !is_terminating(pod)
        && !has_disruption_target(pod)
        && (deadline_kill(pod) || genuine_verdict(pod))
}

/// Restart count of the named container among the pod's init containers (0 when absent).
pub fn init_restart_count(pod: &SlimPod, container: &str) -> i32 {
    init_statuses(pod)
        .iter()
        .find(|c| c.name == container)
        .map_or(0, |c| c.restart_count)
}

/// When the waiting of the first unsuccessful init container began, per D25: the preceding init
/// container's `finishedAt`, or the pod's `startTime` for the first one.
pub fn waiting_since(pod: &SlimPod) -> Option<Timestamp> {
    let statuses = init_statuses(pod);
    let index = statuses.iter().position(|cs| {
        cs.state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .is_none_or(|t| t.exit_code != 0)
    })?;
    if index == 0 {
        return pod.status.as_ref()?.start_time.as_ref().map(|t| t.0);
    }
    statuses[index - 1]
        .state
        .as_ref()?
        .terminated
        .as_ref()?
        .finished_at
        .as_ref()
        .map(|t| t.0)
}

/// Waiting reasons that are normal progress, never evidence (04 rule 4.3.9).
pub fn benign_waiting(reason: &str) -> bool {
    matches!(reason, "PodInitializing" | "ContainerCreating")
}

/// Image-pull waiting reasons (04 rule 4.3.8).
pub fn image_pull_waiting(reason: &str) -> bool {
    matches!(reason, "ErrImagePull" | "ImagePullBackOff")
}

/// The waiting (container, reason, message) of the first unsuccessful init container, if it waits.
pub fn stuck_container(pod: &SlimPod) -> Option<(String, String, String)> {
    let cs = first_unsuccessful_init(pod)?;
    let waiting = cs.state.as_ref()?.waiting.as_ref()?;
    Some((
        cs.name.clone(),
        waiting.reason.clone().unwrap_or_default(),
        waiting.message.clone().unwrap_or_default(),
    ))
}

/// True when the pod is `Pending` and the kubelet never set `status.startTime` (D11/D13, K13).
pub fn never_started(pod: &SlimPod) -> bool {
    pod_phase(pod) == "Pending"
        && pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .is_none()
}
