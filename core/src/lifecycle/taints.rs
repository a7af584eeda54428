//! Runtime-required taint: auto-taint of new nodes (R3, §10.3) and removal once every
//! runtime-required NodeWright selecting the node is complete on it (R8, §10.2, inv 16.16).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, Taint};
use nodewright_crds::keys;

use super::ctx::Ctx;
use super::rollout_seam::runtime_required_taints;
use super::view::NwView;

fn taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

fn has_taint(node: &Node, t: &Taint) -> bool {
    taints(node)
        .iter()
        .any(|x| x.key == t.key && x.effect == t.effect && x.value == t.value)
}

/// R3; true when anything was written.
pub fn auto_taint(ctx: &mut Ctx, views: &[NwView]) -> bool {
    let recognised = runtime_required_taints(ctx.opts);
    let configured = ctx.opts.runtime_required_taint.clone();
    let prefix = format!("{}/", keys::PREFIX);
    let mut done = BTreeSet::new();
    for v in views
        .iter()
        .filter(|v| v.nw.spec.runtime_required && v.nw.spec.auto_taint_new_nodes)
    {
        for name in &v.nodes {
            let Some(node) = ctx.node(name) else { continue };
            let touched = node
                .metadata
                .annotations
                .iter()
                .flatten()
                .any(|(k, _)| k.starts_with(&prefix));
            if touched
                || recognised.iter().any(|t| has_taint(node, t))
                || !done.insert(name.clone())
            {
                continue;
            }
            ctx.work
                .taints_add
                .entry(name.clone())
                .or_default()
                .push(configured.clone());
            ctx.work
                .set_annotation(node, &keys::auto_taint(&configured.key), Some("true"));
        }
    }
    !done.is_empty()
}

/// R8: remove recognised taints from nodes where every runtime-required NodeWright selecting
/// the node (disabled and paused included) is complete on that node.
pub fn remove_runtime_required(ctx: &mut Ctx, views: &[NwView]) {
    let recognised = runtime_required_taints(ctx.opts);
    let rr: Vec<&NwView> = views
        .iter()
        .filter(|v| v.nw.spec.runtime_required)
        .collect();
    let nodes: BTreeSet<&String> = rr.iter().flat_map(|v| v.nodes.iter()).collect();
    for name in nodes {
        let Some(node) = ctx.node(name) else { continue };
        let all_complete = rr
            .iter()
            .filter(|v| v.selects(name))
            .all(|v| ctx.node_complete(v, name));
        if !all_complete {
            continue;
        }
        let present: Vec<Taint> = recognised
            .iter()
            .filter(|t| has_taint(node, t))
            .cloned()
            .collect();
        if present.is_empty() {
            continue;
        }
        ctx.work
            .taints_remove
            .entry(name.clone())
            .or_default()
            .extend(present);
        if rr
            .iter()
            .any(|v| v.selects(name) && v.nw.spec.runtime_required_cordon_after)
        {
            ctx.work.set_unschedulable(node, true);
            ctx.work
                .set_annotation(node, keys::RUNTIME_REQUIRED_CORDON, Some("true"));
        }
    }
}
