//! User actions and faults a scenario schedules on its timeline.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use nodewright_crds::{DeploymentPolicy, NodeState, NodeWright, PackageStatus, keys};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::objects::{AnyObject, Kind, Object};
use crate::operator::Faults;
use crate::store::{ApiError, Propagation};
use crate::time::{Dur, SimTime};
use crate::world::World;

/// One scheduled action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "action",
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum Action {
    /// Create an object, or replace the spec/metadata of an existing one (like `kubectl apply`).
    Apply {
        /// The object manifest.
        object: Value,
    },
    /// JSON merge patch of an object (metadata and spec; NodeWright spec edits bump generation).
    Patch {
        /// Kind (`NodeWright`, `Node`, `Job`, ...).
        kind: String,
        /// Name.
        name: String,
        /// Namespace for namespaced kinds.
        #[serde(default)]
        namespace: Option<String>,
        /// The merge patch.
        patch: Value,
    },
    /// Delete an object (background propagation; finalizers hold it).
    Delete {
        /// Kind.
        kind: String,
        /// Name.
        name: String,
        /// Namespace.
        #[serde(default)]
        namespace: Option<String>,
    },
    /// Reboot a node: NotReady for `down`, then a new boot id.
    RebootNode {
        /// Node.
        node: String,
        /// Downtime.
        #[serde(default = "default_down")]
        down: Dur,
    },
    /// Make a node unreachable (NotReady) until `nodeReady`.
    NodeNotReady {
        /// Node.
        node: String,
    },
    /// Make a node reachable again.
    NodeReady {
        /// Node.
        node: String,
    },
    /// A user cordons a node (`kubectl cordon`).
    Cordon {
        /// Node.
        node: String,
    },
    /// Evict a pod through the eviction API (as a user or a disruption would).
    EvictPod {
        /// Namespace.
        namespace: String,
        /// Name; `*` evicts the first running pod matching `labels`.
        name: String,
        /// With `name: "*"`, label selector values.
        #[serde(default)]
        labels: std::collections::BTreeMap<String, String>,
    },
    /// Remove a package entry from a node's state (CLI reset).
    ResetEntry {
        /// Node.
        node: String,
        /// NodeWright.
        nodewright: String,
        /// Entry key `<pkg>|<ver>`.
        key: String,
    },
    /// Overwrite a package entry on a node (simulates a lost or reverted write).
    SetEntry {
        /// Node.
        node: String,
        /// NodeWright.
        nodewright: String,
        /// The entry.
        entry: PackageStatus,
    },
    /// An operator replica crashes during its next pass after `afterEffects` effects.
    CrashOperator {
        /// Effects applied before the crash.
        #[serde(default)]
        after_effects: usize,
        /// Downtime.
        #[serde(default = "default_restart")]
        down: Dur,
        /// Replica index (with `leaderElection`); default: the one leading now.
        #[serde(default)]
        replica: Option<usize>,
    },
    /// A replica stops the world (a long GC pause, SIGSTOP) for `for`: no lease renewals, no
    /// passes, no watch events. With `afterEffects` it stops during its next pass that has more
    /// effects than that, after that many, and sends the rest of the plan when it resumes,
    /// through its write fence.
    PauseReplica {
        /// Replica index; default: the one leading now.
        #[serde(default)]
        replica: Option<usize>,
        /// Stop mid-pass after this many effects (default: stop at once).
        #[serde(default)]
        after_effects: Option<usize>,
        /// Length of the pause.
        #[serde(rename = "for")]
        pause_for: Dur,
        /// With `afterEffects`: the rest of the plan had already passed the write fence and was
        /// sent before the pause (requests in flight); it lands when the pause ends, unchecked.
        #[serde(default)]
        in_flight: bool,
    },
    /// Replace one replica's lease faults (hung or late lease writes, lease conflicts).
    LeaseFaults {
        /// Replica index; default: the one leading now.
        #[serde(default)]
        replica: Option<usize>,
        /// New lease faults.
        faults: crate::leader::LeaseFaults,
    },
    /// Nothing; makes the simulation stop at this instant (used for checkpoints).
    Mark,
    /// Replace the operator's fault settings.
    Faults {
        /// New faults.
        faults: Faults,
    },
}

fn default_down() -> Dur {
    Dur(30_000)
}

fn default_restart() -> Dur {
    Dur(5_000)
}

/// An action at a time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimedAction {
    /// Virtual time since start.
    pub at: Dur,
    /// What happens.
    #[serde(flatten)]
    pub action: Action,
}

/// Creates or updates an object from JSON as a user would.
pub fn apply_object(world: &mut World, value: Value) -> Result<(), String> {
    let object = AnyObject::from_json(value)?;
    fn upsert<T: Object>(world: &mut World, mut o: T) -> Result<(), String> {
        let ns = o.meta().namespace.clone();
        let name = o.meta().name.clone().unwrap_or_default();
        match world.store.get::<T>(ns.as_deref(), &name).cloned() {
            None => world
                .store
                .create(o)
                .map(|_| ())
                .map_err(|e| format!("{e:?}")),
            Some(existing) => {
                let before = serde_json::to_value(&existing).unwrap_or_default();
                let spec_before = before.get("spec").cloned();
                let mut after = serde_json::to_value(&o).unwrap_or_default();
                if let Some(map) = after.as_object_mut() {
                    map.insert(
                        "status".into(),
                        before.get("status").cloned().unwrap_or(Value::Null),
                    );
                }
                o = serde_json::from_value(after.clone()).map_err(|e| e.to_string())?;
                let meta = o.meta_mut();
                meta.resource_version = existing.meta().resource_version.clone();
                meta.finalizers = existing.meta().finalizers.clone();
                meta.generation = existing.meta().generation;
                if after.get("spec").cloned() != spec_before {
                    meta.generation = Some(existing.meta().generation.unwrap_or(1) + 1);
                }
                world
                    .store
                    .update(o, None)
                    .map(|_| ())
                    .map_err(|e| format!("{e:?}"))
            }
        }
    }
    match object {
        AnyObject::Node(o) => upsert(world, *o),
        AnyObject::NodeWright(o) => upsert(world, *o),
        AnyObject::DeploymentPolicy(o) => upsert(world, *o),
        AnyObject::Job(o) => upsert(world, *o),
        AnyObject::Pod(o) => upsert(world, *o),
        AnyObject::ConfigMap(o) => upsert(world, *o),
        AnyObject::PodDisruptionBudget(o) => upsert(world, *o),
        AnyObject::Lease(o) => upsert(world, *o),
    }
}

fn patch_object<T: Object>(
    world: &mut World,
    ns: Option<&str>,
    name: &str,
    patch: &Value,
) -> Result<(), String> {
    let existing = world.store.get::<T>(ns, name).cloned().ok_or("not found")?;
    let mut value = serde_json::to_value(&existing).map_err(|e| e.to_string())?;
    let spec_before = value.get("spec").cloned();
    nodewright_shell::merge::apply(&mut value, patch);
    let spec_changed = value.get("spec").cloned() != spec_before;
    let mut object: T = serde_json::from_value(value).map_err(|e| e.to_string())?;
    if spec_changed && matches!(T::KIND, Kind::NodeWright | Kind::DeploymentPolicy) {
        object.meta_mut().generation = Some(existing.meta().generation.unwrap_or(1) + 1);
    }
    world
        .store
        .update(object, None)
        .map(|_| ())
        .map_err(|e| format!("{e:?}"))
}

fn delete_object(
    world: &mut World,
    kind: Kind,
    ns: Option<&str>,
    name: &str,
) -> Result<(), ApiError> {
    let bg = Propagation::Background;
    match kind {
        Kind::Node => world.store.delete::<Node>(ns, name, None, bg, false),
        Kind::NodeWright => world.store.delete::<NodeWright>(ns, name, None, bg, false),
        Kind::DeploymentPolicy => world
            .store
            .delete::<DeploymentPolicy>(ns, name, None, bg, false),
        Kind::Job => world
            .store
            .delete::<Job>(ns, name, None, Propagation::Foreground, false),
        Kind::Pod => world.store.delete::<Pod>(ns, name, None, bg, true),
        Kind::ConfigMap => world.store.delete::<ConfigMap>(ns, name, None, bg, false),
        Kind::PodDisruptionBudget => world
            .store
            .delete::<PodDisruptionBudget>(ns, name, None, bg, false),
        Kind::Lease => world.store.delete::<Lease>(ns, name, None, bg, false),
    }
}

fn edit_entry(
    world: &mut World,
    node: &str,
    nw: &str,
    change: impl FnOnce(&mut NodeState),
) -> Result<(), String> {
    world
        .store
        .modify::<Node>(None, node, |n| {
            let key = keys::node_state(nw);
            let ann = n.metadata.annotations.get_or_insert_with(Default::default);
            let mut doc = ann
                .get(&key)
                .and_then(|t| NodeState::parse(t).ok())
                .unwrap_or_default();
            change(&mut doc);
            ann.insert(key, doc.to_annotation());
        })
        .map(|_| ())
        .map_err(|e| format!("{e:?}"))
}

/// Runs a world-level action (operator actions are handled by the simulation).
pub fn run_world_action(world: &mut World, action: &Action, now: SimTime) -> Result<(), String> {
    let kind_of = |k: &str| Kind::parse(k).ok_or(format!("unknown kind {k}"));
    match action {
        Action::Apply { object } => apply_object(world, object.clone()),
        Action::Patch {
            kind,
            name,
            namespace,
            patch,
        } => {
            let ns = namespace.as_deref();
            match kind_of(kind)? {
                Kind::Node => patch_object::<Node>(world, ns, name, patch),
                Kind::NodeWright => patch_object::<NodeWright>(world, ns, name, patch),
                Kind::DeploymentPolicy => patch_object::<DeploymentPolicy>(world, ns, name, patch),
                Kind::Job => patch_object::<Job>(world, ns, name, patch),
                Kind::Pod => patch_object::<Pod>(world, ns, name, patch),
                Kind::ConfigMap => patch_object::<ConfigMap>(world, ns, name, patch),
                Kind::PodDisruptionBudget => {
                    patch_object::<PodDisruptionBudget>(world, ns, name, patch)
                }
                Kind::Lease => patch_object::<Lease>(world, ns, name, patch),
            }
        }
        Action::Delete {
            kind,
            name,
            namespace,
        } => delete_object(world, kind_of(kind)?, namespace.as_deref(), name)
            .map_err(|e| format!("{e:?}")),
        Action::RebootNode { node, down } => {
            world.reboot_node(node, down.0, now);
            Ok(())
        }
        Action::NodeNotReady { node } => {
            world.set_node_reachable(node, false, now);
            Ok(())
        }
        Action::NodeReady { node } => {
            world.set_node_reachable(node, true, now);
            Ok(())
        }
        Action::Cordon { node } => world
            .store
            .modify::<Node>(None, node, |n| {
                n.spec.get_or_insert_with(Default::default).unschedulable = Some(true)
            })
            .map(|_| ())
            .map_err(|e| format!("{e:?}")),
        Action::EvictPod {
            namespace,
            name,
            labels,
        } => {
            let pod = world
                .store
                .objects
                .pods
                .values()
                .filter(|p| p.metadata.namespace.as_deref() == Some(namespace.as_str()))
                .filter(|p| {
                    p.metadata.deletion_timestamp.is_none() && !crate::world::is_terminal(p)
                })
                .find(|p| {
                    if name == "*" {
                        labels.iter().all(|(k, v)| {
                            p.metadata.labels.as_ref().and_then(|l| l.get(k)) == Some(v)
                        })
                    } else {
                        p.metadata.name.as_deref() == Some(name.as_str())
                    }
                })
                .cloned()
                .ok_or(format!("no pod {namespace}/{name} to evict"))?;
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let pname = pod.metadata.name.clone().unwrap_or_default();
            world
                .evict(namespace, &pname, &uid, false)
                .map(|_| ())
                .map_err(|e| format!("{e:?}"))
        }
        Action::ResetEntry {
            node,
            nodewright,
            key,
        } => edit_entry(world, node, nodewright, |d| {
            d.0.remove(key);
        }),
        Action::SetEntry {
            node,
            nodewright,
            entry,
        } => {
            let entry = entry.clone();
            edit_entry(world, node, nodewright, move |d| d.upsert(entry))
        }
        Action::CrashOperator { .. }
        | Action::PauseReplica { .. }
        | Action::LeaseFaults { .. }
        | Action::Faults { .. }
        | Action::Mark => Ok(()),
    }
}
