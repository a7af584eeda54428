//! Creation gating (04-jobs-rules.md §2): when a freshly built executor may be created, and what
//! to do when its deterministic name is taken (the AlreadyExists table applied from the snapshot,
//! D21).

use k8s_openapi::api::batch::v1::Job;
use nodewright_crds::{PackageStatus, State, keys};

use super::annotation::PackageAnnotation;
use super::classify::JobState;
use super::index::{ExecutorIndex, ExecutorJob};
use super::matching::{executor_matches, job_deadline};
use super::recipe::JobManifest;
use crate::effect::{Context, DeletionReason, Effect, FreshReadPrecondition};

/// Why a create is not issued this pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitReason {
    /// An unfinished Job of the package exists on the node (04 §2.1).
    ExecutorExists,
    /// An unfinished Job of any NodeWright runs on the node (interrupt gate, 04 §2.3, §8.4).
    NodeBusy,
    /// The entry is `skipped`: a skipped package never starts an executor (04 §2.4).
    Skipped,
    /// The name is held by a finished Job whose outcome is not yet recorded (04 §2.7, A20).
    UnrecordedOutcome,
    /// The name is held by a timed-out Job that still matches (04 §2.7, §5.2 step 2).
    TimedOut,
    /// The name is held by an unfinished Job that matches: another pass won.
    AlreadyRunning,
}

/// What the lifecycle should do with a built executor.
#[derive(Clone, Debug, PartialEq)]
pub enum CreateDecision {
    /// Emit these effects (a `CreateJob`); the lifecycle records (stage, in_progress, 0) with it.
    Create(Vec<Effect>),
    /// Emit nothing for this executor this pass.
    Wait(WaitReason),
    /// Emit these deletions (the name is needed) and requeue; the create follows on a later pass.
    /// Never record `in_progress` for it (04 §2.8).
    ClearFirst(Vec<Effect>),
}

/// The log/event context of a built or existing Job.
pub fn context_of(job: &Job) -> Context {
    let labels = job.metadata.labels.as_ref();
    let get = |k: &str| labels.and_then(|l| l.get(k)).cloned();
    let package = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::PACKAGE))
        .and_then(|t| PackageAnnotation::parse(t));
    Context {
        nodewright: get(keys::LABEL_NAME),
        node: job
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|s| s.node_name.clone())
            .or_else(|| get(keys::LABEL_NODE)),
        package: package.as_ref().map(|p| p.name.clone()),
        version: package.as_ref().map(|p| p.version.clone()),
        stage: get(keys::LABEL_STAGE),
    }
}

/// A foreground `DeleteJob` of an indexed Job with a reason (D12).
pub fn delete(job: &ExecutorJob, reason: DeletionReason) -> Effect {
    Effect::DeleteJob {
        name: job.name.to_string(),
        uid: job.uid.to_string(),
        reason,
        context: job.context(),
        confirm: None,
    }
}

/// Decides whether `job` (a recipe, or a Job from
/// [`build_package_job`](super::build_package_job) or
/// [`build_interrupt_job`](super::build_interrupt_job)) may be created now. `entry` is the
/// package's node-state entry as the pass sees it. A recipe is built only when its name is taken
/// (to compare it with the Job holding the name).
pub fn plan_create(
    index: &ExecutorIndex,
    job: impl Into<JobManifest>,
    entry: Option<&PackageStatus>,
) -> CreateDecision {
    let job = job.into();
    let context = job.context();
    let nw = context.nodewright.clone().unwrap_or_default();
    let node = context.node.clone().unwrap_or_default();
    let interrupt = job.is_interrupt();
    if let (Some(pkg), Some(ver)) = (context.package.as_deref(), context.version.as_deref())
        && index.unfinished(&nw, &node, pkg, ver)
    {
        return CreateDecision::Wait(WaitReason::ExecutorExists);
    }
    if interrupt && index.node_busy(&node) {
        return CreateDecision::Wait(WaitReason::NodeBusy);
    }
    if !interrupt && entry.is_some_and(|e| e.state == Some(State::Skipped)) {
        return CreateDecision::Wait(WaitReason::Skipped);
    }
    match index.by_name(&job.name()) {
        None => CreateDecision::Create(vec![Effect::CreateJob {
            confirm: None,
            job,
            context,
            // B6: the snapshot may lag; the interpreter re-checks the node on a fresh list.
            precondition: interrupt
                .then_some(FreshReadPrecondition::NoUnfinishedJobsOn { node: node.clone() }),
        }]),
        Some(existing) => existing_name_decision(existing, &job.to_job(), entry),
    }
}

/// The AlreadyExists table of 04 §2.7, decided from the snapshot (D21).
pub fn existing_name_decision(
    existing: &ExecutorJob,
    expected: &Job,
    entry: Option<&PackageStatus>,
) -> CreateDecision {
    let matches = executor_matches(&existing.job, expected);
    match &existing.state {
        JobState::Unfinished { .. } if matches => CreateDecision::Wait(WaitReason::AlreadyRunning),
        JobState::Unfinished { .. } => {
            CreateDecision::ClearFirst(vec![delete(existing, DeletionReason::StaleSpec)])
        }
        _ if !existing.processed => CreateDecision::Wait(WaitReason::UnrecordedOutcome),
        JobState::Failed { .. }
            if matches
                && job_deadline(&*existing.job) == job_deadline(expected)
                && entry.is_some_and(|e| {
                    Some(e.stage) == existing.stage && e.state == Some(State::Erroring)
                }) =>
        {
            CreateDecision::Wait(WaitReason::TimedOut)
        }
        _ => CreateDecision::ClearFirst(vec![delete(existing, DeletionReason::Rerun)]),
    }
}
