//! Ending a crash-looping non-reboot interrupt Job past its restart allowance (D18, 04 §8.10).

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use nodewright_crds::keys;
use serde_json::{Value, json};

use super::port::ClusterPort;
use super::{Interpreter, Outcome};

/// Name of the interrupt container in interrupt executor pods.
const INTERRUPT_CONTAINER: &str = "interrupt";

impl<P: ClusterPort> Interpreter<P> {
    pub(super) async fn end_interrupt_job(
        &self,
        name: &str,
        uid: &str,
        resource_version: Option<&str>,
        restarts: i32,
    ) -> Outcome {
        let job = match self.port.get_job(name).await {
            Ok(Some(job)) => job,
            Ok(None) => return Outcome::Noop,
            Err(e) => return Outcome::Failed(e.into()),
        };
        if let Err(why) = job_may_end(&job, uid, resource_version) {
            return Outcome::Dropped(why);
        }
        let selector = format!("batch.kubernetes.io/controller-uid={uid}");
        let observed = match self.port.list_pods(&self.namespace, &selector).await {
            Ok(pods) => max_interrupt_restarts(&pods),
            Err(e) => return Outcome::Failed(e.into()),
        };
        if observed < restarts {
            return Outcome::Dropped(format!(
                "interrupt container restarts {observed} < {restarts} on a fresh read"
            ));
        }
        let body = end_interrupt_patch(uid, job.metadata.resource_version.as_deref(), restarts);
        match self.port.patch_job(name, &body).await {
            Ok(()) => Outcome::Applied,
            Err(e) if e.is_not_found() => Outcome::Noop,
            Err(e) if e.is_uid_mismatch() => Outcome::Dropped(format!("job changed: {e}")),
            Err(e) => Outcome::Failed(e.into()),
        }
    }
}

/// Re-checks on the fresh Job what the core decided on (04 §8.10 skip list).
fn job_may_end(job: &Job, uid: &str, resource_version: Option<&str>) -> Result<(), String> {
    if job.metadata.uid.as_deref() != Some(uid) {
        return Err("job was recreated".into());
    }
    if let Some(rv) = resource_version
        && job.metadata.resource_version.as_deref() != Some(rv)
    {
        return Err("job changed since the snapshot".into());
    }
    let annotations = job.metadata.annotations.clone().unwrap_or_default();
    if annotations.contains_key(keys::RESTART_LIMIT_EXCEEDED) {
        return Err("already marked".into());
    }
    if !annotations.contains_key(keys::RESTART_ALLOWANCE) {
        return Err("job has no restart allowance".into());
    }
    if job.spec.as_ref().and_then(|s| s.suspend) == Some(true) {
        return Err("job is suspended".into());
    }
    let finished = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.status == "True"
                    && ["Complete", "Failed", "FailureTarget"].contains(&c.type_.as_str())
            })
        });
    if finished {
        return Err("job is finished".into());
    }
    Ok(())
}

/// Highest restart count of the interrupt container among live pods. The interrupt runs as the
/// pod's init container (03 §2), so its count is in `initContainerStatuses` (D18, 04 §8.10).
fn max_interrupt_restarts(pods: &[Pod]) -> i32 {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.status.as_ref()?.init_container_statuses.as_ref())
        .flatten()
        .filter(|c| c.name == INTERRUPT_CONTAINER)
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0)
}

/// The locked merge patch that lets the Job controller fail the Job.
pub(crate) fn end_interrupt_patch(
    uid: &str,
    resource_version: Option<&str>,
    restarts: i32,
) -> Value {
    json!({
        "metadata": {
            "uid": uid,
            "resourceVersion": resource_version.unwrap_or_default(),
            "annotations": { keys::RESTART_LIMIT_EXCEEDED: restarts.to_string() },
        },
        "spec": { "backoffLimit": 0 },
    })
}
