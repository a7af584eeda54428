//! Applies a record-only effect to a snapshot copy, the way the watch would deliver the write
//! (`plan` follows record-only passes through with it).

use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeCondition;
use nodewright_core::effect::resolve_node_patch;
use nodewright_core::{Effect, Snapshot};
use nodewright_crds::keys;

/// Applies `effect` to `snapshot`; effects that touch Jobs or pods are ignored.
pub fn apply(snapshot: &mut Snapshot, effect: &Effect) {
    match effect {
        Effect::PatchStatus { nodewright, status } => {
            if let Some(nw) = nodewright_mut(snapshot, nodewright) {
                nw.status = Some((**status).clone());
            }
        }
        Effect::AddFinalizer { nodewright, .. } => {
            if let Some(nw) = nodewright_mut(snapshot, nodewright) {
                let list = nw.metadata.finalizers.get_or_insert_with(Vec::new);
                if !list.iter().any(|f| f == keys::FINALIZER) {
                    list.push(keys::FINALIZER.to_string());
                }
            }
        }
        Effect::PatchNode(patch) => {
            let Some(node) = snapshot
                .nodes
                .iter_mut()
                .find(|n| n.metadata.name.as_deref() == Some(patch.node.as_str()))
            else {
                return;
            };
            if let Ok(Some(delta)) = resolve_node_patch(node, patch) {
                *node = Arc::new(delta.apply_to((**node).clone()));
            }
        }
        Effect::PatchNodeConditions { node, set, remove } => {
            let Some(n) = snapshot
                .nodes
                .iter_mut()
                .find(|n| n.metadata.name.as_deref() == Some(node.as_str()))
            else {
                return;
            };
            let status = Arc::make_mut(n).status.get_or_insert_with(Default::default);
            let conditions: &mut Vec<NodeCondition> =
                status.conditions.get_or_insert_with(Vec::new);
            conditions
                .retain(|c| !remove.contains(&c.type_) && !set.iter().any(|s| s.type_ == c.type_));
            conditions.extend(set.iter().cloned());
        }
        Effect::UpsertConfigMap { config_map, .. } => {
            let name = config_map.metadata.name.clone();
            snapshot.config_maps.retain(|c| c.metadata.name != name);
            snapshot.config_maps.push(Arc::new((**config_map).clone()));
        }
        _ => {}
    }
}

fn nodewright_mut<'a>(
    snapshot: &'a mut Snapshot,
    name: &str,
) -> Option<&'a mut nodewright_crds::NodeWright> {
    snapshot
        .nodewrights
        .iter_mut()
        .find(|n| n.metadata.name.as_deref() == Some(name))
        .map(Arc::make_mut)
}
