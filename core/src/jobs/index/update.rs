//! Updating an executor index for a snapshot in which a few Jobs or executor pods changed: the
//! entries of Jobs whose record and child pods are the same `Arc`s are kept, the others are read
//! again, and the per-NodeWright and per-node lists and busy nodes are patched to what
//! [`ExecutorIndex::build`] makes of the new snapshot.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use indexmap::IndexMap;

use super::{
    CONTROLLER_UID, Children, ExecutorIndex, ExecutorJob, group_children, in_namespace, job_key,
    label, read_job,
};
use crate::slim::{SlimJob, SlimPod};
use crate::{Options, Snapshot};

/// The records of a snapshot that differ from the indexed one: in each vector, the records between
/// the longest common prefix and suffix (by pointer identity), old and new. Every other record is
/// the same `Arc` at the same place relative to the others.
pub(super) struct Changed<'a> {
    pub(super) old_jobs: &'a [Arc<SlimJob>],
    pub(super) new_jobs: &'a [Arc<SlimJob>],
    pub(super) old_pods: &'a [Arc<SlimPod>],
    pub(super) new_pods: &'a [Arc<SlimPod>],
}

impl Changed<'_> {
    /// Number of changed records, old and new.
    pub(super) fn len(&self) -> usize {
        self.old_jobs.len() + self.new_jobs.len() + self.old_pods.len() + self.new_pods.len()
    }
}

/// The entries an update drops (positions in the index, ascending) and the entries it reads
/// (each with its position in the updated index, ascending).
struct Patch {
    dropped: Vec<usize>,
    fresh: Vec<(usize, ExecutorJob)>,
}

fn remove_sorted(list: &mut Vec<usize>, i: usize) {
    if let Ok(at) = list.binary_search(&i) {
        list.remove(at);
    }
}

fn insert_sorted(list: &mut Vec<usize>, i: usize) {
    let at = list.partition_point(|&j| j < i);
    list.insert(at, i);
}

impl ExecutorIndex {
    /// Brings this index, built from the last snapshot, up to date with `snapshot`, whose records
    /// differ only by `changed` (same namespace). False, with the index unchanged, when two Jobs
    /// with the same name and uid are among the changed ones: their order is the snapshot's,
    /// which only a build reproduces.
    pub(super) fn update(
        &mut self,
        changed: &Changed,
        snapshot: &Snapshot,
        options: &Options,
    ) -> bool {
        let Some(patch) = self.patch(changed, snapshot, options) else {
            return false;
        };
        self.apply(patch);
        true
    }

    /// The entries to drop and read again: those of the changed Jobs and of the Jobs whose
    /// child pods changed (every changed pod's controller uid).
    fn patch(&self, changed: &Changed, snapshot: &Snapshot, options: &Options) -> Option<Patch> {
        // Few uids: a sorted set compares them faster than hashing every Job's uid.
        let touched: BTreeSet<&str> = (changed.old_pods.iter().chain(changed.new_pods))
            .filter_map(|p| label(p.metadata.labels.as_ref(), CONTROLLER_UID))
            .collect();
        let mut dropped: Vec<usize> = changed
            .old_jobs
            .iter()
            .filter_map(|job| self.position(job))
            .collect();
        dropped.sort_unstable();
        dropped.dedup();
        let reread: Vec<usize> = if touched.is_empty() {
            Vec::new()
        } else {
            (0..self.jobs.len())
                .filter(|&i| touched.contains(self.jobs[i].uid.as_ref()))
                .filter(|i| dropped.binary_search(i).is_err())
                .collect()
        };
        let to_read: Vec<&Arc<SlimJob>> = (changed.new_jobs.iter())
            .filter(|j| in_namespace(j.metadata.namespace.as_deref(), options))
            .chain(reread.iter().map(|&i| &self.jobs[i].job))
            .collect();
        dropped.extend(reread);
        dropped.sort_unstable();
        if dropped.iter().any(|&i| self.shares_key(i)) {
            return None;
        }
        let children = self.children(&to_read, &dropped, &touched, snapshot, options);
        let mut parsed = IndexMap::new();
        let mut fresh: Vec<ExecutorJob> = (to_read.into_iter())
            .filter_map(|job| read_job(job, &children, &mut parsed))
            .collect();
        fresh.sort_by(|a, b| job_key(&a.job).cmp(&job_key(&b.job)));
        if fresh
            .windows(2)
            .any(|w| job_key(&w[0].job) == job_key(&w[1].job))
        {
            return None;
        }
        let fresh = (fresh.into_iter().enumerate())
            .map(|(k, entry)| Some((self.target(&entry.job, &dropped)? + k, entry)))
            .collect::<Option<_>>()?;
        Some(Patch { dropped, fresh })
    }

    /// The position of `job`'s entry, if it has one.
    fn position(&self, job: &Arc<SlimJob>) -> Option<usize> {
        let key = job_key(job);
        let start = self.jobs.partition_point(|e| job_key(&e.job) < key);
        (self.jobs[start..].iter())
            .take_while(|e| job_key(&e.job) == key)
            .position(|e| Arc::ptr_eq(&e.job, job))
            .map(|k| start + k)
    }

    /// True when the entry at `i` has the same name and uid as a neighbour.
    fn shares_key(&self, i: usize) -> bool {
        let key = job_key(&self.jobs[i].job);
        let same = |j: usize| self.jobs.get(j).is_some_and(|e| job_key(&e.job) == key);
        (i > 0 && same(i - 1)) || same(i + 1)
    }

    /// The number of kept entries (not `dropped`) ordered before a Job read again; `None` when a
    /// kept entry has the same name and uid.
    fn target(&self, job: &SlimJob, dropped: &[usize]) -> Option<usize> {
        let key = job_key(job);
        let start = self.jobs.partition_point(|e| job_key(&e.job) < key);
        let mut equal = (start..self.jobs.len()).take_while(|&i| job_key(&self.jobs[i].job) == key);
        if equal.any(|i| dropped.binary_search(&i).is_err()) {
            return None;
        }
        Some(start - dropped.partition_point(|&d| d < start))
    }

    /// The child pods of the Jobs to read: a Job whose uid no changed pod carries has the
    /// children a dropped entry with that uid had (the same pods in the same order); the others
    /// are looked up in the snapshot's pods.
    fn children<'a>(
        &'a self,
        jobs: &[&Arc<SlimJob>],
        dropped: &[usize],
        touched: &BTreeSet<&str>,
        snapshot: &'a Snapshot,
        options: &Options,
    ) -> Children<'a> {
        let known: HashMap<&str, &[Arc<SlimPod>]> = (dropped.iter().map(|&i| &self.jobs[i]))
            .filter(|e| !touched.contains(e.uid.as_ref()))
            .map(|e| (e.uid.as_ref(), e.pods.as_slice()))
            .collect();
        let mut children = Children::new();
        let mut wanted = BTreeSet::new();
        for job in jobs {
            let uid = job.metadata.uid.as_deref().unwrap_or_default();
            match known.get_key_value(uid) {
                Some((&uid, pods)) => {
                    children.insert(uid, pods.iter().collect());
                }
                None => {
                    wanted.insert(uid);
                }
            }
        }
        if !wanted.is_empty() {
            let wanted = |uid: &str| wanted.contains(uid);
            group_children(&snapshot.executor_pods, options, wanted, &mut children);
        }
        children
    }

    /// Drops `patch.dropped`, places `patch.fresh` and brings the lists and busy nodes up to date.
    fn apply(&mut self, patch: Patch) {
        let Patch { dropped, fresh } = patch;
        let mut nodes: BTreeSet<Arc<str>> = BTreeSet::new();
        for &i in &dropped {
            nodes.insert(self.jobs[i].node.clone());
            self.unlist(i);
        }
        let targets: Vec<usize> = fresh.iter().map(|(t, _)| *t).collect();
        nodes.extend(fresh.iter().map(|(_, e)| e.node.clone()));
        if targets == dropped {
            for (t, entry) in fresh {
                self.jobs[t] = entry;
            }
        } else {
            self.merge(&dropped, fresh);
        }
        for t in targets {
            self.list(t);
        }
        for node in &nodes {
            self.refresh_busy(node);
        }
    }

    /// Replaces the entries at `dropped` by `fresh` (each at its target position) and renumbers
    /// the lists, which hold only kept entries.
    fn merge(&mut self, dropped: &[usize], fresh: Vec<(usize, ExecutorJob)>) {
        let old = std::mem::take(&mut self.jobs);
        let mut renumber = vec![usize::MAX; old.len()];
        let mut fresh = fresh.into_iter().peekable();
        let mut dropped = dropped.iter().peekable();
        self.jobs.reserve(old.len() + fresh.len());
        for (i, entry) in old.into_iter().enumerate() {
            while let Some((_, e)) = fresh.next_if(|(t, _)| *t == self.jobs.len()) {
                self.jobs.push(e);
            }
            if dropped.next_if_eq(&&i).is_none() {
                renumber[i] = self.jobs.len();
                self.jobs.push(entry);
            }
        }
        self.jobs.extend(fresh.map(|(_, e)| e));
        let lists = (self.by_nodewright.values_mut()).chain(
            self.by_node
                .values_mut()
                .flat_map(|nodes| nodes.values_mut()),
        );
        for i in lists.flatten() {
            *i = renumber[*i];
        }
    }

    /// Removes the entry at `i` from its NodeWright's and node's lists.
    fn unlist(&mut self, i: usize) {
        let entry = &self.jobs[i];
        if let Some(list) = self.by_nodewright.get_mut(&entry.nodewright) {
            remove_sorted(list, i);
            if list.is_empty() {
                self.by_nodewright.remove(&entry.nodewright);
            }
        }
        if let Some(nodes) = self.by_node.get_mut(&entry.nodewright) {
            if let Some(list) = nodes.get_mut(&entry.node) {
                remove_sorted(list, i);
                if list.is_empty() {
                    nodes.remove(&entry.node);
                }
            }
            if nodes.is_empty() {
                self.by_node.remove(&entry.nodewright);
            }
        }
    }

    /// Adds the entry at `i` to its NodeWright's and node's lists.
    fn list(&mut self, i: usize) {
        let entry = &self.jobs[i];
        let list = self
            .by_nodewright
            .entry(entry.nodewright.clone())
            .or_default();
        insert_sorted(list, i);
        let nodes = self.by_node.entry(entry.nodewright.clone()).or_default();
        insert_sorted(nodes.entry(entry.node.clone()).or_default(), i);
    }

    /// Marks `node` busy when an unfinished Job of any NodeWright runs on it (04 rule 2.3).
    fn refresh_busy(&mut self, node: &str) {
        let busy = (self.by_node.values())
            .filter_map(|nodes| nodes.get(node))
            .flatten()
            .any(|&i| self.jobs[i].is_unfinished());
        if busy {
            self.busy_nodes.insert(Arc::from(node));
        } else {
            self.busy_nodes.remove(node);
        }
    }
}
