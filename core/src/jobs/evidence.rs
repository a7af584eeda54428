//! Maintenance of active executor Jobs (04-jobs-rules.md §4.3, §4.5, §4.6, §8.10): live attempt
//! evidence (the reference's pod watch), restarts, `FailureTarget`, the interrupt restart
//! allowance and archive pruning.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Node;
use nodewright_crds::{NodeState, State, keys};

use super::classify::{
    self, JobState, benign_waiting, image_pull_waiting, live_genuine_failure, pod_failed_genuinely,
};
use super::index::ExecutorJob;
use super::matching::job_deadline;
use super::outcome::{
    Evidence, FAILURE_TARGET_GRACE, OutcomeKind, Outcomes, base, entry_at, event, last_failure,
    node_ref, node_status, nodewright_ref, open_at_stage, prune_archives,
};
use crate::Options;
use crate::effect::Effect;
use crate::slim::SlimPod;

/// The newest child pod that is not terminating (the live attempt), if any.
fn live_pod(job: &ExecutorJob) -> Option<&SlimPod> {
    job.pods
        .iter()
        .rev()
        .find(|p| !classify::is_terminating(p) && !classify::has_disruption_target(p))
        .map(|p| &**p)
}

fn since(now: Timestamp, then: Timestamp) -> Duration {
    let d: SignedDuration = now.duration_since(then);
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

pub(super) fn active(
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
                Some(classify::failed_attempts(&job.job))
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
                    restarts: (!job.interrupt).then(|| classify::failed_attempts(&job.job)),
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
            let deadline = job_deadline(&*job.job);
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
                    restarts: (!job.interrupt).then(|| classify::failed_attempts(&job.job)),
                });
            }
        } else {
            out.requeue(FAILURE_TARGET_GRACE - waited + Duration::from_secs(1));
        }
    }
    if state_kind.is_none() && open && !job.interrupt {
        let failed = classify::failed_attempts(&job.job);
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

fn failing_container(pod: &SlimPod) -> (String, String, String) {
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
    pod: &SlimPod,
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
            name: job.name.to_string(),
            uid: job.uid.to_string(),
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
    let phase = |p: &SlimPod| {
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
        name: job.name.to_string(),
        uid: job.uid.to_string(),
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
