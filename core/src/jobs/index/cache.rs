//! The executor index kept between passes, updated in place when a few Jobs or pods changed.

use std::sync::Arc;

use super::ExecutorIndex;
use super::update::Changed;
use crate::{Options, Snapshot};

/// The executor index of the snapshot a caller last brought it up to date with, kept between
/// passes (see [`NodeStateCache::update_executors`](crate::NodeStateCache::update_executors)).
///
/// The index is a pure function of the snapshot's Jobs, executor pods and the operator namespace.
/// The cache keeps the exact `Arc`s it indexed and answers only for a snapshot whose Job and pod
/// vectors hold the same `Arc`s in the same order (pointer identity; the cache's own clones keep
/// those allocations alive, so an address cannot be reused by another object) and the same
/// namespace. A new, removed or replaced Job or pod (the shell's caches build a new record on
/// every watch event) makes it stale; `update` then reads again only the Jobs whose record or
/// child pods changed and keeps the other entries (or builds the index again when most records
/// changed). A pass with a stale cache builds its own index, so the plan is the same whatever the
/// cache holds.
#[derive(Clone, Debug, Default)]
pub struct ExecutorCache {
    namespace: String,
    jobs: Vec<Arc<crate::slim::SlimJob>>,
    pods: Vec<Arc<crate::slim::SlimPod>>,
    index: Option<ExecutorIndex>,
}

fn same<T>(a: &[Arc<T>], b: &[Arc<T>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| Arc::ptr_eq(x, y))
}

/// The records of `new` that differ from `old`: the range of each between their longest common
/// prefix and suffix (by pointer identity), as (prefix length, old end, new end).
fn middle<T>(old: &[Arc<T>], new: &[Arc<T>]) -> (usize, usize, usize) {
    let same = |(a, b): (&Arc<T>, &Arc<T>)| Arc::ptr_eq(a, b);
    let prefix = old.iter().zip(new).take_while(|&p| same(p)).count();
    let (old_rest, new_rest) = (&old[prefix..], &new[prefix..]);
    let suffix = old_rest
        .iter()
        .rev()
        .zip(new_rest.iter().rev())
        .take_while(|&p| same(p))
        .count();
    (prefix, old.len() - suffix, new.len() - suffix)
}

/// Replaces the changed range of `kept` (as found by [`middle`]) by `new`'s.
fn splice<T>(
    kept: &mut Vec<Arc<T>>,
    new: &[Arc<T>],
    (start, old_end, new_end): (usize, usize, usize),
) {
    kept.splice(start..old_end, new[start..new_end].iter().cloned());
}

impl ExecutorCache {
    /// An empty cache (answers for no snapshot).
    pub fn new() -> Self {
        Self::default()
    }

    /// Brings the cache up to date with `snapshot`: keeps the index when the snapshot holds the
    /// same Jobs and pods as last time, updates the entries of the changed ones otherwise, and
    /// builds it again when there is no index yet, the namespace changed or most records changed.
    pub fn update(&mut self, snapshot: &Snapshot, options: &Options) {
        if self.get(snapshot, options).is_some() || self.update_in_place(snapshot, options) {
            return;
        }
        *self = ExecutorCache {
            namespace: options.namespace.clone(),
            jobs: snapshot.jobs.clone(),
            pods: snapshot.executor_pods.clone(),
            index: Some(ExecutorIndex::build(snapshot, options)),
        };
    }

    /// Updates the kept index for the changed records of `snapshot`; false (cache unchanged) when
    /// it has to be built again.
    pub(super) fn update_in_place(&mut self, snapshot: &Snapshot, options: &Options) -> bool {
        let Some(index) = self.index.as_mut() else {
            return false;
        };
        let jobs = middle(&self.jobs, &snapshot.jobs);
        let pods = middle(&self.pods, &snapshot.executor_pods);
        let changed = Changed {
            old_jobs: &self.jobs[jobs.0..jobs.1],
            new_jobs: &snapshot.jobs[jobs.0..jobs.2],
            old_pods: &self.pods[pods.0..pods.1],
            new_pods: &snapshot.executor_pods[pods.0..pods.2],
        };
        let total =
            self.jobs.len() + snapshot.jobs.len() + self.pods.len() + snapshot.executor_pods.len();
        if self.namespace != options.namespace
            || 2 * changed.len() > total
            || !index.update(&changed, snapshot, options)
        {
            return false;
        }
        splice(&mut self.jobs, &snapshot.jobs, jobs);
        splice(&mut self.pods, &snapshot.executor_pods, pods);
        true
    }

    /// The cached index when it is the index of `snapshot` under `options`, else `None`.
    pub fn get(&self, snapshot: &Snapshot, options: &Options) -> Option<&ExecutorIndex> {
        let index = self.index.as_ref()?;
        (self.namespace == options.namespace
            && same(&self.jobs, &snapshot.jobs)
            && same(&self.pods, &snapshot.executor_pods))
        .then_some(index)
    }
}
