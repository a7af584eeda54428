//! Node writes: the guarded node-state merge with conflict re-reads (02-lifecycle.md §13.1,
//! §13.4) and node conditions (§13.2).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use nodewright_core::NodePatch;
use nodewright_crds::{NodeState, keys};
use serde_json::{Map, Value, json};

use super::{Interpreter, Outcome};
use crate::error::{ShellError, is_conflict, is_not_found};

/// Why a node patch cannot be built from a fresh read.
#[derive(Debug)]
pub(crate) enum BuildError {
    /// An entry is not what the core expected.
    Mismatch(String),
    /// The fresh node-state annotation cannot be parsed.
    Malformed(String),
}

impl Interpreter {
    pub(super) async fn patch_node(&self, patch: &NodePatch) -> Outcome {
        let api: Api<Node> = Api::all(self.client.clone());
        for attempt in 0..self.conflict_attempts {
            if attempt > 0 {
                tokio::time::sleep(self.retry_backoff * 2u32.pow(attempt - 1)).await;
            }
            let fresh = match self.read_node(&api, &patch.node, attempt == 0).await {
                Ok(Some(node)) => node,
                Ok(None) => return Outcome::Noop,
                Err(e) => return Outcome::Failed(e.into()),
            };
            let body = match node_patch_body(&fresh, patch) {
                Ok(Some(body)) => body,
                Ok(None) => return Outcome::Noop,
                Err(BuildError::Mismatch(why)) => return Outcome::Dropped(why),
                Err(BuildError::Malformed(why)) => {
                    return Outcome::Failed(ShellError::Malformed(why));
                }
            };
            match api
                .patch(&patch.node, &PatchParams::default(), &Patch::Merge(&body))
                .await
            {
                Ok(_) => return Outcome::Applied,
                Err(e) if is_not_found(&e) => return Outcome::Noop,
                Err(e) if is_conflict(&e) => {
                    tracing::debug!(node = %patch.node, attempt, "node write conflict, re-reading");
                }
                Err(e) => return Outcome::Failed(e.into()),
            }
        }
        Outcome::Failed(ShellError::ConflictRetriesExhausted(self.conflict_attempts))
    }

    /// Reads a node: the first attempt may use the cache, retries always ask the apiserver.
    async fn read_node(
        &self,
        api: &Api<Node>,
        name: &str,
        may_use_cache: bool,
    ) -> Result<Option<Node>, kube::Error> {
        if may_use_cache
            && let Some(store) = &self.node_cache
            && let Some(node) = store.get(&ObjectRef::new(name))
        {
            return Ok(Some((*node).clone()));
        }
        api.get_opt(name).await
    }

    pub(super) async fn patch_node_conditions(
        &self,
        node: &str,
        set: &[NodeCondition],
        remove: &[String],
    ) -> Outcome {
        if set.is_empty() && remove.is_empty() {
            return Outcome::Noop;
        }
        let api: Api<Node> = Api::all(self.client.clone());
        let body = conditions_patch(set, remove);
        match api
            .patch_status(node, &PatchParams::default(), &Patch::Strategic(&body))
            .await
        {
            Ok(_) => Outcome::Applied,
            Err(e) if is_not_found(&e) => Outcome::Noop,
            Err(e) => Outcome::Failed(e.into()),
        }
    }
}

/// Strategic merge patch of node conditions keyed by type; removals use `$patch: delete`.
pub(crate) fn conditions_patch(set: &[NodeCondition], remove: &[String]) -> Value {
    let mut list: Vec<Value> = set
        .iter()
        .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
        .collect();
    list.extend(
        remove
            .iter()
            .map(|t| json!({"type": t, "$patch": "delete"})),
    );
    json!({"status": {"conditions": list}})
}

/// Builds the merge patch of `patch` against a fresh read of the node; `Ok(None)` when nothing
/// would change.
pub(crate) fn node_patch_body(
    fresh: &Node,
    patch: &NodePatch,
) -> Result<Option<Value>, BuildError> {
    let current = fresh.metadata.annotations.clone().unwrap_or_default();
    let mut annotations = delta(&current, &patch.annotations);
    let state_changed = apply_state(&current, patch, &mut annotations)?;
    let labels = delta(
        &fresh.metadata.labels.clone().unwrap_or_default(),
        &patch.labels,
    );
    let spec = fresh.spec.clone().unwrap_or_default();
    let taints = new_taints(spec.taints.as_deref().unwrap_or_default(), patch);
    let unschedulable = patch
        .unschedulable
        .filter(|u| *u != spec.unschedulable.unwrap_or(false));

    let mut metadata = Map::new();
    if !annotations.is_empty() {
        metadata.insert("annotations".into(), Value::Object(annotations));
    }
    if !labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(labels));
    }
    let mut spec_patch = Map::new();
    if let Some(t) = &taints {
        spec_patch.insert(
            "taints".into(),
            serde_json::to_value(t).unwrap_or(Value::Null),
        );
    }
    if let Some(u) = unschedulable {
        spec_patch.insert("unschedulable".into(), json!(u));
    }
    if metadata.is_empty() && spec_patch.is_empty() {
        return Ok(None);
    }
    // Values computed from the fresh read (state document, taint list) must not land on a newer
    // node; guarded patches always carry the precondition.
    if patch.guarded || state_changed || taints.is_some() {
        metadata.insert(
            "resourceVersion".into(),
            json!(fresh.metadata.resource_version.clone().unwrap_or_default()),
        );
    }
    let mut body = Map::new();
    body.insert("metadata".into(), Value::Object(metadata));
    if !spec_patch.is_empty() {
        body.insert("spec".into(), Value::Object(spec_patch));
    }
    Ok(Some(Value::Object(body)))
}

/// Annotation or label deltas that differ from the fresh values.
fn delta(
    current: &BTreeMap<String, String>,
    wanted: &BTreeMap<String, Option<String>>,
) -> Map<String, Value> {
    wanted
        .iter()
        .filter(|(k, v)| current.get(*k) != v.as_ref())
        .map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String)))
        .collect()
}

/// Applies entry changes and document removals to the fresh annotations; returns whether a
/// node-state document changed.
fn apply_state(
    current: &BTreeMap<String, String>,
    patch: &NodePatch,
    out: &mut Map<String, Value>,
) -> Result<bool, BuildError> {
    let mut docs: BTreeMap<&str, NodeState> = BTreeMap::new();
    for change in &patch.state {
        let doc = match docs.get_mut(change.nodewright.as_str()) {
            Some(doc) => doc,
            None => {
                let parsed = match current.get(&keys::node_state(&change.nodewright)) {
                    None => NodeState::default(),
                    Some(text) => NodeState::parse(text).map_err(|e| {
                        BuildError::Malformed(format!(
                            "node {} nodeState_{}: {e}",
                            patch.node, change.nodewright
                        ))
                    })?,
                };
                docs.entry(change.nodewright.as_str()).or_insert(parsed)
            }
        };
        let fresh_entry = doc.0.get(&change.key);
        if patch.guarded && fresh_entry != change.expect.as_ref() {
            return Err(BuildError::Mismatch(format!(
                "node {} entry {} of {} changed since the snapshot",
                patch.node, change.key, change.nodewright
            )));
        }
        match &change.set {
            Some(entry) => {
                doc.0.insert(change.key.clone(), entry.clone());
            }
            None => {
                doc.0.remove(&change.key);
            }
        }
    }
    let mut changed = false;
    for (nw, doc) in docs {
        let key = keys::node_state(nw);
        let text = doc.to_annotation();
        if current.get(&key) != Some(&text) {
            out.insert(key, Value::String(text));
            changed = true;
        }
    }
    for nw in &patch.remove_state_of {
        let key = keys::node_state(nw);
        if current.contains_key(&key) {
            out.insert(key, Value::Null);
            changed = true;
        }
    }
    Ok(changed)
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
