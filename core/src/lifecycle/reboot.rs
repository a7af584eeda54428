//! Reboot detection (R5, §8.8) with B4: the new boot id is recorded only in a pass that finds
//! nothing left to reset, i.e. after the reset write and the executor deletions landed.

use k8s_openapi::api::core::v1::Node;
use nodewright_crds::Status;

use super::ctx::Ctx;
use super::view::{NwView, walk_get};
use super::work::{Slot, node_ref, nw_ref};
use crate::NodeKeys;

/// R5; true when anything was written (the pass ends).
pub fn track(ctx: &mut Ctx, views: &[NwView]) -> bool {
    let mut wrote = false;
    for v in views {
        // Usually every boot id is recorded and unchanged: check that in name order first.
        let mut recorded = ctx.status(v).node_boot_ids.iter().peekable();
        let quiet = v.by_name.iter().all(|&i| {
            walk_get(&mut recorded, &v.nodes[i])
                .is_some_and(|old| old.is_empty() || old == boot_id(v.refs[i]))
        });
        if quiet {
            continue;
        }
        for (name, node) in v.nodes.iter().zip(&v.refs) {
            let current = boot_id(node);
            let reboot = match ctx.status(v).node_boot_ids.get(name) {
                None => false,
                Some(old) if !old.is_empty() && old != current => true,
                Some(_) => continue,
            };
            if reboot && ctx.opts.reapply_on_reboot && reset(ctx, v, name) {
                wrote = true;
                continue; // B4: the boot id waits for a pass with nothing left to reset
            }
            ctx.status_mut(v)
                .node_boot_ids
                .insert(name.clone(), current.to_string());
            wrote = true;
        }
    }
    wrote
}

/// The node's current boot id (empty when unknown).
fn boot_id(node: &Node) -> &str {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map_or("", |i| i.boot_id.as_str())
}

/// Resets (v, node) for a reboot; false when there was nothing left to reset (T18).
fn reset(ctx: &mut Ctx, v: &NwView, name: &str) -> bool {
    let Some(node) = ctx.node(name) else {
        return false;
    };
    let keys = NodeKeys::of(&v.name);
    let has_keys = keys
        .reset_annotations()
        .iter()
        .chain([&keys.cordon.as_str()])
        .any(|k| super::view::annotation(node, k).is_some())
        || keys
            .reset_labels()
            .iter()
            .any(|k| super::view::label(node, k).is_some());
    let jobs = crate::jobs::reboot_reset(&ctx.index, v.nw, name);
    if !has_keys && jobs.is_empty() {
        return false;
    }
    for e in jobs {
        ctx.work.push(Slot::Before, e);
    }
    ctx.work.release_cordon(&v.name, node); // Q16: release through the ownership rule
    ctx.work.reset_node(node, &v.name, &keys, true);
    ctx.work.mirror_mut(&v.name).remove(name);
    let status = ctx.status_mut(v);
    status.node_status.remove(name);
    status.status = Some(Status::Unknown);
    ctx.work.node_event(
        name,
        nw_ref(&v.name, &v.uid),
        false,
        "Reboot",
        "ResetNodeState",
        format!("detected reboot, resetting node [{name}] to be reapplied"),
    );
    ctx.work.event(
        node_ref(name),
        false,
        "Reboot",
        "ResetNodeState",
        format!(
            "detected reboot, resetting node for [{}] to be reapplied",
            v.name
        ),
    );
    true
}
