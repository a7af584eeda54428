//! R6 per-NodeWright prelude (02-lifecycle.md §4 R6.1–R6.6): state-derived conditions,
//! ReportState, pause, executor sweep, resume and introspection.

use std::collections::BTreeSet;

use nodewright_crds::{State, Status, keys};

use super::ctx::Ctx;
use super::ordering::{globally_waiting, node_ready};
use super::predicates::in_cycle;
use super::rollout_seam;
use super::status::{
    NodeFacts, aggregate, node_status, remove_condition, set_condition, set_counters, set_ready,
};
use super::view::NwView;
use super::work::{Slot, nw_ref};

/// R6.1: NodeStateMalformed, Blocked (DependencyUninstalled), UninstallInProgress,
/// UninstallFailed; after the work phase (`after_work`) also the drain-derived ones
/// (Blocked/NonInterruptPodsRunning, DrainBlocked), which only the work phase can observe.
/// True when a condition changed.
pub fn refresh_conditions(ctx: &mut Ctx, v: &NwView, after_work: bool) -> bool {
    let (generation, now) = (v.generation, ctx.now);
    let unreadable = v.unreadable();
    let mut in_cycle_any = false;
    let mut failing = false;
    for node in &v.nodes {
        let Some(doc) = ctx.doc(v, node) else {
            continue;
        };
        // Entries are keyed by name|version, so each spec package has at most one entry:
        // scanning the (rarely cycling) entries finds the same pairs as looking up each package.
        for e in doc.0.values().filter(|e| e.stage.in_uninstall_cycle()) {
            if v.packages
                .values()
                .any(|p| p.name == e.name && p.version == e.version)
            {
                in_cycle_any = true;
                failing |= e.state == Some(State::Erroring);
            }
        }
    }
    let blocked = dependency_blocked(ctx, v);
    let graph = v.graph_error();
    let non_interrupt: Vec<String> = ctx
        .done
        .non_interrupt_blocked
        .iter()
        .filter(|(nw, _)| *nw == v.name)
        .map(|(_, n)| n.clone())
        .collect();
    let mut warnings: Vec<(&str, &str, String)> = Vec::new();
    let status = ctx.status_mut(v);
    let conditions = &mut status.conditions;
    let mut changed = false;
    if unreadable.is_empty() {
        changed |= remove_condition(conditions, "NodeStateMalformed");
    } else {
        let message = malformed_message(&unreadable);
        if set_condition(
            conditions,
            "NodeStateMalformed",
            true,
            "ParseError",
            &message,
            generation,
            now,
        ) {
            changed = true;
            warnings.push(("NodeStateMalformed", "ParseNodeState", message));
        }
    }
    if let Some(message) = blocked {
        changed |= set_condition(
            conditions,
            "Blocked",
            true,
            "DependencyUninstalled",
            &message,
            generation,
            now,
        );
    } else if let Some(message) = graph {
        if set_condition(
            conditions,
            "Blocked",
            true,
            "InvalidDependencyGraph",
            &message,
            generation,
            now,
        ) {
            changed = true;
            warnings.push(("InvalidSpec", "BuildDependencyGraph", message));
        }
    } else if !after_work {
        let drain_held = super::status::condition(conditions, "Blocked")
            .is_some_and(|c| c.reason == "NonInterruptPodsRunning");
        if !drain_held {
            changed |= remove_condition(conditions, "Blocked");
        }
    } else if !non_interrupt.is_empty() {
        let message = format!(
            "{} node(s) blocked by non-interrupt pods ({}). Waiting.",
            non_interrupt.len(),
            non_interrupt.join(", ")
        );
        let newly = super::status::condition(conditions, "Blocked")
            .is_none_or(|c| c.reason != "NonInterruptPodsRunning" || c.status != "True");
        changed |= set_condition(
            conditions,
            "Blocked",
            true,
            "NonInterruptPodsRunning",
            &message,
            generation,
            now,
        );
        if newly {
            warnings.push((
                "Drain",
                "NonInterruptPodsRunning",
                format!(
                    "drain blocked by non-interrupt pods on {} node(s) ({})",
                    non_interrupt.len(),
                    non_interrupt.join(", ")
                ),
            )); // E6
        }
    } else {
        changed |= remove_condition(conditions, "Blocked");
    }
    for (reason, action, message) in warnings {
        ctx.work
            .event(nw_ref(&v.name, &v.uid), true, reason, action, message);
    }
    if after_work {
        changed |= drain_blocked(ctx, v);
    }
    let status = ctx.status_mut(v);
    let conditions = &mut status.conditions;
    let msg = "One or more packages are being uninstalled";
    changed |= toggle(
        conditions,
        "UninstallInProgress",
        in_cycle_any,
        "UninstallInProgress",
        msg,
        generation,
        now,
    );
    let msg = "One or more uninstall pods are failing";
    changed |= toggle(
        conditions,
        "UninstallFailed",
        failing,
        "UninstallPodFailing",
        msg,
        generation,
        now,
    );
    changed
}

fn toggle(
    conditions: &mut Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    ty: &str,
    on: bool,
    reason: &str,
    message: &str,
    generation: i64,
    now: jiff::Timestamp,
) -> bool {
    if on {
        set_condition(conditions, ty, true, reason, message, generation, now)
    } else {
        remove_condition(conditions, ty)
    }
}

/// [Ext] DrainBlocked, rebuilt each pass from this pass's blockers; true on change.
fn drain_blocked(ctx: &mut Ctx, v: &NwView) -> bool {
    let (generation, now) = (v.generation, ctx.now);
    let blocked: Vec<(&String, &Vec<super::done::Blocker>)> = ctx
        .drain_blockers
        .iter()
        .filter(|((nw, _), _)| *nw == v.name)
        .map(|((_, node), b)| (node, b))
        .collect();
    if blocked.is_empty() {
        return remove_condition(&mut ctx.status_mut(v).conditions, "DrainBlocked");
    }
    let reasons: BTreeSet<&str> = blocked
        .iter()
        .flat_map(|(_, b)| b.iter().map(|x| x.reason))
        .collect();
    let reason = if reasons.len() == 1 {
        reasons.iter().next().copied().unwrap_or("MultipleCauses")
    } else {
        "MultipleCauses"
    };
    let names: Vec<&str> = blocked.iter().map(|(n, _)| n.as_str()).collect();
    let mut message = format!(
        "{}/{} nodes blocked draining ({})",
        blocked.len(),
        v.nodes.len(),
        names.join(", ")
    );
    let details: Vec<String> = blocked
        .iter()
        .flat_map(|(node, bs)| {
            bs.iter()
                .filter(|b| b.reason == "PodDisruptionBudget")
                .map(move |b| format!("{} on {node}: {}", b.pod, b.detail))
        })
        .collect();
    for d in details.iter().take(10) {
        message.push_str("; ");
        message.push_str(d);
    }
    if details.len() > 10 {
        message.push_str("; (list truncated; see controller logs)");
    }
    let status = ctx.status_mut(v);
    set_condition(
        &mut status.conditions,
        "DrainBlocked",
        true,
        reason,
        &message,
        generation,
        now,
    )
}

/// `nodeState annotation cannot be parsed on <k> node(s): <names>` (names cut to 10 chars,
/// at most 5, then `and <r> more`).
pub fn malformed_message(nodes: &[String]) -> String {
    let mut names: Vec<String> = nodes
        .iter()
        .take(5)
        .map(|n| {
            if n.chars().count() > 10 {
                format!("{}...", n.chars().take(10).collect::<String>())
            } else {
                n.clone()
            }
        })
        .collect();
    if nodes.len() > 5 {
        names.push(format!("and {} more", nodes.len() - 5));
    }
    format!(
        "nodeState annotation cannot be parsed on {} node(s): {}",
        nodes.len(),
        names.join(", ")
    )
}

/// The Blocked/DependencyUninstalled message, if any package is blocked.
fn dependency_blocked(ctx: &Ctx, v: &NwView) -> Option<String> {
    if v.nodes.is_empty() {
        return None;
    }
    let all_readable = v.unreadable().is_empty();
    let mut messages = BTreeSet::new();
    for b in v.packages.values() {
        // Only a dependency in the spec can block: skip the fleet scan when there is none.
        if b.is_uninstalling() || !b.depends_on.keys().any(|d| v.packages.contains_key(d)) {
            continue;
        }
        let complete_everywhere = v.nodes.iter().all(|n| {
            ctx.doc(v, n).is_some_and(|d| {
                super::predicates::is_package_complete(d, b, &ctx.status(v).config_updates)
            })
        });
        if complete_everywhere {
            continue;
        }
        for dep_name in b.depends_on.keys() {
            let Some(d) = v.packages.get(dep_name) else {
                continue;
            };
            let cycling = v
                .nodes
                .iter()
                .any(|n| ctx.doc(v, n).is_some_and(|doc| in_cycle(doc, d)));
            let gone = d.is_uninstalling()
                && all_readable
                && v.nodes.iter().all(|n| {
                    ctx.doc(v, n).is_some_and(|doc| {
                        super::predicates::entry_of(doc, &d.name, &d.version).is_none()
                    })
                });
            if cycling {
                messages.insert(format!(
                    "package {} is blocked: dependency {} is being uninstalled",
                    b.name, d.name
                ));
            } else if gone {
                messages.insert(format!(
                    "package {} is blocked: dependency {} has been uninstalled",
                    b.name, d.name
                ));
            }
        }
    }
    (!messages.is_empty()).then(|| messages.into_iter().collect::<Vec<_>>().join("; "))
}

/// R6.3 ReportState: drop de-selected nodes from the status maps, counters.
pub fn report_state(ctx: &mut Ctx, v: &NwView) {
    let selected: BTreeSet<&String> = v.nodes.iter().collect();
    let packages: Vec<String> = v
        .packages
        .values()
        .map(|p| format!("{}:{}", p.name, p.version))
        .collect();
    ctx.work
        .mirror_mut(&v.name)
        .retain(&v.status.node_state, |n| selected.contains(n));
    let status = ctx.status_mut(v);
    status.node_status.retain(|n, _| selected.contains(n));
    status.node_boot_ids.retain(|n, _| selected.contains(n));
    let gone: Vec<String> = status
        .node_priority
        .keys()
        .filter(|n| !selected.contains(n))
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
    for name in &v.nodes {
        if let Some(node) = ctx.node(name) {
            ctx.work.set_node_status(node, &v.name, Status::Paused);
        }
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
    let selected: BTreeSet<String> = v.nodes.iter().cloned().collect();
    // Only nodes carrying an executor of this NodeWright matter to the sweep.
    let with_jobs: BTreeSet<String> = ctx.index.of(&v.name).map(|j| j.node.clone()).collect();
    let states: std::collections::BTreeMap<String, nodewright_crds::NodeState> = with_jobs
        .iter()
        .filter_map(|n| ctx.doc(v, n).map(|d| (n.clone(), d.clone())))
        .collect();
    // The snapshot's documents: the D21 check of a re-run deletion confirms those, not this
    // pass's projected outcome writes (they are written after the deletion).
    let recorded = |n: &str| v.parsed.get(n).and_then(|d| d.as_ref().ok()).map(|c| &**c);
    let result = crate::jobs::sweep_split(
        &ctx.index,
        v.nw,
        &selected,
        |n| states.get(n),
        recorded,
        ctx.opts,
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
    let before_status = without_mirror(ctx.status_mut(v), |s| s.clone());
    let annotations_before = ctx.work.annotations.clone();
    let labels_before = ctx.work.labels.clone();
    let unsched_before = ctx.work.unschedulable.clone();
    let mut facts = Vec::with_capacity(v.nodes.len());
    let prior_statuses: Vec<Status> = v
        .nodes
        .iter()
        .map(|n| {
            ctx.node(n)
                .map_or(Status::Unknown, |node| ctx.work.node_status(node, &v.name))
        })
        .collect();
    let mut views_now = rollout_seam::node_views(ctx, v, None);
    // node_views keeps v.nodes' order and skips only nodes missing from the snapshot, so the
    // view of the i-th present node is views_now[i] (names are unique).
    let mut present = 0;
    let probe: Vec<Option<usize>> = v
        .nodes
        .iter()
        .map(|n| {
            ctx.node(n).map(|_| {
                present += 1;
                present - 1
            })
        })
        .collect();
    let tolerations = crate::rollout::selection_tolerations(
        v.nw,
        &rollout_seam::runtime_required_taints(ctx.opts),
    );
    for (i, name) in v.nodes.iter().enumerate() {
        let ineligible = probe[i]
            .is_some_and(|j| crate::rollout::ineligibility(&views_now[j], &tolerations).is_some());
        facts.push(NodeFacts {
            current: prior_statuses[i],
            complete: ctx.node_complete(v, name),
            ineligible,
            ready: node_ready(ctx, views, v, name),
        });
    }
    let mut nw_status = aggregate(facts.iter().map(|f| (f.complete, f.current)));
    let missing = v.policy_missing();
    if nw_status != Status::Complete {
        if v.disabled {
            nw_status = Status::Disabled;
        } else if v.paused {
            nw_status = Status::Paused;
        } else if missing {
            nw_status = Status::Blocked;
        } else if globally_waiting(ctx, views, v) {
            nw_status = Status::Waiting;
        }
    } else if missing {
        nw_status = Status::Blocked;
    }
    let prior = before_status.status;
    let became_complete = nw_status == Status::Complete && prior != Some(Status::Complete);
    for (i, name) in v.nodes.iter().enumerate() {
        let Some(node) = ctx.node(name) else { continue };
        let new = node_status(nw_status, !missing, facts[i]);
        ctx.work.set_node_status(node, &v.name, new);
        if new == Status::Complete {
            release_cordon(ctx, &v.name, node);
            if prior_statuses[i] != Status::Complete {
                ctx.work.event(
                    super::work::node_ref(name),
                    false,
                    "State",
                    "MarkComplete",
                    format!("NodeWright [{}] complete.", v.name),
                ); // E8
            }
        }
    }
    drop(probe);
    for view in &mut views_now {
        view.status_before = view.status;
        if let Some(node) = ctx.node(&view.name) {
            view.status = ctx.work.node_status(node, &v.name);
        }
    }
    let evaluate = nw_status != Status::Complete;
    let decision = rollout_seam::plan(ctx, v, &views_now, evaluate, false, became_complete);
    rollout_seam::record(ctx, v, &decision);
    let statuses: Vec<(String, Status)> = v
        .nodes
        .iter()
        .filter_map(|n| {
            ctx.node(n)
                .map(|node| (n.clone(), ctx.work.node_status(node, &v.name)))
        })
        .collect();
    let docs: Vec<(String, nodewright_crds::NodeState)> = v
        .nodes
        .iter()
        .filter_map(|n| {
            let d = ctx.doc(v, n)?;
            (ctx.mirror_entry(v, n) != Some(d)).then(|| (n.clone(), d.clone()))
        })
        .collect();
    let mirror_changed = !docs.is_empty();
    let edits = ctx.work.mirror_mut(&v.name);
    for (n, d) in docs {
        edits.insert(n, d);
    }
    let complete = ctx.nw_complete(v);
    let (generation, now) = (v.generation, ctx.now);
    let status = ctx.status_mut(v);
    status.status = Some(nw_status);
    status.observed_generation = generation;
    status.node_status = statuses.into_iter().collect();
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
    if prior.is_some() && prior != Some(nw_status) {
        ctx.work.event(
            nw_ref(&v.name, &v.uid),
            false,
            "State",
            "Transition",
            format!(
                "NodeWright transitioned [{}] -> [{nw_status}]",
                prior.unwrap_or_default()
            ),
        );
    }
    mirror_changed
        || without_mirror(ctx.status_mut(v), |s| *s != before_status)
        || ctx.work.annotations != annotations_before
        || ctx.work.labels != labels_before
        || ctx.work.unschedulable != unsched_before
}

/// Runs `f` on the status with its node-state mirror taken out (it is large at scale).
fn without_mirror<T>(
    status: &mut nodewright_crds::NodeWrightStatus,
    f: impl FnOnce(&nodewright_crds::NodeWrightStatus) -> T,
) -> T {
    let mirror = std::mem::take(&mut status.node_state);
    let out = f(status);
    status.node_state = mirror;
    out
}

/// §8.7 uncordon through ownership: drop `P/cordon_<NW>`; clear `unschedulable` only when no
/// other cordon annotation remains. A NodeWright without the annotation touches nothing.
pub fn release_cordon(ctx: &mut Ctx, nw: &str, node: &k8s_openapi::api::core::v1::Node) {
    let key = keys::cordon(nw);
    if ctx.work.annotation(node, &key).is_none() {
        return;
    }
    ctx.work.set_annotation(node, &key, None);
    let prefix = format!("{}/cordon_", keys::PREFIX);
    let others = node.metadata.annotations.iter().flatten().any(|(k, _)| {
        (k.starts_with(&prefix) || k == keys::RUNTIME_REQUIRED_CORDON)
            && k != &key
            && ctx.work.annotation(node, k).is_some()
    });
    if !others {
        ctx.work.set_unschedulable(node, false);
    }
}
