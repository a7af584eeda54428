//! D21 (K22): a processed Job is deleted for a re-run only after a fresh read of its node confirms
//! that its node-state entry is still open at the Job's stage. The Job cache may be ahead of the
//! Node cache (the Job's `state-recorded` marker seen, the node write that recorded the outcome
//! not yet): deciding on that skew would delete a recorded Job and run its stage again.

use k8s_openapi::api::core::v1::Node;
use nodewright_crds::{NodeState, PackageStatus, Stage, State, keys};
use serde::{Deserialize, Serialize};

/// The node-state entry a `DeleteJob` needs to find still open on a fresh read of the node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryCheck {
    /// NodeWright whose document holds the entry.
    pub nodewright: String,
    /// Node to read.
    pub node: String,
    /// Package name.
    pub package: String,
    /// Package version.
    pub version: String,
    /// The Job's stage: the entry must be at it and not complete.
    pub stage: Stage,
}

impl EntryCheck {
    /// True when `node` (freshly read) holds the entry at the check's stage, not complete. An
    /// absent, other-stage, complete or unreadable entry means "do not delete".
    pub fn holds(&self, node: &Node) -> bool {
        let Some(Ok(doc)) = document(node, &self.nodewright) else {
            return false;
        };
        doc.get(&self.package, &self.version)
            .is_some_and(|e| e.stage == self.stage && e.state != Some(State::Complete))
    }

    /// Why the deletion or create is dropped when the check does not hold.
    pub fn refusal(&self) -> String {
        format!(
            "fresh read of node {} shows {}|{} of {} no longer open at {} (D21, I1: the outcome is recorded; no re-run)",
            self.node, self.package, self.version, self.nodewright, self.stage
        )
    }
}

/// I1: the node-state entry a `CreateJob` needs to find on a fresh read of its node, exactly as
/// the snapshot the pass was planned on showed it. The create goes before the guarded node write
/// that records its stage; on a node cache lagging behind the apiserver that write would be
/// dropped after the Job had started, so the create is checked against the same entry first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryExpect {
    /// NodeWright whose document holds the entry.
    pub nodewright: String,
    /// Node to read.
    pub node: String,
    /// Package name.
    pub package: String,
    /// Package version.
    pub version: String,
    /// The entry the snapshot showed (`None`: no entry).
    pub entry: Option<PackageStatus>,
    /// I3: the start relies on the node being cordoned by this NodeWright, as the snapshot
    /// showed it; the fresh read must show the cordon still (`spec.unschedulable` and the
    /// `cordon_<nw>` annotation).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cordoned: bool,
}

impl EntryExpect {
    /// True when `node` (freshly read) shows exactly the expected entry. An unreadable document
    /// never matches.
    pub fn holds(&self, node: &Node) -> bool {
        if self.cordoned && !cordoned_by(node, &self.nodewright) {
            return false;
        }
        let doc = match document(node, &self.nodewright) {
            None => NodeState::default(),
            Some(Ok(doc)) => doc,
            Some(Err(_)) => return false,
        };
        doc.get(&self.package, &self.version) == self.entry.as_ref()
    }

    /// Why the create is dropped when the check does not hold.
    pub fn refusal(&self) -> String {
        format!(
            "fresh read of node {} shows {}|{} of {} changed since the snapshot, or the node no longer cordoned by it (I1, I3: the next pass decides on fresh state)",
            self.node, self.package, self.version, self.nodewright
        )
    }
}

/// True when `node` is cordoned by `nodewright`: unschedulable, with its `cordon_<nw>` annotation.
pub fn cordoned_by(node: &Node, nodewright: &str) -> bool {
    let unschedulable = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    let annotated = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&keys::cordon(nodewright)))
        .is_some_and(|v| v == "true");
    unschedulable && annotated
}

/// The node-state document of `nodewright` on `node`: `None` without the annotation.
fn document(node: &Node, nodewright: &str) -> Option<Result<NodeState, impl std::fmt::Debug>> {
    let text = node
        .metadata
        .annotations
        .as_ref()?
        .get(&keys::node_state(nodewright))?;
    Some(NodeState::parse(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_with(stage: Stage, state: State) -> Node {
        let mut doc = NodeState::default();
        doc.upsert(PackageStatus {
            name: "dexter".into(),
            version: "1.0.0".into(),
            image: "r/dexter".into(),
            container_sha: String::new(),
            stage,
            state: Some(state),
            restarts: 0,
        });
        let mut node = Node::default();
        node.metadata.annotations = Some(
            [(keys::node_state("nw"), doc.to_annotation())]
                .into_iter()
                .collect(),
        );
        node
    }

    fn check() -> EntryCheck {
        EntryCheck {
            nodewright: "nw".into(),
            node: "n1".into(),
            package: "dexter".into(),
            version: "1.0.0".into(),
            stage: Stage::Config,
        }
    }

    #[test]
    fn d21_open_entry_at_the_stage_confirms_the_rerun() {
        assert!(check().holds(&node_with(Stage::Config, State::InProgress)));
        assert!(check().holds(&node_with(Stage::Config, State::Erroring)));
    }

    #[test]
    fn d21_recorded_or_moved_entry_refuses_the_rerun() {
        assert!(!check().holds(&node_with(Stage::Config, State::Complete)));
        assert!(!check().holds(&node_with(Stage::Interrupt, State::InProgress)));
        assert!(!check().holds(&Node::default()), "no document");
        let mut garbled = Node::default();
        garbled.metadata.annotations = Some(
            [(keys::node_state("nw"), "{not json".to_string())]
                .into_iter()
                .collect(),
        );
        assert!(!check().holds(&garbled), "unreadable document");
    }

    fn cordon(node: &mut Node, on: bool) {
        node.spec.get_or_insert_with(Default::default).unschedulable = Some(on);
        let annotations = node
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        if on {
            annotations.insert(keys::cordon("nw"), "true".into());
        } else {
            annotations.remove(&keys::cordon("nw"));
        }
    }

    /// I3 (explore seed 673): a create that rests on the node's cordon goes ahead only if the
    /// fresh read still shows the node cordoned by its NodeWright; without that reliance the
    /// cordon is not looked at.
    #[test]
    fn inv16_3_create_resting_on_the_cordon_needs_it_on_the_fresh_read() {
        let expect = |cordoned| EntryExpect {
            nodewright: "nw".into(),
            node: "n1".into(),
            package: "dexter".into(),
            version: "1.0.0".into(),
            entry: None,
            cordoned,
        };
        let mut node = Node::default();
        cordon(&mut node, true);
        assert!(expect(true).holds(&node), "still cordoned");
        cordon(&mut node, false);
        assert!(
            !expect(true).holds(&node),
            "cordon released since the snapshot"
        );
        assert!(expect(false).holds(&node), "no reliance on the cordon");
        node.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
        assert!(
            !expect(true).holds(&node),
            "unschedulable without this NodeWright's cordon annotation"
        );
    }
}
