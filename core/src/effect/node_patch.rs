//! Resolving a [`NodePatch`] against a fresh read of its node (02-lifecycle.md §13.1, §13.4,
//! §13.5): the guarded node-state merge, annotation and label deltas, taints by (key, effect)
//! identity and cordon. The shell turns the result into a merge patch; the simulator applies it
//! to its store.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Taint};
use nodewright_crds::{NodeState, PackageStatus, keys};

use super::NodePatch;

/// Why a node patch cannot be applied to a fresh read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodePatchRefusal {
    /// A guarded entry is not what the core expected: drop the whole patch and requeue.
    Mismatch(String),
    /// The fresh node-state annotation cannot be parsed: fail without writing.
    Malformed(String),
}

/// What a node patch changes on one fresh read: only values that differ from it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeDelta {
    /// Annotations to set (`Some`) or remove (`None`), node-state documents included.
    pub annotations: BTreeMap<String, Option<String>>,
    /// Labels to set (`Some`) or remove (`None`).
    pub labels: BTreeMap<String, Option<String>>,
    /// The whole new taint list, when it changes.
    pub taints: Option<Vec<Taint>>,
    /// New `spec.unschedulable`, when it changes.
    pub unschedulable: Option<bool>,
    /// True when the write must carry the fresh read's resourceVersion: the patch is guarded,
    /// or it writes values computed from the fresh read (a node-state document, the taint list).
    pub needs_resource_version: bool,
    /// The entry changes applied, as found on the fresh read.
    pub entries: Vec<EntryTransition>,
}

/// One applied node-state entry change: the entry on the fresh read and the entry written.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryTransition {
    /// NodeWright whose document holds the entry.
    pub nodewright: String,
    /// Node name.
    pub node: String,
    /// Entry key `<pkg>|<ver>`.
    pub key: String,
    /// Entry on the fresh read.
    pub from: Option<PackageStatus>,
    /// Entry written (`None` removes it).
    pub to: Option<PackageStatus>,
}

/// Resolves `patch` against `fresh`; `Ok(None)` when nothing would change.
///
/// A guarded patch whose entry differs from its `expect` is refused as a whole; an unguarded one
/// writes its entries regardless. Document removals are sent as is (§13.1 keepState).
pub fn resolve_node_patch(
    fresh: &Node,
    patch: &NodePatch,
) -> Result<Option<NodeDelta>, NodePatchRefusal> {
    let current = fresh.metadata.annotations.clone().unwrap_or_default();
    for (nw, expected) in &patch.expect_documents {
        if fresh_document(&current, patch, nw)? != *expected {
            return Err(NodePatchRefusal::Mismatch(format!(
                "node {} document of {} changed since the snapshot (the write marks it complete or releases its cordon)",
                patch.node, nw
            )));
        }
    }
    let mut annotations = delta(&current, &patch.annotations);
    let (entries, state_changed) = merge_state(&current, patch, &mut annotations)?;
    let labels = delta(
        &fresh.metadata.labels.clone().unwrap_or_default(),
        &patch.labels,
    );
    let spec = fresh.spec.clone().unwrap_or_default();
    let taints = new_taints(spec.taints.as_deref().unwrap_or_default(), patch);
    let released = release_cordons(&current, patch, &mut annotations);
    let wanted = patch.unschedulable.or(released.then_some(false));
    let uncordon = wanted == Some(false);
    // §8.7 on the fresh read: a node stays unschedulable while any cordon annotation remains,
    // including one written after the snapshot the patch was planned on (invariant 16.5).
    let held = uncordon && cordon_remains(&current, &annotations);
    let unschedulable = wanted
        .filter(|_| !held)
        .filter(|u| *u != spec.unschedulable.unwrap_or(false));
    if annotations.is_empty() && labels.is_empty() && taints.is_none() && unschedulable.is_none() {
        return Ok(None);
    }
    Ok(Some(NodeDelta {
        needs_resource_version: patch.guarded
            || state_changed
            || taints.is_some()
            || released
            || uncordon,
        annotations,
        labels,
        taints,
        unschedulable,
        entries,
    }))
}

impl NodeDelta {
    /// The node with this delta applied, as a JSON merge patch of it would leave it.
    pub fn apply_to(&self, mut node: Node) -> Node {
        let set = |map: &mut BTreeMap<String, String>, delta: &BTreeMap<String, Option<String>>| {
            for (k, v) in delta {
                match v {
                    Some(v) => drop(map.insert(k.clone(), v.clone())),
                    None => drop(map.remove(k)),
                }
            }
        };
        set(
            node.metadata
                .annotations
                .get_or_insert_with(Default::default),
            &self.annotations,
        );
        set(
            node.metadata.labels.get_or_insert_with(Default::default),
            &self.labels,
        );
        let spec = node.spec.get_or_insert_with(Default::default);
        if let Some(t) = &self.taints {
            spec.taints = Some(t.clone());
        }
        if let Some(u) = self.unschedulable {
            spec.unschedulable = Some(u);
        }
        node
    }
}

/// Annotation or label deltas that differ from the fresh values.
fn delta(
    current: &BTreeMap<String, String>,
    wanted: &BTreeMap<String, Option<String>>,
) -> BTreeMap<String, Option<String>> {
    wanted
        .iter()
        .filter(|(k, v)| current.get(*k) != v.as_ref())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// §8.7 on the fresh read for `release_cordon_of`: removes each listed NodeWright's cordon
/// annotation that is present (and not set by this very patch); true when one was removed and no
/// other cordon annotation (`P/cordon_*`, `P/runtimeRequiredCordon`) remains, so the node may be
/// made schedulable. A patch that cordons (`unschedulable: true`) releases nothing.
fn release_cordons(
    current: &BTreeMap<String, String>,
    patch: &NodePatch,
    out: &mut BTreeMap<String, Option<String>>,
) -> bool {
    if patch.release_cordon_of.is_empty() || patch.unschedulable == Some(true) {
        return false;
    }
    let mut removed = false;
    for nw in &patch.release_cordon_of {
        let key = keys::cordon(nw);
        if current.contains_key(&key) && !matches!(patch.annotations.get(&key), Some(Some(_))) {
            out.insert(key, None);
            removed = true;
        }
    }
    removed && !cordon_remains(current, out)
}

/// True when a cordon annotation (`P/cordon_*`, `P/runtimeRequiredCordon`) is on the fresh read
/// or set by the patch, and the patch does not remove it.
fn cordon_remains(
    current: &BTreeMap<String, String>,
    out: &BTreeMap<String, Option<String>>,
) -> bool {
    let prefix = keys::cordon("");
    let remains = |k: &String| {
        (k.starts_with(&prefix) || k == keys::RUNTIME_REQUIRED_CORDON)
            && !matches!(out.get(k), Some(None))
    };
    current.keys().chain(out.keys()).any(remains)
}

/// Applies entry changes and document removals to the fresh annotations; returns the applied
/// transitions and whether a node-state document changed.
fn merge_state(
    current: &BTreeMap<String, String>,
    patch: &NodePatch,
    out: &mut BTreeMap<String, Option<String>>,
) -> Result<(Vec<EntryTransition>, bool), NodePatchRefusal> {
    let deleted = patch.deleted_documents();
    let mut docs: BTreeMap<&str, NodeState> = BTreeMap::new();
    let mut entries = Vec::with_capacity(patch.state.len());
    for change in &patch.state {
        if deleted.contains(change.nodewright.as_str()) {
            continue; // §13.1 step 3: a deletion is sent as is, never re-merged (T18)
        }
        let doc = match docs.get_mut(change.nodewright.as_str()) {
            Some(doc) => doc,
            None => {
                let parsed = fresh_document(current, patch, &change.nodewright)?;
                docs.entry(change.nodewright.as_str()).or_insert(parsed)
            }
        };
        let from = doc.0.get(&change.key).cloned();
        if patch.guarded && from != change.expect {
            return Err(NodePatchRefusal::Mismatch(format!(
                "node {} entry {} of {} changed since the snapshot",
                patch.node, change.key, change.nodewright
            )));
        }
        match &change.set {
            Some(entry) => drop(doc.0.insert(change.key.clone(), entry.clone())),
            None => drop(doc.0.remove(&change.key)),
        }
        entries.push(EntryTransition {
            nodewright: change.nodewright.clone(),
            node: patch.node.clone(),
            key: change.key.clone(),
            from,
            to: change.set.clone(),
        });
    }
    let mut changed = false;
    for (nw, doc) in docs {
        let key = keys::node_state(nw);
        let text = doc.to_annotation();
        if current.get(&key) != Some(&text) {
            out.insert(key, Some(text));
            changed = true;
        }
    }
    for nw in deleted {
        let key = keys::node_state(nw);
        if current.contains_key(&key) {
            out.insert(key, None);
            changed = true;
        }
    }
    Ok((entries, changed))
}

impl NodePatch {
    /// The NodeWrights whose whole node-state document this patch deletes: listed in
    /// `remove_state_of`, or their `nodeState_<nw>` annotation set to `None`.
    pub fn deleted_documents(&self) -> BTreeSet<&str> {
        let prefix = keys::node_state("");
        let by_annotation = self
            .annotations
            .iter()
            .filter(|(_, v)| v.is_none())
            .filter_map(|(k, _)| k.strip_prefix(prefix.as_str()));
        self.remove_state_of
            .iter()
            .map(String::as_str)
            .chain(by_annotation)
            .collect()
    }
}

/// The node-state document of `nodewright` on the fresh read (absent → empty).
fn fresh_document(
    current: &BTreeMap<String, String>,
    patch: &NodePatch,
    nodewright: &str,
) -> Result<NodeState, NodePatchRefusal> {
    match current.get(&keys::node_state(nodewright)) {
        None => Ok(NodeState::default()),
        Some(text) => NodeState::parse(text).map_err(|e| {
            NodePatchRefusal::Malformed(format!(
                "node {} nodeState_{}: {e}",
                patch.node, nodewright
            ))
        }),
    }
}

/// The new taint list when it changes: removals and additions by (key, effect) identity (D14).
fn new_taints(current: &[Taint], patch: &NodePatch) -> Option<Vec<Taint>> {
    if patch.taints_add.is_empty() && patch.taints_remove.is_empty() {
        return None;
    }
    let same = |a: &Taint, b: &Taint| a.key == b.key && a.effect == b.effect;
    let mut next: Vec<Taint> = current
        .iter()
        .filter(|t| !patch.taints_remove.iter().any(|r| same(t, r)))
        .cloned()
        .collect();
    for add in &patch.taints_add {
        if !next.iter().any(|t| same(t, add)) {
            next.push(add.clone());
        }
    }
    (next.as_slice() != current).then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effect::EntryChange;
    use nodewright_crds::{Stage, State};

    fn entry(stage: Stage, state: State, restarts: i32) -> PackageStatus {
        PackageStatus {
            name: "foo".into(),
            version: "1.0.0".into(),
            image: "r/foo".into(),
            container_sha: String::new(),
            stage,
            state: Some(state),
            restarts,
        }
    }

    fn node_with(doc: &NodeState) -> Node {
        let mut node = Node::default();
        node.metadata.name = Some("n1".into());
        node.metadata.annotations = Some(
            [(keys::node_state("nw"), doc.to_annotation())]
                .into_iter()
                .collect(),
        );
        node
    }

    /// A reboot reset bundled with the outcome of the Job the reboot killed.
    fn reset_with_outcome(by_annotation: bool) -> NodePatch {
        let mut patch = NodePatch {
            node: "n1".into(),
            state: vec![EntryChange {
                nodewright: "nw".into(),
                key: "foo|1.0.0".into(),
                expect: Some(entry(Stage::Config, State::InProgress, 0)),
                set: Some(entry(Stage::Config, State::Erroring, 1)),
            }],
            ..NodePatch::default()
        };
        if by_annotation {
            patch.annotations.insert(keys::node_state("nw"), None);
        } else {
            patch.remove_state_of.push("nw".into());
        }
        patch
    }

    #[test]
    fn t18_reset_deletion_is_sent_as_is_beside_a_bundled_entry_update() {
        let mut doc = NodeState::default();
        doc.upsert(entry(Stage::Config, State::InProgress, 0));
        let fresh = node_with(&doc);
        for by_annotation in [true, false] {
            let delta = resolve_node_patch(&fresh, &reset_with_outcome(by_annotation))
                .expect("resolves")
                .expect("changes the node");
            assert_eq!(
                delta.annotations.get(&keys::node_state("nw")),
                Some(&None),
                "the document is deleted, not re-merged (by annotation: {by_annotation})"
            );
            assert!(delta.entries.is_empty(), "no entry transition applied");
            let after = delta.apply_to(fresh.clone());
            assert!(
                !after
                    .metadata
                    .annotations
                    .unwrap_or_default()
                    .contains_key(&keys::node_state("nw"))
            );
        }
    }

    #[test]
    fn t18_reset_of_an_absent_document_writes_none() {
        let fresh = Node {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("n1".into()),
                ..Default::default()
            },
            ..Node::default()
        };
        let resolved = resolve_node_patch(&fresh, &reset_with_outcome(false)).expect("resolves");
        assert_eq!(resolved, None, "nothing to delete, nothing re-created");
    }
}
