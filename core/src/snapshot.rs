//! The core's input: everything one pass may look at, read from the shell's caches.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use nodewright_crds::{DeploymentPolicy, NodeWright};

use crate::slim::{SlimJob, SlimPod};

/// A consistent-enough view of the cluster for one pass (02-lifecycle.md R1).
///
/// Vectors may arrive in any order; the core sorts what it iterates, so the plan depends only on
/// the contents. Objects are shared (`Arc`) with the caches they come from, so a snapshot costs
/// one pointer per object, not a copy of it.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// All NodeWright objects.
    pub nodewrights: Vec<Arc<NodeWright>>,
    /// All DeploymentPolicy objects.
    pub policies: Vec<Arc<DeploymentPolicy>>,
    /// All Nodes.
    pub nodes: Vec<Arc<Node>>,
    /// Jobs in the operator namespace carrying the `nodewright.nvidia.com/name` label, as
    /// compact records ([`SlimJob`]).
    pub jobs: Vec<Arc<SlimJob>>,
    /// Executor pods in the operator namespace (both `name` and `package` labels, D16), as compact
    /// records ([`SlimPod`]).
    pub executor_pods: Vec<Arc<SlimPod>>,
    /// Other pods on nodes the operator may cordon, drain or gate interrupts on.
    pub workload_pods: Vec<Arc<Pod>>,
    /// ConfigMaps in the operator namespace labelled for a NodeWright.
    pub config_maps: Vec<Arc<ConfigMap>>,
    /// PodDisruptionBudgets, for drain blockers and eviction throttling.
    pub pod_disruption_budgets: Vec<Arc<PodDisruptionBudget>>,
    /// What the shell learned about the apiserver (decision D20).
    pub cluster: ClusterInfo,
}

/// Facts about the apiserver itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterInfo {
    /// Server version as (major, minor), when known.
    pub server_version: Option<(u32, u32)>,
}

/// Wraps owned objects for a [`Snapshot`] field (tests, fixtures and tools that build snapshots
/// from owned objects); typed Jobs and pods become their compact records.
pub fn shared<T, U: From<T>>(objects: impl IntoIterator<Item = T>) -> Vec<Arc<U>> {
    objects.into_iter().map(|o| Arc::new(U::from(o))).collect()
}
