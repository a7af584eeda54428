//! Executor outcome recording (02-lifecycle.md §7.9; T3–T5, T9–T12, T20) through the jobs
//! seam: guarded entry changes go into the working documents, the `state-recorded` marker and
//! other after-state effects come after the node patches.

use std::borrow::Cow;

use nodewright_crds::{NodeState, State, Status};

use super::ctx::Ctx;
use super::view::NwView;
use super::work::Slot;
use crate::jobs::{self, OutcomeKind};

/// Records every outcome of the snapshot's executors.
pub fn record(ctx: &mut Ctx, views: &[NwView]) {
    // The nodes and their parsed snapshot documents as this pass already holds them (a
    // NodeWright without a view, or a node it does not select, is parsed here).
    let state = |nw: &str, node: &str| -> Option<Cow<'_, NodeState>> {
        match views
            .iter()
            .find(|v| v.name == nw)
            .and_then(|v| v.parsed(node))
        {
            Some(parsed) => parsed.as_ref().ok().map(|d| Cow::Borrowed(&**d)),
            None => jobs::node_state_of(ctx.node(node)?, nw).map(Cow::Owned),
        }
    };
    let outs = jobs::outcomes_with(&ctx.index, |n| ctx.node(n), state, ctx.opts, ctx.now);
    if let Some(after) = outs.requeue_after
        && after <= super::emit::SHORT_REQUEUE
    {
        ctx.requeue = true;
    }
    for o in outs.items {
        let view = views.iter().find(|v| v.name == o.nodewright);
        let changes = match view {
            Some(v) => match ctx.doc(v, &o.node) {
                Some(doc) => jobs::entry_changes(&o, Some(v.nw), doc),
                None => continue, // unreadable: leave the outcome for a later pass
            },
            None => Vec::new(),
        };
        if let Some(v) = view
            && !changes.is_empty()
            && let Some(doc) = ctx.doc_mut(v, &o.node)
        {
            for c in &changes {
                if doc.0.get(&c.key) != c.expect.as_ref() {
                    continue; // guard: the working copy moved on
                }
                match &c.set {
                    Some(entry) => {
                        doc.0.insert(c.key.clone(), entry.clone());
                    }
                    None => {
                        doc.0.remove(&c.key);
                    }
                }
            }
            let terminal = matches!(o.kind, OutcomeKind::TerminalFailed { .. });
            let recorded = ctx.done.outcomes.entry(o.node.clone()).or_default();
            recorded.terminal |= terminal;
            recorded
                .packages
                .insert((v.name.clone(), o.package.clone()));
            for c in &changes {
                let name = c.key.split('|').next().unwrap_or_default();
                recorded.packages.insert((v.name.clone(), name.to_string()));
            }
            if terminal && let Some(node) = ctx.node(&o.node) {
                ctx.work.set_node_status(node, &v.name, Status::Erroring); // T4
            }
            let _ = State::Erroring;
        }
        if matches!(
            o.kind,
            OutcomeKind::Completed { .. }
                | OutcomeKind::InterruptCompleted { .. }
                | OutcomeKind::TerminalFailed { .. }
        ) {
            ctx.done.recorded.insert(o.job.clone());
        }
        for e in jobs::record_events(&o, &changes) {
            let anchor = super::work::EventAnchor::Node(o.node.clone());
            ctx.work.events.push((anchor, e));
        }
        for e in o.after_state {
            ctx.work.push(Slot::After, e);
        }
        ctx.requeue = true;
    }
}
