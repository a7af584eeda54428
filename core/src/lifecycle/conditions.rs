//! R6.1 state-derived NodeWright conditions (02-lifecycle.md §4 R6.1): NodeStateMalformed,
//! Blocked, UninstallInProgress, UninstallFailed and, after the work phase, DrainBlocked.

use std::collections::BTreeSet;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use nodewright_crds::State;

use super::ctx::Ctx;
use super::done::Blocker;
use super::predicates::in_cycle;
use super::status::{condition, remove_condition, set_condition};
use super::view::NwView;
use super::work::nw_ref;

/// A warning Event to emit once a condition newly holds: (reason, action, message).
type Warning = (&'static str, &'static str, String);

/// The conditions of one NodeWright being edited in one pass, with the stamp they get.
struct Conds<'c> {
    list: &'c mut Vec<Condition>,
    generation: i64,
    now: Timestamp,
    changed: bool,
    warnings: Vec<Warning>,
}

impl<'c> Conds<'c> {
    fn new(list: &'c mut Vec<Condition>, generation: i64, now: Timestamp) -> Self {
        Conds {
            list,
            generation,
            now,
            changed: false,
            warnings: Vec::new(),
        }
    }

    /// Sets `ty` True; true when it changed.
    fn set(&mut self, ty: &str, reason: &str, message: &str) -> bool {
        let changed = set_condition(
            self.list,
            ty,
            true,
            reason,
            message,
            self.generation,
            self.now,
        );
        self.changed |= changed;
        changed
    }

    /// Removes `ty`.
    fn remove(&mut self, ty: &str) {
        self.changed |= remove_condition(self.list, ty);
    }

    /// Sets `ty` True when `on`, else removes it.
    fn toggle(&mut self, ty: &str, on: bool, reason: &str, message: &str) {
        if on {
            self.set(ty, reason, message);
        } else {
            self.remove(ty);
        }
    }

    /// The reason of `ty` when it is present.
    fn reason(&self, ty: &str) -> Option<(&str, &str)> {
        condition(self.list, ty).map(|c| (c.reason.as_str(), c.status.as_str()))
    }
}

/// What the Blocked condition is computed from.
struct BlockedInputs {
    dependency: Option<String>,
    graph: Option<String>,
    non_interrupt: Vec<String>,
    after_work: bool,
}

/// R6.1: NodeStateMalformed, Blocked (DependencyUninstalled), UninstallInProgress,
/// UninstallFailed; after the work phase (`after_work`) also the drain-derived ones
/// (Blocked/NonInterruptPodsRunning, DrainBlocked), which only the work phase can observe.
/// True when a condition changed.
pub fn refresh_conditions(ctx: &mut Ctx, v: &NwView, after_work: bool) -> bool {
    let unreadable = v.unreadable();
    let (cycling, failing) = uninstall_cycle(ctx, v);
    let blocked = BlockedInputs {
        dependency: dependency_blocked(ctx, v),
        graph: v.graph_error(),
        non_interrupt: non_interrupt_nodes(ctx, v),
        after_work,
    };
    let (generation, now) = (v.generation, ctx.now);
    let mut conds = Conds::new(&mut ctx.status_mut(v).conditions, generation, now);
    malformed(&mut conds, &unreadable);
    blocked_condition(&mut conds, blocked);
    let (mut changed, warnings) = (conds.changed, conds.warnings);
    for (reason, action, message) in warnings {
        ctx.work
            .event(nw_ref(&v.name, &v.uid), true, reason, action, message);
    }
    if after_work {
        changed |= drain_blocked(ctx, v);
    }
    let mut conds = Conds::new(&mut ctx.status_mut(v).conditions, generation, now);
    let msg = "One or more packages are being uninstalled";
    conds.toggle("UninstallInProgress", cycling, "UninstallInProgress", msg);
    let msg = "One or more uninstall pods are failing";
    conds.toggle("UninstallFailed", failing, "UninstallPodFailing", msg);
    changed | conds.changed
}

/// (some spec package is in an uninstall cycle on a node, one of those entries is erroring).
fn uninstall_cycle(ctx: &Ctx, v: &NwView) -> (bool, bool) {
    let (mut cycling, mut failing) = (false, false);
    for i in 0..v.nodes.len() {
        let Some(doc) = ctx.doc_at(v, i) else {
            continue;
        };
        // Entries are keyed by name|version, so each spec package has at most one entry:
        // scanning the (rarely cycling) entries finds the same pairs as looking up each package.
        for e in doc.0.values().filter(|e| e.stage.in_uninstall_cycle()) {
            if v.packages
                .values()
                .any(|p| p.name == e.name && p.version == e.version)
            {
                cycling = true;
                failing |= e.state == Some(State::Erroring);
            }
        }
    }
    (cycling, failing)
}

/// Nodes of `v` whose drain waits on podNonInterruptLabels pods this pass.
fn non_interrupt_nodes(ctx: &Ctx, v: &NwView) -> Vec<String> {
    ctx.done
        .non_interrupt_blocked
        .iter()
        .filter(|(nw, _)| *nw == v.name)
        .map(|(_, n)| n.clone())
        .collect()
}

/// NodeStateMalformed, with its warning Event when it newly holds.
fn malformed(conds: &mut Conds, unreadable: &[String]) {
    if unreadable.is_empty() {
        conds.remove("NodeStateMalformed");
        return;
    }
    let message = malformed_message(unreadable);
    if conds.set("NodeStateMalformed", "ParseError", &message) {
        conds
            .warnings
            .push(("NodeStateMalformed", "ParseNodeState", message));
    }
}

/// Blocked: a dependency being uninstalled, an invalid graph, or (after the work phase)
/// non-interrupt pods; before the work phase a NonInterruptPodsRunning Blocked is kept.
fn blocked_condition(conds: &mut Conds, inputs: BlockedInputs) {
    if let Some(message) = inputs.dependency {
        conds.set("Blocked", "DependencyUninstalled", &message);
    } else if let Some(message) = inputs.graph {
        if conds.set("Blocked", "InvalidDependencyGraph", &message) {
            conds
                .warnings
                .push(("InvalidSpec", "BuildDependencyGraph", message));
        }
    } else if !inputs.after_work {
        let drain_held = conds
            .reason("Blocked")
            .is_some_and(|(reason, _)| reason == "NonInterruptPodsRunning");
        if !drain_held {
            conds.remove("Blocked");
        }
    } else if !inputs.non_interrupt.is_empty() {
        non_interrupt_blocked(conds, &inputs.non_interrupt);
    } else {
        conds.remove("Blocked");
    }
}

/// Blocked/NonInterruptPodsRunning for `nodes`, with the E6 warning when it newly holds.
fn non_interrupt_blocked(conds: &mut Conds, nodes: &[String]) {
    let list = nodes.join(", ");
    let message = format!(
        "{} node(s) blocked by non-interrupt pods ({list}). Waiting.",
        nodes.len()
    );
    let newly = conds
        .reason("Blocked")
        .is_none_or(|(reason, status)| reason != "NonInterruptPodsRunning" || status != "True");
    conds.set("Blocked", "NonInterruptPodsRunning", &message);
    if newly {
        conds.warnings.push((
            "Drain",
            "NonInterruptPodsRunning",
            format!(
                "drain blocked by non-interrupt pods on {} node(s) ({list})",
                nodes.len()
            ),
        )); // E6
    }
}

/// [Ext] DrainBlocked, rebuilt each pass from this pass's blockers; true on change.
fn drain_blocked(ctx: &mut Ctx, v: &NwView) -> bool {
    let (generation, now) = (v.generation, ctx.now);
    let blocked: Vec<(&String, &Vec<Blocker>)> = ctx
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
