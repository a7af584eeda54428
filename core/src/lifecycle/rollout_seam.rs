//! The lifecycle's use of the rollout module: node views, `plan_rollout`, and writing its
//! decision into the NodeWright status.

use k8s_openapi::api::core::v1::Taint;
use nodewright_crds::Status;

use super::ctx::Ctx;
use super::view::NwView;
use crate::Options;
use crate::rollout::{self, NodeView, RolloutDecision, RolloutSettings};

/// The recognised runtime-required taints: the configured one plus the legacy one (§10.1).
pub fn runtime_required_taints(options: &Options) -> Vec<Taint> {
    let configured = options.runtime_required_taint.clone();
    let legacy = Taint {
        key: nodewright_crds::keys::LEGACY_PREFIX.to_string(),
        value: Some("runtime-required".into()),
        effect: "NoSchedule".into(),
        time_added: None,
    };
    if configured.key == legacy.key
        && configured.value == legacy.value
        && configured.effect == legacy.effect
    {
        vec![configured]
    } else {
        vec![configured, legacy]
    }
}

/// The current node Status of each of `v`'s selected nodes, in `v.nodes` order.
pub fn node_statuses(ctx: &Ctx, v: &NwView) -> Vec<Status> {
    v.refs
        .iter()
        .map(|node| ctx.work.node_status(node, &v.name))
        .collect()
}

/// Node views of `v`'s selected nodes with their current statuses (`statuses`, from
/// [`node_statuses`]).
pub fn node_views<'v>(ctx: &Ctx, v: &NwView<'v>, statuses: &[Status]) -> Vec<NodeView<'v>> {
    let cordon = super::work::Work::cordon_key(&ctx.work.keys, &v.name);
    v.refs
        .iter()
        .zip(statuses)
        .enumerate()
        .map(|(i, (node, &status))| {
            let name = &v.nodes[i];
            let out = ctx.work.annotation(node, &cordon).is_some()
                || ctx.index.on_node(&v.name, name).any(|j| j.is_unfinished());
            NodeView::from_node(node, status, status, ctx.node_complete_at(v, i)).with_out(out)
        })
        .collect()
}

/// Calls `plan_rollout` for `v`.
pub fn plan(
    ctx: &Ctx,
    v: &NwView,
    views: &[NodeView],
    evaluate: bool,
    select: bool,
    reset: bool,
) -> RolloutDecision {
    let settings = RolloutSettings {
        runtime_required_taints: runtime_required_taints(ctx.opts),
        evaluate,
        select,
        reset_trigger: reset,
    };
    // plan_rollout reads only the rollout bookkeeping of the status; copy just that (the full
    // status mirrors every node's state and is expensive to clone at scale).
    let light = crate::effect::rollout_bookkeeping(ctx.status(v));
    let nw = nodewright_crds::NodeWright {
        metadata: v.nw.metadata.clone(),
        spec: v.nw.spec.clone(),
        status: Some(light),
    };
    rollout::plan_rollout(&nw, v.policy, views, ctx.now, &settings)
}

/// Writes the decision's bookkeeping into the working status and the node-order cache.
pub fn record(ctx: &mut Ctx, v: &NwView, decision: &RolloutDecision) {
    ctx.node_orders
        .insert(v.name.clone(), decision.node_order.clone());
    ctx.rollout_metrics
        .insert(v.name.clone(), decision.metrics.clone());
    let status = ctx.status_mut(v);
    status.node_priority = decision.node_priority.clone();
    status.node_order_offset = decision.node_order_offset;
    status.compartment_statuses = decision.compartment_statuses.clone();
}

/// Work-phase selection (§6.5): select with the statuses as they stand now; `version_changed`
/// is the §6.8 reset trigger of a detected package version change.
pub fn select(ctx: &mut Ctx, v: &NwView, version_changed: bool) -> RolloutDecision {
    let views = node_views(ctx, v, &node_statuses(ctx, v));
    let decision = plan(ctx, v, &views, false, true, version_changed);
    record(ctx, v, &decision);
    decision
}
