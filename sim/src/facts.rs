//! Facts read off objects, shared by invariants, expectations and timelines.

use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::api::core::v1::Node;
use nodewright_core::{SlimJob, SlimJobStatus, Tagged};
use nodewright_crds::{NodeState, NodeWright, keys};

/// The parts of a Job the facts read: from a stored [`Job`] or a snapshot's [`SlimJob`].
pub trait JobLike {
    /// A label value.
    fn label(&self, key: &str) -> Option<&str>;
    /// An annotation value.
    fn annotation(&self, key: &str) -> Option<&str>;
    /// The Job has a deletion timestamp.
    fn deleting(&self) -> bool;
    /// The Job has condition `kind` with status `True`.
    fn condition_true(&self, kind: &str) -> bool;
    /// The template's `nodeName`.
    fn template_node(&self) -> Option<&str>;
}

/// Whether a typed status has condition `kind` with status `True`.
fn typed_condition(status: &Option<JobStatus>, kind: &str) -> bool {
    status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == kind && c.status == "True"))
}

/// Whether a record's status has condition `kind` with status `True`.
fn slim_condition(status: &Option<SlimJobStatus>, kind: &str) -> bool {
    status
        .as_ref()
        .is_some_and(|s| s.condition_true(kind).is_some())
}

// One body for both forms: the record keeps the Job's field paths.
macro_rules! joblike_impls {
    ($($t:ty => $condition:ident),+) => {$(
        impl JobLike for $t {
            fn label(&self, key: &str) -> Option<&str> {
                Tagged::label(&self.metadata, key)
            }

            fn annotation(&self, key: &str) -> Option<&str> {
                Tagged::annotation(&self.metadata, key)
            }

            fn deleting(&self) -> bool {
                self.metadata.deletion_timestamp.is_some()
            }

            fn condition_true(&self, kind: &str) -> bool {
                $condition(&self.status, kind)
            }

            fn template_node(&self) -> Option<&str> {
                self.spec
                    .as_ref()
                    .and_then(|s| s.template.spec.as_ref())
                    .and_then(|s| s.node_name.as_deref())
            }
        }
    )+};
}

joblike_impls!(
    Job => typed_condition,
    SlimJob => slim_condition
);

macro_rules! job_like_through {
    ($($pointer:ty),*) => {$(
        impl<T: JobLike + ?Sized> JobLike for $pointer {
            fn label(&self, key: &str) -> Option<&str> {
                (**self).label(key)
            }

            fn annotation(&self, key: &str) -> Option<&str> {
                (**self).annotation(key)
            }

            fn deleting(&self) -> bool {
                (**self).deleting()
            }

            fn condition_true(&self, kind: &str) -> bool {
                (**self).condition_true(kind)
            }

            fn template_node(&self) -> Option<&str> {
                (**self).template_node()
            }
        }
    )*};
}

job_like_through!(&T, Box<T>, std::sync::Arc<T>);

/// The Job has condition `kind` with status `True`.
fn condition(job: &impl JobLike, kind: &str) -> bool {
    job.condition_true(kind)
}

/// What an executor Job is for.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct JobFacts {
    /// Owning NodeWright.
    pub nodewright: String,
    /// Target node (template nodeName).
    pub node: String,
    /// Package name.
    pub package: String,
    /// Package version.
    pub version: String,
    /// Stage.
    pub stage: String,
    /// Interrupt Job.
    pub interrupt: bool,
    /// Not Complete/Failed and not being deleted.
    pub unfinished: bool,
}

/// The Job has its `Complete` condition (it succeeded).
pub fn succeeded(job: &impl JobLike) -> bool {
    condition(job, "Complete")
}

/// Facts of a Job labelled for a NodeWright; `None` for other Jobs.
pub fn job_facts(job: &impl JobLike) -> Option<JobFacts> {
    let label = |k: &str| job.label(k).map(str::to_string);
    let nodewright = label(keys::LABEL_NAME)?;
    let package: serde_json::Value = job
        .annotation(keys::PACKAGE)
        .and_then(|a| serde_json::from_str(a).ok())
        .unwrap_or_default();
    let text = |k: &str| package.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let node = job
        .template_node()
        .map(str::to_string)
        .or_else(|| label(keys::LABEL_NODE))
        .unwrap_or_default();
    Some(JobFacts {
        nodewright,
        node,
        package: text("name")
            .or_else(|| label(keys::PACKAGE))
            .unwrap_or_default(),
        version: text("version").unwrap_or_default(),
        stage: text("stage")
            .or_else(|| label(keys::LABEL_STAGE))
            .unwrap_or_default(),
        interrupt: job.label(keys::LABEL_INTERRUPT) == Some("True"),
        unfinished: !(condition(job, "Complete") || condition(job, "Failed") || job.deleting()),
    })
}

/// The node-state document of NodeWright `nw` on a node (empty when absent or malformed).
pub fn node_state(node: &Node, nw: &str) -> NodeState {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&keys::node_state(nw)))
        .and_then(|t| NodeState::parse(t).ok())
        .unwrap_or_default()
}

/// An annotation value of a node.
pub fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// True when the node is cordoned.
pub fn unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// True when the node carries any operator cordon annotation.
pub fn holds_operator_cordon(node: &Node) -> bool {
    node.metadata.annotations.iter().flatten().any(|(k, v)| {
        v == "true"
            && (k.starts_with(&format!("{}/cordon_", keys::PREFIX))
                || k == keys::RUNTIME_REQUIRED_CORDON)
    })
}

/// Nodes a NodeWright selects.
pub fn selected<'a>(nw: &NodeWright, nodes: impl Iterator<Item = &'a Node>) -> Vec<&'a Node> {
    nodes
        .filter(|n| {
            crate::selector::matches(nw.spec.node_selector.as_ref(), n.metadata.labels.as_ref())
        })
        .collect()
}

/// True when the NodeWright annotation `key` is `"true"`.
pub fn flag(nw: &NodeWright, key: &str) -> bool {
    nw.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .is_some_and(|v| v == "true")
}
