//! A memo of parsed node-state documents the shell may keep between passes.
//!
//! Parsing every node-state annotation is the largest single cost of a pass at scale, and almost
//! every annotation is unchanged from the previous pass. Parsing is pure, so a document parsed
//! from exactly the same text is the same document: the cache holds, per (node, annotation key),
//! the text it parsed and the result, and answers only when the text is identical. A pass with
//! an empty or stale cache plans exactly the same as one with a fresh cache; only its speed
//! differs.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::BuildHasher;
use std::sync::Arc;

use indexmap::IndexMap;
use k8s_openapi::api::core::v1::Node;
use nodewright_crds::{NodeState, NodeStateError};

use crate::jobs::{ExecutorCache, ExecutorIndex};
use crate::{Options, Snapshot};

/// One parsed annotation: the node it was read from, where its text sits, and the document.
#[derive(Clone, Debug)]
struct Parsed {
    /// The node read (shared with the snapshot): it holds the text, and holding it keeps the
    /// text at `at` for as long as this entry lives.
    node: Arc<Node>,
    /// Address of the annotation's text inside `node`: a pass given the same node object finds
    /// its text there and needs no comparison (compared, never dereferenced).
    at: usize,
    doc: Arc<NodeState>,
}

impl Parsed {
    /// True when `text` is the text this entry was parsed from.
    fn holds(&self, key: &str, text: &String) -> bool {
        self.at == address(text) || self.text(key).is_some_and(|t| t == text)
    }

    fn text(&self, key: &str) -> Option<&String> {
        self.node.metadata.annotations.as_ref()?.get(key)
    }
}

fn address(text: &String) -> usize {
    std::ptr::from_ref(text) as usize
}

/// Parsed node-state documents per node and annotation key (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct NodeStateCache {
    docs: foldhash::HashMap<String, BTreeMap<String, Parsed>>,
    /// Every distinct document held, by a hash of a text it was parsed from: nodes with equal
    /// documents (most of a converged fleet) share one.
    shared: foldhash::HashMap<u64, Vec<Arc<NodeState>>>,
    /// The executor index of the last snapshot given to [`NodeStateCache::update_executors`].
    executors: ExecutorCache,
}

impl NodeStateCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Brings the cache up to date with `nodes`: every readable node-state annotation is
    /// cached, documents whose text is unchanged are kept as they are, changed ones are parsed
    /// again, and nodes and annotations that are gone are dropped. Unreadable annotations are
    /// not cached.
    pub fn update(&mut self, nodes: &[Arc<Node>]) {
        let prefix = nodewright_crds::keys::node_state("");
        let mut docs = foldhash::HashMap::default();
        let mut old = std::mem::take(&mut self.docs);
        for node in nodes {
            let Some(name) = node.metadata.name.as_deref() else {
                continue;
            };
            let Some(annotations) = node.metadata.annotations.as_ref() else {
                continue;
            };
            let mut kept = old.remove(name).unwrap_or_default();
            let mut fresh = BTreeMap::new();
            for (key, text) in annotations.iter().filter(|(k, _)| k.starts_with(&prefix)) {
                let doc = match kept.remove(key) {
                    Some(p) if p.holds(key, text) => p.doc,
                    _ => match NodeState::parse(text) {
                        Ok(doc) => self.share(text, doc),
                        Err(_) => continue,
                    },
                };
                let parsed = Parsed {
                    node: Arc::clone(node),
                    at: address(text),
                    doc,
                };
                fresh.insert(key.clone(), parsed);
            }
            if !fresh.is_empty() {
                docs.insert(name.to_string(), fresh);
            }
        }
        self.docs = docs;
        drop(old);
        // Documents no entry holds any more are forgotten.
        self.shared.retain(|_, held| {
            held.retain(|doc| Arc::strong_count(doc) > 1);
            !held.is_empty()
        });
    }

    /// The held document equal to `doc` (parsed from `text`), or `doc` now held.
    fn share(&mut self, text: &str, doc: NodeState) -> Arc<NodeState> {
        let hash = self.shared.hasher().hash_one(text);
        let held = self.shared.entry(hash).or_default();
        if let Some(same) = held.iter().find(|d| ***d == doc) {
            return Arc::clone(same);
        }
        let doc = Arc::new(doc);
        held.push(Arc::clone(&doc));
        doc
    }

    /// Number of distinct documents held.
    pub fn distinct(&self) -> usize {
        self.shared.values().map(Vec::len).sum()
    }

    /// Brings the cached executor index up to date with `snapshot` (see [`ExecutorCache`]): kept
    /// when the snapshot holds the very same Job and pod records as last time, updated for the
    /// Jobs whose record or child pods changed otherwise. A pass over a snapshot the index does
    /// not answer for builds its own.
    pub fn update_executors(&mut self, snapshot: &Snapshot, options: &Options) {
        self.executors.update(snapshot, options);
    }

    /// The cached executor index when it is `snapshot`'s under `options`.
    pub(crate) fn executor_index(
        &self,
        snapshot: &Snapshot,
        options: &Options,
    ) -> Option<&ExecutorIndex> {
        self.executors.get(snapshot, options)
    }

    /// Number of cached documents.
    pub fn len(&self) -> usize {
        self.docs.values().map(BTreeMap::len).sum()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The document parsed from `text` under annotation `key` of `node`, when cached.
    pub fn get(&self, node: &str, key: &str, text: &String) -> Option<&NodeState> {
        self.lookup(node, key, text).map(|doc| &**doc)
    }

    fn lookup(&self, node: &str, key: &str, text: &String) -> Option<&Arc<NodeState>> {
        let parsed = self.docs.get(node)?.get(key)?;
        parsed.holds(key, text).then_some(&parsed.doc)
    }
}

/// Node-state documents of one pass: for each node and node-state key the document the
/// [`NodeStateCache`] answered, and the documents this pass parsed, once per distinct
/// annotation text the cache did not answer (most nodes of a fleet carry identical documents).
pub(crate) struct PassDocs<'a> {
    /// The node-state keys of the named NodeWrights, sorted.
    keys: Vec<String>,
    /// Cache answers, `keys.len()` per node, in the order of the nodes given to `build`.
    hits: Vec<Option<&'a NodeState>>,
    by_text: IndexMap<&'a str, Result<NodeState, NodeStateError>>,
}

impl<'a> PassDocs<'a> {
    /// Looks up in `cache`, or parses, the node-state annotations of the NodeWrights named
    /// `nodewrights` on `nodes`.
    pub(crate) fn build(
        nodes: &[&'a Node],
        nodewrights: &[Arc<nodewright_crds::NodeWright>],
        cache: &'a NodeStateCache,
    ) -> Self {
        let keys: Vec<String> = nodewrights
            .iter()
            .filter_map(|nw| nw.metadata.name.as_deref())
            .map(nodewright_crds::keys::node_state)
            .collect::<BTreeSet<String>>()
            .into_iter()
            .collect();
        let mut by_text: IndexMap<&'a str, Result<NodeState, NodeStateError>> = IndexMap::new();
        let mut hits = Vec::with_capacity(nodes.len() * keys.len());
        for node in nodes {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let annotations = node.metadata.annotations.as_ref();
            for key in &keys {
                let Some(text) = annotations.and_then(|a| a.get(key)) else {
                    hits.push(None);
                    continue;
                };
                // The cache first: a hit needs no hashing of the (long) text.
                let hit = cache.get(name, key, text);
                hits.push(hit);
                if hit.is_none() && !by_text.contains_key(text.as_str()) {
                    by_text.insert(text.as_str(), NodeState::parse(text));
                }
            }
        }
        PassDocs {
            keys,
            hits,
            by_text,
        }
    }

    /// What the cache answered for annotation `key` of the `i`-th node given to `build`:
    /// `None` when `key` is not one this pass looked up, `Some(None)` when the cache did not
    /// hold the node's text.
    pub(crate) fn hit(&self, i: usize, key: &str) -> Option<Option<&'a NodeState>> {
        let k = self.keys.binary_search_by(|k| k.as_str().cmp(key)).ok()?;
        self.hits.get(i * self.keys.len() + k).copied()
    }

    /// The result of parsing `text`, when this pass parsed it.
    pub(crate) fn get(&self, text: &str) -> Option<&Result<NodeState, NodeStateError>> {
        self.by_text.get(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, key: &str, text: &str) -> Arc<Node> {
        Arc::new(Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: Some([(key.to_string(), text.to_string())].into()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        })
    }

    const DOC: &str = r#"{"pkg|1.0.0":{"name":"pkg","version":"1.0.0","image":"img","stage":"apply","state":"in_progress"}}"#;

    #[test]
    fn answers_only_for_identical_text() {
        let key = nodewright_crds::keys::node_state("demo");
        let mut cache = NodeStateCache::new();
        cache.update(&[node("n1", &key, DOC)]);
        assert_eq!(cache.len(), 1);
        let doc = DOC.to_string();
        assert_eq!(
            cache.get("n1", &key, &doc),
            NodeState::parse(DOC).ok().as_ref()
        );
        assert!(cache.get("n1", &key, &"{}".to_string()).is_none());
        assert!(cache.get("n2", &key, &doc).is_none());
        assert!(cache.get("n1", "other", &doc).is_none());
    }

    #[test]
    fn the_same_node_object_is_answered_by_identity_and_another_by_its_text() {
        let key = nodewright_crds::keys::node_state("demo");
        let mut cache = NodeStateCache::new();
        let same = node("n1", &key, DOC);
        cache.update(std::slice::from_ref(&same));
        let text = |n: &Node| n.metadata.annotations.as_ref().unwrap()[&key].clone();
        let inside = &same.metadata.annotations.as_ref().unwrap()[&key];
        let parsed = cache.docs["n1"][&key].clone();
        assert_eq!(
            parsed.at,
            address(inside),
            "the text is found where it was read"
        );
        assert!(cache.get("n1", &key, inside).is_some());
        // An equal text elsewhere (a new node object from the watch) is compared.
        let copy = node("n1", &key, DOC);
        assert!(cache.get("n1", &key, &text(&copy)).is_some());
        let changed = node("n1", &key, "{}");
        assert!(cache.get("n1", &key, &text(&changed)).is_none());
        // Updating with the new object keeps the document and moves to the new text.
        cache.update(std::slice::from_ref(&copy));
        let moved = &cache.docs["n1"][&key];
        assert!(Arc::ptr_eq(&parsed.doc, &moved.doc));
        assert!(Arc::ptr_eq(&copy, &moved.node));
    }

    #[test]
    fn nodes_with_equal_documents_share_one() {
        let key = nodewright_crds::keys::node_state("demo");
        let mut cache = NodeStateCache::new();
        let doc = DOC.to_string();
        cache.update(&[node("n1", &key, DOC), node("n2", &key, DOC)]);
        let (a, b) = (
            cache.lookup("n1", &key, &doc),
            cache.lookup("n2", &key, &doc),
        );
        assert!(Arc::ptr_eq(a.unwrap(), b.unwrap()));
        assert_eq!((cache.len(), cache.distinct()), (2, 1));
        cache.update(&[node("n1", &key, DOC), node("n2", &key, "{}")]);
        assert_eq!((cache.len(), cache.distinct()), (2, 2));
        cache.update(&[node("n2", &key, "{}")]);
        assert_eq!(
            (cache.len(), cache.distinct()),
            (1, 1),
            "the unheld one is forgotten"
        );
        cache.update(&[]);
        assert_eq!(cache.distinct(), 0);
    }

    #[test]
    fn update_reuses_unchanged_documents_and_drops_unreadable_ones() {
        let key = nodewright_crds::keys::node_state("demo");
        let mut cache = NodeStateCache::new();
        let doc = DOC.to_string();
        cache.update(&[node("n1", &key, DOC)]);
        let a = Arc::clone(cache.lookup("n1", &key, &doc).unwrap());
        cache.update(&[node("n1", &key, DOC), node("n2", &key, "not json")]);
        assert_eq!(cache.len(), 1);
        assert!(Arc::ptr_eq(&a, cache.lookup("n1", &key, &doc).unwrap()));
        cache.update(&[node("n1", &key, "{}")]);
        assert_eq!(
            cache.get("n1", &key, &"{}".to_string()),
            Some(&NodeState::default())
        );
        cache.update(&[]);
        assert!(cache.is_empty());
    }
}
