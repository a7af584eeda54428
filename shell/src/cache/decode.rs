//! Per-object decoding of the NodeWright and DeploymentPolicy watches.
//!
//! These kinds are watched as raw JSON ([`DynamicObject`]) and decoded one object at a time, so
//! one object the apiserver stores but Rust cannot decode (written with the webhooks off, or a
//! number outside an `i32`) is reported and skipped instead of failing the whole list page and
//! keeping every cache from syncing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use kube::runtime::watcher::{self, Event};
use kube::{Resource, ResourceExt};
use nodewright_core::{EventSpec, ObjectRef};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tracing::warn;

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

/// An object that did not decode: the report, and the metadata it arrived with.
#[derive(Debug)]
pub struct Skipped {
    /// Why it did not decode.
    pub report: Undecodable,
    /// Its metadata, for removing an older version from a store.
    pub metadata: ObjectMeta,
}

/// Decodes one raw object into `K`, naming the JSON path of the first value that does not fit.
/// The object's body is moved into the decoder, not copied; on failure its metadata comes back
/// with the report.
pub fn decode<K: DeserializeOwned>(kind: &str, obj: DynamicObject) -> Result<K, Box<Skipped>> {
    let DynamicObject {
        types,
        metadata,
        data,
    } = obj;
    let fail = |metadata: ObjectMeta, path: String, error: String| {
        let report = Undecodable {
            kind: kind.to_string(),
            name: metadata.name.clone().unwrap_or_default(),
            uid: metadata.uid.clone().unwrap_or_default(),
            resource_version: metadata.resource_version.clone().unwrap_or_default(),
            path,
            error,
        };
        Box::new(Skipped { report, metadata })
    };
    let mut body = match data {
        Value::Object(body) => body,
        other => {
            return Err(fail(
                metadata,
                ".".into(),
                format!("not an object: {other}"),
            ));
        }
    };
    if let Some(types) = types {
        body.insert("apiVersion".into(), Value::String(types.api_version));
        body.insert("kind".into(), Value::String(types.kind));
    }
    match serde_json::to_value(&metadata) {
        Ok(meta) => body.insert("metadata".into(), meta),
        Err(e) => return Err(fail(metadata, "metadata".into(), e.to_string())),
    };
    serde_path_to_error::deserialize(Value::Object(body)).map_err(|e| {
        let path = e.path().to_string();
        fail(metadata, path, e.into_inner().to_string())
    })
}

/// A stand-in carrying only `meta`, used to remove an object that no longer decodes from a store.
fn stub<K: Resource + Default>(meta: ObjectMeta) -> K {
    let mut k = K::default();
    *k.meta_mut() = meta;
    k
}

/// Turns one raw watch event into a typed one. An undecodable object is reported; an `Apply` or
/// `Delete` of it becomes a `Delete` (an older, decodable version leaves the store) and an
/// `InitApply` of it is dropped.
pub fn convert<K>(kind: &str, event: Event<DynamicObject>, seen: &Undecodables) -> Option<Event<K>>
where
    K: Resource + Default + DeserializeOwned,
{
    let decoded = |obj: DynamicObject| {
        let name = obj.name_any();
        let result = decode::<K>(kind, obj);
        match &result {
            Ok(_) => seen.clear(kind, &name),
            Err(skipped) => seen.report(skipped.report.clone()),
        }
        result
    };
    match event {
        Event::Init => Some(Event::Init),
        Event::InitDone => Some(Event::InitDone),
        Event::InitApply(obj) => decoded(obj).ok().map(Event::InitApply),
        Event::Apply(obj) => {
            Some(decoded(obj).map_or_else(|s| Event::Delete(stub(s.metadata)), Event::Apply))
        }
        Event::Delete(obj) => {
            seen.clear(kind, &obj.name_any());
            Some(Event::Delete(stub(obj.metadata)))
        }
    }
}

/// [`convert`] over a whole raw watch stream.
pub fn typed<K, S>(
    kind: String,
    raw: S,
    seen: Undecodables,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>>
where
    K: Resource + Default + DeserializeOwned,
    S: Stream<Item = Result<Event<DynamicObject>, watcher::Error>>,
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

    fn raw(priority: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "nodewright.nvidia.com/v1alpha1",
            "kind": "NodeWright",
            "metadata": {"name": "bad", "uid": "u1", "resourceVersion": "7"},
            "spec": {"priority": priority, "nodeSelectors": {}, "packages": {}},
        }))
        .unwrap()
    }

    #[test]
    fn undecodable_object_names_its_json_path() {
        let skipped = decode::<NodeWright>("NodeWright", raw(json!(3_000_000_000u64))).unwrap_err();
        let (err, meta) = (skipped.report, skipped.metadata);
        assert_eq!(meta.resource_version.as_deref(), Some("7"));
        assert_eq!(err.path, "spec.priority");
        assert_eq!((err.name.as_str(), err.uid.as_str()), ("bad", "u1"));
        assert!(err.event().message.contains("spec.priority"), "{err:?}");
        let good: NodeWright = decode("NodeWright", raw(json!(5))).expect("decodes");
        assert_eq!(good.spec.priority, 5);
        assert_eq!(good.metadata.uid.as_deref(), Some("u1"));
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
        let policy: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "nodewright.nvidia.com/v1alpha1", "kind": "DeploymentPolicy",
            "metadata": {"name": "p"}, "spec": {"default": {"budget": {"count": "many"}}}}))
        .unwrap();
        let p = convert::<DeploymentPolicy>("DeploymentPolicy", Event::InitApply(policy), &seen);
        assert!(p.is_none());
        let pending = seen.take_pending();
        assert_eq!(pending.len(), 2);
        assert_eq!(pending[1].kind, "DeploymentPolicy");
    }

    #[test]
    fn a_moved_body_decodes_as_the_whole_object_does() {
        let whole = json!({
            "apiVersion": "nodewright.nvidia.com/v1alpha1",
            "kind": "NodeWright",
            "metadata": {"name": "gpu", "uid": "u2", "resourceVersion": "9",
                         "labels": {"team": "a"}, "finalizers": ["f"]},
            "spec": {"priority": 3, "nodeSelectors": {"matchLabels": {"gpu": "true"}},
                     "packages": {"p": {"version": "1.0.0", "image": "r/p"}}},
            "status": {"status": "in_progress", "nodesInProgress": 2,
                       "nodeState": {"n1": {"p|1.0.0": {"name": "p", "version": "1.0.0",
                                     "image": "r/p", "stage": "apply", "state": "complete"}}}},
        });
        let expected: NodeWright = serde_json::from_value(whole.clone()).unwrap();
        let raw: DynamicObject = serde_json::from_value(whole).unwrap();
        let got: NodeWright = decode("NodeWright", raw).expect("decodes");
        assert_eq!(
            serde_json::to_value(&got).unwrap(),
            serde_json::to_value(&expected).unwrap()
        );
    }

    #[test]
    fn a_body_that_is_not_an_object_is_reported_not_decoded() {
        let mut obj = raw(json!(5));
        obj.data = json!([1, 2]);
        let Skipped {
            report: err,
            metadata: meta,
        } = *decode::<NodeWright>("NodeWright", obj).unwrap_err();
        assert_eq!(
            (err.path.as_str(), meta.name.as_deref()),
            (".", Some("bad"))
        );
    }
}
