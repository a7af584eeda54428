//! The interpreters' skip rule: which later effects of a plan an effect that did not happen
//! blocks (02-lifecycle.md §13.7 ordering; docs/operations.md "Effects"). The shell and the
//! simulator both apply plans under this one rule.

use std::collections::BTreeSet;

use super::Effect;

/// How an applied effect ended, as far as the skip rule cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Written, or nothing to write.
    Happened,
    /// Must wait (an eviction refused by a PodDisruptionBudget): later writes still go ahead,
    /// but the Event describing it is not sent.
    Waiting,
    /// Dropped, failed or skipped.
    Failed,
}

/// The failures seen so far while applying one plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkipScope {
    failed_nodes: BTreeSet<String>,
    failed_nodewrights: BTreeSet<String>,
    previous_happened: bool,
    /// A batch could not be recorded (I7): nothing after it is written.
    halted: bool,
}

impl Default for SkipScope {
    /// Nothing failed yet; an Event at the very start of a plan is sent.
    fn default() -> Self {
        SkipScope {
            failed_nodes: BTreeSet::new(),
            failed_nodewrights: BTreeSet::new(),
            previous_happened: true,
            halted: false,
        }
    }
}

impl SkipScope {
    /// True when `effect` must be skipped: an Event whose write did not happen, any effect on a
    /// node with a failed write, the status patch of a NodeWright with a failed node write, or
    /// any write after a batch that could not be recorded (I7).
    pub fn blocks(&self, effect: &Effect) -> bool {
        if matches!(effect, Effect::Event(_)) {
            return !self.previous_happened;
        }
        if self.halted {
            return true;
        }
        if let Effect::PatchStatus { nodewright, .. } = effect
            && self.failed_nodewrights.contains(nodewright)
        {
            return true;
        }
        effect.node().is_some_and(|n| self.failed_nodes.contains(n))
    }

    /// Records how `effect` ended.
    pub fn record(&mut self, effect: &Effect, ended: Ended) {
        if matches!(effect, Effect::Event(_)) {
            return;
        }
        self.previous_happened = ended == Ended::Happened;
        if ended != Ended::Failed {
            return;
        }
        if matches!(effect, Effect::RecordBatch { .. }) {
            self.halted = true;
        }
        if let Some(node) = effect.node() {
            self.failed_nodes.insert(node.to_string());
            if let Some(nw) = &effect.context().nodewright {
                self.failed_nodewrights.insert(nw.clone());
            }
        }
        if let Effect::PatchNode(patch) = effect {
            for change in &patch.state {
                self.failed_nodewrights.insert(change.nodewright.clone());
            }
        }
    }

    /// The part of the scope one node's lane needs (for applying nodes concurrently).
    pub fn fork(&self, node: &str) -> SkipScope {
        let mut local = SkipScope {
            halted: self.halted,
            ..SkipScope::default()
        };
        if self.failed_nodes.contains(node) {
            local.failed_nodes.insert(node.to_string());
        }
        local
    }

    /// Takes over the failures a lane recorded.
    pub fn merge(&mut self, other: SkipScope) {
        self.failed_nodes.extend(other.failed_nodes);
        self.failed_nodewrights.extend(other.failed_nodewrights);
        self.halted |= other.halted;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effect::{Context, EventSpec, NodePatch, ObjectRef};

    fn event() -> Effect {
        Effect::Event(Box::new(EventSpec {
            regarding: ObjectRef {
                kind: "Node".into(),
                name: "n1".into(),
                namespace: None,
                uid: None,
            },
            warning: false,
            reason: "Apply".into(),
            action: "ApplyPackage".into(),
            message: String::new(),
        }))
    }

    fn node_write(node: &str, nw: &str) -> Effect {
        Effect::PatchNode(Box::new(NodePatch {
            node: node.into(),
            context: Context {
                nodewright: Some(nw.into()),
                node: Some(node.into()),
                ..Context::default()
            },
            ..NodePatch::default()
        }))
    }

    fn status(nw: &str) -> Effect {
        Effect::PatchStatus {
            nodewright: nw.into(),
            status: Box::default(),
        }
    }

    #[test]
    fn r13_7_event_at_plan_start_is_sent_and_follows_its_write() {
        let mut scope = SkipScope::default();
        assert!(!scope.blocks(&event()));
        scope.record(&node_write("n1", "nw"), Ended::Failed);
        assert!(scope.blocks(&event()));
        scope.record(&node_write("n2", "nw"), Ended::Waiting);
        assert!(
            scope.blocks(&event()),
            "the Event of a waiting eviction is not sent"
        );
    }

    #[test]
    fn r13_7_failed_node_write_blocks_its_node_and_its_nodewright_status() {
        let mut scope = SkipScope::default();
        scope.record(&node_write("n1", "nw"), Ended::Failed);
        assert!(scope.blocks(&node_write("n1", "other")));
        assert!(!scope.blocks(&node_write("n2", "nw")));
        assert!(scope.blocks(&status("nw")));
        assert!(!scope.blocks(&status("other")));
    }

    #[test]
    fn r13_7_waiting_blocks_nothing_but_its_event() {
        let mut scope = SkipScope::default();
        scope.record(&node_write("n1", "nw"), Ended::Waiting);
        assert!(!scope.blocks(&node_write("n1", "nw")));
        assert!(!scope.blocks(&status("nw")));
    }

    #[test]
    fn lanes_fork_and_merge_failures() {
        let mut scope = SkipScope::default();
        scope.record(&node_write("n1", "nw"), Ended::Failed);
        let mut lane = scope.fork("n2");
        assert!(
            !lane.blocks(&node_write("n1", "nw")),
            "a lane sees only its node"
        );
        assert!(scope.fork("n1").blocks(&node_write("n1", "nw")));
        lane.record(&node_write("n2", "nx"), Ended::Failed);
        scope.merge(lane);
        assert!(scope.blocks(&status("nx")));
    }
}
