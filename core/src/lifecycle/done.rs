//! What one pass has already done or found, so later phases neither repeat it nor contradict it.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;

/// The per-pass "already done" sets, keyed by NodeWright, node, package or Job name.
#[derive(Debug, Default)]
pub struct Done {
    /// (NodeWright, node) pairs whose metadata ConfigMap was ensured this pass.
    pub metadata_ensured: BTreeSet<(String, String)>,
    /// Pods already evicted this pass (by uid).
    pub evicted: BTreeSet<String>,
    /// (NodeWright, node, package) triples started this pass (invariant 16.1).
    pub started: BTreeSet<(String, String, String)>,
    /// Nodes on which this pass started an executor (B6 also counts these).
    pub started_nodes: BTreeSet<String>,
    /// Nodes whose node state this pass changed from executor outcomes: nothing new starts
    /// there until those writes are durable (a start must rest on recorded state, inv 16.9).
    pub outcome_nodes: BTreeSet<String>,
    /// Nodes on which this pass started an interrupt executor (B6).
    pub interrupted_nodes: BTreeSet<String>,
    /// (NodeWright, node) pairs whose interrupt fired this pass (invariant 16.2).
    pub fired: BTreeSet<(String, String)>,
    /// Jobs whose outcome this pass recorded (their marker is in the plan).
    pub recorded: BTreeSet<String>,
    /// Jobs this pass deletes to free their name.
    pub cleared: BTreeSet<String>,
    /// (NodeWright, node) pairs whose drain waits on podNonInterruptLabels pods.
    pub non_interrupt_blocked: BTreeSet<(String, String)>,
    /// (NodeWright, node, package) triples whose uninstall cycle this pass ended: no install
    /// starts for them until the removal is written (invariant 16.11).
    pub cycle_ended: BTreeSet<(String, String, String)>,
}

/// A pod holding up a drain ([Ext] DrainBlocked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocker {
    /// `<namespace>/<name>`.
    pub pod: String,
    /// `PodDisruptionBudget`, `UnmanagedPod` or `EmptyDirData`.
    pub reason: &'static str,
    /// Human detail.
    pub detail: String,
}

impl Blocker {
    /// The blocker `pod` with its reason and detail.
    pub fn new(pod: &Pod, reason: &'static str, detail: String) -> Self {
        Blocker {
            pod: pod_name(pod),
            reason,
            detail,
        }
    }
}

/// Drain blockers per (NodeWright, node) found this pass.
pub type Blockers = BTreeMap<(String, String), Vec<Blocker>>;

/// `<namespace>/<name>` of a pod.
pub fn pod_name(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or_default(),
        p.metadata.name.as_deref().unwrap_or_default()
    )
}
