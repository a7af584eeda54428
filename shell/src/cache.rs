//! Watch caches (kube-runtime reflectors) of everything a pass reads, and snapshot assembly.
//!
//! Memory is kept low by stripping what the core never reads (managedFields, node images,
//! container details of workload pods) before objects enter a store, and by scoping Jobs,
//! executor pods and ConfigMaps to the operator namespace. Nodes, Jobs, pods, ConfigMaps and
//! PodDisruptionBudgets are decoded without those fields in the first place ([`wire`]).

use std::borrow::Cow;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use futures::TryStreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Node, NodeCondition, NodeStatus, NodeSystemInfo, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Lookup, ObjectRef, Store};
use kube::runtime::watcher::watcher;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource};
use nodewright_core::{ClusterInfo, Identity, Interner, SlimJob, SlimPod, Snapshot};
use nodewright_crds::{DeploymentPolicy, NodeWright, keys};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tracing::warn;
use wire::{Slim, Wire};

pub mod decode;
mod filter;
pub mod forget;
mod slim;
pub mod wire;

pub use slim::{strip_executor_pod, strip_job};

pub use decode::{Undecodable, Undecodables};
pub use forget::{Forgotten, PodForgetter};

/// Objects per list page of the initial (and every re-) list.
pub const LIST_PAGE_SIZE: u32 = 100;

/// Wakes the pass loop; bursts coalesce in the loop's debounce.
#[derive(Clone, Default)]
pub struct Trigger(Arc<Notify>);

impl Trigger {
    /// Requests a pass.
    pub fn fire(&self) {
        self.0.notify_one();
    }

    /// Waits for the next request.
    pub async fn wait(&self) {
        self.0.notified().await;
    }
}

/// Reader handles of every cache.
#[derive(Clone)]
pub struct Caches {
    /// NodeWright objects, each held once (see [`CachedNodeWright`]).
    pub nodewrights: Store<CachedNodeWright>,
    /// DeploymentPolicy objects.
    pub policies: Store<DeploymentPolicy>,
    /// Nodes (without images and managedFields).
    pub nodes: Store<Node>,
    /// Jobs in the operator namespace carrying the name label, as compact records.
    pub jobs: Store<CachedJob>,
    /// Scheduled pods cluster-wide: executor pods (operator namespace, both labels) keep their
    /// status, workload pods are slimmed to what drain classification reads.
    pub pods: Store<CachedPod>,
    /// Drops the executor pods a pass reports settled from `pods` (D28).
    pub forget_pods: PodForgetter,
    /// The operator namespace.
    pub namespace: String,
    /// ConfigMaps in the operator namespace.
    pub config_maps: Store<ConfigMap>,
    /// PodDisruptionBudgets cluster-wide.
    pub pdbs: Store<PodDisruptionBudget>,
    /// NodeWrights and DeploymentPolicies the operator cannot decode (skipped, reported).
    pub undecodable: Undecodables,
}

/// Starts one watcher + reflector per cache; each event that matters fires `trigger`.
pub fn start(client: &Client, namespace: &str, trigger: &Trigger) -> (Caches, Vec<JoinHandle<()>>) {
    let mut tasks = Vec::new();
    // Small list pages bound the transient memory of a relist (bodies are buffered whole).
    let all = watcher::Config::default().page_size(LIST_PAGE_SIZE);
    let labelled = all.clone().labels(keys::LABEL_NAME);
    let scheduled = all.clone().fields("spec.nodeName!=");
    let changed = Arc::new(Mutex::new(HashMap::new()));

    let undecodable = Undecodables::default();
    let nodewrights = spawn_decoded(
        &mut tasks,
        client,
        all.clone(),
        trigger,
        &undecodable,
        |nw: NodeWright| CachedNodeWright(Arc::new(nw)),
    );
    let policies = spawn_decoded(
        &mut tasks,
        client,
        all.clone(),
        trigger,
        &undecodable,
        |p: DeploymentPolicy| p,
    );
    let node_filter = move |n: &Node| node_changed(&changed, n);
    let nodes = spawn(
        &mut tasks,
        Api::all(client.clone()),
        all.clone(),
        trigger,
        stripped(strip_node),
        node_filter,
        None,
    );
    let jobs = spawn(
        &mut tasks,
        Api::namespaced(client.clone(), namespace),
        labelled,
        trigger,
        {
            // One interner per cache: the Jobs of a rollout share their label texts.
            let mut interner = Interner::default();
            move |job: Job| CachedJob::interned(job, &mut interner)
        },
        always,
        None,
    );
    let ns = namespace.to_string();
    let (forget_pods, forgotten) = PodForgetter::channel();
    let pods = spawn(
        &mut tasks,
        Api::all(client.clone()),
        scheduled,
        trigger,
        move |p: Pod| CachedPod::new(p, &ns),
        always,
        Some(forgotten),
    );
    let config_maps = spawn(
        &mut tasks,
        Api::namespaced(client.clone(), namespace),
        all.clone(),
        trigger,
        stripped(strip_config_map),
        always,
        None,
    );
    let pdbs = spawn(
        &mut tasks,
        Api::all(client.clone()),
        all,
        trigger,
        stripped(strip_meta),
        always,
        None,
    );
    let caches = Caches {
        nodewrights,
        policies,
        nodes,
        jobs,
        pods,
        forget_pods,
        namespace: namespace.to_string(),
        config_maps,
        pdbs,
        undecodable,
    };
    (caches, tasks)
}

fn always<K>(_: &K) -> bool {
    true
}

/// The conversion of a cache that keeps the typed object, stripped by `strip`.
fn stripped<K>(mut strip: impl FnMut(&mut K)) -> impl FnMut(K) -> K {
    move |mut object| {
        strip(&mut object);
        object
    }
}

/// Watches `api` into a store of `C`, each object converted by `convert` on the way in (which
/// strips it or turns it into a compact record).
fn spawn<K, C, S, F>(
    tasks: &mut Vec<JoinHandle<()>>,
    api: Api<Wire<K>>,
    config: watcher::Config,
    trigger: &Trigger,
    mut convert: S,
    mut relevant: F,
    forgotten: Option<Forgotten>,
) -> Store<C>
where
    K: Resource
        + Slim
        + Default
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default + Eq + Hash + Clone,
    C: Lookup<DynamicType = ()> + Clone + Send + Sync + 'static,
    S: FnMut(K) -> C + Send + 'static,
    F: FnMut(&C) -> bool + Send + 'static,
{
    let (reader, writer) = reflector::store();
    let trigger = trigger.clone();
    let events = watcher(api, config)
        .default_backoff()
        .try_filter_map(|event| std::future::ready(Ok(wire::unwrap(event))))
        .map_ok(move |event| map_event(event, &mut convert));
    tasks.push(tokio::spawn(async move {
        forget::drive_store(events, writer, forgotten, move |event| {
            let fire = match event {
                Event::Apply(obj) => relevant(obj),
                Event::Delete(_) | Event::InitDone => true,
                Event::Init | Event::InitApply(_) => false,
            };
            if fire {
                trigger.fire();
            }
        })
        .await;
    }));
    reader
}

/// A watch event with its object converted by `convert`.
fn map_event<K, C>(event: Event<K>, convert: &mut impl FnMut(K) -> C) -> Event<C> {
    match event {
        Event::Apply(o) => Event::Apply(convert(o)),
        Event::Delete(o) => Event::Delete(convert(o)),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(convert(o)),
        Event::InitDone => Event::InitDone,
    }
}

/// An executor Job as its cache holds it: stripped ([`strip_job`]) and kept as the compact
/// record the core reads ([`SlimJob`]).
#[derive(Clone, Debug)]
pub struct CachedJob(pub Arc<SlimJob>);

impl CachedJob {
    /// Strips `job` and keeps its compact record.
    pub fn new(job: Job) -> Self {
        Self::interned(job, &mut Interner::passthrough())
    }

    /// Strips `job` and keeps its compact record, its label and annotation texts shared with
    /// the other records built through `interner`.
    pub fn interned(mut job: Job, interner: &mut Interner) -> Self {
        slim::strip_job(&mut job);
        CachedJob(Arc::new(SlimJob::new(job, interner)))
    }
}

/// A pod as its cache holds it: an executor pod (D16) as the compact record the core reads
/// ([`SlimPod`]), any other pod typed and stripped to what drain classification reads.
#[derive(Clone, Debug)]
pub enum CachedPod {
    /// An executor pod.
    Executor(Arc<SlimPod>),
    /// A workload pod.
    Workload(Arc<Pod>),
}

impl CachedPod {
    /// Strips `pod` as its cache does ([`strip_any_pod`]) and keeps it in the form the core reads.
    pub fn new(mut pod: Pod, namespace: &str) -> Self {
        if is_executor(&pod, namespace) {
            strip_executor_pod(&mut pod);
            CachedPod::Executor(Arc::new(SlimPod::from(pod)))
        } else {
            strip_pod(&mut pod);
            CachedPod::Workload(Arc::new(pod))
        }
    }

    fn meta(&self) -> &ObjectMeta {
        match self {
            CachedPod::Executor(p) => &p.metadata,
            CachedPod::Workload(p) => &p.metadata,
        }
    }
}

/// The metadata of a cached object, read by `meta`.
fn meta_of<'a, T, M: Identity + 'a>(object: &'a T, meta: fn(&'a T) -> &'a M) -> &'a M {
    meta(object)
}

/// The reflector's view of an object: its kind and identity from `metadata`.
macro_rules! lookup {
    ($type:ty, $group:literal, $version:literal, $kind:literal, $plural:literal, $meta:expr) => {
        impl Lookup for $type {
            type DynamicType = ();

            fn kind(_: &()) -> Cow<'_, str> {
                $kind.into()
            }

            fn group(_: &()) -> Cow<'_, str> {
                $group.into()
            }

            fn version(_: &()) -> Cow<'_, str> {
                $version.into()
            }

            fn plural(_: &()) -> Cow<'_, str> {
                $plural.into()
            }

            fn name(&self) -> Option<Cow<'_, str>> {
                Identity::name(meta_of(self, $meta)).map(Cow::Borrowed)
            }

            fn namespace(&self) -> Option<Cow<'_, str>> {
                Identity::namespace(meta_of(self, $meta)).map(Cow::Borrowed)
            }

            fn resource_version(&self) -> Option<Cow<'_, str>> {
                Identity::resource_version(meta_of(self, $meta)).map(Cow::Borrowed)
            }

            fn uid(&self) -> Option<Cow<'_, str>> {
                Identity::uid(meta_of(self, $meta)).map(Cow::Borrowed)
            }

            /// The store key: name and namespace only. The store compares keys by these alone,
            /// so the key does not keep its own copy of the uid and resourceVersion (the object
            /// has them), and a nameless object is keyed by the empty name instead of panicking.
            fn to_object_ref(&self, dyntype: ()) -> ObjectRef<Self> {
                let meta = meta_of(self, $meta);
                let key = ObjectRef::new_with(Identity::name(meta).unwrap_or_default(), dyntype);
                match Identity::namespace(meta) {
                    Some(namespace) => key.within(namespace),
                    None => key,
                }
            }
        }
    };
}

lookup!(CachedJob, "batch", "v1", "Job", "jobs", |j| &j.0.metadata);
lookup!(CachedPod, "", "v1", "Pod", "pods", CachedPod::meta);

/// A NodeWright as its cache holds it: shared with the watch event it arrived in, so the store
/// keeps that object instead of a copy (the reflector clones what it stores; a NodeWright's
/// `status.nodeState` mirror of a large fleet is megabytes).
#[derive(Clone, Debug)]
pub struct CachedNodeWright(pub Arc<NodeWright>);

lookup!(
    CachedNodeWright,
    "nodewright.nvidia.com",
    "v1alpha1",
    "NodeWright",
    "nodewrights",
    |n| &n.0.metadata
);

/// Like [`spawn`] for a custom resource whose undecodable objects are reported ([`decode`]): each
/// object is decoded from its own text, so one that does not decode is left out of the store
/// instead of failing the list page. `convert` turns each into what the store holds.
fn spawn_decoded<K, C>(
    tasks: &mut Vec<JoinHandle<()>>,
    client: &Client,
    config: watcher::Config,
    trigger: &Trigger,
    undecodable: &Undecodables,
    mut convert: impl FnMut(K) -> C + Send + 'static,
) -> Store<C>
where
    K: Resource<DynamicType = ()> + Slim + Default + Clone + DeserializeOwned + std::fmt::Debug,
    K: Send + Sync + 'static,
    C: Lookup<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let api: Api<Wire<K>> = Api::all(client.clone());
    let (reader, writer) = reflector::store();
    let trigger = trigger.clone();
    let raw = watcher(api, config).default_backoff();
    let stream = decode::typed::<K, _>(K::kind(&()).to_string(), raw, undecodable.clone())
        .map_ok(move |event| map_event(event, &mut convert));
    tasks.push(tokio::spawn(async move {
        forget::drive_store(stream, writer, None, move |event| {
            if !matches!(event, Event::Init | Event::InitApply(_)) {
                trigger.fire();
            }
        })
        .await;
    }));
    reader
}

/// Drops managedFields, which the operator never reads.
pub fn strip_meta<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// Drops managedFields and keeps a node-metadata ConfigMap's data as digests (D29,
/// [`nodewright_core::jobs::configmap::digest_node_metadata`]).
pub fn strip_config_map(cm: &mut ConfigMap) {
    strip_meta(cm);
    nodewright_core::jobs::configmap::digest_node_metadata(cm);
}

/// Drops managedFields and all of a node's status but the boot id (read by reboot detection)
/// and the conditions without their timestamps (the core compares its own conditions' status,
/// reason and message; readiness changes start a pass): it reads nothing else of the status, and
/// a GPU node's status (images, capacity, addresses, volumes) is most of its size.
pub fn strip_node(node: &mut Node) {
    strip_meta(node);
    if let Some(status) = node.status.take() {
        node.status = Some(NodeStatus {
            node_info: status.node_info.map(|info| NodeSystemInfo {
                boot_id: info.boot_id,
                ..NodeSystemInfo::default()
            }),
            conditions: status.conditions.map(|conditions| {
                conditions
                    .into_iter()
                    .map(|c| NodeCondition {
                        type_: c.type_,
                        status: c.status,
                        reason: c.reason,
                        message: c.message,
                        ..NodeCondition::default()
                    })
                    .collect()
            }),
            ..NodeStatus::default()
        });
    }
}

/// Executor evidence (D16): a pod in the operator namespace with both the name and package labels.
pub fn is_executor(pod: &Pod, namespace: &str) -> bool {
    let labels = pod.metadata.labels.as_ref();
    pod.metadata.namespace.as_deref() == Some(namespace)
        && labels.is_some_and(|l| l.contains_key(keys::LABEL_NAME) && l.contains_key(keys::PACKAGE))
}

/// Strips a pod as its cache does: executor pods keep what the executor rules read
/// ([`strip_executor_pod`]), workload pods what drain classification reads.
pub fn strip_any_pod(pod: &mut Pod, namespace: &str) {
    if is_executor(pod, namespace) {
        strip_executor_pod(pod)
    } else {
        strip_pod(pod)
    }
}

/// Keeps only what drain classification and interrupt gating read from a workload pod.
fn strip_pod(pod: &mut Pod) {
    strip_meta(pod);
    if let Some(spec) = pod.spec.as_mut() {
        for c in spec.containers.iter_mut() {
            *c = k8s_openapi::api::core::v1::Container {
                name: std::mem::take(&mut c.name),
                ..Default::default()
            };
        }
        spec.init_containers = None;
        spec.ephemeral_containers = None;
        spec.affinity = None;
        if let Some(volumes) = spec.volumes.as_mut() {
            volumes.retain(|v| v.empty_dir.is_some());
        }
    }
    if let Some(status) = pod.status.as_mut() {
        status.container_statuses = None;
        status.init_container_statuses = None;
        status.ephemeral_container_statuses = None;
    }
}

/// True when a node changed in a way a pass may care about: metadata, spec, boot id or readiness
/// (kubelet heartbeats alone do not trigger passes). `seen` keeps each node's last fingerprint.
pub fn node_changed(seen: &Mutex<HashMap<String, u64>>, node: &Node) -> bool {
    let mut h = DefaultHasher::new();
    node.metadata.labels.hash(&mut h);
    node.metadata.annotations.hash(&mut h);
    node.metadata
        .deletion_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .hash(&mut h);
    serde_json::to_string(&node.spec)
        .unwrap_or_default()
        .hash(&mut h);
    if let Some(status) = &node.status {
        status
            .node_info
            .as_ref()
            .map(|i| i.boot_id.clone())
            .hash(&mut h);
        for c in status.conditions.iter().flatten() {
            (c.type_.as_str(), c.status.as_str()).hash(&mut h);
        }
    }
    let fingerprint = h.finish();
    let name = node.metadata.name.clone().unwrap_or_default();
    // A poisoned lock only means another watcher callback panicked; the map is still valid.
    let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
    seen.insert(name, fingerprint) != Some(fingerprint)
}

impl Caches {
    /// Waits until every store has completed its initial list. PodDisruptionBudgets are
    /// best-effort: without RBAC for them the operator runs with an empty list after 10 s.
    pub async fn wait_ready(&self) {
        let _ = tokio::join!(
            self.nodewrights.wait_until_ready(),
            self.policies.wait_until_ready(),
            self.nodes.wait_until_ready(),
            self.jobs.wait_until_ready(),
            self.pods.wait_until_ready(),
            self.config_maps.wait_until_ready(),
        );
        let pdbs = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            self.pdbs.wait_until_ready(),
        );
        if pdbs.await.is_err() {
            warn!("PodDisruptionBudgets not listable (RBAC?): drain runs without PDB awareness");
        }
    }

    /// Takes a [`Snapshot`] for one pass: the stores' objects are shared (`Arc`), not copied.
    pub fn snapshot(&self, cluster: &ClusterInfo) -> Snapshot {
        let base = Snapshot {
            nodewrights: self
                .nodewrights
                .state()
                .iter()
                .map(|n| n.0.clone())
                .collect(),
            policies: self.policies.state(),
            nodes: self.nodes.state(),
            jobs: self.jobs.state().iter().map(|j| j.0.clone()).collect(),
            pod_disruption_budgets: self.pdbs.state(),
            cluster: cluster.clone(),
            ..Snapshot::default()
        };
        assemble(
            base,
            self.pods.state().iter().map(|p| (**p).clone()),
            self.config_maps.state(),
        )
    }

    /// Object counts per cache, for the `cache_objects` metric.
    pub fn sizes(&self) -> Vec<(&'static str, usize)> {
        vec![
            ("nodewright", self.nodewrights.len()),
            ("deploymentpolicy", self.policies.len()),
            ("node", self.nodes.len()),
            ("job", self.jobs.len()),
            ("pod", self.pods.len()),
            ("configmap", self.config_maps.len()),
            ("pdb", self.pdbs.len()),
        ]
    }
}

/// Completes `base` (every other list already filled from the caches) with the pods and
/// ConfigMaps a pass reads: executor pods (D16) whole, workload pods only on touched nodes,
/// ConfigMaps only with the operator's labels. The simulator assembles its snapshots with it too.
pub fn assemble(
    mut base: Snapshot,
    pods: impl IntoIterator<Item = CachedPod>,
    config_maps: impl IntoIterator<Item = Arc<ConfigMap>>,
) -> Snapshot {
    let touched: BTreeSet<&str> = base
        .nodes
        .iter()
        .filter(|n| node_is_touched(n))
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    let mut executor_pods = Vec::new();
    let mut workload_pods = Vec::new();
    for p in pods {
        let p = match p {
            CachedPod::Executor(p) => {
                executor_pods.push(p);
                continue;
            }
            CachedPod::Workload(p) => p,
        };
        if p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| touched.contains(n))
        {
            workload_pods.push(p);
        }
    }
    base.config_maps = config_maps
        .into_iter()
        .filter(|cm| {
            cm.metadata.labels.as_ref().is_some_and(|l| {
                l.contains_key(keys::LABEL_NAME) || l.contains_key(keys::NODE_META)
            })
        })
        .collect();
    base.executor_pods = executor_pods;
    base.workload_pods = workload_pods;
    base
}

/// Nodes whose workload pods a pass may need: cordoned ones and those carrying operator metadata.
pub fn node_is_touched(node: &Node) -> bool {
    let unschedulable = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    let prefix = format!("{}/", keys::PREFIX);
    unschedulable
        || node
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.keys().any(|k| k.starts_with(&prefix)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn node_heartbeat_does_not_trigger_but_metadata_does() {
        let seen = Mutex::new(HashMap::new());
        let mut node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {"a": "1"}},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                        "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]}}))
        .unwrap_or_default();
        assert!(node_changed(&seen, &node), "first sight triggers");
        if let Some(c) = node.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            c[0].last_heartbeat_time = None;
        }
        assert!(!node_changed(&seen, &node), "heartbeat alone does not");
        node.metadata.labels = Some([("a".to_string(), "2".to_string())].into());
        assert!(node_changed(&seen, &node));
    }

    #[test]
    fn strip_pod_keeps_drain_inputs() {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "w", "managedFields": [{"manager": "x"}],
                         "labels": {"l": "1"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i", "env": [{"name": "E"}]}],
                     "tolerations": [{"operator": "Exists"}],
                     "volumes": [{"name": "e", "emptyDir": {}}, {"name": "s", "secret": {"secretName": "x"}}]},
            "status": {"phase": "Running"}})).unwrap_or_default();
        strip_pod(&mut pod);
        let v = serde_json::to_value(&pod).unwrap_or_default();
        assert_eq!(v["metadata"].get("managedFields"), None);
        assert_eq!(v["spec"]["containers"], json!([{"name": "c"}]));
        assert_eq!(v["spec"]["volumes"], json!([{"name": "e", "emptyDir": {}}]));
        assert_eq!(v["spec"]["tolerations"], json!([{"operator": "Exists"}]));
        assert_eq!(v["status"]["phase"], "Running");
    }
}

#[cfg(test)]
mod snapshot_tests {
    use super::*;
    use kube::runtime::reflector::store::Writer;
    use serde_json::json;

    fn filled<K>(objects: Vec<serde_json::Value>) -> (Store<K>, Writer<K>)
    where
        K: Resource + Clone + DeserializeOwned,
        K::DynamicType: Default + Eq + Hash + Clone,
    {
        let (reader, mut writer) = reflector::store();
        for o in objects {
            if let Ok(obj) = serde_json::from_value::<K>(o) {
                writer.apply_watcher_event(&Event::Apply(obj));
            }
        }
        (reader, writer)
    }

    fn pod(
        ns: &str,
        name: &str,
        uid: &str,
        node: &str,
        labels: serde_json::Value,
    ) -> serde_json::Value {
        json!({"metadata": {"namespace": ns, "name": name, "uid": uid, "labels": labels}, "spec": {"nodeName": node, "containers": []}})
    }

    #[test]
    fn snapshot_keeps_workload_pods_of_touched_nodes_only() {
        let touched = json!({"metadata": {"name": "a", "annotations": {"nodewright.nvidia.com/nodeState_nw": "{}"}}});
        let cordoned = json!({"metadata": {"name": "b"}, "spec": {"unschedulable": true}});
        let idle = json!({"metadata": {"name": "c"}});
        let exec_labels = json!({keys::LABEL_NAME: "nw", keys::PACKAGE: "p-1"});
        let (nodes, _w1) = filled::<Node>(vec![touched, cordoned, idle]);
        let (pods, mut w2) = reflector::store::<CachedPod>();
        for p in [
            pod("w", "on-a", "1", "a", json!({})),
            pod("w", "on-b", "2", "b", json!({})),
            pod("w", "on-c", "3", "c", json!({})),
            pod("nodewright", "exec", "4", "a", exec_labels.clone()),
        ] {
            let p: Pod = serde_json::from_value(p).unwrap_or_default();
            w2.apply_watcher_event(&Event::Apply(CachedPod::new(p, "nodewright")));
        }
        let (config_maps, _w4) = filled::<ConfigMap>(vec![
            json!({"metadata": {"namespace": "nodewright", "name": "x", "labels": {keys::LABEL_NAME: "nw"}}}),
            json!({"metadata": {"namespace": "nodewright", "name": "m", "labels": {keys::NODE_META: "nw"}}}),
            json!({"metadata": {"namespace": "nodewright", "name": "kube-root-ca.crt"}}),
        ]);
        let caches = Caches {
            nodewrights: reflector::store().0,
            policies: reflector::store().0,
            nodes,
            jobs: reflector::store().0,
            pods,
            forget_pods: PodForgetter::default(),
            namespace: "nodewright".into(),
            config_maps,
            pdbs: reflector::store().0,
            undecodable: Undecodables::default(),
        };
        let s = caches.snapshot(&ClusterInfo {
            server_version: Some((1, 35)),
        });
        let mut workload: Vec<_> = s
            .workload_pods
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        workload.sort();
        assert_eq!(
            workload,
            ["on-a", "on-b"],
            "idle node's pods and executor pods are left out"
        );
        assert_eq!(s.executor_pods.len(), 1);
        assert_eq!(s.config_maps.len(), 2, "only labelled ConfigMaps");
        assert_eq!(s.nodes.len(), 3);
        assert_eq!(s.cluster.server_version, Some((1, 35)));
    }
}

#[cfg(test)]
mod scale {
    use super::*;
    use serde_json::json;

    /// Prints the cost of one snapshot copy of 10,000 nodes (run with `--ignored --nocapture`).
    #[test]
    #[ignore]
    fn scale_snapshot_of_10k_nodes() {
        let (nodes, mut writer) = reflector::store::<Node>();
        for i in 0..10_000 {
            let labels: serde_json::Map<String, serde_json::Value> = (0..15)
                .map(|l| {
                    (
                        format!("label-{l}.example.com/key"),
                        json!(format!("value-{i}-{l}")),
                    )
                })
                .collect();
            let node: Node = serde_json::from_value(json!({
                "metadata": {"name": format!("node-{i}"), "labels": labels, "annotations": {
                    "nodewright.nvidia.com/nodeState_nw": r#"{"a|1":{"name":"a","version":"1","image":"r/a","stage":"config","state":"complete"}}"#}},
                "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
                "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}],
                           "nodeInfo": {"bootID": "b", "machineID": "m", "systemUUID": "s", "kernelVersion": "k",
                                        "osImage": "o", "containerRuntimeVersion": "c", "kubeletVersion": "v",
                                        "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}}
            }))
            .unwrap_or_default();
            writer.apply_watcher_event(&Event::Apply(node));
        }
        let caches = Caches {
            nodewrights: reflector::store().0,
            policies: reflector::store().0,
            nodes,
            jobs: reflector::store().0,
            pods: reflector::store().0,
            forget_pods: PodForgetter::default(),
            namespace: "nodewright".into(),
            config_maps: reflector::store().0,
            pdbs: reflector::store().0,
            undecodable: Undecodables::default(),
        };
        let started = std::time::Instant::now();
        let s = caches.snapshot(&ClusterInfo::default());
        println!(
            "snapshot of {} nodes: {:?}",
            s.nodes.len(),
            started.elapsed()
        );
    }
}

#[cfg(test)]
mod key_tests {
    use super::*;
    use serde_json::json;

    fn job(metadata: serde_json::Value) -> CachedJob {
        CachedJob::new(serde_json::from_value(json!({ "metadata": metadata })).unwrap_or_default())
    }

    #[test]
    fn store_keys_hold_name_and_namespace_only() {
        let j = job(
            json!({"namespace": "nodewright", "name": "a", "uid": "u1", "resourceVersion": "7"}),
        );
        let key = j.to_object_ref(());
        assert_eq!(
            (key.name.as_str(), key.namespace.as_deref()),
            ("a", Some("nodewright"))
        );
        assert_eq!((key.extra.uid, key.extra.resource_version), (None, None));
        // The object keeps its identity for the readers that check it (D28 forgetting).
        assert_eq!(
            (j.uid().as_deref(), j.resource_version().as_deref()),
            (Some("u1"), Some("7"))
        );
        let (reader, mut writer) = reflector::store::<CachedJob>();
        writer.apply_watcher_event(&Event::Apply(j));
        let newer = job(
            json!({"namespace": "nodewright", "name": "a", "uid": "u1", "resourceVersion": "8"}),
        );
        writer.apply_watcher_event(&Event::Apply(newer));
        assert_eq!(
            reader.state().len(),
            1,
            "a newer version replaces the held one"
        );
        let held = reader.get(&ObjectRef::new("a").within("nodewright"));
        assert_eq!(
            held.and_then(|h| h.resource_version().map(|v| v.to_string()))
                .as_deref(),
            Some("8")
        );
    }

    #[test]
    fn a_stored_nodewright_is_the_event_object_not_a_copy() {
        assert_eq!(
            (
                CachedNodeWright::kind(&()),
                CachedNodeWright::group(&()),
                CachedNodeWright::version(&()),
                CachedNodeWright::plural(&())
            ),
            (
                <NodeWright as Resource>::kind(&()),
                <NodeWright as Resource>::group(&()),
                <NodeWright as Resource>::version(&()),
                <NodeWright as Resource>::plural(&())
            )
        );
        let mut nw = NodeWright::default();
        nw.metadata.name = Some("gpu".into());
        let event = CachedNodeWright(Arc::new(nw));
        let (reader, mut writer) = reflector::store::<CachedNodeWright>();
        writer.apply_watcher_event(&Event::Apply(event.clone()));
        let held = reader.get(&ObjectRef::new("gpu")).expect("stored");
        assert!(Arc::ptr_eq(&held.0, &event.0));
    }

    #[test]
    fn a_nameless_object_is_keyed_without_panicking() {
        let key = job(json!({"namespace": "nodewright"})).to_object_ref(());
        assert_eq!(key.name, "");
    }
}
