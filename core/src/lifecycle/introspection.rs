//! R6, the per-NodeWright introspection phase (02-lifecycle.md §4 R6.3–R6.6): ReportState,
//! pause, the executor sweep, resume, and introspection proper — node and NodeWright statuses,
//! the rollout decision, conditions and the `status.nodeState` mirror. R6.1's conditions are in
//! `conditions.rs`.

use std::collections::BTreeMap;

use nodewright_crds::{NodeState, NodeWrightStatus, Status, keys};

use super::ctx::Ctx;
use super::mirror::{MIRROR_LIMIT_BYTES, entry_bytes_at_least};
use super::ordering::{globally_waiting, node_ready};
use super::rollout_seam;
use super::status::{
    NodeFacts, aggregate, node_status, remove_condition, set_condition, set_counters, set_ready,
};
use super::view::{NwView, walk_get};
use super::work::{Slot, node_ref, nw_ref};
use crate::rollout::{NodeView, RolloutDecision};

/// R6.3 ReportState: drop de-selected nodes from the status maps, counters.
pub fn report_state(ctx: &mut Ctx, v: &NwView) {
    let packages: Vec<String> = v
        .packages
        .values()
        .map(|p| format!("{}:{}", p.name, p.version))
        .collect();
    // The maps are visited in name order: membership by walking the selection in name order.
    let walk = v.name_walk();
    ctx.work
        .mirror_mut(&v.name)
        .retain(&v.status.node_state, |n| walk.contains(n));
    let status = ctx.status_mut(v);
    let walk = v.name_walk();
    status.node_status.retain(|n, _| walk.contains(n));
    let walk = v.name_walk();
    status.node_boot_ids.retain(|n, _| walk.contains(n));
    let walk = v.name_walk();
    let gone: Vec<String> = status
        .node_priority
        .keys()
        .filter(|n| !walk.contains(n))
        .cloned()
        .collect();
    for n in gone {
        status.node_priority.remove(&n);
        status.node_order_offset = status.node_order_offset.saturating_add(1);
    }
    set_counters(status, &v.nodes, &packages);
}

/// R6.3 pause: every node `paused`, NW status `paused`, unfinished executors suspended.
pub fn pause(ctx: &mut Ctx, v: &NwView) {
    set_suspend(ctx, v, true);
    for node in &v.refs {
        ctx.work.set_node_status(node, &v.name, Status::Paused);
    }
    let (generation, now) = (v.generation, ctx.now);
    let complete = ctx.nw_complete(v);
    let status = ctx.status_mut(v);
    let prior = status.status;
    status.status = Some(Status::Paused);
    for n in &v.nodes {
        status.node_status.insert(n.clone(), Status::Paused);
    }
    set_ready(status, complete, &v.nodes, prior, generation, now);
}

/// Suspends (pause) or resumes (R6.5, only after a quiet sweep: B2) the NodeWright's
/// unfinished, non-invalid executors.
pub fn set_suspend(ctx: &mut Ctx, v: &NwView, suspend: bool) {
    let effects = if suspend {
        crate::jobs::suspend(&ctx.index, v.nw)
    } else {
        crate::jobs::resume(&ctx.index, v.nw, &crate::jobs::Sweep::default())
    };
    for e in effects {
        ctx.work.push(Slot::Before, e);
    }
}

/// R6.4a executor sweep (§7.11) through the jobs seam; true when anything was deleted or
/// invalidated (the pass ends, and nothing is resumed: B2).
pub fn sweep(ctx: &mut Ctx, v: &NwView) -> bool {
    // The sweep asks, node by node of the NodeWright's executors, whether the node is selected
    // and for its working document; both are read in place (no per-pass copies of the fleet).
    // The snapshot's documents: the D21 check of a re-run deletion confirms those, not this
    // pass's projected outcome writes (they are written after the deletion).
    let recorded = |n: &str| v.parsed(n).and_then(|d| d.as_ref().ok()).map(|c| &**c);
    let working = &*ctx;
    let result = crate::jobs::sweep_split(
        &working.index,
        v.nw,
        |n| v.selects(n),
        |n| working.doc(v, n),
        recorded,
        working.opts,
    );
    for e in result.effects {
        if let crate::effect::Effect::DeleteJob { name, .. } = &e {
            ctx.done.cleared.insert(name.clone());
        }
        ctx.work.push(Slot::Before, e);
    }
    result.changed
}

/// R6.6 introspection; true when anything changed.
pub fn introspect(ctx: &mut Ctx, views: &[NwView], vi: usize) -> bool {
    let v = &views[vi];
    let before = Before::take(ctx, v);
    // Every selected node is in the snapshot (the views are built from it): statuses are read
    // by position, once before and once after they are set.
    let prior_statuses = rollout_seam::node_statuses(ctx, v);
    let mut views_now = rollout_seam::node_views(ctx, v, &prior_statuses);
    let facts = node_facts(ctx, views, v, &views_now, &prior_statuses);
    let missing = v.policy_missing();
    let nw_status = nw_status(ctx, views, v, &facts, missing);
    let prior = before.status.status;
    let became_complete = nw_status == Status::Complete && prior != Some(Status::Complete);
    let statuses = set_node_statuses(ctx, v, nw_status, missing, &facts);
    for (view, status) in views_now.iter_mut().zip(&statuses) {
        view.status_before = view.status;
        view.status = *status;
    }
    let evaluate = nw_status != Status::Complete;
    let decision = rollout_seam::plan(ctx, v, &views_now, evaluate, false, became_complete);
    rollout_seam::record(ctx, v, &decision);
    // The mirror copies the node documents (outcomes recorded this pass included) and no
    // decision reads it: it is saved with the pass's status but does not end the pass, so
    // a pass that records outcomes still reaches the work phase (R6.6 lists what ends it).
    refresh_mirror(ctx, v);
    let node_status_changed = write_status(ctx, v, nw_status, prior, &decision, &statuses);
    node_status_changed || before.changed(ctx, v)
}

/// What the working copy held before introspection, to tell whether it changed anything.
/// The status is kept without its mirror, `nodeStatus` (compared where it is written) and
/// `nodeBootIds` (introspection never writes it).
struct Before {
    status: NodeWrightStatus,
    annotations: BTreeMap<String, BTreeMap<String, Option<String>>>,
    labels: BTreeMap<String, BTreeMap<String, Option<String>>>,
    unschedulable: BTreeMap<String, bool>,
}

impl Before {
    fn take(ctx: &mut Ctx, v: &NwView) -> Self {
        Before {
            status: without_maps(ctx.status_mut(v), |s| s.clone()),
            annotations: ctx.work.annotations.clone(),
            labels: ctx.work.labels.clone(),
            unschedulable: ctx.work.unschedulable.clone(),
        }
    }

    fn changed(&self, ctx: &mut Ctx, v: &NwView) -> bool {
        without_maps(ctx.status_mut(v), |s| *s != self.status)
            || ctx.work.annotations != self.annotations
            || ctx.work.labels != self.labels
            || ctx.work.unschedulable != self.unschedulable
    }
}

/// §12.1 inputs per selected node, in `v.nodes` order.
fn node_facts(
    ctx: &Ctx,
    views: &[NwView],
    v: &NwView,
    views_now: &[NodeView],
    prior_statuses: &[Status],
) -> Vec<NodeFacts> {
    // node_views has one view per selected node, in v.nodes' order.
    let tolerations = crate::rollout::selection_tolerations(
        v.nw,
        &rollout_seam::runtime_required_taints(ctx.opts),
    );
    v.nodes
        .iter()
        .enumerate()
        .map(|(i, name)| NodeFacts {
            current: prior_statuses[i],
            complete: ctx.node_complete_at(v, i),
            ineligible: crate::rollout::ineligibility(&views_now[i], &tolerations).is_some(),
            ready: node_ready(ctx, views, v, name),
        })
        .collect()
}

/// §12.2 the NodeWright's Status from its nodes, overridden by disabled, paused, a missing
/// policy and a global wait.
fn nw_status(
    ctx: &Ctx,
    views: &[NwView],
    v: &NwView,
    facts: &[NodeFacts],
    missing: bool,
) -> Status {
    let status = aggregate(facts.iter().map(|f| (f.complete, f.current)));
    if status == Status::Complete {
        return if missing { Status::Blocked } else { status };
    }
    if v.disabled {
        Status::Disabled
    } else if v.paused {
        Status::Paused
    } else if missing {
        Status::Blocked
    } else if globally_waiting(ctx, views, v) {
        Status::Waiting
    } else {
        status
    }
}

/// §12.1 each node's Status; a node that is complete releases its cordon (E8 when it just
/// became complete). Returns the statuses set, in `v.nodes` order (what
/// [`rollout_seam::node_statuses`] now reads: a status is written as its wire spelling, which
/// parses back to it).
fn set_node_statuses(
    ctx: &mut Ctx,
    v: &NwView,
    nw_status: Status,
    missing: bool,
    facts: &[NodeFacts],
) -> Vec<Status> {
    let mut statuses = Vec::with_capacity(v.nodes.len());
    for ((name, node), f) in v.nodes.iter().zip(&v.refs).zip(facts) {
        let new = node_status(nw_status, !missing, *f);
        ctx.work.set_node_status(node, &v.name, new);
        statuses.push(new);
        if new != Status::Complete {
            continue;
        }
        let cordoned = ctx
            .work
            .annotation(
                node,
                &super::work::Work::cordon_key(&ctx.work.keys, &v.name),
            )
            .is_some();
        if f.current != Status::Complete || cordoned {
            ctx.done.settled.insert(name.clone());
        }
        if f.current == Status::Complete {
            ctx.work.release_cordon(&v.name, node);
        } else {
            ctx.work.release_cordon_on_write(&v.name, node);
        }
        if f.current != Status::Complete {
            ctx.work.event(
                node_ref(name),
                false,
                "State",
                "MarkComplete",
                format!("NodeWright [{}] complete.", v.name),
            ); // E8
        }
    }
    statuses
}

/// Brings the `status.nodeState` mirror up to the current documents; true when it changed.
fn refresh_mirror(ctx: &mut Ctx, v: &NwView) -> bool {
    // D26: a mirror whose JSON is certainly over the limit is never written; record only
    // whether it changed instead of copying every document into it.
    let at_least: usize = (0..v.nodes.len())
        .filter_map(|i| Some(entry_bytes_at_least(&v.nodes[i], ctx.doc_at(v, i)?)))
        .sum();
    if at_least > MIRROR_LIMIT_BYTES {
        let changed = ctx
            .work
            .mirrors
            .get(&v.name)
            .is_some_and(|edits| edits.changed(&v.status.node_state))
            || (0..v.nodes.len()).any(|i| {
                ctx.doc_at(v, i)
                    .is_some_and(|d| ctx.mirror_entry(v, &v.nodes[i]) != Some(d))
            });
        ctx.work.mirror_mut(&v.name).mark_oversized(changed);
        return changed;
    }
    let unedited = ctx
        .work
        .mirrors
        .get(&v.name)
        .is_none_or(|edits| edits.is_empty());
    let docs: Vec<(String, NodeState)> = if unedited {
        // The mirror is the snapshot's: walk it in name order beside the selection.
        let mut mirror = v.status.node_state.iter().peekable();
        v.by_name
            .iter()
            .filter_map(|&i| {
                let n = &v.nodes[i];
                let entry = walk_get(&mut mirror, n);
                let d = ctx.doc_at(v, i)?;
                (entry != Some(d)).then(|| (n.clone(), d.clone()))
            })
            .collect()
    } else {
        v.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                let d = ctx.doc_at(v, i)?;
                (ctx.mirror_entry(v, n) != Some(d)).then(|| (n.clone(), d.clone()))
            })
            .collect()
    };
    let changed = !docs.is_empty();
    let edits = ctx.work.mirror_mut(&v.name);
    for (n, d) in docs {
        edits.insert(n, d);
    }
    changed
}

/// Writes the NodeWright's status, node statuses (`statuses`, in `v.nodes` order), rollout
/// conditions and Ready; emits the transition Event when the status changed. True when
/// `nodeStatus` changed.
fn write_status(
    ctx: &mut Ctx,
    v: &NwView,
    nw_status: Status,
    prior: Option<Status>,
    decision: &RolloutDecision,
    statuses: &[Status],
) -> bool {
    let complete = ctx.nw_complete(v);
    let (generation, now) = (v.generation, ctx.now);
    let status = ctx.status_mut(v);
    status.status = Some(nw_status);
    status.observed_generation = generation;
    // Compare with the current map in name order; rebuild it only when it differs.
    let node_status_changed = status.node_status.len() != v.nodes.len()
        || status
            .node_status
            .iter()
            .zip(&v.by_name)
            .any(|((n, s), &i)| *n != v.nodes[i] || *s != statuses[i]);
    if node_status_changed {
        status.node_status = v
            .by_name
            .iter()
            .map(|&i| (v.nodes[i].clone(), statuses[i]))
            .collect();
    }
    for c in &decision.conditions {
        for ty in [c.type_.clone(), format!("{}/{}", keys::PREFIX, c.type_)] {
            set_condition(
                &mut status.conditions,
                &ty,
                c.status,
                &c.reason,
                &c.message,
                generation,
                now,
            );
        }
    }
    for ty in &decision.removed_conditions {
        remove_condition(&mut status.conditions, ty);
        remove_condition(&mut status.conditions, &format!("{}/{ty}", keys::PREFIX));
    }
    set_ready(status, complete, &v.nodes, prior, generation, now);
    if let Some(prior) = prior.filter(|p| *p != nw_status) {
        ctx.work.event(
            nw_ref(&v.name, &v.uid),
            false,
            "State",
            "Transition",
            format!("NodeWright transitioned [{prior}] -> [{nw_status}]"),
        );
    }
    node_status_changed
}

/// Runs `f` on the status with its per-node maps (`nodeState`, `nodeStatus`, `nodeBootIds`)
/// taken out (they are large at scale).
fn without_maps<T>(status: &mut NodeWrightStatus, f: impl FnOnce(&NodeWrightStatus) -> T) -> T {
    let mirror = std::mem::take(&mut status.node_state);
    let node_status = std::mem::take(&mut status.node_status);
    let boot_ids = std::mem::take(&mut status.node_boot_ids);
    let out = f(status);
    status.node_state = mirror;
    status.node_status = node_status;
    status.node_boot_ids = boot_ids;
    out
}
