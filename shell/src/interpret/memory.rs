//! An in-memory apiserver for the interpreter: [`MemoryPort`] applies the interpreter's requests
//! to a [`Snapshot`] the way the apiserver applies them (merge patches with their `metadata.uid`
//! and `metadata.resourceVersion` preconditions, status-only patches, strategic merge of node
//! conditions, guarded creates, replaces and deletes). `kubectl nodewright plan` follows
//! record-only passes through with it; the simulator's port applies patches with [`merged`] and
//! [`merge_conditions`] to its own store.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Node, NodeCondition, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::Resource;
use nodewright_core::Snapshot;
use nodewright_crds::NodeWright;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::port::{ApiError, ApiResult, ClusterPort, Eviction};
use crate::merge;

/// `current` with the merge patch `body` applied (only its `status` when `status_only`), after
/// checking the `metadata.uid` and non-empty `metadata.resourceVersion` preconditions it carries.
/// Returns `current` unchanged when the patch changes nothing.
pub fn merged<T>(current: &T, body: &Value, status_only: bool, what: &str) -> ApiResult<T>
where
    T: Resource + Serialize + DeserializeOwned + Clone,
{
    let meta = &body["metadata"];
    if let Some(uid) = meta["uid"].as_str()
        && current.meta().uid.as_deref() != Some(uid)
    {
        return Err(ApiError::Conflict(format!(
            "{what}: uid precondition failed"
        )));
    }
    if let Some(rv) = meta["resourceVersion"].as_str().filter(|rv| !rv.is_empty())
        && current.meta().resource_version.as_deref() != Some(rv)
    {
        return Err(ApiError::Conflict(format!(
            "{what}: resourceVersion {rv} is stale"
        )));
    }
    let mut patch = body.clone();
    if status_only {
        patch = json!({"status": body["status"].clone()});
    } else if let Some(m) = patch["metadata"].as_object_mut() {
        m.remove("uid");
        m.remove("resourceVersion");
    }
    let mut value = serde_json::to_value(current).map_err(|e| ApiError::Other(e.to_string()))?;
    merge::apply(&mut value, &patch);
    serde_json::from_value(value).map_err(|e| ApiError::Other(e.to_string()))
}

/// Strategic merge of `status.conditions` keyed by type (`$patch: delete` removes).
pub fn merge_conditions(node: &mut Node, body: &Value) {
    let status = node.status.get_or_insert_with(Default::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    for item in body["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(type_) = item["type"].as_str() else {
            continue;
        };
        conditions.retain(|c| c.type_ != type_);
        if item.get("$patch").is_none()
            && let Ok(c) = serde_json::from_value::<NodeCondition>(item.clone())
        {
            conditions.push(c);
        }
    }
}

/// True when `labels` carry every `k=v` pair of the equality selector `selector`.
pub fn selects(labels: Option<&BTreeMap<String, String>>, selector: &str) -> bool {
    selector
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .all(|(k, v)| labels.and_then(|l| l.get(k.trim())).map(String::as_str) == Some(v.trim()))
}

/// The interpreter's port over a snapshot held in memory: reads answer from it, writes change it
/// (each accepted write gives the object a new resourceVersion). Events are kept, not stored.
#[derive(Debug)]
pub struct MemoryPort {
    state: RefCell<State>,
}

#[derive(Debug)]
struct State {
    /// The snapshot; its Jobs and executor pods are held typed in `jobs` and `executor_pods`.
    snapshot: Snapshot,
    jobs: Vec<Arc<Job>>,
    executor_pods: Vec<Arc<Pod>>,
    next_rv: u64,
    events: Vec<Event>,
    now: jiff::Timestamp,
}

impl MemoryPort {
    /// A port over `snapshot` whose clock stands at `now`; new resourceVersions count up from
    /// above every version in it.
    pub fn new(mut snapshot: Snapshot, now: jiff::Timestamp) -> Self {
        let jobs: Vec<Arc<Job>> = std::mem::take(&mut snapshot.jobs)
            .iter()
            .map(|j| Arc::new(Job::from(&**j)))
            .collect();
        let executor_pods: Vec<Arc<Pod>> = std::mem::take(&mut snapshot.executor_pods)
            .iter()
            .map(|p| Arc::new(Pod::from(&**p)))
            .collect();
        let next_rv = highest_version(&snapshot, &jobs, &executor_pods) + 1;
        MemoryPort {
            state: RefCell::new(State {
                snapshot,
                jobs,
                executor_pods,
                next_rv,
                events: Vec::new(),
                now,
            }),
        }
    }

    /// The snapshot with every accepted write applied.
    pub fn into_snapshot(self) -> Snapshot {
        let state = self.state.into_inner();
        let mut snapshot = state.snapshot;
        snapshot.jobs = nodewright_core::shared(state.jobs.iter().map(|j| (**j).clone()));
        snapshot.executor_pods =
            nodewright_core::shared(state.executor_pods.iter().map(|p| (**p).clone()));
        snapshot
    }

    /// The Events created so far.
    pub fn events(&self) -> Vec<Event> {
        self.state.borrow().events.clone()
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.borrow_mut())
    }
}

fn highest_version(s: &Snapshot, jobs: &[Arc<Job>], executor_pods: &[Arc<Pod>]) -> u64 {
    fn rvs<T: Resource>(items: &[Arc<T>]) -> impl Iterator<Item = u64> + '_ {
        items
            .iter()
            .filter_map(|o| o.meta().resource_version.as_deref()?.parse().ok())
    }
    rvs(&s.nodes)
        .chain(rvs(&s.nodewrights))
        .chain(rvs(jobs))
        .chain(rvs(executor_pods))
        .chain(rvs(&s.config_maps))
        .max()
        .unwrap_or(0)
}

impl State {
    fn bump<T: Resource>(&mut self, object: &mut T) {
        object.meta_mut().resource_version = Some(self.next_rv.to_string());
        self.next_rv += 1;
    }

    /// Applies `body` to the object `find` selects in `list`; returns it as stored.
    fn patch<T>(
        &mut self,
        list: fn(&mut State) -> &mut Vec<Arc<T>>,
        name: &str,
        body: &Value,
        status_only: bool,
    ) -> ApiResult<T>
    where
        T: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + PartialEq,
    {
        let what = format!("{} {name}", T::kind(&()));
        let index = position(list(self), name).ok_or_else(|| ApiError::NotFound(what.clone()))?;
        let current = list(self)[index].clone();
        let mut next = merged(current.as_ref(), body, status_only, &what)?;
        if next != *current {
            self.bump(&mut next);
            list(self)[index] = Arc::new(next.clone());
        }
        Ok(next)
    }
}

fn position<T: Resource>(list: &[Arc<T>], name: &str) -> Option<usize> {
    list.iter()
        .position(|o| o.meta().name.as_deref() == Some(name))
}

fn find<T: Resource + Clone>(list: &[Arc<T>], name: &str) -> Option<T> {
    position(list, name).map(|i| list[i].as_ref().clone())
}

fn nodes(s: &mut State) -> &mut Vec<Arc<Node>> {
    &mut s.snapshot.nodes
}

fn nodewrights(s: &mut State) -> &mut Vec<Arc<NodeWright>> {
    &mut s.snapshot.nodewrights
}

fn jobs(s: &mut State) -> &mut Vec<Arc<Job>> {
    &mut s.jobs
}

/// Removes the object named `name` whose uid is `uid` from `list`.
fn remove<T: Resource>(list: &mut Vec<Arc<T>>, name: &str, uid: &str) -> ApiResult<()> {
    let i = position(list, name).ok_or_else(|| ApiError::NotFound(name.into()))?;
    if list[i].meta().uid.as_deref() != Some(uid) {
        return Err(ApiError::Conflict(format!(
            "{name}: uid precondition failed"
        )));
    }
    list.remove(i);
    Ok(())
}

impl ClusterPort for MemoryPort {
    async fn get_node(&self, name: &str, _cached: bool) -> ApiResult<Option<Node>> {
        Ok(self.with(|s| find(&s.snapshot.nodes, name)))
    }

    async fn patch_node(&self, name: &str, body: &Value) -> ApiResult<()> {
        self.with(|s| s.patch(nodes, name, body, false).map(drop))
    }

    async fn patch_node_status(&self, name: &str, body: &Value) -> ApiResult<()> {
        self.with(|s| {
            let i = position(&s.snapshot.nodes, name)
                .ok_or_else(|| ApiError::NotFound(format!("Node {name}")))?;
            let mut node = s.snapshot.nodes[i].as_ref().clone();
            merge_conditions(&mut node, body);
            if node != *s.snapshot.nodes[i] {
                s.bump(&mut node);
                s.snapshot.nodes[i] = Arc::new(node);
            }
            Ok(())
        })
    }

    async fn get_job(&self, name: &str) -> ApiResult<Option<Job>> {
        Ok(self.with(|s| find(&s.jobs, name)))
    }

    async fn list_jobs(&self, selector: &str) -> ApiResult<Vec<Job>> {
        Ok(self.with(|s| {
            let hit = |j: &&Arc<Job>| selects(j.metadata.labels.as_ref(), selector);
            s.jobs
                .iter()
                .filter(hit)
                .map(|j| j.as_ref().clone())
                .collect()
        }))
    }

    async fn create_job(&self, job: &Job) -> ApiResult<Job> {
        self.with(|s| {
            let name = job.metadata.name.clone().unwrap_or_default();
            if position(&s.jobs, &name).is_some() {
                return Err(ApiError::AlreadyExists(format!("Job {name}")));
            }
            let mut job = job.clone();
            job.metadata.uid = Some(format!("memory-{}", s.next_rv));
            s.bump(&mut job);
            s.jobs.push(Arc::new(job.clone()));
            Ok(job)
        })
    }

    async fn patch_job(&self, name: &str, body: &Value) -> ApiResult<()> {
        self.with(|s| s.patch(jobs, name, body, false).map(drop))
    }

    async fn delete_job(&self, name: &str, uid: &str) -> ApiResult<()> {
        self.with(|s| remove(&mut s.jobs, name, uid))
    }

    async fn list_pods(&self, namespace: &str, selector: &str) -> ApiResult<Vec<Pod>> {
        Ok(self.with(|s| {
            let snap = &s.snapshot;
            s.executor_pods
                .iter()
                .chain(&snap.workload_pods)
                .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
                .filter(|p| selects(p.metadata.labels.as_ref(), selector))
                .map(|p| p.as_ref().clone())
                .collect()
        }))
    }

    async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> ApiResult<()> {
        let e = Eviction {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
            delete_instead: true,
            grace: None,
        };
        self.evict_pod(&e).await
    }

    async fn evict_pod(&self, e: &Eviction) -> ApiResult<()> {
        self.with(|s| {
            let in_ns = |p: &Pod| p.metadata.namespace.as_deref() == Some(e.namespace.as_str());
            for list in [&mut s.executor_pods, &mut s.snapshot.workload_pods] {
                if let Some(i) = position(list, &e.name).filter(|i| in_ns(&list[*i])) {
                    if list[i].metadata.uid.as_deref() != Some(e.uid.as_str()) {
                        return Err(ApiError::Conflict(format!("pod {}: uid", e.name)));
                    }
                    list.remove(i);
                    return Ok(());
                }
            }
            Err(ApiError::NotFound(format!(
                "pod {}/{}",
                e.namespace, e.name
            )))
        })
    }

    async fn get_nodewright(&self, name: &str) -> ApiResult<Option<NodeWright>> {
        Ok(self.with(|s| find(&s.snapshot.nodewrights, name)))
    }

    async fn patch_nodewright(&self, name: &str, body: &Value) -> ApiResult<NodeWright> {
        self.with(|s| s.patch(nodewrights, name, body, false))
    }

    async fn patch_nodewright_status(&self, name: &str, body: &Value) -> ApiResult<Option<String>> {
        self.with(|s| {
            s.patch(nodewrights, name, body, true)
                .map(|nw| nw.metadata.resource_version)
        })
    }

    async fn create_config_map(&self, config_map: &ConfigMap) -> ApiResult<()> {
        self.with(|s| {
            let name = config_map.metadata.name.clone().unwrap_or_default();
            if position(&s.snapshot.config_maps, &name).is_some() {
                return Err(ApiError::AlreadyExists(format!("ConfigMap {name}")));
            }
            let mut cm = config_map.clone();
            cm.metadata.uid = Some(format!("memory-{}", s.next_rv));
            s.bump(&mut cm);
            s.snapshot.config_maps.push(Arc::new(cm));
            Ok(())
        })
    }

    async fn replace_config_map(&self, config_map: &ConfigMap) -> ApiResult<()> {
        self.with(|s| {
            let name = config_map.metadata.name.clone().unwrap_or_default();
            let i = position(&s.snapshot.config_maps, &name)
                .ok_or_else(|| ApiError::NotFound(format!("ConfigMap {name}")))?;
            let stored = &s.snapshot.config_maps[i].metadata;
            let rv = config_map.metadata.resource_version.as_deref();
            if rv.is_some_and(|rv| stored.resource_version.as_deref() != Some(rv)) {
                return Err(ApiError::Conflict(format!("ConfigMap {name}: stale")));
            }
            let mut cm = config_map.clone();
            cm.metadata.uid = stored.uid.clone();
            s.bump(&mut cm);
            s.snapshot.config_maps[i] = Arc::new(cm);
            Ok(())
        })
    }

    async fn delete_config_map(&self, name: &str, uid: &str) -> ApiResult<()> {
        self.with(|s| remove(&mut s.snapshot.config_maps, name, uid))
    }

    async fn create_event(&self, _namespace: &str, event: &Event) -> ApiResult<()> {
        self.with(|s| s.events.push(event.clone()));
        Ok(())
    }

    async fn pause(&self, _delay: Duration) {}

    fn now(&self) -> jiff::Timestamp {
        self.state.borrow().now
    }

    fn elapsed(&self) -> Duration {
        Duration::ZERO
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, rv: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                resource_version: Some(rv.into()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    #[test]
    fn merged_enforces_uid_and_resource_version_preconditions() {
        let n = node("a", "7");
        let stale = json!({"metadata": {"resourceVersion": "6", "labels": {"x": "1"}}});
        assert!(merged(&n, &stale, false, "a").unwrap_err().is_conflict());
        let other = json!({"metadata": {"uid": "uid-b", "labels": {"x": "1"}}});
        assert!(
            merged(&n, &other, false, "a")
                .unwrap_err()
                .is_uid_mismatch()
        );
        let ok =
            json!({"metadata": {"uid": "uid-a", "resourceVersion": "7", "labels": {"x": "1"}}});
        let out = merged(&n, &ok, false, "a").unwrap();
        assert_eq!(out.metadata.labels.unwrap()["x"], "1");
        assert_eq!(
            out.metadata.uid.as_deref(),
            Some("uid-a"),
            "preconditions are not written"
        );
    }

    #[test]
    fn the_memory_port_stores_accepted_writes_with_a_new_resource_version() {
        let snapshot = Snapshot {
            nodes: vec![Arc::new(node("a", "7"))],
            ..Snapshot::default()
        };
        let port = MemoryPort::new(snapshot, jiff::Timestamp::UNIX_EPOCH);
        let body = json!({"metadata": {"resourceVersion": "7", "annotations": {"k": "v"}}});
        futures::executor::block_on(port.patch_node("a", &body)).unwrap();
        let again = futures::executor::block_on(port.patch_node("a", &body));
        assert!(again.unwrap_err().is_conflict(), "the version moved");
        let stored = port.into_snapshot().nodes.remove(0).as_ref().clone();
        assert_eq!(stored.metadata.resource_version.as_deref(), Some("8"));
        assert_eq!(stored.metadata.annotations.unwrap()["k"], "v");
        assert!(selects(Some(&[("a".into(), "1".into())].into()), "a=1"));
        assert!(!selects(None, "a=1"));
    }
}
