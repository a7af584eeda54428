//! Jobs, pods and ConfigMaps in the operator namespace, and evictions.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use nodewright_core::DeletionReason;
use nodewright_core::effect::{EntryCheck, EntryExpect, FreshReadPrecondition};
use nodewright_core::jobs::JobManifest;
use serde_json::{Map, Value, json};
use tracing::info;

use super::port::{ApiError, ApiResult, ClusterPort, Eviction};
use super::{Interpreter, Outcome};

/// Maps the answer of a guarded delete to an outcome.
fn delete_outcome(result: ApiResult<()>) -> Outcome {
    match result {
        Ok(()) => Outcome::Applied,
        Err(e) if e.is_not_found() => Outcome::Noop,
        Err(e) if e.is_conflict() => Outcome::Dropped(format!("uid precondition failed: {e}")),
        Err(e) => Outcome::Failed(e.into()),
    }
}

impl<P: ClusterPort> Interpreter<P> {
    /// Creates an executor Job; a recipe is built here, one create at a time, not in the plan
    /// (D27).
    pub(super) async fn create_job(
        &self,
        job: &JobManifest,
        precondition: Option<&FreshReadPrecondition>,
    ) -> Outcome {
        let mut job = job.to_job();
        job.metadata.namespace = Some(self.namespace.clone());
        if let Some(pre) = precondition
            && let Some(blocked) = self.fresh_read_blocker(&job, pre).await
        {
            return blocked;
        }
        match self.port.create_job(&job).await {
            Ok(created) => {
                info!(job = %created.metadata.name.unwrap_or_default(), "created job");
                Outcome::Applied
            }
            Err(ApiError::AlreadyExists(_)) => Outcome::Dropped(format!(
                "job {} already exists",
                job.metadata.name.unwrap_or_default()
            )),
            Err(e) => Outcome::Failed(e.into()),
        }
    }

    /// B6 against a fresh read: an interrupt Job is created only when the apiserver (not the
    /// possibly lagging cache the plan was made from) shows no unfinished Job on its node.
    async fn fresh_read_blocker(
        &self,
        job: &Job,
        precondition: &FreshReadPrecondition,
    ) -> Option<Outcome> {
        let jobs = match self.port.list_jobs(&precondition.label_selector()).await {
            Ok(jobs) => jobs,
            Err(e) => return Some(Outcome::Failed(e.into())),
        };
        let busy = precondition.blocker(job, &jobs)?;
        Some(Outcome::Dropped(precondition.refusal(busy)))
    }

    /// I1: reads the node uncached (or takes `fresh`, this lane's read since its last node write);
    /// `None` when it shows the package's entry as the snapshot did and the create may go ahead,
    /// else the outcome that drops it.
    pub(super) async fn confirm_create(
        &self,
        check: &EntryExpect,
        fresh: &mut Option<Node>,
    ) -> Option<Outcome> {
        let known = fresh
            .as_ref()
            .filter(|n| n.metadata.name.as_deref() == Some(check.node.as_str()));
        let read = match known {
            Some(node) => Ok(Some(node.clone())),
            None => self.port.get_node(&check.node, false).await,
        };
        if let Ok(Some(node)) = &read {
            *fresh = Some(node.clone());
        }
        match read {
            Ok(Some(node)) if check.holds(&node) => None,
            Ok(_) => {
                info!(node = %check.node, nodewright = %check.nodewright, package = %check.package, "create dropped on a fresh read of the node: {}", check.refusal());
                Some(Outcome::Dropped(check.refusal()))
            }
            Err(e) => Some(Outcome::Failed(e.into())),
        }
    }

    /// D21 (K22), I1: reads the node uncached; `None` when `check` holds and the re-run deletion
    /// or the create may go ahead, else the outcome that drops it (the next pass decides on fresh
    /// state).
    pub(super) async fn confirm_entry(&self, check: &EntryCheck) -> Option<Outcome> {
        match self.port.get_node(&check.node, false).await {
            Ok(Some(node)) if check.holds(&node) => None,
            Ok(_) => {
                info!(node = %check.node, nodewright = %check.nodewright, package = %check.package, stage = %check.stage, "dropped on a fresh read of the node: {}", check.refusal());
                Some(Outcome::Dropped(check.refusal()))
            }
            Err(e) => Some(Outcome::Failed(e.into())),
        }
    }

    pub(super) async fn delete_job(
        &self,
        name: &str,
        uid: &str,
        reason: DeletionReason,
    ) -> Outcome {
        let outcome = delete_outcome(self.port.delete_job(name, uid).await);
        if matches!(outcome, Outcome::Applied) {
            info!(job = name, uid, reason = reason.as_str(), "deleted job");
            self.deleted("Job", &self.namespace, name, uid, reason)
                .await;
        }
        outcome
    }

    pub(super) async fn patch_job(
        &self,
        name: &str,
        uid: &str,
        suspend: Option<bool>,
        ttl: Option<i32>,
        annotations: &BTreeMap<String, Option<String>>,
    ) -> Outcome {
        let body = job_patch(uid, suspend, ttl, annotations);
        match self.port.patch_job(name, &body).await {
            Ok(()) => Outcome::Applied,
            Err(e) if e.is_not_found() => Outcome::Noop,
            Err(e) if e.is_uid_mismatch() => {
                Outcome::Dropped(format!("uid precondition failed: {e}"))
            }
            Err(e) => Outcome::Failed(e.into()),
        }
    }

    pub(super) async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        reason: DeletionReason,
    ) -> Outcome {
        let outcome = delete_outcome(self.port.delete_pod(namespace, name, uid).await);
        if matches!(outcome, Outcome::Applied) {
            info!(
                pod = name,
                namespace,
                uid,
                reason = reason.as_str(),
                "deleted pod"
            );
            self.deleted("Pod", namespace, name, uid, reason).await;
        }
        outcome
    }

    pub(super) async fn evict(&self, eviction: Eviction) -> Outcome {
        match self.port.evict_pod(&eviction).await {
            Ok(()) => {
                let Eviction {
                    namespace,
                    name,
                    uid,
                    delete_instead,
                    ..
                } = &eviction;
                info!(pod = %name, %namespace, %uid, delete_instead, "evicted pod");
                Outcome::Applied
            }
            Err(e) if e.is_not_found() => Outcome::Noop,
            Err(e @ ApiError::TooManyRequests(_)) => Outcome::Waiting(format!(
                "eviction of {}/{} refused: {e}",
                eviction.namespace, eviction.name
            )),
            Err(e) if e.is_conflict() => Outcome::Dropped(format!("uid precondition failed: {e}")),
            Err(e) => Outcome::Failed(e.into()),
        }
    }

    pub(super) async fn upsert_config_map(
        &self,
        config_map: &ConfigMap,
        expect_resource_version: Option<&str>,
    ) -> Outcome {
        let mut cm = config_map.clone();
        cm.metadata.namespace = Some(self.namespace.clone());
        let name = cm.metadata.name.clone().unwrap_or_default();
        let result = match expect_resource_version {
            None => self.port.create_config_map(&cm).await,
            Some(rv) => {
                cm.metadata.resource_version = Some(rv.to_string());
                self.port.replace_config_map(&cm).await
            }
        };
        match result {
            Ok(()) => Outcome::Applied,
            Err(ApiError::AlreadyExists(_)) => {
                Outcome::Dropped(format!("configmap {name} already exists"))
            }
            Err(e) if e.is_conflict() || e.is_not_found() => {
                Outcome::Dropped(format!("configmap {name} changed: {e}"))
            }
            Err(e) => Outcome::Failed(e.into()),
        }
    }

    pub(super) async fn delete_config_map(
        &self,
        name: &str,
        uid: &str,
        reason: DeletionReason,
    ) -> Outcome {
        let outcome = delete_outcome(self.port.delete_config_map(name, uid).await);
        if matches!(outcome, Outcome::Applied) {
            info!(
                configmap = name,
                uid,
                reason = reason.as_str(),
                "deleted configmap"
            );
        }
        outcome
    }
}

/// The merge patch of exactly the Job fields an effect changes, with the uid as precondition.
pub(crate) fn job_patch(
    uid: &str,
    suspend: Option<bool>,
    ttl: Option<i32>,
    annotations: &BTreeMap<String, Option<String>>,
) -> Value {
    let mut metadata = Map::new();
    metadata.insert("uid".into(), json!(uid));
    if !annotations.is_empty() {
        let a: Map<String, Value> = annotations
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String)))
            .collect();
        metadata.insert("annotations".into(), Value::Object(a));
    }
    let mut spec = Map::new();
    if let Some(s) = suspend {
        spec.insert("suspend".into(), json!(s));
    }
    if let Some(t) = ttl {
        spec.insert("ttlSecondsAfterFinished".into(), json!(t));
    }
    let mut body = Map::new();
    body.insert("metadata".into(), Value::Object(metadata));
    if !spec.is_empty() {
        body.insert("spec".into(), Value::Object(spec));
    }
    Value::Object(body)
}
