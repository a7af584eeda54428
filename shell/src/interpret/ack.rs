//! The response of a write read only for what the operator uses of it: the object's identity and
//! new resourceVersion. The rest is skipped unparsed; a NodeWright's status and managedFields
//! describe every node of a large fleet, and a node's status its images and volumes. The watches
//! read an undecodable custom resource's identity the same way (`cache::wire`).

use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Deserializer};

/// A written object of kind `K`, as the apiserver answered the write: metadata name, namespace,
/// uid and resourceVersion only.
#[derive(Clone, Debug, Default)]
pub struct Ack<K> {
    /// The identity and resourceVersion of the written object.
    pub metadata: ObjectMeta,
    kind: PhantomData<fn() -> K>,
}

/// The keys read of the response (serde skips every other key without allocating it).
#[derive(Deserialize, Default)]
#[serde(default)]
struct Wire {
    metadata: WireMeta,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WireMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
}

impl<'de, K> Deserialize<'de> for Ack<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Wire { metadata: m } = Wire::deserialize(d)?;
        Ok(Ack {
            metadata: ObjectMeta {
                name: m.name,
                namespace: m.namespace,
                uid: m.uid,
                resource_version: m.resource_version,
                ..ObjectMeta::default()
            },
            kind: PhantomData,
        })
    }
}

impl<K: Resource> Resource for Ack<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    resource_kind_of!(K);

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use nodewright_crds::NodeWright;
    use serde_json::json;

    #[test]
    fn only_the_identity_and_version_are_read() {
        let body = json!({
            "apiVersion": "nodewright.nvidia.com/v1alpha1", "kind": "NodeWright",
            "metadata": {"name": "nw", "uid": "u", "resourceVersion": "42",
                         "managedFields": [{"fieldsV1": {"f:status": {"f:nodeState": {}}}}]},
            "spec": {"priority": "not even a number"},
            "status": {"nodeState": {"n1": {"p|1": {"state": "complete"}}}},
        });
        let ack: Ack<NodeWright> = serde_json::from_value(body).expect("read");
        assert_eq!(ack.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(ack.metadata.name.as_deref(), Some("nw"));
        assert_eq!(ack.metadata.uid.as_deref(), Some("u"));
        assert!(ack.metadata.managed_fields.is_none());
        assert_eq!(Ack::<NodeWright>::plural(&()), "nodewrights");
        assert_eq!(Ack::<Node>::kind(&()), "Node");
    }

    #[test]
    fn a_response_without_metadata_reads_as_empty() {
        let ack: Ack<Node> = serde_json::from_value(json!({"kind": "Node"})).expect("read");
        assert!(ack.metadata.resource_version.is_none());
    }
}
