//! AdmissionReview bodies decoded straight from bytes into typed parts: the envelope fields
//! every handler needs, then the objects as their Rust types. No `serde_json::Value` copy of a
//! whole object is made (a NodeWright's status can be tens of MiB with its review envelope).

use kube::core::admission::{AdmissionResponse, Operation};
use kube::core::{Status, TypeMeta};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use nodewright_crds::limits;

/// The review fields every handler needs; the objects are skipped without being built.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Head {
    /// `admission.k8s.io/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `AdmissionReview`.
    #[serde(default)]
    pub kind: String,
    /// The request; a review without one is malformed.
    pub request: Option<HeadRequest>,
}

/// The request fields the handlers read besides the objects.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeadRequest {
    /// Round-trip id, copied into the response.
    pub uid: String,
    /// The object's name (empty on a CREATE with `generateName`).
    #[serde(default)]
    pub name: String,
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: Operation,
}

/// The request's objects as `T`; every other field is skipped.
#[derive(Debug, Deserialize)]
pub struct Objects<T> {
    /// The request part.
    pub request: ObjectsRequest<T>,
}

/// `object` and `oldObject` of a request.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectsRequest<T> {
    /// The new object (absent on DELETE).
    #[serde(default = "none")]
    pub object: Option<T>,
    /// The stored object (UPDATE and DELETE).
    #[serde(default = "none")]
    pub old_object: Option<T>,
}

fn none<T>() -> Option<T> {
    None
}

/// The review versions answered (the response carries the request's).
const API_VERSIONS: [&str; 2] = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"];

/// A review that cannot be answered with its own uid.
#[derive(Debug, thiserror::Error)]
#[error("malformed AdmissionReview: {0}")]
pub struct Malformed(String);

/// Reads the envelope of `body`.
pub fn head(body: &[u8]) -> Result<(TypeMeta, HeadRequest), Malformed> {
    let head: Head = serde_json::from_slice(body).map_err(|e| Malformed(e.to_string()))?;
    if head.kind != "AdmissionReview" || !API_VERSIONS.contains(&head.api_version.as_str()) {
        // Echoing them would answer with a kind the apiserver never sent (found by fuzzing).
        return Err(Malformed(format!(
            "kind {:?} in {:?} is not an AdmissionReview of admission.k8s.io/v1 or v1beta1",
            limits::clip(&head.kind, 64),
            limits::clip(&head.api_version, 64)
        )));
    }
    let request = head
        .request
        .ok_or_else(|| Malformed("no request".to_string()))?;
    let types = TypeMeta {
        api_version: head.api_version,
        kind: head.kind,
    };
    Ok((types, request))
}

/// Decodes the request's objects as `T` (`Err` names the decode failure).
pub fn objects<T: DeserializeOwned>(body: &[u8]) -> Result<ObjectsRequest<T>, String> {
    serde_json::from_slice::<Objects<T>>(body)
        .map(|o| o.request)
        .map_err(|e| format!("cannot decode object: {e}"))
}

/// Only `request.object`; `oldObject` is skipped without being built.
#[derive(Debug, Deserialize)]
struct NewOnly<T> {
    request: NewOnlyRequest<T>,
}

#[derive(Debug, Deserialize)]
struct NewOnlyRequest<T> {
    #[serde(default = "none")]
    object: Option<T>,
}

/// Decodes only the request's new object as `T`: for an UPDATE whose stored object does not
/// decode (written while the webhooks were off), so that the repair can still be checked.
pub fn new_object<T: DeserializeOwned>(body: &[u8]) -> Result<Option<T>, String> {
    serde_json::from_slice::<NewOnly<T>>(body)
        .map(|o| o.request.object)
        .map_err(|e| format!("cannot decode object: {e}"))
}

/// An allowing response to the request `uid` (what `AdmissionResponse::from(&request)` gives).
pub fn allow(types: TypeMeta, uid: &str) -> AdmissionResponse {
    let mut response = AdmissionResponse::invalid("");
    response.types = types;
    response.uid = uid.to_string();
    response.allowed = true;
    response.result = Status::default();
    response
}
