//! Starting executors through the jobs seam, with the pre-create checks of 04-jobs-rules.md
//! §2.7/§2.10 (D21) and invariant 16.1 (one executor per package per node).

use nodewright_crds::{Interrupt, Package, PackageStatus, Stage};

use super::ctx::Ctx;
use super::predicates;
use super::view::NwView;
use super::work::Slot;
use crate::effect::{Effect, EntryExpect};
use crate::jobs;

/// What a start attempt did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// `CreateJob` was emitted.
    Created,
    /// Nothing was created this pass (an executor exists, a finished one awaits recording, a
    /// parked failure absorbs the request, or an old Job must be cleared first).
    Waiting,
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
    // The index first: most calls meet a running executor, and this check needs no key.
    if ctx.index.unfinished(&v.name, node, &pkg.name, &pkg.version) {
        return Start::Waiting;
    }
    let triple = (v.name.clone(), node.to_string(), pkg.name.clone());
    if ctx.done.started.contains(&triple) {
        return Start::Waiting;
    }
    // B6 both ways: nothing starts beside an interrupt fired on this node in this pass (by any
    // NodeWright), and an interrupt never starts beside anything started in this pass.
    if ctx.done.interrupted_nodes.contains(node) {
        return Start::Waiting;
    }
    // A start built on an outcome recorded in this very pass waits for that write to land;
    // other packages of the node start (invariant 16.9, `Recorded::blocks`).
    if ctx
        .done
        .outcomes
        .get(node)
        .is_some_and(|r| r.blocks(&v.name, v.nw.spec.serial, pkg, interrupt.is_some()))
    {
        ctx.requeue = true;
        return Start::Waiting;
    }
    let job = manifest(ctx, v, node, pkg, stage, interrupt);
    match jobs::plan_create(&ctx.index, job, entry) {
        jobs::CreateDecision::Create(mut effects) => {
            let check = Some(snapshot_entry_check(ctx, v, node, pkg, interrupt.is_some()));
            for e in &mut effects {
                if let Effect::CreateJob { confirm, .. } = e {
                    confirm.clone_from(&check);
                }
            }
            ensure_metadata(ctx, v, node);
            ctx.done.started.insert(triple);
            ctx.done.started_nodes.insert(node.to_string());
            if interrupt.is_some() {
                ctx.done.interrupted_nodes.insert(node.to_string());
            }
            for e in effects {
                ctx.work.push(Slot::Create, e);
            }
            ctx.requeue = true;
            Start::Created
        }
        jobs::CreateDecision::Wait(_) => Start::Waiting,
        jobs::CreateDecision::ClearFirst(effects) => {
            for e in effects {
                if let Effect::DeleteJob { name, .. } = &e
                    && !ctx.done.cleared.insert(name.clone())
                {
                    continue;
                }
                ctx.work.push(Slot::Before, e);
            }
            ctx.requeue = true;
            Start::Waiting
        }
    }
}

/// D27: the Job to start, as a recipe built when it is created when `pkg` is one of `v`'s packages
/// (always, in the lifecycle), else built now.
fn manifest(
    ctx: &mut Ctx,
    v: &NwView,
    node: &str,
    pkg: &Package,
    stage: Stage,
    interrupt: Option<&Interrupt>,
) -> jobs::JobManifest {
    let node_order = i64::from(ctx.node_order(v, node));
    let key = v.packages.iter().find(|(_, p)| std::ptr::eq(*p, pkg));
    if let Some((key, _)) = key {
        let basis = ctx.executor_basis(v);
        if let Some(r) =
            jobs::JobRecipe::new(basis, key, stage, node, node_order, interrupt.cloned())
        {
            return r.into();
        }
    }
    let inputs = jobs::builder::JobInputs {
        nodewright: v.nw,
        package: pkg,
        stage,
        node,
        node_order,
        options: ctx.opts,
    };
    match interrupt {
        Some(i) => jobs::builder::build_interrupt_job(&inputs, i),
        None => jobs::builder::build_package_job(&inputs),
    }
    .into()
}

/// I1: every create is confirmed on a fresh read of the node against the package's entry as the
/// snapshot showed it — the entry the guarded node write recording the start expects. A node
/// cache lagging behind the apiserver (a recorded outcome, another stage's start) then drops the
/// create instead of starting a stage beside another (or a finished stage again).
fn snapshot_entry_check(
    ctx: &Ctx,
    v: &NwView,
    node: &str,
    pkg: &Package,
    interrupt: bool,
) -> EntryExpect {
    let entry = v
        .pos
        .get(node)
        .and_then(|&i| v.snapshot_doc(i))
        .and_then(|d| d.get(&pkg.name, &pkg.version))
        .cloned();
    // I3 (explore seed 673): a start of a package with an interrupt rests on the node's cordon;
    // on a node cache lagging behind the write that released it, the create must not go ahead.
    let needs_cordon = interrupt || predicates::has_interrupt(pkg, &ctx.status(v).config_updates);
    let cordoned = needs_cordon
        && ctx
            .node(node)
            .is_some_and(|n| crate::effect::cordoned_by(n, &v.name));
    EntryExpect {
        nodewright: v.name.clone(),
        node: node.to_string(),
        package: pkg.name.clone(),
        version: pkg.version.clone(),
        entry,
        cordoned,
    }
}

/// Ensures the node metadata ConfigMap before an executor starts (§1.5), once per pass.
pub fn ensure_metadata(ctx: &mut Ctx, v: &NwView, node: &str) {
    if !ctx
        .done
        .metadata_ensured
        .insert((v.name.clone(), node.to_string()))
    {
        return;
    }
    let Some(n) = ctx.node(node) else { return };
    let desired = jobs::configmap::node_metadata_config_map(v.nw, n, ctx.opts);
    if let Some(effect) = jobs::configmap::upsert_if_changed(ctx.snap, desired) {
        ctx.work.push(Slot::Create, effect);
    }
}
