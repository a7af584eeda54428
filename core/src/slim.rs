//! Compact records of executor Jobs and pods: what a snapshot holds of them.
//!
//! With the default one-hour Job TTL every finished executor Job and its pod stay cached, and a
//! typed k8s-openapi `Job` is 2,816 bytes and a `Pod` 2,464 bytes before any string is allocated
//! (their pod specs are inline). These records keep the same field paths for what the core reads
//! (`metadata`, `spec.suspend`, `spec.template.spec.nodeName`, `status.conditions`, ...) and
//! nothing else, so a retained Job + pod costs about a quarter of the fixed size. The shell's
//! caches and the simulator build them from the (stripped) typed objects with `From`.
//!
//! A Job record's metadata is a [`SlimMeta`]: its labels and annotations are shared strings
//! ([`Tags`]), so the thousands of retained Jobs that carry the same NodeWright, package, stage
//! and package annotation hold one copy of each text when built through an [`Interner`].

use std::sync::Arc;

use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStatus, Pod, PodCondition, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Serialize};

pub use meta::{Identity, Interner, SlimMeta, Tagged, Tags};
pub use status::{SlimJobCondition, SlimJobStatus};

mod meta;
mod status;

/// An executor Job as the core reads it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimJob {
    /// What the core reads of the Job's metadata.
    #[serde(default)]
    pub metadata: SlimMeta,
    /// What the core reads of `spec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<SlimJobSpec>,
    /// What the core reads of the Job's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<SlimJobStatus>,
}

/// What the core reads of a Job's `spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimJobSpec {
    /// `spec.suspend`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// The Job-level `spec.activeDeadlineSeconds` (interrupt Jobs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// What the core reads of the pod template.
    #[serde(default)]
    pub template: SlimTemplate,
}

/// What the core reads of a Job's pod template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimTemplate {
    /// The template's metadata; read (its annotations) only for a Job without an executor
    /// fingerprint (03 §4.1 reference comparison), so boxed: usually absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Box<ObjectMeta>>,
    /// What the core reads of the template's pod spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<SlimTemplateSpec>,
}

/// What the core reads of a Job template's pod spec.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimTemplateSpec {
    /// The node the executor pod is bound to (shared by the node's Jobs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<Arc<str>>,
    /// The per-attempt deadline of package Jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Init containers; read only for a Job without an executor fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_containers: Option<Vec<Container>>,
}

impl From<Job> for SlimJob {
    fn from(job: Job) -> Self {
        SlimJob::new(job, &mut Interner::passthrough())
    }
}

impl SlimJob {
    /// The record of `job`, its label and annotation texts shared through `interner`.
    pub fn new(job: Job, interner: &mut Interner) -> Self {
        SlimJob {
            metadata: SlimMeta::new(job.metadata, interner),
            spec: job.spec.map(|spec| SlimJobSpec {
                suspend: spec.suspend,
                active_deadline_seconds: spec.active_deadline_seconds,
                template: SlimTemplate {
                    metadata: spec.template.metadata.map(Box::new),
                    spec: spec.template.spec.map(|pod| SlimTemplateSpec {
                        node_name: pod.node_name.map(|n| interner.intern(&n)),
                        active_deadline_seconds: pod.active_deadline_seconds,
                        init_containers: pod.init_containers,
                    }),
                },
            }),
            status: job.status.map(|s| SlimJobStatus::new(s, interner)),
        }
    }
}

/// An executor pod (D16) as the core reads it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimPod {
    /// The pod's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the core reads of `spec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<SlimPodSpec>,
    /// What the core reads of `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<SlimPodStatus>,
}

/// What the core reads of an executor pod's `spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimPodSpec {
    /// The node the pod is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
}

/// What the core reads of an executor pod's `status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimPodStatus {
    /// `Pending`, `Running`, `Succeeded`, `Failed` or `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Pod-level reason (`DeadlineExceeded`, an admission refusal, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Pod-level message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the kubelet acknowledged the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// Pod conditions (the `DisruptionTarget` one is read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<PodCondition>>,
    /// Main container statuses (only whether there is any is read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_statuses: Option<Vec<SlimContainerStatus>>,
    /// Init container statuses: the package's steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_container_statuses: Option<Vec<SlimContainerStatus>>,
}

/// A container status as the core reads it: name, restart count and current state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimContainerStatus {
    /// The container's name.
    pub name: String,
    /// How often the container restarted.
    #[serde(default)]
    pub restart_count: i32,
    /// The current state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ContainerState>,
}

impl From<ContainerStatus> for SlimContainerStatus {
    fn from(c: ContainerStatus) -> Self {
        SlimContainerStatus {
            name: c.name,
            restart_count: c.restart_count,
            state: c.state,
        }
    }
}

impl From<PodStatus> for SlimPodStatus {
    fn from(s: PodStatus) -> Self {
        // Exact capacity: an in-place `collect` would keep the larger source allocation.
        let slim = |v: Option<Vec<ContainerStatus>>| {
            v.map(|v| {
                let mut out: Vec<SlimContainerStatus> =
                    v.into_iter().map(SlimContainerStatus::from).collect();
                out.shrink_to_fit();
                out
            })
        };
        SlimPodStatus {
            phase: s.phase,
            reason: s.reason,
            message: s.message,
            start_time: s.start_time,
            conditions: s.conditions,
            container_statuses: slim(s.container_statuses),
            init_container_statuses: slim(s.init_container_statuses),
        }
    }
}

impl From<Pod> for SlimPod {
    fn from(pod: Pod) -> Self {
        SlimPod {
            metadata: pod.metadata,
            spec: pod.spec.map(|s| SlimPodSpec {
                node_name: s.node_name,
            }),
            status: pod.status.map(SlimPodStatus::from),
        }
    }
}

impl From<&SlimJob> for Job {
    /// The typed Job with what the record keeps (tools that hand records to typed APIs).
    fn from(job: &SlimJob) -> Self {
        use k8s_openapi::api::batch::v1::JobSpec;
        use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
        Job {
            metadata: ObjectMeta::from(&job.metadata),
            spec: job.spec.as_ref().map(|spec| JobSpec {
                suspend: spec.suspend,
                active_deadline_seconds: spec.active_deadline_seconds,
                template: PodTemplateSpec {
                    metadata: spec.template.metadata.as_deref().cloned(),
                    spec: spec.template.spec.as_ref().map(|pod| PodSpec {
                        node_name: pod.node_name.as_deref().map(str::to_string),
                        active_deadline_seconds: pod.active_deadline_seconds,
                        init_containers: pod.init_containers.clone(),
                        ..PodSpec::default()
                    }),
                },
                ..JobSpec::default()
            }),
            status: job.status.as_ref().map(JobStatus::from),
        }
    }
}

impl From<&SlimContainerStatus> for ContainerStatus {
    fn from(c: &SlimContainerStatus) -> Self {
        ContainerStatus {
            name: c.name.clone(),
            restart_count: c.restart_count,
            state: c.state.clone(),
            ..ContainerStatus::default()
        }
    }
}

impl From<&SlimPod> for Pod {
    /// The typed pod with what the record keeps (tools that hand records to typed APIs).
    fn from(pod: &SlimPod) -> Self {
        use k8s_openapi::api::core::v1::PodSpec;
        let typed = |v: &Option<Vec<SlimContainerStatus>>| {
            v.as_ref()
                .map(|v| v.iter().map(ContainerStatus::from).collect())
        };
        Pod {
            metadata: pod.metadata.clone(),
            spec: pod.spec.as_ref().map(|s| PodSpec {
                node_name: s.node_name.clone(),
                ..PodSpec::default()
            }),
            status: pod.status.as_ref().map(|s| PodStatus {
                phase: s.phase.clone(),
                reason: s.reason.clone(),
                message: s.message.clone(),
                start_time: s.start_time.clone(),
                conditions: s.conditions.clone(),
                container_statuses: typed(&s.container_statuses),
                init_container_statuses: typed(&s.init_container_statuses),
                ..PodStatus::default()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_a_fraction_of_the_typed_objects() {
        use std::mem::size_of;
        assert!(size_of::<SlimJob>() * 3 < size_of::<Job>());
        assert!(size_of::<SlimPod>() * 3 < size_of::<Pod>() + size_of::<ContainerStatus>());
    }
}
