//! Finalizer and NodeWright deletion (02-lifecycle.md §14, B5, invariant 16.17).

use nodewright_crds::keys;

use super::ctx::Ctx;
use super::status::{remove_condition, set_condition};
use super::view::NwView;
use super::work::{Slot, nw_ref};
use crate::effect::Effect;
use crate::{NodeKeys, PlanError, PlanErrorKind};

/// R6.2; true when the pass must end (finalizer removed, or deletion blocked by bad state).
pub fn run(ctx: &mut Ctx, v: &NwView) -> bool {
    let has =
        v.nw.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|x| x == keys::FINALIZER));
    if !v.deleting {
        if !has {
            let effect = Effect::AddFinalizer {
                nodewright: v.name.clone(),
                uid: v.uid.clone(),
            };
            ctx.work.push(Slot::Before, effect);
        }
        return false;
    }
    if !has {
        return false;
    }
    let state_err = !v.unreadable().is_empty();
    let pending = v.nodes.iter().any(|n| {
        ctx.doc(v, n).is_some_and(|d| {
            v.packages.values().any(|p| {
                p.uninstall_enabled()
                    && super::predicates::entry_of(d, &p.name, &p.version).is_some()
            })
        })
    });
    let blocked = if state_err {
        Some((
            "MalformedNodeState",
            "Cannot safely delete NodeWright: malformed nodeState on one or more nodes. Repair the nodeState annotation before deletion.",
            "malformed nodeState. Repair and retry.",
        ))
    } else if v.paused && pending {
        Some((
            "PausedWithPendingUninstall",
            "NodeWright is paused with uninstall-enabled packages still tracked in nodeState. Unpause to let uninstall complete before deletion.",
            "paused with uninstall work pending. Unpause to proceed.",
        ))
    } else if v.disabled && pending {
        Some((
            "DisabledWithPendingUninstall",
            "NodeWright is disabled with uninstall-enabled packages still tracked in nodeState. Re-enable the NodeWright to let uninstall complete before deletion.",
            "disabled with uninstall work pending. Re-enable to proceed.",
        ))
    } else {
        None
    };
    let (generation, now) = (v.generation, ctx.now);
    if let Some((reason, message, event)) = blocked {
        let status = ctx.status_mut(v);
        if set_condition(
            &mut status.conditions,
            "DeletionBlocked",
            true,
            reason,
            message,
            generation,
            now,
        ) {
            ctx.work.event(
                nw_ref(&v.name, &v.uid),
                true,
                "DeletionBlocked",
                "BlockDelete",
                format!("Cannot delete NodeWright {}: {event}", v.name),
            );
        }
        if state_err {
            let kind = PlanErrorKind::DeletionBlocked(message.to_string());
            ctx.work.errors.push(PlanError::new(&v.name, kind));
            return true;
        }
        return false;
    }
    remove_condition(&mut ctx.status_mut(v).conditions, "DeletionBlocked");
    if pending {
        return false; // the work phase drives the finalizer uninstalls
    }
    cleanup(ctx, v);
    let effect = Effect::RemoveFinalizer {
        nodewright: v.name.clone(),
        uid: v.uid.clone(),
    };
    ctx.work.push(Slot::After, effect);
    true
}

/// §14.3 node cleanup with the explicit key list (Q18).
fn cleanup(ctx: &mut Ctx, v: &NwView) {
    for name in &v.nodes {
        let Some(node) = ctx.node(name) else { continue };
        ctx.work.release_cordon(&v.name, node);
        let keep_state = ctx.doc(v, name).is_some_and(|d| !d.is_empty());
        ctx.work
            .reset_node(node, &v.name, &NodeKeys::of(&v.name), !keep_state);
        let prefix = format!("{}/{}/", keys::PREFIX, v.name);
        let remove: Vec<String> = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .filter(|c| c.type_.starts_with(&prefix))
            .map(|c| c.type_.clone())
            .collect();
        if !remove.is_empty() {
            ctx.work.node_conditions.push(Effect::PatchNodeConditions {
                node: name.clone(),
                set: Vec::new(),
                remove,
            });
        }
    }
}
