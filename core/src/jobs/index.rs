//! The executor index: a snapshot's Jobs and executor pods per (NodeWright, node, package) and
//! per node, with each Job classified once (04-jobs-rules.md §2.1–2.3, 03-executor.md §3.9).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use indexmap::IndexMap;

use nodewright_crds::{Stage, keys};

use super::annotation::PackageAnnotation;
use super::classify::{JobState, job_state};
use super::naming::node_label_value;
use crate::effect::Context;
use crate::slim::{SlimJob, SlimPod};
use crate::{Options, Snapshot};

mod cache;
mod update;

pub use cache::ExecutorCache;

/// Label Kubernetes puts on a Job's child pods (never select children by job name, 03 §3.9).
pub const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";

/// One executor Job of the snapshot, read once.
#[derive(Clone, Debug, PartialEq)]
pub struct ExecutorJob {
    /// The Job object (shared with the snapshot).
    pub job: Arc<SlimJob>,
    /// `metadata.name` (shared with the record).
    pub name: Arc<str>,
    /// `metadata.uid` (shared with the record).
    pub uid: Arc<str>,
    /// Owning NodeWright (`<P>/name` label, shared with the record).
    pub nodewright: Arc<str>,
    /// Full node name: `spec.template.spec.nodeName`, else the `<P>/node` label.
    pub node: Arc<str>,
    /// `<P>/package` label (`<pkg>-<ver>`), if present (shared with the record).
    pub package_label: Option<Arc<str>>,
    /// `<P>/executor-fingerprint` annotation, if present (shared with the record): every sweep
    /// compares it with the spec's.
    pub fingerprint: Option<Arc<str>>,
    /// Parsed `<P>/package` annotation; `None` when absent or unreadable (04 rule 1.2.5).
    pub package: Option<Arc<PackageAnnotation>>,
    /// The node-state key (`name|version`) of the annotation's package, shared by the Jobs
    /// with the same annotation text.
    pub(crate) entry_key: Option<Arc<str>>,
    /// Stage from the annotation, else from the `<P>/stage` label.
    pub stage: Option<Stage>,
    /// `<P>/interrupt == "True"`.
    pub interrupt: bool,
    /// Conditions-derived state.
    pub state: JobState,
    /// `<P>/state-recorded == "true"`.
    pub processed: bool,
    /// `"invalid": true` inside `<P>/package`.
    pub invalid: bool,
    /// The Job has a deletion timestamp (still unfinished, 04 rule 2.2).
    pub terminating: bool,
    /// Child pods (by controller uid), sorted by creation timestamp then name.
    pub pods: Vec<Arc<SlimPod>>,
}

impl ExecutorJob {
    /// True when the Job is neither `Complete` nor `Failed`.
    pub fn is_unfinished(&self) -> bool {
        !self.state.is_finished()
    }

    /// A Job annotation value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.job.metadata.annotation(key)
    }

    /// The log/event context of this Job (NodeWright, node, package, version, stage).
    pub fn context(&self) -> Context {
        Context {
            nodewright: Some(self.nodewright.to_string()),
            node: Some(self.node.to_string()),
            package: self.package.as_ref().map(|p| p.name.clone()),
            version: self.package.as_ref().map(|p| p.version.clone()),
            stage: self.stage.map(|s| s.as_str().to_string()),
        }
    }

    /// True when the Job runs package `name` at any version: by its `<P>/package` annotation, or,
    /// when that is unreadable, by its package label for `version`.
    pub fn runs_package(&self, name: &str, version: &str) -> bool {
        match &self.package {
            Some(p) => p.name == name,
            None => self.runs(name, version),
        }
    }

    /// True when the Job runs `name|version` (by its package label).
    pub fn runs(&self, name: &str, version: &str) -> bool {
        self.package_label.as_deref().is_some_and(|label| {
            label.len() == name.len() + 1 + version.len()
                && label.starts_with(name)
                && label[name.len()..].starts_with('-')
                && label.ends_with(version)
        })
    }
}

/// All executor Jobs of a snapshot, indexed for the lifecycle's gates and the Jobs rules.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExecutorIndex {
    jobs: Vec<ExecutorJob>,
    by_nodewright: BTreeMap<Arc<str>, Vec<usize>>,
    by_node: BTreeMap<Arc<str>, BTreeMap<Arc<str>, Vec<usize>>>,
    busy_nodes: BTreeSet<Arc<str>>,
}

fn label<'a>(object_labels: Option<&'a BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    object_labels.and_then(|l| l.get(key)).map(String::as_str)
}

/// Child pods per controller uid (`<P>/name` and `<P>/package` executor pods of the operator
/// namespace), in snapshot order.
type Children<'a> = HashMap<&'a str, Vec<&'a Arc<SlimPod>>>;

/// Adds to `children` the executor pods of `pods` (operator namespace, both `<P>/name` and
/// `<P>/package` labels, D16) whose controller uid is `wanted`.
fn group_children<'a>(
    pods: &'a [Arc<SlimPod>],
    options: &Options,
    wanted: impl Fn(&str) -> bool,
    children: &mut Children<'a>,
) {
    for pod in pods {
        let labels = pod.metadata.labels.as_ref();
        let Some(uid) = label(labels, CONTROLLER_UID).filter(|uid| wanted(uid)) else {
            continue;
        };
        if in_namespace(pod.metadata.namespace.as_deref(), options)
            && label(labels, keys::LABEL_NAME).is_some()
            && label(labels, keys::PACKAGE).is_some()
        {
            children.entry(uid).or_default().push(pod);
        }
    }
}

/// True when an object of namespace `ns` is in the operator namespace (no namespace counts).
fn in_namespace(ns: Option<&str>, options: &Options) -> bool {
    ns.is_none_or(|n| n == options.namespace)
}

/// The index order of Jobs: by name, then uid.
fn job_key(job: &SlimJob) -> (Option<&str>, Option<&str>) {
    (job.metadata.name.as_deref(), job.metadata.uid.as_deref())
}

fn sort_pods(pods: &mut [Arc<SlimPod>]) {
    pods.sort_by(|a, b| {
        let ta = a.metadata.creation_timestamp.as_ref().map(|t| t.0);
        let tb = b.metadata.creation_timestamp.as_ref().map(|t| t.0);
        ta.cmp(&tb)
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

impl ExecutorIndex {
    /// Indexes the snapshot's Jobs (those with a `<P>/name` label in the operator namespace) and
    /// executor pods (operator namespace, both `<P>/name` and `<P>/package` labels, D16).
    pub fn build(snapshot: &Snapshot, options: &Options) -> Self {
        let mut children = Children::new();
        group_children(&snapshot.executor_pods, options, |_| true, &mut children);
        // Package annotations repeat across nodes: parse each distinct text once.
        let mut parsed: IndexMap<&str, Parsed> = IndexMap::new();
        // Sort references, not the (large) read records.
        let mut sorted: Vec<&Arc<SlimJob>> = snapshot
            .jobs
            .iter()
            .filter(|j| in_namespace(j.metadata.namespace.as_deref(), options))
            .collect();
        sorted.sort_by(|a, b| job_key(a).cmp(&job_key(b)));
        // Sized up front: the index lives until the next pass changes it, and a collected
        // vector would keep up to twice the room it needs.
        let mut jobs: Vec<ExecutorJob> = Vec::with_capacity(sorted.len());
        jobs.extend(
            sorted
                .into_iter()
                .filter_map(|job| read_job(job, &children, &mut parsed)),
        );
        let mut index = ExecutorIndex {
            jobs,
            ..Self::default()
        };
        for (i, job) in index.jobs.iter().enumerate() {
            match index.by_nodewright.get_mut(&job.nodewright) {
                Some(list) => list.push(i),
                None => {
                    index.by_nodewright.insert(job.nodewright.clone(), vec![i]);
                }
            }
            let per_node = match index.by_node.get_mut(&job.nodewright) {
                Some(map) => map,
                None => index.by_node.entry(job.nodewright.clone()).or_default(),
            };
            match per_node.get_mut(&job.node) {
                Some(list) => list.push(i),
                None => {
                    per_node.insert(job.node.clone(), vec![i]);
                }
            }
            if job.is_unfinished() && !index.busy_nodes.contains(&job.node) {
                index.busy_nodes.insert(job.node.clone());
            }
        }
        index
    }

    /// Every indexed Job, sorted by name.
    pub fn all(&self) -> &[ExecutorJob] {
        &self.jobs
    }

    /// The Job with this name, if the snapshot has it.
    pub fn by_name(&self, name: &str) -> Option<&ExecutorJob> {
        // `jobs` is sorted by name (then uid): binary search for the first of that name.
        let i = self.jobs.partition_point(|j| j.name.as_ref() < name);
        self.jobs.get(i).filter(|j| &*j.name == name)
    }

    /// Jobs of one NodeWright, sorted by name.
    pub fn of(&self, nodewright: &str) -> impl Iterator<Item = &ExecutorJob> + '_ {
        self.by_nodewright
            .get(nodewright)
            .into_iter()
            .flatten()
            .map(|&i| &self.jobs[i])
    }

    /// The nodes carrying Jobs of one NodeWright, sorted by name, each with the positions of its
    /// Jobs in [`ExecutorIndex::all`] (ascending, so in name order).
    pub fn nodes_of<'s>(
        &'s self,
        nodewright: &str,
    ) -> impl Iterator<Item = (&'s str, &'s [usize])> + 's {
        self.by_node
            .get(nodewright)
            .into_iter()
            .flatten()
            .map(|(node, jobs)| (&**node, jobs.as_slice()))
    }

    /// Jobs of one NodeWright on one node, sorted by name.
    pub fn on_node<'s>(
        &'s self,
        nodewright: &'s str,
        node: &'s str,
    ) -> impl Iterator<Item = &'s ExecutorJob> + 's {
        self.by_node
            .get(nodewright)
            .and_then(|nodes| nodes.get(node))
            .into_iter()
            .flatten()
            .map(|&i| &self.jobs[i])
    }

    /// Jobs of one NodeWright's package (any version unless given) on one node.
    pub fn of_package<'s>(
        &'s self,
        nodewright: &'s str,
        node: &'s str,
        package: &'s str,
        version: &'s str,
    ) -> impl Iterator<Item = &'s ExecutorJob> + 's {
        self.on_node(nodewright, node)
            .filter(move |j| j.runs(package, version))
    }

    /// "Executor exists" (04 rule 2.1 read with invariant 16.1): an unfinished Job of (NodeWright,
    /// node, package) in any stage and at any version, so an old version's uninstall or a stale
    /// Job still terminating holds back the new version's start; suspended and terminating Jobs
    /// count, finished ones never do. `version` names the package only for a Job whose
    /// annotation is unreadable (matched by its label).
    pub fn unfinished(&self, nodewright: &str, node: &str, package: &str, version: &str) -> bool {
        self.on_node(nodewright, node)
            .filter(|j| j.runs_package(package, version))
            .any(ExecutorJob::is_unfinished)
    }

    /// "Node has running executors" (04 rule 2.3): an unfinished Job of any NodeWright on the node.
    pub fn node_busy(&self, node: &str) -> bool {
        self.busy_nodes.contains(node)
    }

    /// Names of nodes with unfinished Jobs, sorted.
    pub fn busy_nodes(&self) -> impl Iterator<Item = &str> {
        self.busy_nodes.iter().map(|n| &**n)
    }
}

/// A parsed `<P>/package` annotation with its node-state key.
type Parsed = Option<(Arc<PackageAnnotation>, Arc<str>)>;

fn read_job<'a>(
    job: &'a Arc<SlimJob>,
    children: &Children<'_>,
    parsed: &mut IndexMap<&'a str, Parsed>,
) -> Option<ExecutorJob> {
    let meta = &job.metadata;
    let nodewright = Arc::clone(meta.label_shared(keys::LABEL_NAME)?);
    let (package, entry_key) = meta
        .annotation(keys::PACKAGE)
        .and_then(|text| {
            parsed
                .entry(text)
                .or_insert_with(|| {
                    PackageAnnotation::parse(text).map(|p| {
                        let key = nodewright_crds::nodewright::unique_name(&p.name, &p.version);
                        (Arc::new(p), Arc::from(key))
                    })
                })
                .clone()
        })
        .unzip();
    let node = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.node_name.clone())
        .or_else(|| meta.label_shared(keys::LABEL_NODE).cloned())
        .unwrap_or_else(|| Arc::from(""));
    let uid = meta.uid.clone().unwrap_or_else(|| Arc::from(""));
    let mut pods: Vec<Arc<SlimPod>> = children
        .get(&*uid)
        .into_iter()
        .flatten()
        .map(|&p| Arc::clone(p))
        .collect();
    sort_pods(&mut pods);
    let stage = package
        .as_ref()
        .map(|p| p.stage)
        .or_else(|| meta.label(keys::LABEL_STAGE).and_then(Stage::parse));
    Some(ExecutorJob {
        job: Arc::clone(job),
        name: meta.name.clone().unwrap_or_else(|| Arc::from("")),
        uid,
        nodewright,
        node,
        package_label: meta.label_shared(keys::PACKAGE).cloned(),
        fingerprint: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get_shared(keys::EXECUTOR_FINGERPRINT))
            .cloned(),
        invalid: package.as_ref().is_some_and(|p| p.invalid),
        package,
        entry_key,
        stage,
        interrupt: meta.label(keys::LABEL_INTERRUPT) == Some("True"),
        state: job_state(job),
        processed: meta.annotation(keys::STATE_RECORDED) == Some("true"),
        terminating: job.metadata.deletion_timestamp.is_some(),
        pods,
    })
}

/// True when a node's `<P>/node` label value or full name designates `node`.
pub fn designates(job_node_label: &str, node: &str) -> bool {
    job_node_label == node || job_node_label == node_label_value(node)
}

#[cfg(test)]
mod tests;
