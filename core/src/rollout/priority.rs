//! `status.nodePriority`, `status.nodeOrderOffset` and node order (05-rollout.md §6.3,
//! 02-lifecycle.md §6.6).

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The sticky-batch bookkeeping of one NodeWright.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodePriority {
    /// Node name → when it was picked into a batch.
    pub entries: BTreeMap<String, Time>,
    /// Count of entries ever removed.
    pub offset: i32,
}

impl NodePriority {
    /// Removes `node` if present, counting the removal in the offset.
    pub fn remove(&mut self, node: &str) -> bool {
        let removed = self.entries.remove(node).is_some();
        if removed {
            self.offset = self.offset.saturating_add(1);
        }
        removed
    }

    /// Removes every entry whose node is not in `keep` (complete, deleted or de-selected).
    pub fn prune(&mut self, keep: &BTreeSet<&str>) {
        let gone: Vec<String> = self
            .entries
            .keys()
            .filter(|name| !keep.contains(name.as_str()))
            .cloned()
            .collect();
        for name in gone {
            self.remove(&name);
        }
    }

    /// Adds `node` picked at `now` (whole seconds, as persisted); an existing entry is kept.
    pub fn add(&mut self, node: &str, now: Timestamp) {
        if !self.entries.contains_key(node) {
            self.entries
                .insert(node.to_string(), Time(truncate_to_second(now)));
        }
    }

    /// `nodeOrderOffset + index` of every entry, sorted by (timestamp, name).
    pub fn node_order(&self) -> BTreeMap<String, i32> {
        let mut sorted: Vec<(&Time, &String)> =
            self.entries.iter().map(|(name, t)| (t, name)).collect();
        sorted.sort();
        sorted
            .into_iter()
            .enumerate()
            .map(|(index, (_, name))| {
                let index = i32::try_from(index).unwrap_or(i32::MAX);
                (name.clone(), self.offset.saturating_add(index))
            })
            .collect()
    }
}

/// `now` without its sub-second part: `status.nodePriority` persists whole seconds.
pub fn truncate_to_second(now: Timestamp) -> Timestamp {
    Timestamp::from_second(now.as_second()).unwrap_or(now)
}
