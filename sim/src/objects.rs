//! The kinds of object the simulated apiserver stores, and a typed set of them that serves both
//! as the apiserver's storage and as the operator's (possibly stale) cache.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodewright_crds::{DeploymentPolicy, NodeWright};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Object kinds the simulator models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    /// core/v1 Node.
    Node,
    /// nodewright.nvidia.com/v1alpha1 NodeWright.
    NodeWright,
    /// nodewright.nvidia.com/v1alpha1 DeploymentPolicy.
    DeploymentPolicy,
    /// batch/v1 Job.
    Job,
    /// core/v1 Pod.
    Pod,
    /// core/v1 ConfigMap.
    ConfigMap,
    /// policy/v1 PodDisruptionBudget.
    PodDisruptionBudget,
    /// coordination.k8s.io/v1 Lease (leader election).
    Lease,
}

impl Kind {
    /// Parses a Kubernetes `kind` string.
    pub fn parse(text: &str) -> Option<Kind> {
        Some(match text {
            "Node" => Kind::Node,
            "NodeWright" => Kind::NodeWright,
            "DeploymentPolicy" => Kind::DeploymentPolicy,
            "Job" => Kind::Job,
            "Pod" => Kind::Pod,
            "ConfigMap" => Kind::ConfigMap,
            "PodDisruptionBudget" => Kind::PodDisruptionBudget,
            "Lease" => Kind::Lease,
            _ => return None,
        })
    }
}

/// A stored object type: metadata access and its table in [`Objects`].
pub trait Object: Clone + PartialEq + Serialize + DeserializeOwned + 'static {
    /// The kind.
    const KIND: Kind;
    /// Object metadata.
    fn meta(&self) -> &ObjectMeta;
    /// Mutable object metadata.
    fn meta_mut(&mut self) -> &mut ObjectMeta;
    /// The table of this kind.
    fn table(objects: &Objects) -> &BTreeMap<String, Self>;
    /// The mutable table of this kind.
    fn table_mut(objects: &mut Objects) -> &mut BTreeMap<String, Self>;
    /// Wraps into [`AnyObject`].
    fn wrap(self) -> AnyObject;
}

macro_rules! object {
    ($ty:ty, $kind:ident, $field:ident) => {
        impl Object for $ty {
            const KIND: Kind = Kind::$kind;
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
            fn table(objects: &Objects) -> &BTreeMap<String, Self> {
                &objects.$field
            }
            fn table_mut(objects: &mut Objects) -> &mut BTreeMap<String, Self> {
                &mut objects.$field
            }
            fn wrap(self) -> AnyObject {
                AnyObject::$kind(Box::new(self))
            }
        }
    };
}

object!(Node, Node, nodes);
object!(NodeWright, NodeWright, nodewrights);
object!(DeploymentPolicy, DeploymentPolicy, policies);
object!(Job, Job, jobs);
object!(Pod, Pod, pods);
object!(ConfigMap, ConfigMap, config_maps);
object!(PodDisruptionBudget, PodDisruptionBudget, pdbs);
object!(Lease, Lease, leases);

/// The storage key of an object: `name` for cluster-scoped kinds, `namespace/name` otherwise.
pub fn key_of(meta: &ObjectMeta) -> String {
    key(
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// The storage key for a namespace (or none) and a name.
pub fn key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// A typed set of objects, keyed per kind by [`key_of`]; sorted, so iteration is deterministic.
#[derive(Clone, Debug, Default)]
pub struct Objects {
    /// Nodes.
    pub nodes: BTreeMap<String, Node>,
    /// NodeWrights.
    pub nodewrights: BTreeMap<String, NodeWright>,
    /// DeploymentPolicies.
    pub policies: BTreeMap<String, DeploymentPolicy>,
    /// Jobs (all namespaces).
    pub jobs: BTreeMap<String, Job>,
    /// Pods (all namespaces).
    pub pods: BTreeMap<String, Pod>,
    /// ConfigMaps (all namespaces).
    pub config_maps: BTreeMap<String, ConfigMap>,
    /// PodDisruptionBudgets.
    pub pdbs: BTreeMap<String, PodDisruptionBudget>,
    /// Leases (leader election; the operator's cache does not watch them).
    pub leases: BTreeMap<String, Lease>,
}

impl Objects {
    /// Inserts or replaces an object.
    pub fn put(&mut self, object: AnyObject) {
        macro_rules! put {
            ($o:expr) => {{
                let o = *$o;
                let k = key_of(Object::meta(&o));
                Object::table_mut(self).insert(k, o);
            }};
        }
        match object {
            AnyObject::Node(o) => put!(o),
            AnyObject::NodeWright(o) => put!(o),
            AnyObject::DeploymentPolicy(o) => put!(o),
            AnyObject::Job(o) => put!(o),
            AnyObject::Pod(o) => put!(o),
            AnyObject::ConfigMap(o) => put!(o),
            AnyObject::PodDisruptionBudget(o) => put!(o),
            AnyObject::Lease(o) => put!(o),
        }
    }

    /// Removes the object with the kind and key of `object`.
    pub fn remove(&mut self, object: &AnyObject) {
        let k = key_of(object.meta());
        match object.kind() {
            Kind::Node => drop(self.nodes.remove(&k)),
            Kind::NodeWright => drop(self.nodewrights.remove(&k)),
            Kind::DeploymentPolicy => drop(self.policies.remove(&k)),
            Kind::Job => drop(self.jobs.remove(&k)),
            Kind::Pod => drop(self.pods.remove(&k)),
            Kind::ConfigMap => drop(self.config_maps.remove(&k)),
            Kind::PodDisruptionBudget => drop(self.pdbs.remove(&k)),
            Kind::Lease => drop(self.leases.remove(&k)),
        }
    }

    /// Every object the operator reads, kinds in a fixed order (Leases are not among them).
    pub fn all(&self) -> Vec<AnyObject> {
        let mut out: Vec<AnyObject> = Vec::new();
        out.extend(self.nodes.values().cloned().map(Object::wrap));
        out.extend(self.nodewrights.values().cloned().map(Object::wrap));
        out.extend(self.policies.values().cloned().map(Object::wrap));
        out.extend(self.config_maps.values().cloned().map(Object::wrap));
        out.extend(self.pdbs.values().cloned().map(Object::wrap));
        out.extend(self.jobs.values().cloned().map(Object::wrap));
        out.extend(self.pods.values().cloned().map(Object::wrap));
        out
    }

    /// Every uid present, for owner-reference checks.
    pub fn uids(&self) -> std::collections::BTreeSet<&str> {
        fn uids<'a, T: Object>(t: &'a BTreeMap<String, T>) -> impl Iterator<Item = &'a str> + 'a {
            t.values().filter_map(|o| o.meta().uid.as_deref())
        }
        uids(&self.nodes)
            .chain(uids(&self.nodewrights))
            .chain(uids(&self.policies))
            .chain(uids(&self.jobs))
            .chain(uids(&self.pods))
            .chain(uids(&self.config_maps))
            .chain(uids(&self.pdbs))
            .chain(uids(&self.leases))
            .collect()
    }
}

/// One object of any modelled kind.
#[derive(Clone, Debug, PartialEq)]
pub enum AnyObject {
    /// A Node.
    Node(Box<Node>),
    /// A NodeWright.
    NodeWright(Box<NodeWright>),
    /// A DeploymentPolicy.
    DeploymentPolicy(Box<DeploymentPolicy>),
    /// A Job.
    Job(Box<Job>),
    /// A Pod.
    Pod(Box<Pod>),
    /// A ConfigMap.
    ConfigMap(Box<ConfigMap>),
    /// A PodDisruptionBudget.
    PodDisruptionBudget(Box<PodDisruptionBudget>),
    /// A Lease.
    Lease(Box<Lease>),
}

impl AnyObject {
    /// The kind.
    pub fn kind(&self) -> Kind {
        match self {
            AnyObject::Node(_) => Kind::Node,
            AnyObject::NodeWright(_) => Kind::NodeWright,
            AnyObject::DeploymentPolicy(_) => Kind::DeploymentPolicy,
            AnyObject::Job(_) => Kind::Job,
            AnyObject::Pod(_) => Kind::Pod,
            AnyObject::ConfigMap(_) => Kind::ConfigMap,
            AnyObject::PodDisruptionBudget(_) => Kind::PodDisruptionBudget,
            AnyObject::Lease(_) => Kind::Lease,
        }
    }

    /// The metadata.
    pub fn meta(&self) -> &ObjectMeta {
        match self {
            AnyObject::Node(o) => &o.metadata,
            AnyObject::NodeWright(o) => &o.metadata,
            AnyObject::DeploymentPolicy(o) => &o.metadata,
            AnyObject::Job(o) => &o.metadata,
            AnyObject::Pod(o) => &o.metadata,
            AnyObject::ConfigMap(o) => &o.metadata,
            AnyObject::PodDisruptionBudget(o) => &o.metadata,
            AnyObject::Lease(o) => &o.metadata,
        }
    }

    /// The object as JSON (with `apiVersion` and `kind`).
    pub fn to_json(&self) -> serde_json::Value {
        // Serializing Kubernetes objects to a JSON value cannot fail (string keys, no NaN).
        let mut value = match self {
            AnyObject::Node(o) => serde_json::to_value(o),
            AnyObject::NodeWright(o) => serde_json::to_value(o),
            AnyObject::DeploymentPolicy(o) => serde_json::to_value(o),
            AnyObject::Job(o) => serde_json::to_value(o),
            AnyObject::Pod(o) => serde_json::to_value(o),
            AnyObject::ConfigMap(o) => serde_json::to_value(o),
            AnyObject::PodDisruptionBudget(o) => serde_json::to_value(o),
            AnyObject::Lease(o) => serde_json::to_value(o),
        }
        .expect("objects serialize");
        let (api_version, kind) = api_version_kind(self.kind());
        if let Some(map) = value.as_object_mut() {
            map.entry("apiVersion").or_insert(api_version.into());
            map.entry("kind").or_insert(kind.into());
        }
        value
    }

    /// Reads an object from JSON by its `kind` field.
    pub fn from_json(value: serde_json::Value) -> Result<AnyObject, String> {
        let kind_text = value
            .get("kind")
            .and_then(|k| k.as_str())
            .ok_or("object has no kind")?
            .to_string();
        let kind = Kind::parse(&kind_text).ok_or(format!("unsupported kind {kind_text:?}"))?;
        fn read<T: DeserializeOwned>(v: serde_json::Value) -> Result<Box<T>, String> {
            serde_json::from_value(v)
                .map(Box::new)
                .map_err(|e| e.to_string())
        }
        Ok(match kind {
            Kind::Node => AnyObject::Node(read(value)?),
            Kind::NodeWright => {
                let mut nw: Box<NodeWright> = read(value)?;
                nw.spec.normalize();
                AnyObject::NodeWright(nw)
            }
            Kind::DeploymentPolicy => AnyObject::DeploymentPolicy(read(value)?),
            Kind::Job => AnyObject::Job(read(value)?),
            Kind::Pod => AnyObject::Pod(read(value)?),
            Kind::ConfigMap => AnyObject::ConfigMap(read(value)?),
            Kind::PodDisruptionBudget => AnyObject::PodDisruptionBudget(read(value)?),
            Kind::Lease => AnyObject::Lease(read(value)?),
        })
    }
}

/// `apiVersion` and `kind` strings of a modelled kind.
pub fn api_version_kind(kind: Kind) -> (&'static str, &'static str) {
    match kind {
        Kind::Node => ("v1", "Node"),
        Kind::NodeWright => ("nodewright.nvidia.com/v1alpha1", "NodeWright"),
        Kind::DeploymentPolicy => ("nodewright.nvidia.com/v1alpha1", "DeploymentPolicy"),
        Kind::Job => ("batch/v1", "Job"),
        Kind::Pod => ("v1", "Pod"),
        Kind::ConfigMap => ("v1", "ConfigMap"),
        Kind::PodDisruptionBudget => ("policy/v1", "PodDisruptionBudget"),
        Kind::Lease => ("coordination.k8s.io/v1", "Lease"),
    }
}

impl Serialize for AnyObject {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for AnyObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        AnyObject::from_json(value).map_err(serde::de::Error::custom)
    }
}
