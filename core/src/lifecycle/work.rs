//! The pass's working copy of what it intends to write: node-state documents, node metadata,
//! NodeWright statuses and the other effects, turned into an ordered effect list at the end
//! (02-lifecycle.md §13).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Taint};
use nodewright_crds::{NodeState, NodeWrightStatus, Status, keys};

use super::mirror::{MirrorEdits, clone_without_mirror, eq_without_mirror, mirror_fits};
use super::view::{annotation, label, node_name};
use crate::NodeKeys;
use crate::effect::{Context, Effect, EntryChange, EventSpec, NodePatch, ObjectRef};

/// Where an effect goes in the plan's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Slot {
    /// Job deletions, invalidations, suspensions: before anything that depends on them (B2).
    Before,
    /// Node metadata ConfigMaps, then Job creates.
    Create,
    /// After node patches and statuses (ConfigMap swap of a config commit, B3; Job markers).
    After,
}

/// Everything the pass has decided so far.
#[derive(Debug, Default)]
pub struct Work {
    /// Working node-state documents per node, then NodeWright; only for pairs touched.
    pub states: BTreeMap<String, BTreeMap<String, NodeState>>,
    /// Documents removed wholesale (reset), per (node, NodeWright).
    pub removed: BTreeSet<(String, String)>,
    /// Annotation changes per node.
    pub annotations: BTreeMap<String, BTreeMap<String, Option<String>>>,
    /// Label changes per node.
    pub labels: BTreeMap<String, BTreeMap<String, Option<String>>>,
    /// New `spec.unschedulable` per node.
    pub unschedulable: BTreeMap<String, bool>,
    /// Taints to add per node.
    pub taints_add: BTreeMap<String, Vec<Taint>>,
    /// Taints to remove per node.
    pub taints_remove: BTreeMap<String, Vec<Taint>>,
    /// Nodes patched without a resourceVersion precondition (reboot reset, finalizer cleanup).
    pub unguarded: BTreeSet<String>,
    /// NodeWrights whose cordon is released on the fresh read, per node (see
    /// [`Work::release_cordon_on_write`]).
    pub release_on_write: BTreeMap<String, BTreeSet<String>>,
    /// NodeWrights whose working node status is written with the node's patch even where the
    /// snapshot already shows it, per node (see [`Work::status_on_write`]).
    pub status_on_write: BTreeMap<String, BTreeSet<String>>,
    /// Working NodeWright statuses (only those touched), their `nodeState` mirror left empty.
    pub statuses: BTreeMap<String, NodeWrightStatus>,
    /// Edits of each NodeWright's `status.nodeState` mirror (only those touched).
    pub mirrors: BTreeMap<String, MirrorEdits>,
    /// Other effects by slot, in decision order.
    pub effects: Vec<(Slot, Effect)>,
    /// Node condition patches.
    pub node_conditions: Vec<Effect>,
    /// Events with the object whose write each describes; placed after that write (§13.7).
    pub events: Vec<(EventAnchor, Effect)>,
    /// Errors collected (the shell backs off).
    pub errors: Vec<crate::PlanError>,
    /// Per-node keys of each NodeWright (status, version, cordon, ...), built once per pass.
    pub keys: BTreeMap<String, NodeKeys>,
}

impl Work {
    /// The working document of (nw, node), seeded from `snapshot`.
    pub fn state_mut(&mut self, nw: &str, node: &str, snapshot: &NodeState) -> &mut NodeState {
        if !self.removed.is_empty() {
            self.removed.remove(&(node.to_string(), nw.to_string()));
        }
        self.states
            .entry(node.to_string())
            .or_default()
            .entry(nw.to_string())
            .or_insert_with(|| snapshot.clone())
    }

    /// The current document: working copy if touched, else the snapshot's.
    pub fn state<'s>(&'s self, nw: &str, node: &str, snapshot: &'s NodeState) -> &'s NodeState {
        self.states
            .get(node)
            .and_then(|docs| docs.get(nw))
            .unwrap_or(snapshot)
    }

    /// Drops the working document of (nw, node), if any.
    pub fn drop_state(&mut self, nw: &str, node: &str) {
        if let Some(docs) = self.states.get_mut(node) {
            docs.remove(nw);
            if docs.is_empty() {
                self.states.remove(node);
            }
        }
    }

    /// Sets an annotation on a node (only recorded when it differs from the snapshot node).
    pub fn set_annotation(&mut self, node: &Node, key: &str, value: Option<&str>) {
        let current = annotation(node, key);
        record(&mut self.annotations, node, key, current, value);
    }

    /// Resets what NodeWright `nw` owns on `node` (its cordon aside), unguarded: status
    /// annotation and label and drain start always; with `whole` also the operator version and
    /// the node-state document, which is deleted as is — entry changes this pass made to it are
    /// dropped, never re-merged (02-lifecycle.md §13.1 step 3, T18).
    pub fn reset_node(&mut self, node: &Node, nw: &str, keys: &NodeKeys, whole: bool) {
        let name = node_name(node);
        for key in keys.reset_annotations() {
            if key == keys.state {
                if whole {
                    self.drop_state(nw, &name);
                    if annotation(node, key).is_some() {
                        self.removed.insert((name.clone(), nw.to_string()));
                    }
                }
            } else if whole || key != keys.version {
                self.set_annotation(node, key, None);
            }
        }
        for key in keys.reset_labels() {
            self.set_label(node, key, None);
        }
        self.unguarded.insert(name);
    }

    /// §8.7 uncordon through ownership: drop `P/cordon_<NW>`; clear `unschedulable` only when
    /// no other cordon annotation remains. A NodeWright without the annotation touches nothing.
    pub fn release_cordon(&mut self, nw: &str, node: &Node) {
        let key = Self::cordon_key(&self.keys, nw);
        let key: &str = &key;
        if self.annotation(node, key).is_none() {
            return;
        }
        let key = key.to_string();
        self.set_annotation(node, &key, None);
        let prefix = format!("{}/cordon_", keys::PREFIX);
        let others = node.metadata.annotations.iter().flatten().any(|(k, _)| {
            (k.starts_with(&prefix) || k == keys::RUNTIME_REQUIRED_CORDON)
                && *k != key
                && self.annotation(node, k).is_some()
        });
        if !others {
            self.set_unschedulable(node, false);
        }
    }

    /// §8.7 for a node the pass marks complete while its snapshot shows no `P/cordon_<NW>`: the
    /// cache may lag behind this NodeWright's own cordon write, so the node patch asks for the
    /// release on its fresh read (invariant 16.6: complete and cordoned are never written together).
    pub fn release_cordon_on_write(&mut self, nw: &str, node: &Node) {
        if self
            .annotation(node, &Self::cordon_key(&self.keys, nw))
            .is_some()
        {
            return self.release_cordon(nw, node);
        }
        self.release_on_write
            .entry(node_name(node))
            .or_default()
            .insert(nw.to_string());
    }

    /// Invariant 16.6 for a write that cordons: the snapshot may lag behind this NodeWright's own
    /// `complete` write, so the node's patch carries the working status even where the snapshot
    /// shows it, and the fresh read cannot keep `complete` beside the cordon.
    pub fn status_on_write(&mut self, nw: &str, node: &Node) {
        self.status_on_write
            .entry(node_name(node))
            .or_default()
            .insert(nw.to_string());
    }

    /// Sets a label on a node (only recorded when it differs from the snapshot node).
    pub fn set_label(&mut self, node: &Node, key: &str, value: Option<&str>) {
        record(&mut self.labels, node, key, label(node, key), value);
    }

    /// The current value of an annotation (working change, else the snapshot's).
    pub fn annotation<'n>(&'n self, node: &'n Node, key: &str) -> Option<&'n str> {
        match self
            .annotations
            .get(node.metadata.name.as_deref().unwrap_or_default())
            .and_then(|c| c.get(key))
        {
            Some(change) => change.as_deref(),
            None => annotation(node, key),
        }
    }

    /// The node-status annotation key of a NodeWright, precomputed where the pass has it.
    fn status_key<'k>(keys: &'k BTreeMap<String, NodeKeys>, nw: &str) -> Cow<'k, str> {
        match keys.get(nw) {
            Some(k) => Cow::Borrowed(k.status.as_str()),
            None => Cow::Owned(keys::node_status(nw)),
        }
    }

    /// The operator-version annotation key of a NodeWright, precomputed where the pass has it.
    fn version_key<'k>(keys: &'k BTreeMap<String, NodeKeys>, nw: &str) -> Cow<'k, str> {
        match keys.get(nw) {
            Some(k) => Cow::Borrowed(k.version.as_str()),
            None => Cow::Owned(keys::node_version(nw)),
        }
    }

    /// The cordon annotation key of a NodeWright, precomputed where the pass has it.
    pub fn cordon_key<'k>(keys: &'k BTreeMap<String, NodeKeys>, nw: &str) -> Cow<'k, str> {
        match keys.get(nw) {
            Some(k) => Cow::Borrowed(k.cordon.as_str()),
            None => Cow::Owned(keys::cordon(nw)),
        }
    }

    /// The node's Status for a NodeWright (annotation is the source of truth).
    pub fn node_status(&self, node: &Node, nw: &str) -> Status {
        let key = Self::status_key(&self.keys, nw);
        let key: &str = &key;
        self.annotation(node, key)
            .map(Status::parse_lenient)
            .unwrap_or(Status::Unknown)
    }

    /// Sets the node Status for a NodeWright: annotation and label (N0), and stamps the node with
    /// the operator version for that NodeWright (M2; a no-op once it is there).
    pub fn set_node_status(&mut self, node: &Node, nw: &str, status: Status) {
        let key = Self::status_key(&self.keys, nw);
        let key: &str = &key;
        let value = Some(status.as_str());
        record(
            &mut self.annotations,
            node,
            key,
            annotation(node, key),
            value,
        );
        record(&mut self.labels, node, key, label(node, key), value);
        let version = Self::version_key(&self.keys, nw);
        let version: &str = &version;
        let current = annotation(node, version);
        record(
            &mut self.annotations,
            node,
            version,
            current,
            Some(keys::OPERATOR_VERSION),
        );
    }

    /// Sets `spec.unschedulable` (only recorded when it differs from the snapshot).
    pub fn set_unschedulable(&mut self, node: &Node, value: bool) {
        let name = node_name(node);
        let before = node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false);
        if before == value {
            self.unschedulable.remove(&name);
        } else {
            self.unschedulable.insert(name, value);
        }
    }

    /// The nodes the pass may write anything on, in name order.
    pub fn touched_nodes(&self) -> BTreeSet<&str> {
        let mut out: BTreeSet<&str> = BTreeSet::new();
        out.extend(self.annotations.keys().map(String::as_str));
        out.extend(self.labels.keys().map(String::as_str));
        out.extend(self.unschedulable.keys().map(String::as_str));
        out.extend(self.taints_add.keys().map(String::as_str));
        out.extend(self.taints_remove.keys().map(String::as_str));
        out.extend(self.unguarded.iter().map(String::as_str));
        out.extend(
            self.states
                .iter()
                .filter(|(_, docs)| !docs.is_empty())
                .map(|(n, _)| n.as_str()),
        );
        out.extend(self.removed.iter().map(|(n, _)| n.as_str()));
        out
    }

    /// The working status of a NodeWright, seeded from `snapshot`.
    pub fn status_mut(&mut self, nw: &str, snapshot: &NodeWrightStatus) -> &mut NodeWrightStatus {
        self.statuses
            .entry(nw.to_string())
            .or_insert_with(|| clone_without_mirror(snapshot))
    }

    /// The mirror edits of a NodeWright.
    pub fn mirror_mut(&mut self, nw: &str) -> &mut MirrorEdits {
        self.mirrors.entry(nw.to_string()).or_default()
    }

    /// The current mirror entry of (nw, node).
    pub fn mirror_entry<'s>(
        &'s self,
        nw: &str,
        snapshot: &'s NodeWrightStatus,
        node: &str,
    ) -> Option<&'s NodeState> {
        match self.mirrors.get(nw) {
            Some(edits) => edits.get(&snapshot.node_state, node),
            None => snapshot.node_state.get(node),
        }
    }

    /// The full working status of a NodeWright (mirror included) when it differs from
    /// `snapshot`; `None` when the pass changed nothing in it. With `consume` the mirror edits
    /// are moved out (the last use of them), else copied.
    pub fn take_changed_status(
        &mut self,
        nw: &str,
        snapshot: &NodeWrightStatus,
        consume: bool,
    ) -> Option<NodeWrightStatus> {
        let edits = if consume {
            self.mirrors.remove(nw)
        } else {
            self.mirrors.get(nw).cloned()
        };
        let working = self.statuses.get(nw);
        let light_same = working.is_none_or(|w| eq_without_mirror(w, snapshot));
        let mirror_same = edits
            .as_ref()
            .is_none_or(|e| !e.changed(&snapshot.node_state));
        if light_same && mirror_same {
            return None;
        }
        let mut full = clone_without_mirror(working.unwrap_or(snapshot));
        let oversized = edits.as_ref().is_some_and(MirrorEdits::oversized);
        full.node_state = match edits {
            Some(e) => e.into_applied(&snapshot.node_state),
            None => snapshot.node_state.clone(),
        };
        if oversized || !mirror_fits(&full.node_state) {
            // D26: a status too large for the apiserver is never written; leave the mirror out.
            full.node_state.clear();
            if light_same && snapshot.node_state.is_empty() {
                return None;
            }
        }
        Some(full)
    }

    /// The current status of a NodeWright.
    pub fn status<'s>(&'s self, nw: &str, snapshot: &'s NodeWrightStatus) -> &'s NodeWrightStatus {
        self.statuses.get(nw).unwrap_or(snapshot)
    }

    /// Queues an effect in a slot.
    pub fn push(&mut self, slot: Slot, effect: Effect) {
        self.effects.push((slot, effect));
    }

    /// Queues an event describing a write to the object it regards (a Node's patch, a
    /// NodeWright's status).
    pub fn event(
        &mut self,
        regarding: ObjectRef,
        warning: bool,
        reason: &str,
        action: &str,
        message: String,
    ) {
        let anchor = EventAnchor::of(&regarding);
        self.push_event(anchor, regarding, warning, reason, action, message);
    }

    /// Queues an event regarding `regarding` (a NodeWright) that describes a write to `node`.
    pub fn node_event(
        &mut self,
        node: &str,
        regarding: ObjectRef,
        warning: bool,
        reason: &str,
        action: &str,
        message: String,
    ) {
        let anchor = EventAnchor::Node(node.to_string());
        self.push_event(anchor, regarding, warning, reason, action, message);
    }

    fn push_event(
        &mut self,
        anchor: EventAnchor,
        regarding: ObjectRef,
        warning: bool,
        reason: &str,
        action: &str,
        message: String,
    ) {
        let spec = EventSpec {
            regarding,
            warning,
            reason: reason.to_string(),
            action: action.to_string(),
            message,
        };
        self.events.push((anchor, Effect::Event(Box::new(spec))));
    }
}

/// The object whose write an Event describes: the Event is placed after that write in the plan,
/// so it is sent only if the write happened (02-lifecycle.md §13.7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventAnchor {
    /// The node's state patch (or, without one, the node's last write).
    Node(String),
    /// The NodeWright's status patch.
    NodeWright(String),
}

impl EventAnchor {
    /// The anchor of an Event regarding `regarding`: a Node's write, else the NodeWright's.
    pub fn of(regarding: &ObjectRef) -> Self {
        match regarding.kind.as_str() {
            "Node" => EventAnchor::Node(regarding.name.clone()),
            _ => EventAnchor::NodeWright(regarding.name.clone()),
        }
    }
}

/// An object reference for a Node.
pub fn node_ref(node: &str) -> ObjectRef {
    ObjectRef {
        kind: "Node".into(),
        name: node.to_string(),
        namespace: None,
        uid: None,
    }
}

/// An object reference for a NodeWright.
pub fn nw_ref(name: &str, uid: &str) -> ObjectRef {
    ObjectRef {
        kind: "NodeWright".into(),
        name: name.to_string(),
        namespace: None,
        uid: Some(uid.to_string()),
    }
}

/// Per-entry changes between two documents: new or different keys, and removed keys.
pub fn entry_changes(nw: &str, before: &NodeState, after: &NodeState) -> Vec<EntryChange> {
    let mut out = Vec::new();
    for (key, entry) in &after.0 {
        let old = before.0.get(key);
        if old != Some(entry) {
            out.push(EntryChange {
                nodewright: nw.to_string(),
                key: key.clone(),
                expect: old.cloned(),
                set: Some(entry.clone()),
            });
        }
    }
    for (key, entry) in &before.0 {
        if !after.0.contains_key(key) {
            out.push(EntryChange {
                nodewright: nw.to_string(),
                key: key.clone(),
                expect: Some(entry.clone()),
                set: None,
            });
        }
    }
    out
}

/// Builds the node patch of one node from the working copy; `None` when nothing changed.
pub fn node_patch(
    work: &Work,
    node: &Node,
    snapshot_states: &BTreeMap<&str, &NodeState>,
) -> Option<NodePatch> {
    let name = node_name(node);
    let mut patch = NodePatch {
        node: name.clone(),
        snapshot_resource_version: node.metadata.resource_version.clone(),
        guarded: !work.unguarded.contains(&name),
        context: Context {
            node: Some(name.clone()),
            ..Context::default()
        },
        ..NodePatch::default()
    };
    for (nw, after) in work.states.get(&name).into_iter().flatten() {
        let empty = NodeState::default();
        let before = snapshot_states.get(nw.as_str()).copied().unwrap_or(&empty);
        patch.state.extend(entry_changes(nw, before, after));
    }
    patch.state.retain(|c| c.expect != c.set);
    for (n, nw) in &work.removed {
        if *n == name {
            patch.remove_state_of.push(nw.clone());
        }
    }
    patch.annotations = work.annotations.get(&name).cloned().unwrap_or_default();
    patch.labels = work.labels.get(&name).cloned().unwrap_or_default();
    for nw in work.status_on_write.get(&name).into_iter().flatten() {
        let key = keys::node_status(nw);
        let status = Some(work.node_status(node, nw).as_str().to_string());
        patch
            .annotations
            .entry(key.clone())
            .or_insert(status.clone());
        patch.labels.entry(key).or_insert(status);
    }
    patch.unschedulable = work.unschedulable.get(&name).copied();
    patch.taints_add = work.taints_add.get(&name).cloned().unwrap_or_default();
    patch.taints_remove = work.taints_remove.get(&name).cloned().unwrap_or_default();
    patch.release_cordon_of = work
        .release_on_write
        .get(&name)
        .map(|nws| nws.iter().cloned().collect())
        .unwrap_or_default();
    if patch.guarded {
        patch.expect_documents = settling_documents(&patch, snapshot_states);
    }
    let empty = patch.state.is_empty()
        && patch.remove_state_of.is_empty()
        && patch.annotations.is_empty()
        && patch.labels.is_empty()
        && patch.unschedulable.is_none()
        && patch.taints_add.is_empty()
        && patch.taints_remove.is_empty();
    (!empty).then_some(patch)
}

/// The snapshot documents of the NodeWrights whose node `patch` marks complete or uncordons:
/// that rests on the whole document, so the fresh read must still show it (a lagging node cache
/// must not release a node on which a stage was started since).
fn settling_documents(
    patch: &NodePatch,
    snapshot_states: &BTreeMap<&str, &NodeState>,
) -> BTreeMap<String, NodeState> {
    let complete = Status::Complete.as_str();
    let mut nws: BTreeSet<&str> = patch.release_cordon_of.iter().map(String::as_str).collect();
    for (key, value) in &patch.annotations {
        let nw = match value.as_deref() {
            Some(v) if v == complete => key.strip_prefix(&keys::node_status("")),
            None => key.strip_prefix(&keys::cordon("")),
            Some(_) => None,
        };
        nws.extend(nw);
    }
    nws.into_iter()
        .map(|nw| {
            let doc = snapshot_states.get(nw).map(|d| (*d).clone());
            (nw.to_string(), doc.unwrap_or_default())
        })
        .collect()
}

/// Records `value` for `key` of `node` in `changes` (annotation or label changes per node); a
/// value equal to the node's `current` one drops the change instead. Allocates only for a change.
fn record(
    changes: &mut BTreeMap<String, BTreeMap<String, Option<String>>>,
    node: &Node,
    key: &str,
    current: Option<&str>,
    value: Option<&str>,
) {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    if current == value {
        if let Some(c) = changes.get_mut(name) {
            c.remove(key);
            if c.is_empty() {
                changes.remove(name);
            }
        }
    } else {
        changes
            .entry(name.to_string())
            .or_default()
            .insert(key.to_string(), value.map(str::to_string));
    }
}

#[cfg(test)]
mod tests {
    use nodewright_crds::{NodeState, NodeWrightStatus, PackageStatus, Stage, State};

    use super::Work;
    use crate::lifecycle::mirror::{MIRROR_LIMIT_BYTES, entry_bytes_at_least, mirror_fits};

    /// A five-package document of about 600 bytes of JSON.
    fn doc() -> NodeState {
        let mut d = NodeState::default();
        for p in ["alpha", "bravo", "charlie", "delta", "echo"] {
            d.upsert(PackageStatus {
                name: p.into(),
                version: "1.0.0".into(),
                image: format!("registry.example/{p}"),
                container_sha: String::new(),
                stage: Stage::Config,
                state: Some(State::Complete),
                restarts: 0,
            });
        }
        d
    }

    fn work_mirroring(nodes: usize) -> Work {
        let mut work = Work::default();
        for i in 0..nodes {
            work.mirror_mut("nw").insert(format!("node-{i:05}"), doc());
        }
        work
    }

    #[test]
    fn d26_a_mirror_over_the_limit_is_left_out_of_the_status() {
        let nodes = 4 * MIRROR_LIMIT_BYTES / 600; // well over the limit
        let mut work = work_mirroring(nodes);
        let mut snapshot = NodeWrightStatus::default();
        snapshot.node_state.insert("node-00000".into(), doc());
        let written = work
            .take_changed_status("nw", &snapshot, true)
            .expect("the old mirror is cleared");
        assert!(written.node_state.is_empty());
        // Once the status holds no mirror, a too-large mirror writes nothing more.
        let mut work = work_mirroring(nodes);
        assert_eq!(
            work.take_changed_status("nw", &NodeWrightStatus::default(), true),
            None
        );
    }

    #[test]
    fn d26_the_entry_bound_never_exceeds_the_entry_json() {
        let mut odd = doc();
        odd.upsert(PackageStatus {
            name: "<&>\"q".into(),
            version: String::new(),
            image: "é/\\".into(),
            container_sha: "sha256:abc".into(),
            stage: Stage::Apply,
            state: None,
            restarts: 3,
        });
        for (node, d) in [
            ("n", NodeState::default()),
            ("node-00001", doc()),
            ("x<y", odd),
        ] {
            let json = serde_json::to_string(&std::collections::BTreeMap::from([(node, &d)]))
                .expect("serializes");
            // The map's own braces are not part of an entry.
            let bound = entry_bytes_at_least(node, &d);
            assert!(
                bound <= json.len() - 2,
                "{node}: {bound} > {}",
                json.len() - 2
            );
            assert!(
                bound + 40 >= (json.len() - 2) / 2,
                "{node}: the bound is not loose"
            );
        }
    }

    #[test]
    fn d26_a_mirror_known_to_be_over_the_limit_is_left_out_as_when_measured() {
        // Marked oversized and changed: the old mirror is cleared, as when it is measured.
        let mut snapshot = NodeWrightStatus::default();
        snapshot.node_state.insert("node-00000".into(), doc());
        let mut work = Work::default();
        work.mirror_mut("nw").mark_oversized(true);
        let written = work
            .take_changed_status("nw", &snapshot, true)
            .expect("the old mirror is cleared");
        assert!(written.node_state.is_empty());
        // Over the limit with no mirror in the status: nothing is written.
        let mut work = Work::default();
        work.mirror_mut("nw").mark_oversized(true);
        assert_eq!(
            work.take_changed_status("nw", &NodeWrightStatus::default(), true),
            None
        );
        // Unchanged (the status still holds a mirror it did not write): left alone.
        let mut work = Work::default();
        work.mirror_mut("nw").mark_oversized(false);
        assert_eq!(work.take_changed_status("nw", &snapshot, true), None);
    }

    #[test]
    fn d26_a_mirror_under_the_limit_is_written_whole() {
        let mut work = work_mirroring(100);
        let written = work
            .take_changed_status("nw", &NodeWrightStatus::default(), true)
            .expect("the mirror changed");
        assert_eq!(written.node_state.len(), 100);
        assert!(mirror_fits(&written.node_state));
    }
}
