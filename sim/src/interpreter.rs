//! A model of the shell's effect interpreter (00-architecture.md "Effects", 02-lifecycle.md
//! §13): uid preconditions, per-entry node-state guards with uncached re-reads on conflict,
//! AlreadyExists/NotFound no-ops, merge patches, and the shell's scope rule (a write that did
//! not happen skips later effects on its node, its NodeWright's status patch and the Event
//! right after it).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use nodewright_core::effect::{FreshReadPrecondition, NodePatchRefusal, resolve_node_patch};
use nodewright_core::{Effect, NodePatch, Snapshot};
use nodewright_crds::{NodeWright, keys};
use serde::{Deserialize, Serialize};

use crate::objects::{Objects, key};
use crate::rng::Rng;
use crate::store::{ApiError, Propagation};
use crate::world::{EvictOutcome, World};

/// How one effect ended (the shell's outcome vocabulary).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", content = "why", rename_all = "lowercase")]
pub enum Outcome {
    /// The write happened.
    Applied,
    /// Nothing needed writing.
    Noop,
    /// A precondition failed or the object already exists.
    Dropped(String),
    /// The apiserver asked to wait (PDB).
    Waiting(String),
    /// Skipped because an earlier effect in its scope did not happen.
    Skipped,
    /// The write failed.
    Failed(String),
}

impl Outcome {
    /// True for Applied and Noop.
    pub fn happened(&self) -> bool {
        matches!(self, Outcome::Applied | Outcome::Noop)
    }

    /// How the skip rule sees this outcome.
    pub fn ended(&self) -> nodewright_core::effect::Ended {
        use nodewright_core::effect::Ended;
        match self {
            _ if self.happened() => Ended::Happened,
            Outcome::Waiting(_) => Ended::Waiting,
            _ => Ended::Failed,
        }
    }

    /// Short label.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Noop => "noop",
            Outcome::Dropped(_) => "dropped",
            Outcome::Waiting(_) => "waiting",
            Outcome::Skipped => "skipped",
            Outcome::Failed(_) => "failed",
        }
    }
}

/// A write worth checking against the invariants.
#[derive(Clone, Debug)]
pub enum Written {
    /// A node changed.
    Node {
        /// Before the write.
        before: Box<Node>,
        /// After the write.
        after: Box<Node>,
        /// Entry transitions applied: (NodeWright, key, from, to).
        entries: Vec<EntryTransition>,
    },
    /// A Job was created.
    JobCreated(Box<Job>),
}

/// One applied entry change, as found on the fresh node (resolved in core).
pub use nodewright_core::effect::EntryTransition;

/// Interpreter settings and fault knobs.
#[derive(Clone, Debug)]
pub struct InterpreterConfig {
    /// Operator namespace.
    pub namespace: String,
    /// Conflict retries of guarded writes.
    pub conflict_attempts: u32,
    /// Probability that a foreign writer touches the node right before a node write.
    pub conflict_probability: f64,
    /// Refuse Job deletions (a denying admission webhook).
    pub deny_job_deletes: bool,
}

/// Applies plans to the world.
pub struct Interpreter<'a> {
    /// The world.
    pub world: &'a mut World,
    /// The operator's cache (first read of node writes).
    pub cache: &'a Objects,
    /// Settings.
    pub config: &'a InterpreterConfig,
    /// Fault randomness.
    pub rng: &'a mut Rng,
    /// Writes to check.
    pub written: Vec<Written>,
    /// Events emitted.
    pub events: Vec<nodewright_core::EventSpec>,
    /// Per NodeWright, the version our own finalizer write made of the snapshot's (`from` → `to`,
    /// same status); a status patch computed from `from` expects `to` (as in the shell).
    pub finalizer_chain: &'a mut nodewright_core::effect::FinalizerChain,
}

/// Which later effects a failure blocks: the shell's rule, from the core.
pub type Scope = nodewright_core::effect::SkipScope;

fn removal(result: Result<(), ApiError>) -> Outcome {
    match result {
        Ok(()) => Outcome::Applied,
        Err(ApiError::NotFound) => Outcome::Noop,
        Err(e) => Outcome::Dropped(format!("precondition failed: {e:?}")),
    }
}

impl Interpreter<'_> {
    /// Applies one effect with its precondition.
    pub fn apply_one(&mut self, snapshot: &Snapshot, effect: &Effect) -> Outcome {
        let ns = self.config.namespace.clone();
        match effect {
            Effect::CreateJob { job, .. } => self.create_job(job, effect.fresh_read_precondition()),
            Effect::DeleteJob { .. } if self.config.deny_job_deletes => {
                Outcome::Failed("admission webhook denied the request".into())
            }
            Effect::DeleteJob {
                confirm: Some(check),
                ..
            } if !self
                .world
                .store
                .get::<Node>(None, &check.node)
                .is_some_and(|n| check.holds(n)) =>
            {
                // D21 (K22): the fresh read shows the outcome recorded; no re-run.
                Outcome::Dropped(check.refusal())
            }
            Effect::DeleteJob { name, uid, .. } => removal(self.world.store.delete::<Job>(
                Some(&ns),
                name,
                Some(uid),
                Propagation::Foreground,
                false,
            )),
            Effect::PatchJob {
                name,
                uid,
                suspend,
                ttl_seconds_after_finished,
                annotations,
                ..
            } => self.patch_job(
                name,
                uid,
                *suspend,
                *ttl_seconds_after_finished,
                annotations,
            ),
            Effect::EndInterruptJob {
                name,
                uid,
                resource_version,
                restarts,
                ..
            } => self.end_interrupt_job(name, uid, resource_version.as_deref(), *restarts),
            Effect::DeletePod {
                namespace,
                name,
                uid,
                ..
            } => removal(self.world.store.delete::<Pod>(
                Some(namespace),
                name,
                Some(uid),
                Propagation::Background,
                true,
            )),
            Effect::PatchNode(patch) => self.patch_node(patch),
            Effect::PatchNodeConditions { node, set, remove } => {
                if set.is_empty() && remove.is_empty() {
                    return Outcome::Noop;
                }
                match self.world.store.modify::<Node>(None, node, |n| {
                    let status = n.status.get_or_insert_with(Default::default);
                    let conditions = status.conditions.get_or_insert_with(Vec::new);
                    conditions.retain(|c| {
                        !remove.contains(&c.type_) && !set.iter().any(|s| s.type_ == c.type_)
                    });
                    conditions.extend(set.iter().cloned());
                }) {
                    Ok(_) => Outcome::Applied,
                    Err(_) => Outcome::Noop,
                }
            }
            Effect::Evict {
                namespace,
                name,
                uid,
                delete_instead,
                ..
            } => match self.world.evict(namespace, name, uid, *delete_instead) {
                Ok(EvictOutcome::Evicted | EvictOutcome::AlreadyTerminating) => Outcome::Applied,
                Err(ApiError::NotFound) => Outcome::Noop,
                Err(ApiError::TooManyRequests) => {
                    Outcome::Waiting(format!("eviction of {namespace}/{name} refused by a PDB"))
                }
                Err(e) => Outcome::Dropped(format!("precondition failed: {e:?}")),
            },
            Effect::PatchStatus { nodewright, status } => {
                self.patch_status(snapshot, nodewright, status)
            }
            Effect::AddFinalizer { nodewright, uid } => {
                self.set_finalizer(snapshot, nodewright, uid, true)
            }
            Effect::RemoveFinalizer { nodewright, uid } => {
                self.set_finalizer(snapshot, nodewright, uid, false)
            }
            Effect::UpsertConfigMap {
                config_map,
                expect_resource_version,
            } => self.upsert_config_map(config_map, expect_resource_version.as_deref()),
            Effect::DeleteConfigMap { name, uid, .. } => {
                removal(self.world.store.delete::<ConfigMap>(
                    Some(&ns),
                    name,
                    Some(uid),
                    Propagation::Background,
                    false,
                ))
            }
            Effect::Event(spec) => {
                self.events.push((**spec).clone());
                Outcome::Applied
            }
        }
    }

    /// Models the shell's fresh-read precondition (B6 for interrupt Jobs): the live store, not
    /// the (possibly stale) snapshot, must not block the create.
    fn fresh_read_blocker(
        &self,
        job: &Job,
        precondition: &FreshReadPrecondition,
    ) -> Option<String> {
        let selected = self
            .world
            .store
            .objects
            .jobs
            .values()
            .filter(|other| precondition.selects(other));
        let busy = precondition.blocker(job, selected)?;
        Some(precondition.refusal(busy))
    }

    fn create_job(&mut self, job: &Job, precondition: Option<FreshReadPrecondition>) -> Outcome {
        let mut job = job.clone();
        if job.metadata.namespace.is_none() {
            job.metadata.namespace = Some(self.config.namespace.clone());
        }
        if let Some(pre) = precondition
            && let Some(why) = self.fresh_read_blocker(&job, &pre)
        {
            return Outcome::Dropped(why);
        }
        match self.world.store.create(job) {
            Ok(created) => {
                // apiserver defaulting: selector and controller-uid labels on the template.
                let uid = created.metadata.uid.clone().unwrap_or_default();
                let name = created.metadata.name.clone().unwrap_or_default();
                let ns = created.metadata.namespace.clone();
                let written = self.world.store.modify::<Job>(ns.as_deref(), &name, |j| {
                    let spec = j.spec.get_or_insert_with(Default::default);
                    let labels = spec
                        .template
                        .metadata
                        .get_or_insert_with(Default::default)
                        .labels
                        .get_or_insert_with(Default::default);
                    labels.insert("batch.kubernetes.io/controller-uid".into(), uid.clone());
                    labels.insert("batch.kubernetes.io/job-name".into(), name.clone());
                    spec.selector = Some(
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                            match_labels: Some(
                                [(
                                    "batch.kubernetes.io/controller-uid".to_string(),
                                    uid.clone(),
                                )]
                                .into(),
                            ),
                            ..Default::default()
                        },
                    );
                });
                if let Ok(job) = written {
                    self.written.push(Written::JobCreated(Box::new(job)));
                }
                Outcome::Applied
            }
            Err(ApiError::AlreadyExists) => Outcome::Dropped("job already exists".into()),
            Err(e) => Outcome::Failed(format!("{e:?}")),
        }
    }

    fn patch_job(
        &mut self,
        name: &str,
        uid: &str,
        suspend: Option<bool>,
        ttl: Option<i32>,
        annotations: &BTreeMap<String, Option<String>>,
    ) -> Outcome {
        let ns = self.config.namespace.clone();
        let Some(job) = self.world.store.get::<Job>(Some(&ns), name) else {
            return Outcome::Noop;
        };
        if job.metadata.uid.as_deref() != Some(uid) {
            return Outcome::Dropped("uid precondition failed".into());
        }
        let result = self.world.store.modify::<Job>(Some(&ns), name, |j| {
            let spec = j.spec.get_or_insert_with(Default::default);
            if let Some(s) = suspend {
                spec.suspend = Some(s);
            }
            if let Some(t) = ttl {
                spec.ttl_seconds_after_finished = Some(t);
            }
            let map = j.metadata.annotations.get_or_insert_with(Default::default);
            for (k, v) in annotations {
                match v {
                    Some(v) => drop(map.insert(k.clone(), v.clone())),
                    None => drop(map.remove(k)),
                }
            }
        });
        match result {
            Ok(_) => Outcome::Applied,
            Err(_) => Outcome::Noop,
        }
    }

    fn end_interrupt_job(
        &mut self,
        name: &str,
        uid: &str,
        rv: Option<&str>,
        restarts: i32,
    ) -> Outcome {
        let ns = self.config.namespace.clone();
        let Some(job) = self.world.store.get::<Job>(Some(&ns), name).cloned() else {
            return Outcome::Noop;
        };
        if job.metadata.uid.as_deref() != Some(uid) {
            return Outcome::Dropped("uid precondition failed".into());
        }
        if rv.is_some() && job.metadata.resource_version.as_deref() != rv {
            return Outcome::Dropped("job changed".into());
        }
        let ann = job.metadata.annotations.clone().unwrap_or_default();
        let suspended = job.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false);
        if crate::world::job_finished(&job)
            || crate::world::job_condition(&job, "FailureTarget")
            || suspended
            || ann.contains_key(keys::RESTART_LIMIT_EXCEEDED)
            || !ann.contains_key(keys::RESTART_ALLOWANCE)
        {
            return Outcome::Dropped("job may not be ended".into());
        }
        let observed = self
            .world
            .store
            .objects
            .pods
            .values()
            .filter(|p| {
                p.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == uid)
            })
            .flat_map(|p| {
                p.status
                    .iter()
                    .flat_map(|s| s.init_container_statuses.iter().flatten())
            })
            .filter(|c| c.name == "interrupt")
            .map(|c| c.restart_count)
            .max()
            .unwrap_or(0);
        if observed < restarts {
            return Outcome::Dropped(format!("interrupt restarts {observed} < {restarts}"));
        }
        let result = self.world.store.modify::<Job>(Some(&ns), name, |j| {
            j.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(keys::RESTART_LIMIT_EXCEEDED.into(), restarts.to_string());
            j.spec.get_or_insert_with(Default::default).backoff_limit = Some(0);
        });
        match result {
            Ok(_) => Outcome::Applied,
            Err(_) => Outcome::Noop,
        }
    }

    fn patch_status(
        &mut self,
        snapshot: &Snapshot,
        name: &str,
        status: &nodewright_crds::NodeWrightStatus,
    ) -> Outcome {
        let seen = snapshot
            .nodewrights
            .iter()
            .find(|nw| nw.metadata.name.as_deref() == Some(name));
        let from = serde_json::to_value(seen.and_then(|nw| nw.status.as_ref())).unwrap_or_default();
        let to = serde_json::to_value(Some(status)).unwrap_or_default();
        let Some(patch) = crate::merge::diff(&from, &to) else {
            return Outcome::Noop;
        };
        // §13.7 as the shell does it: the patch expects the snapshot's version (or the version our
        // own finalizer write made of it); a status computed from a stale cache is dropped.
        let expected = seen
            .and_then(|nw| nw.metadata.resource_version.clone())
            .map(|rv| self.finalizer_chain.expected(name, rv));
        let Some(mut current) = self.world.store.get::<NodeWright>(None, name).cloned() else {
            return Outcome::Noop;
        };
        let mut value = serde_json::to_value(&current.status).unwrap_or_default();
        crate::merge::apply(&mut value, &patch);
        if let Ok(next) = serde_json::from_value(value) {
            current.status = next;
        }
        match self.world.store.update(current, expected.as_deref()) {
            Ok(_) => Outcome::Applied,
            Err(ApiError::NotFound) => Outcome::Noop,
            Err(e) => Outcome::Dropped(format!("status of {name}: {e:?}")),
        }
    }

    fn set_finalizer(
        &mut self,
        snapshot: &Snapshot,
        name: &str,
        uid: &str,
        present: bool,
    ) -> Outcome {
        let mut seen = snapshot
            .nodewrights
            .iter()
            .find(|nw| nw.metadata.name.as_deref() == Some(name))
            .cloned();
        for attempt in 0..self.config.conflict_attempts {
            if seen.is_none() || attempt > 0 {
                seen = self.world.store.get::<NodeWright>(None, name).cloned();
            }
            let Some(nw) = seen.clone() else {
                return Outcome::Noop;
            };
            if nw.metadata.uid.as_deref() != Some(uid) {
                return Outcome::Dropped(format!("NodeWright {name} was recreated"));
            }
            let has = nw
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == keys::FINALIZER);
            if has == present {
                return Outcome::Noop;
            }
            let rv = nw.metadata.resource_version.clone();
            let Some(mut current) = self.world.store.get::<NodeWright>(None, name).cloned() else {
                return Outcome::Noop;
            };
            let finalizers = current.metadata.finalizers.get_or_insert_with(Vec::new);
            if present {
                finalizers.push(keys::FINALIZER.into());
            } else {
                finalizers.retain(|f| f != keys::FINALIZER);
            }
            match self.world.store.update(current, rv.as_deref()) {
                Ok(written) => {
                    let from = (attempt == 0).then_some(rv).flatten();
                    self.finalizer_chain
                        .record(name, from, written.metadata.resource_version);
                    return Outcome::Applied;
                }
                Err(ApiError::NotFound) => return Outcome::Noop,
                Err(_) => continue,
            }
        }
        Outcome::Failed("conflict retries exhausted".into())
    }

    fn upsert_config_map(&mut self, cm: &ConfigMap, rv: Option<&str>) -> Outcome {
        let mut cm = cm.clone();
        cm.metadata.namespace = Some(self.config.namespace.clone());
        let result = match rv {
            None => self.world.store.create(cm).map(|_| ()),
            Some(rv) => self.world.store.update(cm, Some(rv)).map(|_| ()),
        };
        match result {
            Ok(()) => Outcome::Applied,
            Err(e) => Outcome::Dropped(format!("configmap: {e:?}")),
        }
    }

    fn patch_node(&mut self, patch: &NodePatch) -> Outcome {
        for attempt in 0..self.config.conflict_attempts {
            let fresh = if attempt == 0 {
                self.cache
                    .nodes
                    .get(&patch.node)
                    .or_else(|| self.world.store.objects.nodes.get(&patch.node))
                    .cloned()
            } else {
                self.world.store.objects.nodes.get(&patch.node).cloned()
            };
            let Some(fresh) = fresh else {
                return Outcome::Noop;
            };
            let built = match resolve_node_patch(&fresh, patch) {
                Ok(Some(b)) => b,
                Ok(None) => return Outcome::Noop,
                Err(NodePatchRefusal::Mismatch(why)) => return Outcome::Dropped(why),
                Err(NodePatchRefusal::Malformed(why)) => return Outcome::Failed(why),
            };
            if self.rng.chance(self.config.conflict_probability) {
                self.foreign_write(&patch.node);
            }
            let Some(current) = self.world.store.objects.nodes.get(&patch.node).cloned() else {
                return Outcome::Noop;
            };
            if built.needs_resource_version
                && current.metadata.resource_version != fresh.metadata.resource_version
            {
                continue;
            }
            let after = built.apply_to(current.clone());
            match self.world.store.update(after.clone(), None) {
                Ok(written) => {
                    self.written.push(Written::Node {
                        before: Box::new(current),
                        after: Box::new(written),
                        entries: built.entries,
                    });
                    return Outcome::Applied;
                }
                Err(_) => return Outcome::Noop,
            }
        }
        Outcome::Failed(format!(
            "conflict retries exhausted ({})",
            self.config.conflict_attempts
        ))
    }

    /// Another writer touches the node (an unrelated annotation), moving its resourceVersion.
    fn foreign_write(&mut self, node: &str) {
        let _ = self.world.store.modify::<Node>(None, node, |n| {
            let map = n.metadata.annotations.get_or_insert_with(Default::default);
            let count: u64 = map.get(FOREIGN).and_then(|v| v.parse().ok()).unwrap_or(0);
            map.insert(FOREIGN.into(), (count + 1).to_string());
        });
    }
}

/// Annotation a simulated foreign writer bumps to provoke write conflicts.
pub const FOREIGN: &str = "sim.example.com/foreign-writes";

/// The pod key helper used by the operator model.
pub fn pod_key(namespace: &str, name: &str) -> String {
    key(Some(namespace), name)
}
