//! What one pass has already done or found, so later phases neither repeat it nor contradict it.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use nodewright_crds::Package;

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
    /// Per node, what this pass changed from executor outcomes: a start that rests on one of
    /// those changes waits until the write is durable (inv 16.9; see [`Recorded`]).
    pub outcomes: BTreeMap<String, Recorded>,
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
    /// Nodes this pass's introspection marked complete or released from a cordon: a batch
    /// chosen on that must wait until the write is durable (invariant 16.7).
    pub settled: BTreeSet<String>,
}

impl Done {
    /// True when this pass recorded any executor outcome.
    pub fn recorded_any(&self) -> bool {
        !self.recorded.is_empty() || !self.outcomes.is_empty()
    }
}

/// The outcome changes this pass made to one node's state, which later decisions of the same
/// pass must not build on (a start rests only on durable state, invariant 16.9).
#[derive(Debug, Default)]
pub struct Recorded {
    /// (NodeWright, package) whose entry an outcome changed (the Job's own package and, for an
    /// interrupt completion, the siblings it promoted).
    pub packages: BTreeSet<(String, String)>,
    /// An outcome was a terminal failure: the node's status turns erroring in this pass (T4).
    pub terminal: bool,
}

impl Recorded {
    /// True when an outcome changed the entry of package `pkg` of NodeWright `nw` in this pass:
    /// the pass writes no second transition of that entry (invariant 16.11).
    pub fn touched(&self, nw: &str, pkg: &str) -> bool {
        self.packages.contains(&(nw.to_string(), pkg.to_string()))
    }

    /// True when a start of `pkg` by NodeWright `nw` would rest on a change recorded here: its
    /// own entry or a `dependsOn` entry (16.9), another NodeWright's entry (priority gating,
    /// 16.8), anything under a serial NodeWright, an interrupt or a package that cordons (the
    /// node-wide interrupt and cordon decisions, B6, 16.2, 16.3), or a terminal failure.
    pub fn blocks(&self, nw: &str, serial: bool, pkg: &Package, interrupt: bool) -> bool {
        interrupt
            || self.terminal
            || pkg.interrupt.is_some()
            || !pkg.config_interrupts.is_empty()
            || self.packages.iter().any(|(owner, name)| {
                owner != nw || serial || name == &pkg.name || pkg.depends_on.contains_key(name)
            })
    }
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
