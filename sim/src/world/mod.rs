//! The cluster outside the operator: Job controller, kubelets, nodes, garbage collector, PDBs
//! and workload controllers, all advanced in virtual time over the [`Store`].

mod gc;
pub(crate) mod jobctl;
mod kubelet;
mod nodes;
pub mod script;
mod workloads;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use nodewright_crds::keys;

pub use jobctl::{job_condition, job_finished};
pub use nodes::{NodeRun, set_ready_for_start};
pub use script::{Attempt, PackageScript, PodIdentity, Scripts};
pub use workloads::EvictOutcome;

use crate::store::Store;
use crate::time::{SimTime, k8s_time};

/// Finalizer the Job controller puts on its pods so no attempt goes uncounted.
pub const JOB_TRACKING: &str = "batch.kubernetes.io/job-tracking";

/// Knobs of the world model.
#[derive(Clone, Debug)]
pub struct WorldSettings {
    /// How long a terminating pod takes to stop once its kubelet is reachable.
    pub termination: SimTime,
    /// Kubelet node-status heartbeat (each bumps the Node's resourceVersion); 0 disables.
    pub heartbeat: SimTime,
    /// Delay before a ReplicaSet replaces an evicted workload pod.
    pub replace_after: SimTime,
}

impl Default for WorldSettings {
    fn default() -> Self {
        WorldSettings {
            termination: 1_000,
            heartbeat: 0,
            replace_after: 5_000,
        }
    }
}

/// The simulated cluster.
#[derive(Clone, Debug, Default)]
pub struct World {
    /// The apiserver.
    pub store: Store,
    /// Package behaviour.
    pub scripts: Scripts,
    /// Settings.
    pub settings: WorldSettings,
    /// Per node: power, reachability, boot count, host flag files.
    pub nodes: BTreeMap<String, NodeRun>,
    kubelet: BTreeMap<String, kubelet::PodRun>,
    job_ctl: BTreeMap<String, jobctl::JobRun>,
    executions: BTreeMap<String, usize>,
    pending_replacements: Vec<(SimTime, Pod)>,
    /// Pod uids already counted by the Job controller.
    counted: BTreeSet<String>,
    last_heartbeat: SimTime,
    jobctl_cursor: usize,
}

impl World {
    /// A world around an existing store.
    pub fn new(store: Store, scripts: Scripts, settings: WorldSettings) -> Self {
        World {
            store,
            scripts,
            settings,
            ..Default::default()
        }
    }

    /// Advances everything outside the operator to `now`.
    pub fn step(&mut self, now: SimTime) {
        self.store.now = now;
        self.nodes_step(now);
        self.kubelet_step(now);
        self.job_controller_step(now);
        self.gc_step();
        self.workloads_step(now);
        self.pdb_step();
    }

    /// The earliest future time at which something in the world changes on its own.
    pub fn next_wakeup(&self, now: SimTime) -> Option<SimTime> {
        let mut times: Vec<SimTime> = Vec::new();
        times.extend(self.kubelet.values().filter_map(|r| r.wake));
        times.extend(self.job_ctl.values().filter_map(|r| r.wake));
        times.extend(self.nodes.values().filter_map(|n| n.down_until));
        times.extend(self.pending_replacements.iter().map(|(t, _)| *t));
        times.extend(self.ttl_wakeups());
        if self.settings.heartbeat > 0 {
            times.push(self.last_heartbeat + self.settings.heartbeat);
        }
        if self.has_terminating_pods() {
            times.push(now + self.settings.termination.max(1));
        }
        times.into_iter().filter(|t| *t > now).min()
    }

    fn has_terminating_pods(&self) -> bool {
        self.store
            .objects
            .pods
            .values()
            .any(|p| p.metadata.deletion_timestamp.is_some())
            || self
                .store
                .objects
                .jobs
                .values()
                .any(|j| j.metadata.deletion_timestamp.is_some())
    }
}

/// The package, version, stage and node an executor pod runs, from its `P/package` annotation.
pub fn pod_identity(pod: &Pod) -> Option<PodIdentity> {
    let raw = pod.metadata.annotations.as_ref()?.get(keys::PACKAGE)?;
    let value: serde_json::Value = serde_json::from_str(raw).ok()?;
    let text = |k: &str| {
        value
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    Some(PodIdentity {
        package: text("name"),
        version: text("version"),
        stage: text("stage"),
        node: pod.spec.as_ref()?.node_name.clone().unwrap_or_default(),
    })
}

/// True when the pod has the given condition with status True.
pub fn has_condition(pod: &Pod, kind: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == kind && c.status == "True"))
}

/// Sets a pod condition (replacing one of the same type).
pub fn set_pod_condition(pod: &mut Pod, kind: &str, reason: &str, at: SimTime) {
    let status = pod.status.get_or_insert_with(Default::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    conditions.retain(|c| c.type_ != kind);
    conditions.push(PodCondition {
        type_: kind.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        last_transition_time: Some(k8s_time(at)),
        ..Default::default()
    });
}

/// The pod's phase (`Pending` when unset).
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// True for Succeeded or Failed pods.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}
