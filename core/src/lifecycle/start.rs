//! Starting executors through the jobs seam, with the pre-create checks of 04-jobs-rules.md
//! §2.7/§2.10 (D21) and invariant 16.1 (one executor per package per node).

use k8s_openapi::api::batch::v1::Job;
use nodewright_crds::{Interrupt, Package, PackageStatus, Stage, State, keys};

use super::ctx::Ctx;
use super::view::NwView;
use super::work::Slot;
use crate::effect::{Context, DeletionReason, Effect};
use crate::jobs::{self, JobState};

/// What a start attempt did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// `CreateJob` was emitted.
    Created,
    /// Nothing was created this pass (an executor exists, a finished one awaits recording, a
    /// parked failure absorbs the request, or an old Job must be cleared first).
    Waiting,
}

/// Context for effects about (nw, node, package, stage).
pub fn context(nw: &str, node: &str, pkg: &Package, stage: Stage) -> Context {
    Context {
        nodewright: Some(nw.to_string()),
        node: Some(node.to_string()),
        package: Some(pkg.name.clone()),
        version: Some(pkg.version.clone()),
        stage: Some(stage.as_str().to_string()),
    }
}

/// Builds and emits the Job for (v, node, pkg, stage); `interrupt` selects the interrupt Job.
pub fn start_executor(
    ctx: &mut Ctx,
    v: &NwView,
    node: &str,
    pkg: &Package,
    stage: Stage,
    interrupt: Option<&Interrupt>,
    entry: Option<&PackageStatus>,
) -> Start {
    let triple = (v.name.clone(), node.to_string(), pkg.name.clone());
    if ctx.started.contains(&triple) || ctx.index.unfinished(&v.name, node, &pkg.name, &pkg.version) {
        return Start::Waiting;
    }
    let inputs = jobs::builder::JobInputs {
        nodewright: v.nw,
        package: pkg,
        stage,
        node,
        node_order: i64::from(ctx.node_order(v, node)),
        options: ctx.opts,
    };
    let job = match interrupt {
        Some(i) => jobs::builder::build_interrupt_job(&inputs, i),
        None => jobs::builder::build_package_job(&inputs),
    };
    let name = job.metadata.name.clone().unwrap_or_default();
    if let Some(existing) = ctx.index.by_name(&name) {
        let processed = existing.processed || ctx.recorded.contains(&name);
        let parked = matches!(existing.state, JobState::Failed { .. })
            && processed
            && entry.is_some_and(|e| e.stage == stage && e.state == Some(State::Erroring))
            && fingerprint(existing.job) == fingerprint(&job);
        if !existing.state.is_finished() || !processed || parked {
            return Start::Waiting;
        }
        if !ctx.cleared.insert(name.clone()) {
            return Start::Waiting;
        }
        let effect = Effect::DeleteJob {
            name,
            uid: existing.uid.clone(),
            reason: DeletionReason::Rerun,
            context: context(&v.name, node, pkg, stage),
        };
        ctx.work.push(Slot::Before, effect);
        ctx.requeue = true;
        return Start::Waiting;
    }
    ensure_metadata(ctx, v, node);
    ctx.started.insert(triple);
    ctx.started_nodes.insert(node.to_string());
    ctx.work.push(
        Slot::Create,
        Effect::CreateJob {
            job: Box::new(job),
            context: context(&v.name, node, pkg, stage),
        },
    );
    ctx.requeue = true;
    Start::Created
}

fn fingerprint(job: &Job) -> Option<&str> {
    job.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::EXECUTOR_FINGERPRINT))
        .map(String::as_str)
}

/// Ensures the node metadata ConfigMap before an executor starts (§1.5), once per pass.
pub fn ensure_metadata(ctx: &mut Ctx, v: &NwView, node: &str) {
    if !ctx.metadata_ensured.insert((v.name.clone(), node.to_string())) {
        return;
    }
    let Some(n) = ctx.node(node) else { return };
    let desired = jobs::configmap::node_metadata_config_map(v.nw, n, ctx.opts);
    if let Some(effect) = jobs::configmap::upsert_if_changed(ctx.snap, desired) {
        ctx.work.push(Slot::Create, effect);
    }
}
