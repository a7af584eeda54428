//! The `status.nodeState` mirror kept out of the working status: the pass records its edits to
//! the mirror per NodeWright and assembles the full status only for a `PatchStatus` (the mirror
//! holds every node's document, so cloning, comparing and dropping it per pass is expensive).

use std::collections::{BTreeMap, BTreeSet};

use nodewright_crds::{NodeState, NodeWrightStatus};

/// Edits of one NodeWright's mirror on top of the snapshot's.
#[derive(Clone, Debug, Default)]
pub struct MirrorEdits {
    /// Entries set (replacing the snapshot's).
    set: BTreeMap<String, NodeState>,
    /// Entries removed (absent from `set`).
    removed: BTreeSet<String>,
    /// `Some(changed)` once the edited mirror is known to exceed [`MIRROR_LIMIT_BYTES`] (D26:
    /// it is left out of the status, so its entries are not kept); `changed` says whether it
    /// differs from the snapshot's.
    oversized: Option<bool>,
}

impl MirrorEdits {
    /// The current mirror entry of `node`.
    pub fn get<'s>(
        &'s self,
        snapshot: &'s BTreeMap<String, NodeState>,
        node: &str,
    ) -> Option<&'s NodeState> {
        match self.set.get(node) {
            Some(doc) => Some(doc),
            None if self.removed.contains(node) => None,
            None => snapshot.get(node),
        }
    }

    /// True when nothing is edited (every entry is the snapshot's).
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.removed.is_empty()
    }

    /// Sets the entry of `node`.
    pub fn insert(&mut self, node: String, doc: NodeState) {
        self.removed.remove(&node);
        self.set.insert(node, doc);
    }

    /// Removes the entry of `node`.
    pub fn remove(&mut self, node: &str) {
        self.set.remove(node);
        self.removed.insert(node.to_string());
    }

    /// Keeps only the entries whose node satisfies `keep`.
    pub fn retain(
        &mut self,
        snapshot: &BTreeMap<String, NodeState>,
        keep: impl Fn(&String) -> bool,
    ) {
        self.set.retain(|n, _| keep(n));
        for n in snapshot.keys() {
            if !keep(n) {
                self.removed.insert(n.clone());
            }
        }
    }

    /// Records that the edited mirror exceeds [`MIRROR_LIMIT_BYTES`] and whether it differs
    /// from the snapshot's; its entries are dropped (a too-large mirror is never written).
    pub fn mark_oversized(&mut self, changed: bool) {
        self.set.clear();
        self.removed.clear();
        self.oversized = Some(changed);
    }

    /// True when the edited mirror is known to exceed [`MIRROR_LIMIT_BYTES`].
    pub fn oversized(&self) -> bool {
        self.oversized.is_some()
    }

    /// True when the edited mirror differs from the snapshot's.
    pub fn changed(&self, snapshot: &BTreeMap<String, NodeState>) -> bool {
        if let Some(changed) = self.oversized {
            return changed;
        }
        self.set.iter().any(|(n, d)| snapshot.get(n) != Some(d))
            || self.removed.iter().any(|n| snapshot.contains_key(n))
    }

    /// The full edited mirror (the edits are moved into it, the rest cloned from `snapshot`);
    /// empty when it is [`oversized`](Self::oversized).
    pub fn into_applied(
        self,
        snapshot: &BTreeMap<String, NodeState>,
    ) -> BTreeMap<String, NodeState> {
        if self.oversized() {
            return BTreeMap::new();
        }
        let mut out: BTreeMap<String, NodeState> = snapshot
            .iter()
            .filter(|(n, _)| !self.removed.contains(*n) && !self.set.contains_key(*n))
            .map(|(n, d)| (n.clone(), d.clone()))
            .collect();
        out.extend(self.set);
        out
    }
}

/// A copy of `status` with an empty mirror (the mirror is not cloned).
pub fn clone_without_mirror(status: &NodeWrightStatus) -> NodeWrightStatus {
    // Exhaustive on purpose: a new status field must be considered here.
    let NodeWrightStatus {
        observed_generation,
        node_state: _,
        node_status,
        status,
        conditions,
        node_boot_ids,
        node_priority,
        node_order_offset,
        config_updates,
        compartment_statuses,
        nodes_in_progress,
        complete_nodes,
        package_list,
    } = status;
    NodeWrightStatus {
        observed_generation: *observed_generation,
        node_state: BTreeMap::new(),
        node_status: node_status.clone(),
        status: *status,
        conditions: conditions.clone(),
        node_boot_ids: node_boot_ids.clone(),
        node_priority: node_priority.clone(),
        node_order_offset: *node_order_offset,
        config_updates: config_updates.clone(),
        compartment_statuses: compartment_statuses.clone(),
        nodes_in_progress: *nodes_in_progress,
        complete_nodes: complete_nodes.clone(),
        package_list: package_list.clone(),
    }
}

/// True when `a` and `b` are equal apart from their mirrors.
pub fn eq_without_mirror(a: &NodeWrightStatus, b: &NodeWrightStatus) -> bool {
    // Exhaustive on purpose: a new status field must be compared here.
    let NodeWrightStatus {
        observed_generation,
        node_state: _,
        node_status,
        status,
        conditions,
        node_boot_ids,
        node_priority,
        node_order_offset,
        config_updates,
        compartment_statuses,
        nodes_in_progress,
        complete_nodes,
        package_list,
    } = a;
    *observed_generation == b.observed_generation
        && *status == b.status
        && *node_order_offset == b.node_order_offset
        && *nodes_in_progress == b.nodes_in_progress
        && *complete_nodes == b.complete_nodes
        && *package_list == b.package_list
        && *conditions == b.conditions
        && *node_priority == b.node_priority
        && *config_updates == b.config_updates
        && *compartment_statuses == b.compartment_statuses
        && *node_status == b.node_status
        && *node_boot_ids == b.node_boot_ids
}
/// D26: the largest `status.nodeState` mirror written, as JSON bytes. A NodeWright status must
/// fit the apiserver's request limit (etcd's `--max-request-bytes`, 1.5 MiB by default); at
/// 10,000 nodes × 5 packages the mirror alone is about 2.4 MB.
pub const MIRROR_LIMIT_BYTES: usize = 1 << 20;

/// True when the mirror's JSON is at most [`MIRROR_LIMIT_BYTES`] (counted, not built; the count
/// stops at the limit).
pub fn mirror_fits(mirror: &BTreeMap<String, NodeState>) -> bool {
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, mirror).is_ok()
}

/// A lower bound of the JSON bytes `node`'s mirror entry `doc` takes: the quoted keys, the
/// four fields every package entry serializes (`name`, `version`, `image`, `stage` with its
/// value left out) and the punctuation; escaping only adds to it.
pub fn entry_bytes_at_least(node: &str, doc: &NodeState) -> usize {
    // `"node":{}` and, per entry, `"key":{"name":"","version":"","image":"","stage":""}`.
    const NODE: usize = 5;
    const ENTRY: usize = 49;
    NODE + node.len()
        + doc
            .0
            .iter()
            .map(|(k, e)| ENTRY + k.len() + e.name.len() + e.version.len() + e.image.len())
            .sum::<usize>()
}

/// Counts written bytes and refuses once they pass [`MIRROR_LIMIT_BYTES`].
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        if self.0 > MIRROR_LIMIT_BYTES {
            return Err(std::io::Error::other("mirror over the limit"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
