//! The effect vocabulary: every write the core decides, with the precondition it decided on
//! (00-architecture.md "Effects").

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, NodeCondition, Taint};
use nodewright_crds::{NodeState, NodeWrightStatus, PackageStatus};
use serde::{Deserialize, Serialize};

use crate::jobs::JobManifest;

mod confirm;
mod describe;
mod node_patch;
mod precondition;
mod skip;
mod status_base;

pub use confirm::{EntryCheck, EntryExpect, cordoned_by};
pub use node_patch::{EntryTransition, NodeDelta, NodePatchRefusal, resolve_node_patch};
pub use precondition::FreshReadPrecondition;
pub use skip::{Ended, SkipScope};
pub use status_base::FinalizerChain;

/// One intended write. Effects in a plan are ordered; a failed effect makes the shell drop the
/// effects after it that `depends_on_previous` and requeue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "camelCase")]
pub enum Effect {
    /// Create an executor Job; AlreadyExists is dropped (the next pass decides).
    CreateJob {
        /// The Job manifest (built when created; serialized as the complete Job).
        job: JobManifest,
        /// Why it is started, for logs.
        context: Context,
        /// What must hold on a fresh read right before the create (B6 for interrupt Jobs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        precondition: Option<FreshReadPrecondition>,
        /// I1: create only if a fresh read of the node shows the package's entry as the snapshot
        /// did (the entry the guarded node write recording the start expects), so a node cache
        /// lagging behind the apiserver cannot start a stage beside another.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        confirm: Option<EntryExpect>,
    },
    /// Foreground-delete a Job guarded by its uid; always logged and evented with the reason.
    DeleteJob {
        /// Job name in the operator namespace.
        name: String,
        /// uid precondition.
        uid: String,
        /// Why (decision D12).
        reason: DeletionReason,
        /// Who and what it concerned.
        context: Context,
        /// D21: delete only if a fresh read of the node still shows this entry open (set on
        /// re-run deletions of processed Jobs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        confirm: Option<EntryCheck>,
    },
    /// Merge-patch exactly the given Job fields.
    PatchJob {
        /// Job name in the operator namespace.
        name: String,
        /// uid precondition.
        uid: String,
        /// New `spec.suspend`, when changed.
        suspend: Option<bool>,
        /// New `spec.ttlSecondsAfterFinished`, when changed.
        ttl_seconds_after_finished: Option<i32>,
        /// Annotations to set (`Some`) or remove (`None`).
        annotations: BTreeMap<String, Option<String>>,
        /// Who and what it concerned.
        context: Context,
    },
    /// End a crash-looping non-reboot interrupt Job past its restart allowance (D18, 04 §8.10):
    /// one merge patch of `<P>/restart-limit-exceeded` and `spec.backoffLimit: 0`, guarded by
    /// `resource_version`; the shell re-reads the pod uncached and re-checks before sending it.
    EndInterruptJob {
        /// Job name in the operator namespace.
        name: String,
        /// uid precondition.
        uid: String,
        /// resourceVersion precondition (the only locked Job write).
        resource_version: Option<String>,
        /// The `interrupt` container's restart count, written as the annotation value.
        restarts: i32,
        /// Who and what it concerned.
        context: Context,
    },
    /// Delete a pod in the operator namespace (archive pruning) guarded by uid.
    DeletePod {
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// uid precondition.
        uid: String,
        /// Why (decision D12).
        reason: DeletionReason,
        /// Who and what it concerned.
        context: Context,
    },
    /// Change one node: node-state entries (guarded per entry), annotations, labels, taints and
    /// cordon, as deltas against a fresh read.
    PatchNode(Box<NodePatch>),
    /// Replace the listed node conditions (status subresource, no precondition).
    PatchNodeConditions {
        /// Node name.
        node: String,
        /// Conditions to set, by type.
        set: Vec<NodeCondition>,
        /// Condition types to remove.
        remove: Vec<String>,
    },
    /// Evict a pod through the eviction subresource (PodDisruptionBudgets respected).
    Evict {
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// uid precondition.
        uid: String,
        /// Delete instead of evict (`drainConfig.disableEviction`).
        delete_instead: bool,
        /// Grace period override in seconds.
        grace_period_seconds: Option<i64>,
        /// Who and what it concerned.
        context: Context,
    },
    /// Merge-patch a NodeWright's status subresource to the given value.
    PatchStatus {
        /// NodeWright name.
        nodewright: String,
        /// The full desired status; the shell sends the difference.
        status: Box<NodeWrightStatus>,
    },
    /// I7: merge-patch a newly selected batch into a NodeWright's status (the rollout
    /// bookkeeping only: `nodePriority`, `nodeOrderOffset`, `compartmentStatuses`) before any
    /// write acts on it; when it does not happen, the rest of the plan is skipped.
    RecordBatch {
        /// NodeWright name.
        nodewright: String,
        /// The rollout bookkeeping to write; every other field is left default and not sent.
        status: Box<NodeWrightStatus>,
    },
    /// Add the finalizer to a NodeWright.
    AddFinalizer {
        /// NodeWright name.
        nodewright: String,
        /// uid precondition.
        uid: String,
    },
    /// Remove the finalizer from a NodeWright (after cleanup and status, B5).
    RemoveFinalizer {
        /// NodeWright name.
        nodewright: String,
        /// uid precondition.
        uid: String,
    },
    /// Create or update a ConfigMap in the operator namespace (only emitted when data differs).
    UpsertConfigMap {
        /// The desired ConfigMap.
        config_map: Box<ConfigMap>,
        /// resourceVersion of the existing one when updating.
        expect_resource_version: Option<String>,
    },
    /// Delete a ConfigMap in the operator namespace.
    DeleteConfigMap {
        /// ConfigMap name.
        name: String,
        /// uid precondition.
        uid: String,
        /// Why.
        reason: DeletionReason,
    },
    /// Emit a Kubernetes Event (only after the write it describes succeeded).
    Event(Box<EventSpec>),
}

/// A delta against one node, applied by the shell to a fresh read with a resourceVersion
/// precondition and uncached re-reads on conflict (02-lifecycle.md §13.1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodePatch {
    /// Node name.
    pub node: String,
    /// resourceVersion of the snapshot the decision was made on, for logs and the first attempt.
    pub snapshot_resource_version: Option<String>,
    /// When false the patch is applied without a resourceVersion precondition (reboot reset,
    /// finalizer cleanup).
    pub guarded: bool,
    /// Node-state entry changes, per NodeWright.
    pub state: Vec<EntryChange>,
    /// Remove the whole node-state document of these NodeWrights (reset).
    pub remove_state_of: Vec<String>,
    /// Annotations to set (`Some`) or remove (`None`).
    pub annotations: BTreeMap<String, Option<String>>,
    /// Labels to set (`Some`) or remove (`None`).
    pub labels: BTreeMap<String, Option<String>>,
    /// Taints to add, by (key, effect) identity (D14).
    pub taints_add: Vec<Taint>,
    /// Taints to remove, by (key, effect) identity.
    pub taints_remove: Vec<Taint>,
    /// New `spec.unschedulable`, when changed.
    pub unschedulable: Option<bool>,
    /// NodeWrights whose cordon is released on the fresh read (§8.7 with the status write that
    /// marks the node complete, when the snapshot did not yet show the cordon): `P/cordon_<NW>`
    /// is removed if present, and `unschedulable` cleared when it was and no other cordon remains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub release_cordon_of: Vec<String>,
    /// Per NodeWright, its whole node-state document as the snapshot had it, which the fresh
    /// read must still show (invariant 16.7, B7): the write marks the node complete or releases
    /// its cordon, which rests on every entry, not only the ones it changes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub expect_documents: BTreeMap<String, NodeState>,
    /// Who and what it concerned.
    pub context: Context,
}

/// One node-state entry change: the shell checks the fresh entry equals `expect`, then writes
/// `set` (`None` removes). A mismatch drops the whole node patch and requeues.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EntryChange {
    /// NodeWright whose document holds the entry.
    pub nodewright: String,
    /// Entry key `<pkg>|<ver>`.
    pub key: String,
    /// The entry the core saw; `None` means it saw no entry.
    pub expect: Option<PackageStatus>,
    /// The entry to write; `None` removes it.
    pub set: Option<PackageStatus>,
}

/// Why an executor, pod or ConfigMap is deleted (decision D12).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeletionReason {
    /// The node is gone or no longer selected.
    OrphanedNode,
    /// The executor no longer matches the spec (fingerprint or stage).
    StaleSpec,
    /// A config update invalidated the executor.
    ConfigUpdate,
    /// A newer cycle needs the deterministic name.
    Rerun,
    /// The node rebooted and its state was reset.
    RebootReset,
    /// Uninstall finished; its executors are no longer needed.
    UninstallCleanup,
    /// Archive pods beyond the first and latest genuine failure.
    ArchivePrune,
    /// The NodeWright is being deleted.
    Finalizer,
}

impl DeletionReason {
    /// The kebab-case spelling used in Events and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OrphanedNode => "orphaned-node",
            Self::StaleSpec => "stale-spec",
            Self::ConfigUpdate => "config-update",
            Self::Rerun => "rerun",
            Self::RebootReset => "reboot-reset",
            Self::UninstallCleanup => "uninstall-cleanup",
            Self::ArchivePrune => "archive-prune",
            Self::Finalizer => "finalizer",
        }
    }
}

/// The NodeWright, node, package and stage an effect concerns, for structured logs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Context {
    /// NodeWright name.
    pub nodewright: Option<String>,
    /// Node name.
    pub node: Option<String>,
    /// Package name.
    pub package: Option<String>,
    /// Package version.
    pub version: Option<String>,
    /// Stage.
    pub stage: Option<String>,
}

/// The object an Event is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    /// `NodeWright`, `Node`, `Job`, `DeploymentPolicy`.
    pub kind: String,
    /// Object name.
    pub name: String,
    /// Namespace for namespaced objects.
    pub namespace: Option<String>,
    /// Object uid, when known.
    pub uid: Option<String>,
}

/// A Kubernetes Event (events.k8s.io) to emit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventSpec {
    /// The object the event is about.
    pub regarding: ObjectRef,
    /// `Normal` or `Warning`.
    pub warning: bool,
    /// Reason (`Apply`, `Interrupt`, `Drain`, `State`, `Reboot`, `DeletionBlocked`, ...).
    pub reason: String,
    /// Action string.
    pub action: String,
    /// Human message.
    pub message: String,
}

/// The rollout bookkeeping of a status (`nodePriority`, `nodeOrderOffset`,
/// `compartmentStatuses`), every other field default: what [`Effect::RecordBatch`] writes and
/// what the rollout reads.
pub fn rollout_bookkeeping(status: &NodeWrightStatus) -> NodeWrightStatus {
    NodeWrightStatus {
        node_priority: status.node_priority.clone(),
        node_order_offset: status.node_order_offset,
        compartment_statuses: status.compartment_statuses.clone(),
        ..NodeWrightStatus::default()
    }
}
