//! Ordering between NodeWrights (02-lifecycle.md §5): precedence, NodeReady, global waiting.

use nodewright_crds::SequencingMode;

use super::ctx::Ctx;
use super::view::NwView;

/// §5.1: A precedes B iff (priority, name) is smaller.
pub fn precedes(a: &NwView, b: &NwView) -> bool {
    (a.priority(), &a.name) < (b.priority(), &b.name)
}

/// §5.2 NodeReady(B, n): every non-disabled predecessor is complete on n (`node`) or
/// everywhere (`all`); paused predecessors gate, disabled ones never do.
pub fn node_ready(ctx: &Ctx, views: &[NwView], b: &NwView, node: &str) -> bool {
    views
        .iter()
        .filter(|a| !a.disabled && precedes(a, b))
        .all(|a| match a.sequencing() {
            SequencingMode::All => ctx.nw_complete(a),
            SequencingMode::Node => !a.selects(node) || ctx.node_complete(a, node),
        })
}

/// §5.4: B is globally waiting when a non-disabled `all` predecessor is incomplete.
pub fn globally_waiting(ctx: &Ctx, views: &[NwView], b: &NwView) -> bool {
    views.iter().any(|a| {
        !a.disabled
            && precedes(a, b)
            && a.sequencing() == SequencingMode::All
            && !ctx.nw_complete(a)
    })
}
