//! The reconcile pass R1–R9 (02-lifecycle.md §4): one pure function from a snapshot to a plan.
//!
//! Phases run in the spec's order; a phase that writes something may end the pass early
//! ("End (2 s)"): its effects are emitted with a 2 s requeue and later phases wait for the next
//! pass. Node-state writes are per-entry guarded [`crate::EntryChange`]s (§13.1). See
//! `docs/design.md` for a walkthrough.

mod conditions;
mod config;
mod ctx;
pub mod dag;
mod done;
mod emit;
mod event_order;
mod finalizer;
pub mod interrupts;
mod introspection;
mod metrics;
mod mirror;
mod ordering;
mod outcomes;
pub mod predicates;
mod reboot;
mod rollout_seam;
mod start;
pub mod status;
mod taints;
mod view;
mod work;
mod work_phase;

use jiff::Timestamp;

use self::ctx::Ctx;
use self::view::NwView;
use crate::parse_cache::PassDocs;
use crate::{NodeStateCache, Options, Plan, Snapshot};

/// Plans one pass over the whole snapshot. Pure and deterministic: the same snapshot, options
/// and `now` give the same plan, whatever the order of the snapshot's vectors.
pub fn reconcile(snapshot: &Snapshot, options: &Options, now: Timestamp) -> Plan {
    reconcile_with(snapshot, options, now, &NodeStateCache::default())
}

/// [`reconcile`] with a memo of parsed node-state documents (see [`NodeStateCache`]); the plan
/// is the same whatever the cache holds, only faster when it is fresh.
pub fn reconcile_with(
    snapshot: &Snapshot,
    options: &Options,
    now: Timestamp,
    cache: &NodeStateCache,
) -> Plan {
    let mut ctx = Ctx::new(snapshot, options, now, cache);
    // All nodes sorted by name (one per name, as `ctx.nodes`).
    let nodes: Vec<_> = ctx.nodes.values().copied().collect();
    let pass = PassDocs::build(&nodes, &snapshot.nodewrights, cache);
    let views = build_views(&mut ctx, &nodes, cache, &pass);
    if views.is_empty() && snapshot.nodewrights.is_empty() {
        return Plan::default();
    }
    let ended = run(&mut ctx, &views);
    emit::finish(ctx, &views, ended)
}

/// R2: one view per NodeWright, sorted by (priority, name); a NodeWright whose view cannot be
/// built (invalid selector) is reported and left alone.
fn build_views<'a>(
    ctx: &mut Ctx<'a>,
    nodes: &[&'a k8s_openapi::api::core::v1::Node],
    cache: &'a NodeStateCache,
    pass: &'a PassDocs<'a>,
) -> Vec<NwView<'a>> {
    let mut nws: Vec<_> = ctx.snap.nodewrights.iter().collect();
    nws.sort_by(|a, b| {
        (a.spec.priority, &a.metadata.name).cmp(&(b.spec.priority, &b.metadata.name))
    });
    let mut views = Vec::new();
    for nw in nws {
        match NwView::build(nw, nodes, &ctx.snap.policies, cache, pass) {
            Ok(view) => {
                let keys = crate::NodeKeys::of(&view.name);
                ctx.work.keys.insert(view.name.clone(), keys);
                views.push(view);
            }
            Err(e) => {
                let name = nw.metadata.name.clone().unwrap_or_default();
                ctx.invalid.push((nw, e.to_string()));
                ctx.work.errors.push(crate::PlanError::new(&name, e));
            }
        }
    }
    views
}

/// Runs the phases; true when a phase ended the pass early.
fn run(ctx: &mut Ctx, views: &[NwView]) -> bool {
    if ctx.nodes.is_empty() {
        // R1: no Node → nothing to do, except keeping finalizers right.
        for v in views {
            finalizer::run(ctx, v);
        }
        return false;
    }
    outcomes::record(ctx, views);
    if taints::auto_taint(ctx, views) {
        return true; // R3
    }
    if reboot::track(ctx, views) {
        return true; // R5
    }
    for vi in 0..views.len() {
        if introspection_phase(ctx, views, vi) {
            return true; // R6
        }
    }
    for vi in 0..views.len() {
        work_phase::run(ctx, views, vi); // R7
    }
    for v in views {
        conditions::refresh_conditions(ctx, v, true);
    }
    taints::remove_runtime_required(ctx, views); // R8
    false
}

/// R6 for one NodeWright; true when it ended the pass.
fn introspection_phase(ctx: &mut Ctx, views: &[NwView], vi: usize) -> bool {
    let v = &views[vi];
    if conditions::refresh_conditions(ctx, v, false) && !v.unreadable().is_empty() {
        return true; // R6.1: NodeStateMalformed is saved right away
    }
    if finalizer::run(ctx, v) {
        return true; // R6.2
    }
    introspection::report_state(ctx, v); // R6.3
    if v.paused {
        introspection::pause(ctx, v);
        return false;
    }
    if introspection::sweep(ctx, v) {
        return true; // R6.4a (B2: before any resume)
    }
    if config::sync(ctx, v) {
        return true; // R6.4c (B3)
    }
    if !v.disabled {
        introspection::set_suspend(ctx, v, false); // R6.5
    }
    // R6.6 ends the pass only when the pass recorded an executor outcome (a start could rest on
    // it, invariant 16.9) or marked a node complete or uncordoned it (the next batch could rest
    // on it, invariant 16.7). Otherwise its node statuses, batch and conditions are written with
    // the work phase's effects, so a rollout's first executors start in the pass that chose
    // their batch, not after every selected node's status write (issue 15, head-of-line).
    introspection::introspect(ctx, views, vi)
        && (ctx.done.recorded_any() || !ctx.done.settled.is_empty())
}
