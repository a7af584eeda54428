//! The cluster port: the few apiserver calls the interpreter makes, with typed answers. The
//! operator implements it over `kube::Api` ([`super::kube_port::KubePort`]); the simulator over
//! its in-memory apiserver. Everything that decides what to send and how to read the answer lives
//! in the interpreter, generic over this trait, so both run the same code.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::events::v1::Event;
use nodewright_crds::NodeWright;
use serde_json::Value;
use thiserror::Error;

/// Why the apiserver (or the path to it) refused a request.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ApiError {
    /// 404: no such object.
    #[error("not found: {0}")]
    NotFound(String),
    /// 409 AlreadyExists: a create of an existing name.
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// 409 Conflict: a resourceVersion or uid precondition failed.
    #[error("conflict: {0}")]
    Conflict(String),
    /// 422 on a patch whose `metadata.uid` differs from the stored object's.
    #[error("uid mismatch: {0}")]
    UidMismatch(String),
    /// 429: an eviction refused by a PodDisruptionBudget.
    #[error("too many requests: {0}")]
    TooManyRequests(String),
    /// The leadership fence refused the write before it was sent.
    #[error("fenced: {0}")]
    Fenced(String),
    /// Anything else (other status codes, transport, timeouts).
    #[error("{0}")]
    Other(String),
}

impl ApiError {
    /// True for 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ApiError::NotFound(_))
    }

    /// True for 409 Conflict (not AlreadyExists).
    pub fn is_conflict(&self) -> bool {
        matches!(self, ApiError::Conflict(_))
    }

    /// True when a patch carrying `metadata.uid` was refused for the uid (409 or 422).
    pub fn is_uid_mismatch(&self) -> bool {
        matches!(self, ApiError::Conflict(_) | ApiError::UidMismatch(_))
    }
}

/// The answer of one port call.
pub type ApiResult<T> = Result<T, ApiError>;

/// The apiserver calls of the interpreter. Jobs and ConfigMaps live in the operator namespace the
/// port was made for; patches are JSON merge patches (the node conditions patch is a strategic
/// merge patch of `status.conditions`) whose `metadata.uid` and `metadata.resourceVersion`, when
/// present, are preconditions.
pub trait ClusterPort {
    /// Reads a node; `cached` lets the port answer from its watch cache when it has the node.
    fn get_node(&self, name: &str, cached: bool) -> impl Future<Output = ApiResult<Option<Node>>>;
    /// Merge-patches a node.
    fn patch_node(&self, name: &str, body: &Value) -> impl Future<Output = ApiResult<()>>;
    /// Strategic-merge-patches a node's status conditions.
    fn patch_node_status(&self, name: &str, body: &Value) -> impl Future<Output = ApiResult<()>>;
    /// Reads a Job.
    fn get_job(&self, name: &str) -> impl Future<Output = ApiResult<Option<Job>>>;
    /// Lists Jobs by label selector (`k=v`).
    fn list_jobs(&self, selector: &str) -> impl Future<Output = ApiResult<Vec<Job>>>;
    /// Creates a Job; returns it as stored.
    fn create_job(&self, job: &Job) -> impl Future<Output = ApiResult<Job>>;
    /// Merge-patches a Job.
    fn patch_job(&self, name: &str, body: &Value) -> impl Future<Output = ApiResult<()>>;
    /// Foreground-deletes a Job guarded by its uid.
    fn delete_job(&self, name: &str, uid: &str) -> impl Future<Output = ApiResult<()>>;
    /// Lists pods of a namespace by label selector (`k=v`).
    fn list_pods(
        &self,
        namespace: &str,
        selector: &str,
    ) -> impl Future<Output = ApiResult<Vec<Pod>>>;
    /// Foreground-deletes a pod guarded by its uid.
    fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> impl Future<Output = ApiResult<()>>;
    /// Evicts a pod guarded by its uid (policy/v1 Eviction), or deletes it with the same guard
    /// when `delete_instead`; `grace` overrides its termination grace period.
    fn evict_pod(&self, eviction: &Eviction) -> impl Future<Output = ApiResult<()>>;
    /// Reads a NodeWright.
    fn get_nodewright(&self, name: &str) -> impl Future<Output = ApiResult<Option<NodeWright>>>;
    /// Merge-patches a NodeWright; returns it as stored.
    fn patch_nodewright(
        &self,
        name: &str,
        body: &Value,
    ) -> impl Future<Output = ApiResult<NodeWright>>;
    /// Merge-patches a NodeWright's status subresource; returns the resourceVersion written.
    fn patch_nodewright_status(
        &self,
        name: &str,
        body: &Value,
    ) -> impl Future<Output = ApiResult<Option<String>>>;
    /// Creates a ConfigMap.
    fn create_config_map(&self, config_map: &ConfigMap) -> impl Future<Output = ApiResult<()>>;
    /// Replaces a ConfigMap guarded by the resourceVersion it carries.
    fn replace_config_map(&self, config_map: &ConfigMap) -> impl Future<Output = ApiResult<()>>;
    /// Deletes a ConfigMap guarded by its uid.
    fn delete_config_map(&self, name: &str, uid: &str) -> impl Future<Output = ApiResult<()>>;
    /// Creates an events.k8s.io/v1 Event in `namespace`.
    fn create_event(&self, namespace: &str, event: &Event) -> impl Future<Output = ApiResult<()>>;
    /// Waits before a conflict retry (the simulator does not wait).
    fn pause(&self, delay: Duration) -> impl Future<Output = ()>;
    /// Wall-clock time (Event timestamps).
    fn now(&self) -> jiff::Timestamp;
    /// Monotonic time since an arbitrary origin (Event de-duplication).
    fn elapsed(&self) -> Duration;
}

/// One eviction request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eviction {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// uid precondition.
    pub uid: String,
    /// Delete instead of evicting (PDBs are not consulted).
    pub delete_instead: bool,
    /// Grace period override in seconds.
    pub grace: Option<i64>,
}
