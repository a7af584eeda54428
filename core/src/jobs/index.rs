//! The executor index: a snapshot's Jobs and executor pods per (NodeWright, node, package) and
//! per node, with each Job classified once (04-jobs-rules.md §2.1–2.3, 03-executor.md §3.9).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use indexmap::IndexMap;

use nodewright_crds::{Stage, keys};

use super::annotation::PackageAnnotation;
use super::classify::{JobState, job_state};
use super::naming::node_label_value;
use crate::effect::Context;
use crate::slim::{SlimJob, SlimPod};
use crate::{Options, Snapshot};

/// Label Kubernetes puts on a Job's child pods (never select children by job name, 03 §3.9).
pub const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";

/// One executor Job of the snapshot, read once.
#[derive(Clone, Debug)]
pub struct ExecutorJob {
    /// The Job object (shared with the snapshot).
    pub job: Arc<SlimJob>,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// Owning NodeWright (`<P>/name` label).
    pub nodewright: String,
    /// Full node name: `spec.template.spec.nodeName`, else the `<P>/node` label.
    pub node: String,
    /// `<P>/package` label (`<pkg>-<ver>`), if present.
    pub package_label: Option<String>,
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
        self.job
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    }

    /// The log/event context of this Job (NodeWright, node, package, version, stage).
    pub fn context(&self) -> Context {
        Context {
            nodewright: Some(self.nodewright.clone()),
            node: Some(self.node.clone()),
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
#[derive(Clone, Debug, Default)]
pub struct ExecutorIndex {
    jobs: Vec<ExecutorJob>,
    by_nodewright: BTreeMap<String, Vec<usize>>,
    by_node: BTreeMap<String, BTreeMap<String, Vec<usize>>>,
    busy_nodes: BTreeSet<String>,
}

fn label<'a>(object_labels: Option<&'a BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    object_labels.and_then(|l| l.get(key)).map(String::as_str)
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
        let in_namespace =
            |ns: &Option<String>| ns.as_deref().is_none_or(|n| n == options.namespace);
        let mut children: BTreeMap<&str, Vec<&Arc<SlimPod>>> = BTreeMap::new();
        for pod in &snapshot.executor_pods {
            let labels = pod.metadata.labels.as_ref();
            if !in_namespace(&pod.metadata.namespace)
                || label(labels, keys::LABEL_NAME).is_none()
                || label(labels, keys::PACKAGE).is_none()
            {
                continue;
            }
            if let Some(uid) = label(labels, CONTROLLER_UID) {
                children.entry(uid).or_default().push(pod);
            }
        }
        // Package annotations repeat across nodes: parse each distinct text once.
        let mut parsed: IndexMap<&str, Parsed> = IndexMap::new();
        // Sort references, not the (large) read records.
        let mut sorted: Vec<&Arc<SlimJob>> = snapshot
            .jobs
            .iter()
            .filter(|j| in_namespace(&j.metadata.namespace))
            .collect();
        sorted.sort_by(|a, b| {
            a.metadata
                .name
                .cmp(&b.metadata.name)
                .then_with(|| a.metadata.uid.cmp(&b.metadata.uid))
        });
        let jobs: Vec<ExecutorJob> = sorted
            .into_iter()
            .filter_map(|job| read_job(job, &children, &mut parsed))
            .collect();
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
        let i = self.jobs.partition_point(|j| j.name.as_str() < name);
        self.jobs.get(i).filter(|j| j.name == name)
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
            .map(|(node, jobs)| (node.as_str(), jobs.as_slice()))
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
        self.busy_nodes.iter().map(String::as_str)
    }
}

/// The executor index of the snapshot a caller last brought it up to date with, kept between
/// passes (see [`NodeStateCache::update_executors`](crate::NodeStateCache::update_executors)).
///
/// The index is a pure function of the snapshot's Jobs, executor pods and the operator namespace.
/// The cache keeps the exact `Arc`s it indexed and answers only for a snapshot whose Job and pod
/// vectors hold the same `Arc`s in the same order (pointer identity; the cache's own clones keep
/// those allocations alive, so an address cannot be reused by another object) and the same
/// namespace. A new, removed or replaced Job or pod (the shell's caches build a new record on
/// every watch event) makes it stale; a pass with a stale cache builds its own index, so the plan
/// is the same whatever the cache holds.
#[derive(Clone, Debug, Default)]
pub struct ExecutorCache {
    namespace: String,
    jobs: Vec<Arc<SlimJob>>,
    pods: Vec<Arc<SlimPod>>,
    index: Option<ExecutorIndex>,
}

fn same<T>(a: &[Arc<T>], b: &[Arc<T>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| Arc::ptr_eq(x, y))
}

impl ExecutorCache {
    /// An empty cache (answers for no snapshot).
    pub fn new() -> Self {
        Self::default()
    }

    /// Brings the cache up to date with `snapshot`: keeps the index when the snapshot holds the
    /// same Jobs and pods as last time, builds it again otherwise.
    pub fn update(&mut self, snapshot: &Snapshot, options: &Options) {
        if self.get(snapshot, options).is_some() {
            return;
        }
        *self = ExecutorCache {
            namespace: options.namespace.clone(),
            jobs: snapshot.jobs.clone(),
            pods: snapshot.executor_pods.clone(),
            index: Some(ExecutorIndex::build(snapshot, options)),
        };
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

/// A parsed `<P>/package` annotation with its node-state key.
type Parsed = Option<(Arc<PackageAnnotation>, Arc<str>)>;

fn read_job<'a>(
    job: &'a Arc<SlimJob>,
    children: &BTreeMap<&str, Vec<&Arc<SlimPod>>>,
    parsed: &mut IndexMap<&'a str, Parsed>,
) -> Option<ExecutorJob> {
    let labels = job.metadata.labels.as_ref();
    let nodewright = label(labels, keys::LABEL_NAME)?.to_string();
    let (package, entry_key) = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::PACKAGE))
        .and_then(|text| {
            parsed
                .entry(text.as_str())
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
        .or_else(|| label(labels, keys::LABEL_NODE).map(str::to_string))
        .unwrap_or_default();
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let mut pods: Vec<Arc<SlimPod>> = children
        .get(uid.as_str())
        .into_iter()
        .flatten()
        .map(|&p| Arc::clone(p))
        .collect();
    sort_pods(&mut pods);
    let stage = package
        .as_ref()
        .map(|p| p.stage)
        .or_else(|| label(labels, keys::LABEL_STAGE).and_then(Stage::parse));
    Some(ExecutorJob {
        job: Arc::clone(job),
        name: job.metadata.name.clone().unwrap_or_default(),
        uid,
        nodewright,
        node,
        package_label: label(labels, keys::PACKAGE).map(str::to_string),
        invalid: package.as_ref().is_some_and(|p| p.invalid),
        package,
        entry_key,
        stage,
        interrupt: label(labels, keys::LABEL_INTERRUPT) == Some("True"),
        state: job_state(job),
        processed: job
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(keys::STATE_RECORDED))
            .is_some_and(|v| v == "true"),
        terminating: job.metadata.deletion_timestamp.is_some(),
        pods,
    })
}

/// True when a node's `<P>/node` label value or full name designates `node`.
pub fn designates(job_node_label: &str, node: &str) -> bool {
    job_node_label == node || job_node_label == node_label_value(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn job(name: &str, node: &str) -> Arc<SlimJob> {
        let labels = [
            (keys::LABEL_NAME, "nw"),
            (keys::LABEL_NODE, node),
            (keys::PACKAGE, "pkg-1.0.0"),
        ];
        Arc::new(SlimJob {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                labels: Some(label_map(&labels)),
                ..ObjectMeta::default()
            },
            ..SlimJob::default()
        })
    }

    fn label_map(labels: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn pod(job: &SlimJob) -> Arc<SlimPod> {
        let labels = [
            (keys::LABEL_NAME, "nw"),
            (keys::PACKAGE, "pkg-1.0.0"),
            (
                CONTROLLER_UID,
                job.metadata.uid.as_deref().unwrap_or_default(),
            ),
        ];
        Arc::new(SlimPod {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{}-pod",
                    job.metadata.name.as_deref().unwrap_or_default()
                )),
                labels: Some(label_map(&labels)),
                ..ObjectMeta::default()
            },
            ..SlimPod::default()
        })
    }

    fn snapshot(jobs: Vec<Arc<SlimJob>>, pods: Vec<Arc<SlimPod>>) -> Snapshot {
        Snapshot {
            jobs,
            executor_pods: pods,
            ..Snapshot::default()
        }
    }

    /// The cached index answers for the same records in a new snapshot, and only for those: a
    /// new Job, a removed pod, a Job whose status changed or another namespace make it stale,
    /// and `update` then indexes the new snapshot.
    #[test]
    fn executor_cache_answers_only_for_the_same_records() {
        let options = Options::default();
        let (a, b) = (job("a", "n1"), job("b", "n2"));
        let pods = vec![pod(&a), pod(&b)];
        let base = snapshot(vec![a.clone(), b.clone()], pods.clone());
        let mut cache = ExecutorCache::new();
        assert!(cache.get(&base, &options).is_none(), "empty cache");
        cache.update(&base, &options);
        let same = snapshot(vec![a.clone(), b.clone()], pods.clone());
        let index = cache.get(&same, &options).expect("same records");
        assert_eq!(index.all().len(), 2);
        assert!(index.node_busy("n1"));

        let added = snapshot(vec![a.clone(), b.clone(), job("c", "n3")], pods.clone());
        assert!(cache.get(&added, &options).is_none(), "a new Job");
        let removed = snapshot(vec![a.clone(), b.clone()], vec![pods[0].clone()]);
        assert!(cache.get(&removed, &options).is_none(), "a removed pod");
        let mut finished = (*b).clone();
        finished.status = Some(JobStatus {
            conditions: Some(vec![JobCondition {
                type_: "Complete".into(),
                status: "True".into(),
                ..JobCondition::default()
            }]),
            ..JobStatus::default()
        });
        let changed = snapshot(vec![a.clone(), Arc::new(finished)], pods.clone());
        assert!(
            cache.get(&changed, &options).is_none(),
            "a changed Job status"
        );
        let other = Options {
            namespace: "elsewhere".into(),
            ..Options::default()
        };
        assert!(cache.get(&same, &other).is_none(), "another namespace");

        cache.update(&changed, &options);
        let index = cache.get(&changed, &options).expect("rebuilt");
        assert!(index.node_busy("n1") && !index.node_busy("n2"));
        assert!(cache.get(&base, &options).is_none(), "the old records");
    }
}
