//! The pass context: the snapshot, indexes built once, and the working copy of decisions.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use nodewright_crds::{NodeState, NodeWrightStatus, Package};

use super::done::{Blockers, Done};
use super::view::NwView;
use super::work::Work;
use crate::jobs::{ExecutorBasis, ExecutorIndex};
use crate::slim::SlimPod;
use crate::{NodeStateCache, Options, Snapshot};

/// Everything a phase reads or writes, except the NodeWright views (borrowed separately).
pub struct Ctx<'a> {
    /// The input snapshot.
    pub snap: &'a Snapshot,
    /// Operator options.
    pub opts: &'a Options,
    /// The pass's notion of now.
    pub now: Timestamp,
    /// All nodes by name.
    pub nodes: BTreeMap<&'a str, &'a Node>,
    /// The same nodes hashed by name, for lookups (one per Job and per node each pass).
    by_name: foldhash::HashMap<&'a str, &'a Node>,
    /// Workload pods by node name, built when first asked for (a pass that gates no interrupt
    /// never reads it; see [`Ctx::pods_on`]).
    pods_by_node: std::cell::OnceCell<BTreeMap<&'a str, Vec<&'a Pod>>>,
    /// Executor pods (D16) by node name, built when first asked for. Drain ignores them (§8.3);
    /// only the non-interrupt selector reads them ([`Ctx::running_pods_selected`]).
    executor_pods_by_node: std::cell::OnceCell<BTreeMap<&'a str, Vec<&'a SlimPod>>>,
    /// The executor index: the caller's cached one when it answers for this snapshot, else
    /// built for this pass.
    pub index: PassIndex<'a>,
    /// The working copy of decisions.
    pub work: Work,
    /// Something asks for the short requeue (work pending, something saved, a gate waited).
    pub requeue: bool,
    /// A config change was deferred (30 s idle requeue).
    pub config_sync_pending: bool,
    /// What this pass already did (starts, evictions, recorded outcomes, ...).
    pub done: Done,
    /// IsNodeComplete per (NodeWright, node position among all nodes; 0 = not known, 1 = no,
    /// 2 = yes), cleared when a document or `configUpdates` changes.
    complete_cache: std::cell::RefCell<BTreeMap<String, Vec<u8>>>,
    /// NodeWrights whose view could not be built (invalid selector), with the reason.
    pub invalid: Vec<(&'a nodewright_crds::NodeWright, String)>,
    /// Drain blockers per (NodeWright, node) found this pass ([Ext] DrainBlocked).
    pub drain_blockers: Blockers,
    /// Rollout gauges per NodeWright from its last rollout decision this pass.
    pub rollout_metrics: BTreeMap<String, Vec<crate::plan::MetricSample>>,
    /// Node order per NodeWright from the rollout decision.
    pub node_orders: BTreeMap<String, BTreeMap<String, i32>>,
    /// What this pass's executors of each NodeWright are built from (made at its first start).
    bases: BTreeMap<String, Arc<ExecutorBasis>>,
}

impl<'a> Ctx<'a> {
    /// Indexes the snapshot (the executor index taken from `cache` when it answers for it).
    pub fn new(
        snap: &'a Snapshot,
        opts: &'a Options,
        now: Timestamp,
        cache: &'a NodeStateCache,
    ) -> Self {
        let nodes: BTreeMap<&str, &Node> = snap
            .nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref().map(|name| (name, &**n)))
            .collect();
        let by_name = nodes.iter().map(|(&name, &node)| (name, node)).collect();
        Ctx {
            snap,
            opts,
            now,
            nodes,
            by_name,
            pods_by_node: std::cell::OnceCell::new(),
            executor_pods_by_node: std::cell::OnceCell::new(),
            index: match cache.executor_index(snap, opts) {
                Some(index) => PassIndex::Cached(index),
                None => PassIndex::Built(ExecutorIndex::build(snap, opts)),
            },
            work: Work::default(),
            requeue: false,
            config_sync_pending: false,
            done: Done::default(),
            node_orders: BTreeMap::new(),
            bases: BTreeMap::new(),
            rollout_metrics: BTreeMap::new(),
            complete_cache: Default::default(),
            drain_blockers: Blockers::new(),
            invalid: Vec::new(),
        }
    }

    /// `<namespace>/<name>` of the Running or Pending pods on `node`, workload and executor, whose
    /// labels `selector` selects, in (namespace, name, uid) order.
    pub fn running_pods_selected(&self, node: &str, selector: &LabelSelector) -> Vec<String> {
        let empty = BTreeMap::new();
        let selected = |meta: &'a ObjectMeta, phase: Option<&str>| {
            matches!(phase, Some("Running") | Some("Pending"))
                && nodewright_crds::selector::matches(
                    selector,
                    meta.labels.as_ref().unwrap_or(&empty),
                )
        };
        let executor = self
            .executor_pods_by_node
            .get_or_init(|| {
                by_node(
                    &self.snap.executor_pods,
                    |p| p.spec.as_ref()?.node_name.as_deref(),
                    |p| &p.metadata,
                )
            })
            .get(node)
            .map_or(&[][..], Vec::as_slice);
        let mut metas: Vec<&'a ObjectMeta> = self
            .pods_on(node)
            .iter()
            .filter(|p| {
                selected(
                    &p.metadata,
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                )
            })
            .map(|p| &p.metadata)
            .chain(
                executor
                    .iter()
                    .filter(|p| {
                        selected(
                            &p.metadata,
                            p.status.as_ref().and_then(|s| s.phase.as_deref()),
                        )
                    })
                    .map(|p| &p.metadata),
            )
            .collect();
        sort_dedup(&mut metas, |m| m);
        metas
            .into_iter()
            .map(|m| {
                format!(
                    "{}/{}",
                    m.namespace.as_deref().unwrap_or_default(),
                    m.name.as_deref().unwrap_or_default()
                )
            })
            .collect()
    }

    /// The workload pods on node `node`, sorted by (namespace, name, uid), duplicates dropped
    /// (executor pods are not drained, §8.3).
    pub fn pods_on(&self, node: &str) -> &[&'a Pod] {
        let by_node = self.pods_by_node.get_or_init(|| {
            by_node(
                &self.snap.workload_pods,
                |p| p.spec.as_ref()?.node_name.as_deref(),
                |p| &p.metadata,
            )
        });
        by_node.get(node).map_or(&[], Vec::as_slice)
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&'a Node> {
        self.by_name.get(name).copied()
    }

    /// True when this pass recorded an outcome that `pkg`'s work on `node` rests on (16.9):
    /// the work phase leaves the package for the next pass (see [`super::done::Recorded`]).
    pub fn rests_on_outcome(&self, v: &NwView, node: &str, pkg: &Package) -> bool {
        self.done
            .outcomes
            .get(node)
            .is_some_and(|r| r.blocks(&v.name, v.nw.spec.serial, pkg, false))
    }

    /// True when an outcome recorded this pass changed `pkg`'s entry on `node` (16.11: one
    /// transition per written entry).
    pub fn outcome_touched(&self, v: &NwView, node: &str, pkg: &str) -> bool {
        self.done
            .outcomes
            .get(node)
            .is_some_and(|r| r.touched(&v.name, pkg))
    }

    /// The current node-state document of (v, node); `None` when unreadable.
    pub fn doc<'s>(&'s self, v: &'s NwView, node: &str) -> Option<&'s NodeState> {
        self.doc_at(v, *v.pos.get(node)?)
    }

    /// The current node-state document of `v`'s `i`-th selected node; `None` when unreadable.
    pub fn doc_at<'s>(&'s self, v: &'s NwView, i: usize) -> Option<&'s NodeState> {
        let snapshot = v.snapshot_doc(i)?;
        Some(self.work.state(&v.name, &v.nodes[i], snapshot))
    }

    /// The working document of (v, node) for writing; `None` when unreadable.
    pub fn doc_mut(&mut self, v: &NwView, node: &str) -> Option<&mut NodeState> {
        let i = *v.pos.get(node)?;
        if let Some(cache) = self.complete_cache.get_mut().get_mut(&v.name)
            && let Some(slot) = cache.get_mut(v.global[i])
        {
            *slot = 0;
        }
        let snapshot = v.snapshot_doc(i)?;
        Some(self.work.state_mut(&v.name, node, snapshot))
    }

    /// D5 on the current document; unreadable reads as no entries.
    pub fn node_complete(&self, v: &NwView, node: &str) -> bool {
        match v.pos.get(node) {
            Some(&i) => self.node_complete_at(v, i),
            // Not selected: the document reads as empty.
            None => self.complete_of(v, None),
        }
    }

    /// D5 for `v`'s `i`-th selected node.
    pub fn node_complete_at(&self, v: &NwView, i: usize) -> bool {
        let g = v.global[i];
        if let Some(&hit) = self
            .complete_cache
            .borrow()
            .get(&v.name)
            .and_then(|m| m.get(g))
            && hit != 0
        {
            return hit == 2;
        }
        let complete = self.complete_of(v, self.doc_at(v, i));
        let mut cache = self.complete_cache.borrow_mut();
        let memo = match cache.get_mut(&v.name) {
            Some(memo) => memo,
            None => cache.entry(v.name.clone()).or_default(),
        };
        if memo.len() <= g {
            memo.resize(self.nodes.len().max(g + 1), 0);
        }
        memo[g] = if complete { 2 } else { 1 };
        complete
    }

    /// D5 of a document (`None`: unreadable, read as no entries).
    fn complete_of(&self, v: &NwView, doc: Option<&NodeState>) -> bool {
        let empty = NodeState::default();
        let updates = &self.status(v).config_updates;
        nodewright_crds_complete(v, doc.unwrap_or(&empty), updates)
    }

    /// Forgets cached completeness of `v` (its `configUpdates` changed, which steers D2/D3).
    pub fn forget_completeness(&mut self, v: &NwView) {
        self.complete_cache.get_mut().remove(&v.name);
    }

    /// D6 on the current documents.
    pub fn nw_complete(&self, v: &NwView) -> bool {
        (0..v.nodes.len()).all(|i| self.node_complete_at(v, i))
    }

    /// `SKYHOOK_NODE_ORDER` of `node` (0 when it is not in `nodePriority`).
    pub fn node_order(&self, v: &NwView, node: &str) -> i32 {
        self.node_orders
            .get(&v.name)
            .and_then(|m| m.get(node))
            .copied()
            .unwrap_or(0)
    }

    /// What `v`'s executors are built from in this pass (made once, shared by its recipes).
    pub fn executor_basis(&mut self, v: &NwView) -> Arc<ExecutorBasis> {
        let opts = self.opts;
        self.bases
            .entry(v.name.clone())
            .or_insert_with(|| Arc::new(ExecutorBasis::new(v.nw, &v.packages, opts)))
            .clone()
    }

    /// True when the node has an unfinished executor of any NodeWright, in the snapshot or
    /// started by this pass (B6).
    pub fn node_busy(&self, node: &str) -> bool {
        self.index.node_busy(node) || self.done.started_nodes.contains(node)
    }

    /// The working status of `v`.
    pub fn status<'s>(&'s self, v: &'s NwView) -> &'s NodeWrightStatus {
        self.work.status(&v.name, &v.status)
    }

    /// The current `status.nodeState` mirror entry of (v, node).
    pub fn mirror_entry<'s>(&'s self, v: &'s NwView, node: &str) -> Option<&'s NodeState> {
        self.work.mirror_entry(&v.name, &v.status, node)
    }

    /// The working status of `v` for writing.
    pub fn status_mut(&mut self, v: &NwView) -> &mut NodeWrightStatus {
        self.work.status_mut(&v.name, &v.status)
    }
}

/// The executor index a pass reads: borrowed from the caller's cache or built for the pass.
pub enum PassIndex<'a> {
    /// The cache's index (it answers for this snapshot).
    Cached(&'a ExecutorIndex),
    /// Built for this pass.
    Built(ExecutorIndex),
}

impl std::ops::Deref for PassIndex<'_> {
    type Target = ExecutorIndex;

    fn deref(&self) -> &ExecutorIndex {
        match self {
            PassIndex::Cached(index) => index,
            PassIndex::Built(index) => index,
        }
    }
}

/// The snapshot's workload and executor pods by node name, each node's sorted by (namespace,
/// name, uid), duplicates dropped.
/// `objects` by the node `node` names, each list sorted by (namespace, name, uid), duplicates
/// dropped.
fn by_node<'a, T>(
    objects: &'a [std::sync::Arc<T>],
    node: impl Fn(&'a T) -> Option<&'a str>,
    meta: impl Fn(&T) -> &ObjectMeta,
) -> BTreeMap<&'a str, Vec<&'a T>> {
    let mut by_node: BTreeMap<&'a str, Vec<&'a T>> = BTreeMap::new();
    for object in objects {
        if let Some(name) = node(object) {
            by_node.entry(name).or_default().push(object);
        }
    }
    for list in by_node.values_mut() {
        sort_dedup(list, |o| meta(o));
    }
    by_node
}

fn nodewright_crds_complete(
    v: &NwView,
    state: &NodeState,
    updates: &super::predicates::ConfigUpdates,
) -> bool {
    super::predicates::is_node_complete(state, &v.packages, updates)
}

/// Sorts objects by (namespace, name, uid) and drops adjacent ones with the same uid and name.
fn sort_dedup<T>(objects: &mut Vec<T>, meta: impl Fn(&T) -> &ObjectMeta) {
    objects.sort_by(|a, b| {
        let (a, b) = (meta(a), meta(b));
        (&a.namespace, &a.name, &a.uid).cmp(&(&b.namespace, &b.name, &b.uid))
    });
    objects.dedup_by(|a, b| {
        let (a, b) = (meta(a), meta(b));
        a.uid == b.uid && a.name == b.name
    });
}
