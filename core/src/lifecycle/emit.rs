//! R9: turns the working copy into the ordered effect list, node conditions, status patches,
//! metrics and the requeue (§3, §12.5, §13).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nodewright_crds::{NodeState, State, keys};

use super::ctx::Ctx;
use super::event_order::place_events;
use super::metrics;
use super::view::NwView;
use super::work::{Slot, node_patch};
use crate::Plan;
use crate::effect::{Effect, rollout_bookkeeping};

/// Requeue after a write (§3).
pub const SHORT_REQUEUE: Duration = Duration::from_secs(2);
/// Requeue while a config change is deferred (§3).
pub const CONFIG_SYNC_REQUEUE: Duration = Duration::from_secs(30);

/// Builds the plan.
pub fn finish(mut ctx: Ctx, views: &[NwView], ended: bool) -> Plan {
    let mut plan = Plan::default();
    let mut slots: Vec<(Slot, usize, Effect)> = ctx
        .work
        .effects
        .drain(..)
        .enumerate()
        .map(|(i, (slot, e))| (slot, i, e))
        .collect();
    slots.sort_by_key(|(slot, i, _)| (*slot, *i));
    let (before, rest): (Vec<_>, Vec<_>) =
        slots.into_iter().partition(|(s, _, _)| *s != Slot::After);
    // The batch is recorded after the deletions, evictions and the finalizer (their writes do
    // not act on a new batch, and our finalizer write then precedes the status writes that
    // expect its version) and before the creates and node writes that act on it.
    let (early, create): (Vec<_>, Vec<_>) =
        before.into_iter().partition(|(s, _, _)| *s == Slot::Before);
    plan.effects.extend(early.into_iter().map(|(_, _, e)| e));
    plan.effects.extend(new_batches(&ctx, views));
    plan.effects.extend(create.into_iter().map(|(_, _, e)| e));
    let mut saved_nodes = Vec::new();
    for name in ctx.work.touched_nodes() {
        let Some((name, node)) = ctx.nodes.get_key_value(name) else {
            continue;
        };
        let snapshot_states = snapshot_states(views, name);
        if let Some(patch) = node_patch(&ctx.work, node, &snapshot_states) {
            plan.effects.push(Effect::PatchNode(Box::new(patch)));
            saved_nodes.push((*name, *node));
        }
    }
    for (name, node) in &saved_nodes {
        if let Some(effect) = node_conditions(&ctx, views, name, node) {
            plan.effects.push(effect);
        }
    }
    plan.effects.append(&mut ctx.work.node_conditions);
    for v in views {
        // NodeWright names are unique in a cluster; should one repeat, keep its edits for the
        // other view of the same name.
        let sole_of_name = !views
            .iter()
            .any(|w| w.name == v.name && !std::ptr::eq(w, v));
        if let Some(status) = ctx
            .work
            .take_changed_status(&v.name, &v.status, sole_of_name)
        {
            plan.effects.push(Effect::PatchStatus {
                nodewright: v.name.clone(),
                status: Box::new(status),
            });
        }
    }
    invalid_specs(&mut ctx, &mut plan);
    plan.effects.extend(rest.into_iter().map(|(_, _, e)| e));
    place_events(&mut plan.effects, std::mem::take(&mut ctx.work.events));
    plan.metrics = metrics::collect(&ctx, views);
    plan.errors = std::mem::take(&mut ctx.work.errors);
    plan.settled_pods = crate::jobs::settled_pods(&ctx.index);
    let wrote = !plan.effects.is_empty();
    plan.requeue_after = Some(if ended || ctx.requeue || wrote {
        SHORT_REQUEUE
    } else if ctx.config_sync_pending {
        CONFIG_SYNC_REQUEUE
    } else {
        ctx.opts.default_interval
    });
    if views.is_empty() {
        plan.requeue_after = None;
    }
    plan
}

/// I7: a batch selected in this pass (a node new in `nodePriority`) is recorded before any write
/// acts on it, so a pass on a snapshot that misses the status write cannot choose
/// another batch beside one already cordoned and started.
fn new_batches(ctx: &Ctx, views: &[NwView]) -> Vec<Effect> {
    views
        .iter()
        .filter_map(|v| {
            let working = ctx.work.statuses.get(&v.name)?;
            let grew = working
                .node_priority
                .keys()
                .any(|n| !v.status.node_priority.contains_key(n));
            grew.then(|| Effect::RecordBatch {
                nodewright: v.name.clone(),
                status: Box::new(rollout_bookkeeping(working)),
            })
        })
        .collect()
}

/// Snapshot node-state documents on `node`, per NodeWright (readable ones only).
fn snapshot_states<'v>(views: &'v [NwView], node: &str) -> BTreeMap<&'v str, &'v NodeState> {
    views
        .iter()
        .filter_map(|v| match v.parsed(node) {
            Some(Ok(doc)) => Some((v.name.as_str(), &**doc)),
            _ => None,
        })
        .collect()
}

/// §12.5 NotReady/Erroring per NodeWright selecting the node, only when they differ.
fn node_conditions(ctx: &Ctx, views: &[NwView], name: &str, node: &Node) -> Option<Effect> {
    let existing = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut set = Vec::new();
    for v in views.iter().filter(|v| v.selects(name) && !v.deleting) {
        let Some(doc) = ctx.doc(v, name) else {
            continue;
        };
        let complete = ctx.node_complete(v, name);
        let erroring = doc
            .0
            .values()
            .any(|e| matches!(e.state, Some(State::Erroring) | Some(State::Unknown)));
        let wanted = [
            (
                keys::node_condition_not_ready(&v.name),
                !complete,
                if complete { "Complete" } else { "Incomplete" },
                format!("NodeWright {} Ready", v.name),
            ),
            (
                keys::node_condition_erroring(&v.name),
                erroring,
                if erroring {
                    "Package(s) Erroring or Unknown"
                } else {
                    "Not Erroring"
                },
                format!("Package Erroring or Unknown for {}", v.name),
            ),
        ];
        for (ty, on, reason, message) in wanted {
            let status = if on { "True" } else { "False" };
            let same = existing.iter().any(|c| {
                c.type_ == ty
                    && c.status == status
                    && c.reason.as_deref() == Some(reason)
                    && c.message.as_deref() == Some(message.as_str())
            });
            if !same {
                set.push(NodeCondition {
                    type_: ty,
                    status: status.to_string(),
                    reason: Some(reason.to_string()),
                    message: Some(message),
                    last_heartbeat_time: Some(Time(ctx.now)),
                    last_transition_time: Some(Time(ctx.now)),
                });
            }
        }
    }
    (!set.is_empty()).then(|| Effect::PatchNodeConditions {
        node: name.to_string(),
        set,
        remove: Vec::new(),
    })
}

/// A NodeWright whose view could not be built (invalid selector slipped past admission): a
/// `Blocked`/`InvalidSpec` condition and a warning event; nothing else of it is touched.
fn invalid_specs(ctx: &mut Ctx, plan: &mut Plan) {
    let invalid = std::mem::take(&mut ctx.invalid);
    for (nw, reason) in invalid {
        let name = nw.metadata.name.clone().unwrap_or_default();
        let uid = nw.metadata.uid.clone().unwrap_or_default();
        let mut status = nw.status.clone().unwrap_or_default();
        let generation = nw.metadata.generation.unwrap_or_default();
        let changed = super::status::set_condition(
            &mut status.conditions,
            "Blocked",
            true,
            "InvalidSpec",
            &reason,
            generation,
            ctx.now,
        );
        if changed {
            plan.effects.push(Effect::PatchStatus {
                nodewright: name.clone(),
                status: Box::new(status),
            });
            ctx.work.event(
                super::work::nw_ref(&name, &uid),
                true,
                "InvalidSpec",
                "ValidateSpec",
                reason,
            );
        }
    }
}
