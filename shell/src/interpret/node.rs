//! Node writes: the guarded node-state merge with conflict re-reads (02-lifecycle.md §13.1,
//! §13.4) and node conditions (§13.2).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use nodewright_core::NodePatch;
use nodewright_core::effect::{NodePatchRefusal, resolve_node_patch};
use serde_json::{Map, Value, json};

use super::port::ClusterPort;
use super::{Interpreter, Outcome};
use crate::error::ShellError;

impl<P: ClusterPort> Interpreter<P> {
    pub(super) async fn patch_node(&self, patch: &NodePatch) -> Outcome {
        for attempt in 0..self.conflict_attempts {
            if attempt > 0 {
                self.port
                    .pause(self.retry_backoff * 2u32.pow(attempt - 1))
                    .await;
            }
            // The first read may come from the cache; retries always ask the apiserver.
            let fresh = match self.port.get_node(&patch.node, attempt == 0).await {
                Ok(Some(node)) => node,
                Ok(None) => return Outcome::Noop,
                Err(e) => return Outcome::Failed(e.into()),
            };
            let body = match node_patch_body(&fresh, patch) {
                Ok(Some(body)) => body,
                Ok(None) => return Outcome::Noop,
                Err(NodePatchRefusal::Mismatch(why)) => return Outcome::Dropped(why),
                Err(NodePatchRefusal::Malformed(why)) => {
                    return Outcome::Failed(ShellError::Malformed(why));
                }
            };
            match self.port.patch_node(&patch.node, &body).await {
                Ok(()) => return Outcome::Applied,
                Err(e) if e.is_not_found() => return Outcome::Noop,
                Err(e) if e.is_conflict() => {
                    tracing::debug!(node = %patch.node, attempt, "node write conflict, re-reading");
                }
                Err(e) => return Outcome::Failed(e.into()),
            }
        }
        Outcome::Failed(ShellError::ConflictRetriesExhausted(self.conflict_attempts))
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
        let body = conditions_patch(set, remove);
        match self.port.patch_node_status(node, &body).await {
            Ok(()) => Outcome::Applied,
            Err(e) if e.is_not_found() => Outcome::Noop,
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
/// would change. What changes is decided in core ([`resolve_node_patch`]); this only spells it as
/// a JSON merge patch, with the fresh read's resourceVersion when the delta needs it.
pub(crate) fn node_patch_body(
    fresh: &Node,
    patch: &NodePatch,
) -> Result<Option<Value>, NodePatchRefusal> {
    let Some(delta) = resolve_node_patch(fresh, patch)? else {
        return Ok(None);
    };
    let mut metadata = Map::new();
    if !delta.annotations.is_empty() {
        metadata.insert("annotations".into(), merge_map(&delta.annotations));
    }
    if !delta.labels.is_empty() {
        metadata.insert("labels".into(), merge_map(&delta.labels));
    }
    // Values computed from the fresh read (state document, taint list) must not land on a newer
    // node; guarded patches always carry the precondition.
    if delta.needs_resource_version {
        metadata.insert(
            "resourceVersion".into(),
            json!(fresh.metadata.resource_version.clone().unwrap_or_default()),
        );
    }
    let mut body = Map::new();
    body.insert("metadata".into(), Value::Object(metadata));
    let mut spec_patch = Map::new();
    if let Some(t) = &delta.taints {
        spec_patch.insert(
            "taints".into(),
            serde_json::to_value(t).unwrap_or(Value::Null),
        );
    }
    if let Some(u) = delta.unschedulable {
        spec_patch.insert("unschedulable".into(), json!(u));
    }
    if !spec_patch.is_empty() {
        body.insert("spec".into(), Value::Object(spec_patch));
    }
    Ok(Some(Value::Object(body)))
}

/// A set/remove map as merge-patch JSON (`null` removes).
fn merge_map(delta: &BTreeMap<String, Option<String>>) -> Value {
    Value::Object(
        delta
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String)))
            .collect(),
    )
}
