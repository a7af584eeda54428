//! Per-object decoding of the NodeWright and DeploymentPolicy watches.
//!
//! Each object of these kinds is decoded from its own JSON text ([`Wire`]), so one object the
//! apiserver stores but Rust cannot decode (written with the webhooks off, or a number outside an
//! `i32`) is reported and skipped instead of failing the whole list page and keeping every cache
//! from syncing. Decoding the text straight into the typed object keeps no intermediate JSON tree
//! of a large NodeWright (its `status.nodeState` mirror of every node).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use kube::runtime::watcher::{self, Event};
use kube::{Resource, ResourceExt};
use nodewright_core::{EventSpec, ObjectRef};
use tracing::warn;

use super::wire::{Wire, WireError};

/// Event reason of an undecodable object.
pub const REASON: &str = "Undecodable";

/// One object the operator cannot decode, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Undecodable {
    /// Kind (`NodeWright`, `DeploymentPolicy`).
    pub kind: String,
    /// Object name.
    pub name: String,
    /// Object uid.
    pub uid: String,
    /// The resourceVersion that failed to decode.
    pub resource_version: String,
    /// JSON path of the offending value (`spec.priority`), `.` for the root.
    pub path: String,
    /// The decoder's message.
    pub error: String,
}

impl Undecodable {
    /// The Warning Event on the object that explains why it is skipped.
    pub fn event(&self) -> EventSpec {
        EventSpec {
            regarding: ObjectRef {
                kind: self.kind.clone(),
                name: self.name.clone(),
                namespace: None,
                uid: Some(self.uid.clone()),
            },
            warning: true,
            reason: REASON.into(),
            action: "Decode".into(),
            message: format!(
                "{} [{}] cannot be decoded at {}: {}; it is skipped until it is fixed",
                self.kind, self.name, self.path, self.error
            ),
        }
    }
}

/// Undecodable objects seen by the watches: the current set (by kind/name) and the reports not
/// yet turned into Events.
#[derive(Clone, Default)]
pub struct Undecodables(Arc<Mutex<State>>);

#[derive(Default)]
struct State {
    current: BTreeMap<(String, String), Undecodable>,
    pending: Vec<Undecodable>,
}

impl Undecodables {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means a watcher callback panicked; the maps are still valid.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records `u`; a new object or a new resourceVersion of it is logged and queued for an Event.
    fn report(&self, u: Undecodable) {
        let mut state = self.lock();
        let key = (u.kind.clone(), u.name.clone());
        if state.current.get(&key) == Some(&u) {
            return;
        }
        warn!(kind = %u.kind, name = %u.name, path = %u.path, error = %u.error,
              resource_version = %u.resource_version, "object cannot be decoded; skipped until fixed");
        state.current.insert(key, u.clone());
        state.pending.push(u);
    }

    /// Forgets `kind/name` (it decoded again, or was deleted).
    fn clear(&self, kind: &str, name: &str) {
        self.lock()
            .current
            .remove(&(kind.to_string(), name.to_string()));
    }

    /// The objects currently skipped, by kind and name.
    pub fn current(&self) -> Vec<Undecodable> {
        self.lock().current.values().cloned().collect()
    }

    /// Takes the reports that still need an Event.
    pub fn take_pending(&self) -> Vec<Undecodable> {
        std::mem::take(&mut self.lock().pending)
    }
}

/// The report of `object` (its identity) that did not decode by `error`.
fn report<K: Resource>(kind: &str, object: &K, error: WireError) -> Undecodable {
    let meta = object.meta();
    Undecodable {
        kind: kind.to_string(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        resource_version: meta.resource_version.clone().unwrap_or_default(),
        path: error.path,
        error: error.message,
    }
}

/// Turns one watch event of objects decoded from their text ([`Wire`]) into a typed one. An
/// undecodable object is reported; an `Apply` of it becomes a `Delete` of its identity (an older,
/// decodable version leaves the store) and an `InitApply` of it is dropped.
pub fn convert<K>(kind: &str, event: Event<Wire<K>>, seen: &Undecodables) -> Option<Event<K>>
where
    K: Resource,
{
    let decoded = |wire: Wire<K>| {
        let (object, error) = wire.into_parts();
        match error {
            None => {
                seen.clear(kind, &object.name_any());
                Ok(object)
            }
            Some(error) => {
                seen.report(report(kind, &object, *error));
                Err(object)
            }
        }
    };
    match event {
        Event::Init => Some(Event::Init),
        Event::InitDone => Some(Event::InitDone),
        Event::InitApply(wire) => decoded(wire).ok().map(Event::InitApply),
        Event::Apply(wire) => Some(decoded(wire).map_or_else(Event::Delete, Event::Apply)),
        Event::Delete(wire) => {
            let (object, _) = wire.into_parts();
            seen.clear(kind, &object.name_any());
            Some(Event::Delete(object))
        }
    }
}

/// [`convert`] over a whole watch stream.
pub fn typed<K, S>(
    kind: String,
    raw: S,
    seen: Undecodables,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>>
where
    K: Resource,
    S: Stream<Item = Result<Event<Wire<K>>, watcher::Error>>,
{
    raw.filter_map(move |item| {
        let out = match item {
            Ok(event) => convert(&kind, event, &seen).map(Ok),
            Err(e) => Some(Err(e)),
        };
        std::future::ready(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_crds::{DeploymentPolicy, NodeWright};
    use serde_json::json;

    fn wire<K: super::super::wire::Slim + Default + serde::de::DeserializeOwned>(
        v: serde_json::Value,
    ) -> Wire<K> {
        Wire::decode(&v.to_string())
    }

    fn raw(priority: serde_json::Value) -> Wire<NodeWright> {
        wire(json!({
            "apiVersion": "nodewright.nvidia.com/v1alpha1",
            "kind": "NodeWright",
            "metadata": {"name": "bad", "uid": "u1", "resourceVersion": "7"},
            "spec": {"priority": priority, "nodeSelectors": {}, "packages": {}},
        }))
    }

    #[test]
    fn undecodable_object_names_its_json_path() {
        let seen = Undecodables::default();
        let e = convert(
            "NodeWright",
            Event::Apply(raw(json!(3_000_000_000u64))),
            &seen,
        );
        assert!(
            matches!(e, Some(Event::Delete(ref k)) if k.metadata.resource_version.as_deref() == Some("7"))
        );
        let err = seen.take_pending().pop().expect("reported");
        assert_eq!(err.path, "spec.priority");
        assert_eq!((err.name.as_str(), err.uid.as_str()), ("bad", "u1"));
        assert_eq!(err.resource_version, "7");
        assert!(err.event().message.contains("spec.priority"), "{err:?}");
        let good = convert("NodeWright", Event::Apply(raw(json!(5))), &seen);
        assert!(matches!(good, Some(Event::Apply(ref k)) if k.spec.priority == 5));
    }

    #[test]
    fn apply_of_undecodable_removes_it_and_reports_once() {
        let seen = Undecodables::default();
        let e = convert::<NodeWright>("NodeWright", Event::Apply(raw(json!("x"))), &seen);
        assert!(
            matches!(e, Some(Event::Delete(ref k)) if k.metadata.name.as_deref() == Some("bad"))
        );
        let again = convert::<NodeWright>("NodeWright", Event::Apply(raw(json!("x"))), &seen);
        assert!(matches!(again, Some(Event::Delete(_))));
        assert_eq!(
            seen.take_pending().len(),
            1,
            "one report per resourceVersion"
        );
        assert_eq!(seen.current().len(), 1);
        let fixed = convert::<NodeWright>("NodeWright", Event::Apply(raw(json!(5))), &seen);
        assert!(matches!(fixed, Some(Event::Apply(_))));
        assert!(seen.current().is_empty());
    }

    #[test]
    fn init_apply_of_undecodable_is_dropped_others_kept() {
        let seen = Undecodables::default();
        let bad = convert::<NodeWright>("NodeWright", Event::InitApply(raw(json!(-1.5))), &seen);
        assert!(bad.is_none());
        let good = convert::<NodeWright>("NodeWright", Event::InitApply(raw(json!(1))), &seen);
        assert!(matches!(good, Some(Event::InitApply(_))));
        let policy = wire::<DeploymentPolicy>(json!({
            "apiVersion": "nodewright.nvidia.com/v1alpha1", "kind": "DeploymentPolicy",
            "metadata": {"name": "p"}, "spec": {"default": {"budget": {"count": "many"}}}}));
        let p = convert("DeploymentPolicy", Event::InitApply(policy), &seen);
        assert!(p.is_none());
        let pending = seen.take_pending();
        assert_eq!(pending.len(), 2);
        assert_eq!(pending[1].kind, "DeploymentPolicy");
    }

    #[test]
    fn decoding_the_text_gives_the_whole_object_without_managed_fields() {
        let whole = json!({
            "apiVersion": "nodewright.nvidia.com/v1alpha1",
            "kind": "NodeWright",
            "metadata": {"name": "gpu", "uid": "u2", "resourceVersion": "9",
                         "labels": {"team": "a"}, "finalizers": ["f"],
                         "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
            "spec": {"priority": 3, "nodeSelectors": {"matchLabels": {"gpu": "true"}},
                     "packages": {"p": {"version": "1.0.0", "image": "r/p"}}},
            "status": {"status": "in_progress", "nodesInProgress": 2,
                       "nodeState": {"n1": {"p|1.0.0": {"name": "p", "version": "1.0.0",
                                     "image": "r/p", "stage": "apply", "state": "complete"}}}},
        });
        let mut expected: NodeWright = serde_json::from_value(whole.clone()).unwrap();
        assert!(expected.metadata.managed_fields.is_some());
        expected.metadata.managed_fields = None;
        let got = wire::<NodeWright>(whole).into_result().expect("decodes");
        assert_eq!(
            serde_json::to_value(&got).unwrap(),
            serde_json::to_value(&expected).unwrap()
        );
    }
}
