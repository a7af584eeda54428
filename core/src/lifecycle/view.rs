//! R2: the per-NodeWright view of the snapshot (selected nodes in order, parsed node-state
//! documents, normalised packages, the dependency graph).

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use nodewright_crds::{
    DeploymentPolicy, NodeState, NodeStateError, NodeWright, NodeWrightStatus, Package,
    SequencingMode, keys,
};

use super::dag::{Dag, DagError};
use crate::parse_cache::PassDocs;
use crate::{NodeStateCache, ViewError};

/// One NodeWright as the pass sees it.
#[derive(Debug)]
pub struct NwView<'a> {
    /// The object.
    pub nw: &'a NodeWright,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// Spec packages with names defaulted from their keys.
    pub packages: BTreeMap<String, Package>,
    /// `P/pause = "true"`.
    pub paused: bool,
    /// `P/disable = "true"`.
    pub disabled: bool,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Selected node names, sorted by (creationTimestamp, name).
    pub nodes: Vec<String>,
    /// The selected nodes, in `nodes` order.
    pub refs: Vec<&'a Node>,
    /// Snapshot node-state per selected node, in `nodes` order; `Err` = unreadable (§R2.2).
    pub docs: Vec<Result<Cow<'a, NodeState>, NodeStateError>>,
    /// Position of each selected node in `nodes`.
    pub pos: foldhash::HashMap<&'a str, usize>,
    /// Position of each selected node among all nodes of the pass (`nodes` of
    /// [`NwView::build`], sorted by name), in `nodes` order.
    pub global: Vec<usize>,
    /// Positions of the selected nodes in name order.
    pub by_name: Vec<usize>,
    /// Status as read (borrowed from the snapshot; default when absent).
    pub status: Cow<'a, NodeWrightStatus>,
    /// The dependency graph.
    pub graph: Result<Dag, DagError>,
    /// The referenced DeploymentPolicy, when it exists.
    pub policy: Option<&'a DeploymentPolicy>,
}

impl<'a> NwView<'a> {
    /// Builds the view; an invalid selector is an error for this NodeWright. `nodes` are all
    /// nodes of the pass sorted by name, as given to [`PassDocs::build`].
    pub fn build(
        nw: &'a NodeWright,
        nodes: &[&'a Node],
        policies: &'a [std::sync::Arc<DeploymentPolicy>],
        cache: &'a NodeStateCache,
        pass: &'a PassDocs<'a>,
    ) -> Result<Self, ViewError> {
        let name = nw.metadata.name.clone().unwrap_or_default();
        let mut spec = nw.spec.clone();
        spec.normalize();
        let selector = nw.spec.node_selector.clone().unwrap_or_default();
        nodewright_crds::selector::validate(&selector)
            .map_err(|e| ViewError::InvalidSelector(e.0))?;
        // (position among all nodes, node) of the selected nodes.
        let mut chosen: Vec<(usize, &'a Node)> = nodes
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, n)| nodewright_crds::selector::matches(&selector, labels(n)))
            .collect();
        chosen.sort_by(|(_, a), (_, b)| {
            let ta = a.metadata.creation_timestamp.as_ref().map(|t| t.0);
            let tb = b.metadata.creation_timestamp.as_ref().map(|t| t.0);
            ta.cmp(&tb)
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
        let global: Vec<usize> = chosen.iter().map(|(i, _)| *i).collect();
        let mut by_name: Vec<usize> = (0..global.len()).collect();
        by_name.sort_unstable_by_key(|&i| global[i]);
        let selected: Vec<&'a Node> = chosen.into_iter().map(|(_, n)| n).collect();
        let state_key = keys::node_state(&name);
        let docs = selected
            .iter()
            .zip(&global)
            .map(|(n, &g)| {
                let name = n.metadata.name.as_deref().unwrap_or_default();
                let text = n
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(&state_key));
                match text {
                    None => Ok(Cow::Owned(NodeState::default())),
                    Some(text) => match pass
                        .hit(g, &state_key)
                        .unwrap_or_else(|| cache.get(name, &state_key, text))
                    {
                        Some(doc) => Ok(Cow::Borrowed(doc)),
                        None => match pass.get(text) {
                            Some(Ok(doc)) => Ok(Cow::Borrowed(doc)),
                            Some(Err(e)) => Err(e.clone()),
                            None => NodeState::parse(text).map(Cow::Owned),
                        },
                    },
                }
            })
            .collect();
        let pos = selected
            .iter()
            .enumerate()
            .map(|(i, n)| (n.metadata.name.as_deref().unwrap_or_default(), i))
            .collect();
        let policy = crate::rollout::find_policy(nw, policies);
        Ok(NwView {
            name,
            uid: nw.metadata.uid.clone().unwrap_or_default(),
            generation: nw.metadata.generation.unwrap_or_default(),
            graph: Dag::build(&spec.packages),
            packages: spec.packages,
            paused: flag(nw, keys::PAUSE),
            disabled: flag(nw, keys::DISABLE),
            deleting: nw.metadata.deletion_timestamp.is_some(),
            nodes: selected.iter().map(|n| node_name(n)).collect(),
            refs: selected,
            docs,
            pos,
            global,
            by_name,
            status: nw
                .status
                .as_ref()
                .map_or_else(|| Cow::Owned(NodeWrightStatus::default()), Cow::Borrowed),
            policy,
            nw,
        })
    }

    /// The NodeWright's priority (default 200).
    pub fn priority(&self) -> i32 {
        self.nw.spec.priority
    }

    /// The sequencing mode.
    pub fn sequencing(&self) -> SequencingMode {
        self.nw.spec.sequencing
    }

    /// True when the NodeWright names a DeploymentPolicy that does not exist.
    pub fn policy_missing(&self) -> bool {
        !self.nw.spec.deployment_policy.is_empty() && self.policy.is_none()
    }

    /// True when `node` is selected.
    pub fn selects(&self, node: &str) -> bool {
        self.pos.contains_key(node)
    }

    /// A walker answering "is this name selected" for names asked in ascending order.
    pub fn name_walk(&self) -> NameWalk<'_, 'a> {
        NameWalk {
            v: self,
            next: std::cell::Cell::new(0),
        }
    }

    /// The snapshot node-state of a selected node; `Err` = unreadable.
    pub fn parsed(&self, node: &str) -> Option<&Result<Cow<'a, NodeState>, NodeStateError>> {
        self.pos.get(node).map(|&i| &self.docs[i])
    }

    /// The readable snapshot node-state at position `i`.
    pub fn snapshot_doc(&self, i: usize) -> Option<&NodeState> {
        self.docs[i].as_ref().ok().map(|d| &**d)
    }

    /// Nodes whose node-state annotation is unreadable, sorted.
    pub fn unreadable(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .nodes
            .iter()
            .zip(&self.docs)
            .filter(|(_, d)| d.is_err())
            .map(|(n, _)| n.clone())
            .collect();
        out.sort();
        out
    }

    /// Packages with a `dependsOn` cycle or an invalid graph, for reporting.
    pub fn graph_error(&self) -> Option<String> {
        match &self.graph {
            Err(e) => Some(e.to_string()),
            Ok(dag) if !dag.cyclic().is_empty() => Some(format!(
                "dependency cycle among packages {}",
                dag.cyclic().iter().cloned().collect::<Vec<_>>().join(", ")
            )),
            Ok(_) => None,
        }
    }
}

/// Membership in a view's selection for names asked mostly in ascending order (as a
/// `BTreeMap` visits its keys): walks the selection in name order instead of a tree look-up
/// per name; a name out of order re-positions the walk by binary search.
pub struct NameWalk<'v, 'a> {
    v: &'v NwView<'a>,
    next: std::cell::Cell<usize>,
}

impl NameWalk<'_, '_> {
    /// True when `name` is selected.
    pub fn contains(&self, name: &str) -> bool {
        let v = self.v;
        let at = |p: usize| v.nodes[v.by_name[p]].as_str();
        let mut p = self.next.get();
        if p > 0 && at(p - 1) >= name {
            p = v.by_name.partition_point(|&i| v.nodes[i].as_str() < name);
        }
        while p < v.by_name.len() && at(p) < name {
            p += 1;
        }
        let found = p < v.by_name.len() && at(p) == name;
        self.next.set(if found { p + 1 } else { p });
        found
    }
}

/// The value of `name` in a map walked in key order: `it` is advanced past smaller keys, so
/// names must be asked in ascending order.
pub fn walk_get<'m, V>(
    it: &mut std::iter::Peekable<std::collections::btree_map::Iter<'m, String, V>>,
    name: &str,
) -> Option<&'m V> {
    while it.next_if(|(k, _)| k.as_str() < name).is_some() {}
    it.next_if(|(k, _)| k.as_str() == name)
        .map(|(_, value)| value)
}

/// True for `"true"` annotations (pause, disable).
fn flag(nw: &NodeWright, key: &str) -> bool {
    nw.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .is_some_and(|v| v == "true")
}

/// A node's name.
pub fn node_name(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

/// A node's annotation.
pub fn annotation<'n>(node: &'n Node, key: &str) -> Option<&'n str> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// A node's label.
pub fn label<'n>(node: &'n Node, key: &str) -> Option<&'n str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

static EMPTY: BTreeMap<String, String> = BTreeMap::new();

/// A node's labels (empty when none).
pub fn labels(node: &Node) -> &BTreeMap<String, String> {
    node.metadata.labels.as_ref().unwrap_or(&EMPTY)
}
