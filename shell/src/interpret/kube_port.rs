//! The cluster port over `kube::Api`: what the operator process sends. Timeouts and the write
//! fence sit in the client (`crate::client`).

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::{ObjectRef, Store};
use nodewright_crds::NodeWright;
use serde_json::{Value, json};

use super::ack::Ack;
use super::port::{ApiError, ApiResult, ClusterPort, Eviction};
use crate::error::{is_already_exists, is_conflict, is_not_found, is_too_many_requests};

/// The port of the operator process.
#[derive(Clone)]
pub struct KubePort {
    client: Client,
    namespace: String,
    node_cache: Option<Store<Node>>,
    origin: Instant,
}

impl KubePort {
    /// A port writing Jobs and ConfigMaps into `namespace`.
    pub fn new(client: Client, namespace: &str) -> Self {
        KubePort {
            client,
            namespace: namespace.to_string(),
            node_cache: None,
            origin: Instant::now(),
        }
    }

    /// Lets cached node reads come from the reflector cache (§13.1 step 4).
    pub fn with_node_cache(mut self, store: Store<Node>) -> Self {
        self.node_cache = Some(store);
        self
    }

    fn jobs(&self) -> Api<Job> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn config_maps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// POSTs a policy/v1 Eviction. kube's `Api::evict` spells the body field `delete_options`,
    /// which the apiserver ignores, losing the uid precondition; this builds the body itself.
    async fn post_eviction(&self, e: &Eviction) -> Result<(), kube::Error> {
        let body = eviction_body(&e.namespace, &e.name, &e.uid, e.grace);
        let request = http::Request::post(format!(
            "/api/v1/namespaces/{}/pods/{}/eviction",
            e.namespace, e.name
        ))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(&body).map_err(|e| kube::Error::Service(Box::new(e)))?)
        .map_err(kube::Error::HttpError)?;
        self.client
            .request::<kube::core::Status>(request)
            .await
            .map(|_| ())
    }
}

/// Classifies a kube error into the port's vocabulary.
pub fn api_error(e: kube::Error) -> ApiError {
    let text = e.to_string();
    if crate::client::is_fenced(&e) {
        ApiError::Fenced(text)
    } else if is_not_found(&e) {
        ApiError::NotFound(text)
    } else if is_already_exists(&e) {
        ApiError::AlreadyExists(text)
    } else if is_conflict(&e) {
        ApiError::Conflict(text)
    } else if is_too_many_requests(&e) {
        ApiError::TooManyRequests(text)
    } else if matches!(&e, kube::Error::Api(s) if s.code == 422 && s.message.contains("uid")) {
        ApiError::UidMismatch(text)
    } else {
        ApiError::Other(format!("kubernetes API: {text}"))
    }
}

fn done<T>(r: Result<T, kube::Error>) -> ApiResult<()> {
    r.map(drop).map_err(api_error)
}

/// A delete guarded by uid.
fn guarded(uid: &str) -> DeleteParams {
    DeleteParams::default().preconditions(Preconditions {
        uid: Some(uid.to_string()),
        resource_version: None,
    })
}

/// Foreground delete guarded by uid.
fn guarded_foreground(uid: &str) -> DeleteParams {
    DeleteParams::foreground().preconditions(Preconditions {
        uid: Some(uid.to_string()),
        resource_version: None,
    })
}

fn merge(body: &Value) -> Patch<&Value> {
    Patch::Merge(body)
}

impl ClusterPort for KubePort {
    async fn get_node(&self, name: &str, cached: bool) -> ApiResult<Option<Node>> {
        if cached
            && let Some(store) = &self.node_cache
            && let Some(node) = store.get(&ObjectRef::new(name))
        {
            return Ok(Some((*node).clone()));
        }
        let api: Api<Node> = Api::all(self.client.clone());
        api.get_opt(name).await.map_err(api_error)
    }

    async fn patch_node(&self, name: &str, body: &Value) -> ApiResult<()> {
        let api: Api<Ack<Node>> = Api::all(self.client.clone());
        done(api.patch(name, &PatchParams::default(), &merge(body)).await)
    }

    async fn patch_node_status(&self, name: &str, body: &Value) -> ApiResult<()> {
        let api: Api<Ack<Node>> = Api::all(self.client.clone());
        done(
            api.patch_status(name, &PatchParams::default(), &Patch::Strategic(body))
                .await,
        )
    }

    async fn get_job(&self, name: &str) -> ApiResult<Option<Job>> {
        self.jobs().get_opt(name).await.map_err(api_error)
    }

    async fn list_jobs(&self, selector: &str) -> ApiResult<Vec<Job>> {
        let lp = ListParams::default().labels(selector);
        self.jobs()
            .list(&lp)
            .await
            .map(|l| l.items)
            .map_err(api_error)
    }

    async fn create_job(&self, job: &Job) -> ApiResult<Job> {
        let mut job = job.clone();
        job.metadata.namespace = Some(self.namespace.clone());
        self.jobs()
            .create(&PostParams::default(), &job)
            .await
            .map_err(api_error)
    }

    async fn patch_job(&self, name: &str, body: &Value) -> ApiResult<()> {
        let api: Api<Ack<Job>> = Api::namespaced(self.client.clone(), &self.namespace);
        done(api.patch(name, &PatchParams::default(), &merge(body)).await)
    }

    async fn delete_job(&self, name: &str, uid: &str) -> ApiResult<()> {
        done(self.jobs().delete(name, &guarded_foreground(uid)).await)
    }

    async fn list_pods(&self, namespace: &str, selector: &str) -> ApiResult<Vec<Pod>> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let lp = ListParams::default().labels(selector);
        api.list(&lp).await.map(|l| l.items).map_err(api_error)
    }

    async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> ApiResult<()> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        done(api.delete(name, &guarded_foreground(uid)).await)
    }

    async fn evict_pod(&self, e: &Eviction) -> ApiResult<()> {
        if !e.delete_instead {
            return self.post_eviction(e).await.map_err(api_error);
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &e.namespace);
        let mut params = guarded(&e.uid);
        if let Some(g) = e.grace {
            params = params.grace_period(u32::try_from(g.max(0)).unwrap_or(u32::MAX));
        }
        done(api.delete(&e.name, &params).await)
    }

    async fn get_nodewright(&self, name: &str) -> ApiResult<Option<NodeWright>> {
        let api: Api<NodeWright> = Api::all(self.client.clone());
        api.get_opt(name).await.map_err(api_error)
    }

    async fn patch_nodewright(&self, name: &str, body: &Value) -> ApiResult<NodeWright> {
        let api: Api<NodeWright> = Api::all(self.client.clone());
        api.patch(name, &PatchParams::default(), &merge(body))
            .await
            .map_err(api_error)
    }

    async fn patch_nodewright_status(&self, name: &str, body: &Value) -> ApiResult<Option<String>> {
        let api: Api<Ack<NodeWright>> = Api::all(self.client.clone());
        api.patch_status(name, &PatchParams::default(), &merge(body))
            .await
            .map(|nw| nw.metadata.resource_version)
            .map_err(api_error)
    }

    async fn create_config_map(&self, config_map: &ConfigMap) -> ApiResult<()> {
        let mut cm = config_map.clone();
        cm.metadata.namespace = Some(self.namespace.clone());
        done(self.config_maps().create(&PostParams::default(), &cm).await)
    }

    async fn replace_config_map(&self, config_map: &ConfigMap) -> ApiResult<()> {
        let mut cm = config_map.clone();
        cm.metadata.namespace = Some(self.namespace.clone());
        let name = cm.metadata.name.clone().unwrap_or_default();
        done(
            self.config_maps()
                .replace(&name, &PostParams::default(), &cm)
                .await,
        )
    }

    async fn delete_config_map(&self, name: &str, uid: &str) -> ApiResult<()> {
        done(self.config_maps().delete(name, &guarded(uid)).await)
    }

    async fn create_event(&self, namespace: &str, event: &Event) -> ApiResult<()> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        done(api.create(&PostParams::default(), event).await)
    }

    async fn pause(&self, delay: Duration) {
        tokio::time::sleep(delay).await;
    }

    fn now(&self) -> jiff::Timestamp {
        jiff::Timestamp::now()
    }

    fn elapsed(&self) -> Duration {
        self.origin.elapsed()
    }
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
