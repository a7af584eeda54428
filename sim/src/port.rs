//! The shell's cluster port over the simulated apiserver: the operator's real interpreter
//! (`nodewright_shell::interpret`) sends its requests here. Every call answers at once, so the
//! interpreter's futures are driven with `futures::executor::block_on`.
//!
//! Patches are applied the way the apiserver applies them: a JSON merge patch whose
//! `metadata.uid` or non-empty `metadata.resourceVersion` differs from the stored object is
//! refused with a conflict, so a precondition the interpreter forgets to send is a precondition
//! the simulation does not enforce.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use nodewright_core::effect::EntryTransition;
use nodewright_core::{EventSpec, ObjectRef};
use nodewright_crds::{NodeState, NodeWright, keys};
use nodewright_shell::interpret::memory;
use nodewright_shell::interpret::{ApiError, ApiResult, ClusterPort, Eviction};
use serde_json::Value;

use crate::objects::{Object, Objects};
use crate::rng::Rng;
use crate::store::{self, Propagation, Store};
use crate::time::{SimTime, timestamp};
use crate::world::{EvictOutcome, World};

/// A write worth checking against the invariants.
#[derive(Clone, Debug)]
pub enum Written {
    /// A node changed.
    Node {
        /// Before the write.
        before: Box<Node>,
        /// After the write.
        after: Box<Node>,
        /// Node-state entries that differ between the two.
        entries: Vec<EntryTransition>,
    },
    /// A Job was created.
    JobCreated(Box<Job>),
}

/// Faults and settings of the port.
#[derive(Clone, Debug)]
pub struct PortConfig {
    /// Operator namespace.
    pub namespace: String,
    /// Probability that a foreign writer touches the node right before a node write.
    pub conflict_probability: f64,
    /// Refuse Job deletions (a denying admission webhook).
    pub deny_job_deletes: bool,
    /// The replica's write fence is closed: every write is refused before it is sent, as the
    /// operator's client does (`leader::Fence`).
    pub fenced: bool,
}

/// Annotation a simulated foreign writer bumps to provoke write conflicts.
pub const FOREIGN: &str = "sim.example.com/foreign-writes";

/// The port over one world for one stretch of effects.
pub struct SimPort<'a> {
    inner: RefCell<Inner<'a>>,
}

struct Inner<'a> {
    world: &'a mut World,
    cache: &'a Objects,
    config: &'a PortConfig,
    rng: &'a mut Rng,
    written: Vec<Written>,
    events: Vec<EventSpec>,
}

impl<'a> SimPort<'a> {
    /// A port writing to `world`; cached node reads come from `cache` (the operator's).
    pub fn new(
        world: &'a mut World,
        cache: &'a Objects,
        config: &'a PortConfig,
        rng: &'a mut Rng,
    ) -> Self {
        SimPort {
            inner: RefCell::new(Inner {
                world,
                cache,
                config,
                rng,
                written: Vec::new(),
                events: Vec::new(),
            }),
        }
    }

    /// The writes made so far (taken).
    pub fn take_written(&self) -> Vec<Written> {
        std::mem::take(&mut self.inner.borrow_mut().written)
    }

    /// The Events created so far (taken).
    pub fn take_events(&self) -> Vec<EventSpec> {
        std::mem::take(&mut self.inner.borrow_mut().events)
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner<'a>) -> T) -> T {
        f(&mut self.inner.borrow_mut())
    }
}

impl Inner<'_> {
    fn store(&mut self) -> &mut Store {
        &mut self.world.store
    }

    fn ns(&self) -> String {
        self.config.namespace.clone()
    }

    /// Another writer touches the node (an unrelated annotation), moving its resourceVersion.
    fn foreign_write(&mut self, node: &str) {
        let _ = self.store().modify::<Node>(None, node, |n| {
            let map = n.metadata.annotations.get_or_insert_with(Default::default);
            let count: u64 = map.get(FOREIGN).and_then(|v| v.parse().ok()).unwrap_or(0);
            map.insert(FOREIGN.into(), (count + 1).to_string());
        });
    }
}

/// The port's answer for a store refusal.
fn api(e: store::ApiError, what: &str) -> ApiError {
    match e {
        store::ApiError::NotFound => ApiError::NotFound(what.into()),
        store::ApiError::AlreadyExists => ApiError::AlreadyExists(what.into()),
        store::ApiError::Conflict | store::ApiError::UidMismatch => {
            ApiError::Conflict(format!("{what}: precondition failed"))
        }
        store::ApiError::TooManyRequests => {
            ApiError::TooManyRequests(format!("{what}: disruption budget"))
        }
    }
}

/// Applies a merge patch (only its `status` when `status_only`) to the stored object, enforcing
/// the `metadata.uid` and `metadata.resourceVersion` preconditions it carries (the shell's
/// `memory::merged`, as for `kubectl nodewright plan`).
fn merge_patch<T: Object + kube::Resource<DynamicType = ()>>(
    store: &mut Store,
    namespace: Option<&str>,
    name: &str,
    body: &Value,
    status_only: bool,
) -> ApiResult<(T, T)> {
    let what = format!("{:?} {name}", T::KIND);
    let current = store
        .get::<T>(namespace, name)
        .cloned()
        .ok_or_else(|| ApiError::NotFound(what.clone()))?;
    let next = memory::merged(&current, body, status_only, &what)?;
    if next == current {
        return Ok((current.clone(), current));
    }
    let written = store.update(next, None).map_err(|e| api(e, &what))?;
    Ok((current, written))
}

/// Node-state entries that differ between two versions of a node.
pub fn entry_changes(before: &Node, after: &Node) -> Vec<EntryTransition> {
    let docs = |n: &Node| -> BTreeMap<String, NodeState> {
        n.metadata
            .annotations
            .iter()
            .flatten()
            .filter_map(|(k, v)| {
                let nw = k.strip_prefix(&keys::node_state(""))?;
                Some((nw.to_string(), NodeState::parse(v).ok()?))
            })
            .collect()
    };
    let (old, new) = (docs(before), docs(after));
    let node = after.metadata.name.clone().unwrap_or_default();
    let mut out = Vec::new();
    for (nw, doc) in &new {
        let empty = NodeState::default();
        let was = old.get(nw).unwrap_or(&empty);
        let keys: std::collections::BTreeSet<&String> = doc.0.keys().chain(was.0.keys()).collect();
        for key in keys {
            let (from, to) = (was.0.get(key), doc.0.get(key));
            if from != to {
                out.push(EntryTransition {
                    nodewright: nw.clone(),
                    node: node.clone(),
                    key: key.clone(),
                    from: from.cloned(),
                    to: to.cloned(),
                });
            }
        }
    }
    out
}

/// The EventSpec an Event was built from (for scenario expectations).
fn spec_of(event: &Event) -> EventSpec {
    let r = event.regarding.clone().unwrap_or_default();
    EventSpec {
        regarding: ObjectRef {
            kind: r.kind.unwrap_or_default(),
            name: r.name.unwrap_or_default(),
            namespace: r.namespace,
            uid: r.uid,
        },
        warning: event.type_.as_deref() == Some("Warning"),
        reason: event.reason.clone().unwrap_or_default(),
        action: event.action.clone().unwrap_or_default(),
        message: event.note.clone().unwrap_or_default(),
    }
}

/// apiserver defaulting of a created Job: selector and controller-uid labels on the template.
fn default_job(store: &mut Store, created: &Job) -> Option<Job> {
    let uid = created.metadata.uid.clone().unwrap_or_default();
    let name = created.metadata.name.clone().unwrap_or_default();
    let ns = created.metadata.namespace.clone();
    store
        .modify::<Job>(ns.as_deref(), &name, |j| {
            let spec = j.spec.get_or_insert_with(Default::default);
            let labels = spec
                .template
                .metadata
                .get_or_insert_with(Default::default)
                .labels
                .get_or_insert_with(Default::default);
            labels.insert("batch.kubernetes.io/controller-uid".into(), uid.clone());
            labels.insert("batch.kubernetes.io/job-name".into(), name.clone());
            spec.selector = Some(LabelSelector {
                match_labels: Some(
                    [(
                        "batch.kubernetes.io/controller-uid".to_string(),
                        uid.clone(),
                    )]
                    .into(),
                ),
                ..Default::default()
            });
        })
        .ok()
}

impl ClusterPort for SimPort<'_> {
    async fn get_node(&self, name: &str, cached: bool) -> ApiResult<Option<Node>> {
        self.with(|s| {
            let hit = cached.then(|| s.cache.nodes.get(name)).flatten();
            Ok(hit
                .or_else(|| s.world.store.objects.nodes.get(name))
                .cloned())
        })
    }

    async fn patch_node(&self, name: &str, body: &Value) -> ApiResult<()> {
        self.fence()?;
        self.with(|s| {
            if s.rng.chance(s.config.conflict_probability) {
                s.foreign_write(name);
            }
            let (before, after) = merge_patch::<Node>(s.store(), None, name, body, false)?;
            if before != after {
                let entries = entry_changes(&before, &after);
                s.written.push(Written::Node {
                    before: Box::new(before),
                    after: Box::new(after),
                    entries,
                });
            }
            Ok(())
        })
    }

    async fn patch_node_status(&self, name: &str, body: &Value) -> ApiResult<()> {
        self.fence()?;
        self.with(|s| {
            s.store()
                .modify::<Node>(None, name, |n| memory::merge_conditions(n, body))
                .map(drop)
                .map_err(|e| api(e, name))
        })
    }

    async fn get_job(&self, name: &str) -> ApiResult<Option<Job>> {
        self.with(|s| {
            let ns = s.ns();
            Ok(s.world.store.get::<Job>(Some(&ns), name).cloned())
        })
    }

    async fn list_jobs(&self, selector: &str) -> ApiResult<Vec<Job>> {
        self.with(|s| {
            let ns = s.ns();
            Ok(s.world
                .store
                .objects
                .jobs
                .values()
                .filter(|j| j.metadata.namespace.as_deref() == Some(ns.as_str()))
                .filter(|j| memory::selects(j.metadata.labels.as_ref(), selector))
                .cloned()
                .collect())
        })
    }

    async fn create_job(&self, job: &Job) -> ApiResult<Job> {
        self.fence()?;
        self.with(|s| {
            let mut job = job.clone();
            job.metadata.namespace = Some(s.ns());
            let name = job.metadata.name.clone().unwrap_or_default();
            let created = s.store().create(job).map_err(|e| api(e, &name))?;
            let defaulted = default_job(s.store(), &created).unwrap_or(created);
            s.written
                .push(Written::JobCreated(Box::new(defaulted.clone())));
            Ok(defaulted)
        })
    }

    async fn patch_job(&self, name: &str, body: &Value) -> ApiResult<()> {
        self.fence()?;
        self.with(|s| {
            let ns = s.ns();
            merge_patch::<Job>(s.store(), Some(&ns), name, body, false).map(drop)
        })
    }

    async fn delete_job(&self, name: &str, uid: &str) -> ApiResult<()> {
        self.fence()?;
        self.with(|s| {
            if s.config.deny_job_deletes {
                return Err(ApiError::Other(
                    "admission webhook denied the request".into(),
                ));
            }
            let ns = s.ns();
            s.store()
                .delete::<Job>(Some(&ns), name, Some(uid), Propagation::Foreground, false)
                .map_err(|e| api(e, name))
        })
    }

    async fn list_pods(&self, namespace: &str, selector: &str) -> ApiResult<Vec<Pod>> {
        self.with(|s| {
            Ok(s.world
                .store
                .objects
                .pods
                .values()
                .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
                .filter(|p| memory::selects(p.metadata.labels.as_ref(), selector))
                .cloned()
                .collect())
        })
    }

    async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> ApiResult<()> {
        self.fence()?;
        self.with(|s| {
            s.store()
                .delete::<Pod>(
                    Some(namespace),
                    name,
                    Some(uid),
                    Propagation::Background,
                    true,
                )
                .map_err(|e| api(e, name))
        })
    }

    async fn evict_pod(&self, e: &Eviction) -> ApiResult<()> {
        self.fence()?;
        self.with(|s| {
            match s
                .world
                .evict(&e.namespace, &e.name, &e.uid, e.delete_instead)
            {
                Ok(EvictOutcome::Evicted | EvictOutcome::AlreadyTerminating) => Ok(()),
                Err(err) => Err(api(err, &format!("pod {}/{}", e.namespace, e.name))),
            }
        })
    }

    async fn get_nodewright(&self, name: &str) -> ApiResult<Option<NodeWright>> {
        self.with(|s| Ok(s.world.store.get::<NodeWright>(None, name).cloned()))
    }

    async fn patch_nodewright(&self, name: &str, body: &Value) -> ApiResult<NodeWright> {
        self.fence()?;
        self.with(|s| {
            merge_patch::<NodeWright>(s.store(), None, name, body, false).map(|(_, after)| after)
        })
    }

    async fn patch_nodewright_status(&self, name: &str, body: &Value) -> ApiResult<Option<String>> {
        self.fence()?;
        self.with(|s| {
            merge_patch::<NodeWright>(s.store(), None, name, body, true)
                .map(|(_, written)| written.metadata.resource_version)
        })
    }

    async fn create_config_map(&self, config_map: &ConfigMap) -> ApiResult<()> {
        self.fence()?;
        self.with(|s| {
            let name = config_map.metadata.name.clone().unwrap_or_default();
            s.store()
                .create(config_map.clone())
                .map(drop)
                .map_err(|e| api(e, &name))
        })
    }

    async fn replace_config_map(&self, config_map: &ConfigMap) -> ApiResult<()> {
        self.fence()?;
        self.with(|s| {
            let name = config_map.metadata.name.clone().unwrap_or_default();
            let rv = config_map.metadata.resource_version.clone();
            s.store()
                .update(config_map.clone(), rv.as_deref())
                .map(drop)
                .map_err(|e| api(e, &name))
        })
    }

    async fn delete_config_map(&self, name: &str, uid: &str) -> ApiResult<()> {
        self.fence()?;
        self.with(|s| {
            let ns = s.ns();
            s.store()
                .delete::<ConfigMap>(Some(&ns), name, Some(uid), Propagation::Background, false)
                .map_err(|e| api(e, name))
        })
    }

    async fn create_event(&self, _namespace: &str, event: &Event) -> ApiResult<()> {
        self.fence()?;
        self.with(|s| s.events.push(spec_of(event)));
        Ok(())
    }

    async fn pause(&self, _delay: Duration) {}

    fn now(&self) -> jiff::Timestamp {
        timestamp(self.sim_now())
    }

    fn elapsed(&self) -> Duration {
        Duration::from_millis(self.sim_now())
    }
}

impl SimPort<'_> {
    /// Refuses a write while the replica's fence is closed.
    fn fence(&self) -> ApiResult<()> {
        match self.inner.borrow().config.fenced {
            true => Err(ApiError::Fenced(
                "write fenced: this replica does not hold the lease".into(),
            )),
            false => Ok(()),
        }
    }

    fn sim_now(&self) -> SimTime {
        self.inner.borrow().world.store.now
    }
}
