//! D28: executor pods a pass no longer reads, which the caches may drop.
//!
//! The core reads an executor pod only through its Job (the outcome of an unprocessed Job, the
//! live attempt of a running one) and, while it is Running or Pending, as a pod on its node.
//! Once its Job is `Complete` and the outcome is recorded, a terminal pod is read by neither, so
//! keeping it cached for the Job's TTL only costs memory.

use serde::{Deserialize, Serialize};

use super::classify::JobState;
use super::index::{ExecutorIndex, ExecutorJob};
use crate::slim::SlimPod;

/// A cached pod as the snapshot showed it: the cache drops it only while it is unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettledPod {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// Pod uid.
    pub uid: String,
    /// The resourceVersion the snapshot showed.
    pub resource_version: String,
}

/// D28: the terminal executor pods of every `Complete` Job whose outcome is recorded (and that
/// is neither being deleted nor invalid), in index order.
pub fn settled_pods(index: &ExecutorIndex) -> Vec<SettledPod> {
    index
        .all()
        .iter()
        .filter(|job| job_settled(job))
        .flat_map(|job| job.pods.iter())
        .filter(|pod| pod_settled(pod))
        .map(|pod| settled(pod))
        .collect()
}

fn job_settled(job: &ExecutorJob) -> bool {
    job.processed
        && matches!(job.state, JobState::Complete)
        && !job.terminating
        && !job.invalid
        && !job.pods.is_empty()
}

/// A pod that ran to its end (Succeeded or Failed) and is not being deleted.
fn pod_settled(pod: &SlimPod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded") | Some("Failed")) && pod.metadata.deletion_timestamp.is_none()
}

fn settled(pod: &SlimPod) -> SettledPod {
    let m = &pod.metadata;
    SettledPod {
        namespace: m.namespace.clone().unwrap_or_default(),
        name: m.name.clone().unwrap_or_default(),
        uid: m.uid.clone().unwrap_or_default(),
        resource_version: m.resource_version.clone().unwrap_or_default(),
    }
}

impl SettledPod {
    /// Whether `meta` is this pod unchanged since the snapshot (same uid and resourceVersion),
    /// so a cache drops only what the pass saw.
    pub fn is_unchanged(
        &self,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> bool {
        self.is_version(meta.uid.as_deref(), meta.resource_version.as_deref())
    }

    /// Whether an object of this `uid` and `resource_version` is this pod as the pass saw it.
    pub fn is_version(&self, uid: Option<&str>, resource_version: Option<&str>) -> bool {
        uid == Some(self.uid.as_str()) && resource_version == Some(self.resource_version.as_str())
    }
}
