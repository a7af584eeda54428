//! Jobs, pods and ConfigMaps in the operator namespace, and evictions.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use nodewright_core::DeletionReason;
use nodewright_core::effect::{EntryCheck, FreshReadPrecondition};
use serde_json::{Map, Value, json};
use tracing::info;

use super::{Interpreter, Outcome};
use crate::error::{
    is_already_exists, is_conflict, is_not_found, is_too_many_requests, is_uid_mismatch,
};

/// Foreground delete guarded by uid.
fn guarded_delete(uid: &str) -> DeleteParams {
    DeleteParams::foreground().preconditions(Preconditions {
        uid: Some(uid.to_string()),
        resource_version: None,
    })
}

/// Maps the answer of a guarded delete to an outcome.
fn delete_outcome<T>(result: Result<T, kube::Error>) -> Outcome {
    match result {
        Ok(_) => Outcome::Applied,
        Err(e) if is_not_found(&e) => Outcome::Noop,
        Err(e) if is_conflict(&e) => Outcome::Dropped(format!("uid precondition failed: {e}")),
        Err(e) => Outcome::Failed(e.into()),
    }
}

impl Interpreter {
    pub(super) async fn create_job(
        &self,
        job: &Job,
        precondition: Option<FreshReadPrecondition>,
    ) -> Outcome {
        let api: Api<Job> = Api::namespaced(self.client.clone(), &self.namespace);
        let mut job = job.clone();
        job.metadata.namespace = Some(self.namespace.clone());
        if let Some(pre) = precondition
            && let Some(blocked) = self.fresh_read_blocker(&api, &job, &pre).await
        {
            return blocked;
        }
        match api.create(&PostParams::default(), &job).await {
            Ok(created) => {
                info!(job = %created.metadata.name.unwrap_or_default(), "created job");
                Outcome::Applied
            }
            Err(e) if is_already_exists(&e) => Outcome::Dropped(format!(
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
        api: &Api<Job>,
        job: &Job,
        precondition: &FreshReadPrecondition,
    ) -> Option<Outcome> {
        let selector = precondition.label_selector();
        let jobs = match api.list(&ListParams::default().labels(&selector)).await {
            Ok(list) => list.items,
            Err(e) => return Some(Outcome::Failed(e.into())),
        };
        let busy = precondition.blocker(job, &jobs)?;
        Some(Outcome::Dropped(precondition.refusal(busy)))
    }

    /// D21 (K22): reads the node uncached; `None` when `check` holds and the re-run deletion may
    /// go ahead, else the outcome that drops it (the next pass decides on fresh state).
    pub(super) async fn confirm_entry(&self, check: &EntryCheck) -> Option<Outcome> {
        let api: Api<Node> = Api::all(self.client.clone());
        match api.get_opt(&check.node).await {
            Ok(Some(node)) if check.holds(&node) => None,
            Ok(_) => {
                info!(node = %check.node, nodewright = %check.nodewright, package = %check.package, stage = %check.stage, "re-run deletion dropped: {}", check.refusal());
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
        let api: Api<Job> = Api::namespaced(self.client.clone(), &self.namespace);
        let outcome = delete_outcome(api.delete(name, &guarded_delete(uid)).await);
        if matches!(outcome, Outcome::Applied) {
            info!(job = name, uid, reason = reason.as_str(), "deleted job");
            self.events
                .deleted("Job", &self.namespace, name, uid, reason)
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
        let api: Api<Job> = Api::namespaced(self.client.clone(), &self.namespace);
        let body = job_patch(uid, suspend, ttl, annotations);
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => Outcome::Applied,
            Err(e) if is_not_found(&e) => Outcome::Noop,
            Err(e) if is_uid_mismatch(&e) => {
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
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let outcome = delete_outcome(api.delete(name, &guarded_delete(uid)).await);
        if matches!(outcome, Outcome::Applied) {
            info!(
                pod = name,
                namespace,
                uid,
                reason = reason.as_str(),
                "deleted pod"
            );
            self.events
                .deleted("Pod", namespace, name, uid, reason)
                .await;
        }
        outcome
    }

    pub(super) async fn evict(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        delete_instead: bool,
        grace: Option<i64>,
    ) -> Outcome {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let mut params = DeleteParams::default().preconditions(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        });
        if let Some(g) = grace {
            params = params.grace_period(u32::try_from(g.max(0)).unwrap_or(u32::MAX));
        }
        let result = if delete_instead {
            api.delete(name, &params).await.map(|_| ())
        } else {
            self.post_eviction(namespace, name, uid, grace).await
        };
        match result {
            Ok(()) => {
                info!(pod = name, namespace, uid, delete_instead, "evicted pod");
                Outcome::Applied
            }
            Err(e) if is_not_found(&e) => Outcome::Noop,
            Err(e) if is_too_many_requests(&e) => {
                Outcome::Waiting(format!("eviction of {namespace}/{name} refused: {e}"))
            }
            Err(e) if is_conflict(&e) => Outcome::Dropped(format!("uid precondition failed: {e}")),
            Err(e) => Outcome::Failed(e.into()),
        }
    }

    /// POSTs a policy/v1 Eviction. kube's `Api::evict` spells the body field `delete_options`,
    /// which the apiserver ignores, losing the uid precondition; this builds the body itself.
    async fn post_eviction(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        grace: Option<i64>,
    ) -> Result<(), kube::Error> {
        let body = eviction_body(namespace, name, uid, grace);
        let request = http::Request::post(format!(
            "/api/v1/namespaces/{namespace}/pods/{name}/eviction"
        ))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(&body).map_err(|e| kube::Error::Service(Box::new(e)))?)
        .map_err(kube::Error::HttpError)?;
        self.client
            .request::<kube::core::Status>(request)
            .await
            .map(|_| ())
    }

    pub(super) async fn upsert_config_map(
        &self,
        config_map: &ConfigMap,
        expect_resource_version: Option<&str>,
    ) -> Outcome {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        let mut cm = config_map.clone();
        cm.metadata.namespace = Some(self.namespace.clone());
        let name = cm.metadata.name.clone().unwrap_or_default();
        let result = match expect_resource_version {
            None => api.create(&PostParams::default(), &cm).await,
            Some(rv) => {
                cm.metadata.resource_version = Some(rv.to_string());
                api.replace(&name, &PostParams::default(), &cm).await
            }
        };
        match result {
            Ok(_) => Outcome::Applied,
            Err(e) if is_already_exists(&e) => {
                Outcome::Dropped(format!("configmap {name} already exists"))
            }
            Err(e) if is_conflict(&e) || is_not_found(&e) => {
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
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        let params = DeleteParams::default().preconditions(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        });
        let outcome = delete_outcome(api.delete(name, &params).await);
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

/// The policy/v1 Eviction of a pod, guarded by its uid.
pub(crate) fn eviction_body(namespace: &str, name: &str, uid: &str, grace: Option<i64>) -> Value {
    let mut delete_options = json!({"preconditions": {"uid": uid}});
    if let Some(g) = grace {
        delete_options["gracePeriodSeconds"] = json!(g.max(0));
    }
    json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": delete_options,
    })
}
