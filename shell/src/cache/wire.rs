//! Watched objects decoded without what their cache drops.
//!
//! The watches decode each list page and watch event into [`Wire<K>`], whose decoder skips the
//! fields the cache strips anyway (managedFields, a Job's pod template, a pod's containers, a
//! node's image list, ...; the [`filter::Rule`]s below), so those fields are never allocated. The
//! cache then strips the object as before ([`super::slim`], [`super::strip_node`]): every field a
//! strip keeps is also kept by the rules here, so the cached object is the same as when the event
//! is decoded whole and stripped (tests below and `wire_matches_whole_decode` on recorded objects).

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::watcher::Event;
use nodewright_crds::{DeploymentPolicy, NodeWright, keys};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use tracing::warn;

use super::filter::{self, Rule};
use crate::interpret::ack::Ack;

/// An object of kind `K` decoded without the fields its cache drops ([`Slim::RULE`]), or, when it
/// does not decode, a stand-in with its identity and the decoder's error.
#[derive(Clone, Debug)]
pub struct Wire<K> {
    object: K,
    error: Option<Box<WireError>>,
}

/// Why an object did not decode.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WireError {
    /// JSON path of the offending value (`spec.priority`), `.` for the root.
    pub path: String,
    /// The decoder's message.
    pub message: String,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at {}: {}", self.path, self.message)
    }
}

/// A kind whose watch decodes only what its cache keeps.
pub trait Slim {
    /// The keys decoded; everything a cache's strip keeps must be in it.
    const RULE: Rule;
    /// What is decoded of an object that does not decode by [`Slim::RULE`]: its identity.
    const IDENTITY: Rule = Rule::Only(&[("metadata", IDENTITY_META)]);
    /// Whether such an object stays cached as its identity (true) or is left out (false).
    const KEEP_IDENTITY: bool = false;

    /// Decodes [`Slim::IDENTITY`] of an object that does not decode whole.
    fn identity(text: &str) -> Self
    where
        Self: Sized + Default + DeserializeOwned,
    {
        filter::deserialize(
            &mut serde_json::Deserializer::from_str(text),
            Self::IDENTITY,
        )
        .unwrap_or_default()
    }
}

/// The identity of a kind whose required fields (a custom resource's `spec`) the identity rule
/// leaves out: its metadata (read as a write's answer is, [`Ack`]) on a default object.
fn identity_by_meta<K: Resource + Default>(text: &str) -> K {
    let mut object = K::default();
    if let Ok(ack) = serde_json::from_str::<Ack<K>>(text) {
        *object.meta_mut() = ack.metadata;
    }
    object
}

/// The metadata an undecodable object is still read for.
const IDENTITY_META: Rule = Rule::Only(&[
    ("name", Rule::Keep),
    ("namespace", Rule::Keep),
    ("uid", Rule::Keep),
    ("resourceVersion", Rule::Keep),
]);

impl<K: Slim + Default + DeserializeOwned> Wire<K> {
    /// Decodes one object's JSON text; an error names the JSON path of the offending value.
    pub fn decode(text: &str) -> Self {
        let filtered =
            |rule| filter::deserialize(&mut serde_json::Deserializer::from_str(text), rule);
        match filtered(K::RULE) {
            Ok(object) => Wire {
                object,
                error: None,
            },
            Err(error) => {
                let mut track = serde_path_to_error::Track::new();
                let mut de = serde_json::Deserializer::from_str(text);
                let tracked = serde_path_to_error::Deserializer::new(&mut de, &mut track);
                let path = match filter::deserialize::<K, _>(tracked, K::RULE) {
                    Err(_) => track.path().to_string(),
                    Ok(_) => ".".to_string(),
                };
                Wire {
                    object: K::identity(text),
                    error: Some(Box::new(WireError {
                        path,
                        message: error.to_string(),
                    })),
                }
            }
        }
    }
}

impl<K> Wire<K> {
    /// The decoded object, or the decoder's error.
    pub fn into_result(self) -> Result<K, Box<WireError>> {
        match self.error {
            None => Ok(self.object),
            Some(e) => Err(e),
        }
    }

    /// The object (only its identity when it did not decode) and the decoder's error, if any.
    pub fn into_parts(self) -> (K, Option<Box<WireError>>) {
        (self.object, self.error)
    }
}

impl<'de, K: Slim + Default + DeserializeOwned> Deserialize<'de> for Wire<K> {
    /// Takes the object's text (borrowed from the list page or watch line) and decodes it on its
    /// own, so one undecodable object does not fail its page or event.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(d)?;
        Ok(Wire::decode(raw.get()))
    }
}

impl<K: Resource> Resource for Wire<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    resource_kind_of!(K);

    fn meta(&self) -> &ObjectMeta {
        self.object.meta()
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.object.meta_mut()
    }
}

/// The watch event of the object inside. An undecodable object is logged and, unless its kind
/// keeps it as its identity ([`Slim::KEEP_IDENTITY`]), skipped: an `Apply` of it becomes a
/// `Delete` (an older, decodable version leaves the store), an `InitApply` of it is dropped.
pub fn unwrap<K>(event: Event<Wire<K>>) -> Option<Event<K>>
where
    K: Resource + Slim,
    K::DynamicType: Default,
{
    let skipped = |w: &Wire<K>| {
        let error = w.error.as_deref()?;
        let meta = w.object.meta();
        warn!(kind = %K::kind(&K::DynamicType::default()), name = meta.name.as_deref().unwrap_or(""),
              namespace = meta.namespace.as_deref().unwrap_or(""),
              resource_version = meta.resource_version.as_deref().unwrap_or(""),
              kept_as_identity = K::KEEP_IDENTITY,
              %error, "object cannot be decoded; skipped until it changes");
        (!K::KEEP_IDENTITY).then_some(())
    };
    match event {
        Event::Apply(w) if skipped(&w).is_some() => Some(Event::Delete(w.object)),
        Event::Apply(w) => Some(Event::Apply(w.object)),
        Event::Delete(w) => Some(Event::Delete(w.object)),
        Event::Init => Some(Event::Init),
        Event::InitApply(w) if skipped(&w).is_some() => None,
        Event::InitApply(w) => Some(Event::InitApply(w.object)),
        Event::InitDone => Some(Event::InitDone),
    }
}

/// Metadata without managedFields (every cache drops them).
const META: Rule = Rule::Except(&[("managedFields", Rule::Skip)]);

/// A container status as `slim` keeps it: name, restart count and the current state's exit code,
/// reason, message and finish time.
const CONTAINER_STATUS: Rule = Rule::Only(&[
    ("name", Rule::Keep),
    ("restartCount", Rule::Keep),
    (
        "state",
        Rule::Only(&[
            ("running", Rule::Only(&[])),
            (
                "terminated",
                Rule::Only(&[
                    ("exitCode", Rule::Keep),
                    ("reason", Rule::Keep),
                    ("message", Rule::Keep),
                    ("finishedAt", Rule::Keep),
                ]),
            ),
            ("waiting", Rule::Keep),
        ]),
    ),
]);

impl Slim for Job {
    /// Executor Jobs: the pod template only to the node name and deadline (and, for a Job without
    /// an executor fingerprint, its template annotations and init containers: the fingerprint
    /// annotation comes before the spec in what the apiserver sends; if it did not, they would be
    /// decoded and stripped afterwards).
    const RULE: Rule = Rule::Except(&[
        (
            "metadata",
            Rule::Except(&[
                ("managedFields", Rule::Skip),
                ("ownerReferences", Rule::Skip),
                ("generateName", Rule::Skip),
                ("annotations", Rule::MarkKey(keys::EXECUTOR_FINGERPRINT)),
            ]),
        ),
        (
            "spec",
            Rule::Except(&[
                ("selector", Rule::Skip),
                ("podFailurePolicy", Rule::Skip),
                ("successPolicy", Rule::Skip),
                (
                    "template",
                    Rule::Only(&[
                        (
                            "metadata",
                            Rule::UnlessMarked(&Rule::Only(&[("annotations", Rule::Keep)])),
                        ),
                        (
                            "spec",
                            Rule::Only(&[
                                ("nodeName", Rule::Keep),
                                ("activeDeadlineSeconds", Rule::Keep),
                                ("initContainers", Rule::UnlessMarked(&Rule::Keep)),
                            ]),
                        ),
                    ]),
                ),
            ]),
        ),
        (
            "status",
            Rule::Only(&[
                ("active", Rule::Keep),
                ("failed", Rule::Keep),
                ("succeeded", Rule::Keep),
                ("conditions", Rule::Keep),
            ]),
        ),
    ]);
}

impl Slim for Pod {
    /// What either pod strip keeps: an executor pod's (D16) or a workload pod's (drain inputs).
    const RULE: Rule = Rule::Except(&[
        ("metadata", META),
        (
            "spec",
            Rule::Except(&[
                ("containers", Rule::Only(&[("name", Rule::Keep)])),
                ("initContainers", Rule::Skip),
                ("ephemeralContainers", Rule::Skip),
                ("affinity", Rule::Skip),
            ]),
        ),
        (
            "status",
            Rule::Except(&[
                ("containerStatuses", CONTAINER_STATUS),
                ("initContainerStatuses", CONTAINER_STATUS),
                ("ephemeralContainerStatuses", Rule::Skip),
            ]),
        ),
    ]);
    /// An undecodable pod stays cached with its identity and node, so a drain of that node still
    /// waits for it.
    const IDENTITY: Rule = Rule::Only(&[
        ("metadata", IDENTITY_META),
        ("spec", Rule::Only(&[("nodeName", Rule::Keep)])),
    ]);
    const KEEP_IDENTITY: bool = true;
}

impl Slim for Node {
    /// Nodes without managedFields and with only the boot id and the conditions (without their
    /// timestamps) of their status (what [`super::strip_node`] keeps).
    const RULE: Rule = Rule::Except(&[
        ("metadata", META),
        (
            "status",
            Rule::Only(&[
                ("nodeInfo", Rule::Only(&[("bootID", Rule::Keep)])),
                (
                    "conditions",
                    Rule::Only(&[
                        ("type", Rule::Keep),
                        ("status", Rule::Keep),
                        ("reason", Rule::Keep),
                        ("message", Rule::Keep),
                    ]),
                ),
            ]),
        ),
    ]);
}

impl Slim for NodeWright {
    /// NodeWrights without managedFields; an undecodable one is reported (`super::decode`).
    const RULE: Rule = Rule::Except(&[("metadata", META)]);

    fn identity(text: &str) -> Self {
        identity_by_meta(text)
    }
}

impl Slim for DeploymentPolicy {
    /// DeploymentPolicies without managedFields; an undecodable one is reported.
    const RULE: Rule = Rule::Except(&[("metadata", META)]);

    fn identity(text: &str) -> Self {
        identity_by_meta(text)
    }
}

impl Slim for ConfigMap {
    /// ConfigMaps without managedFields.
    const RULE: Rule = Rule::Except(&[("metadata", META)]);
}

impl Slim for PodDisruptionBudget {
    /// PodDisruptionBudgets without managedFields.
    const RULE: Rule = Rule::Except(&[("metadata", META)]);
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
