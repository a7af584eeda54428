//! Error type of the shell and helpers to classify apiserver answers.

use thiserror::Error;

/// Anything the shell's I/O can fail with.
#[derive(Debug, Error)]
pub enum ShellError {
    /// The apiserver or the transport failed.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// The apiserver answered a port call with an error.
    #[error("{0}")]
    Api(#[from] crate::interpret::ApiError),
    /// A JSON value could not be built or read.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// Cluster data the shell must read is malformed (for example a node-state annotation).
    #[error("malformed cluster data: {0}")]
    Malformed(String),
    /// Conflicts persisted through every retry.
    #[error("still conflicting after {0} attempts")]
    ConflictRetriesExhausted(u32),
    /// Certificate minting or loading failed.
    #[error("certificate: {0}")]
    Certificate(String),
    /// Anything else, with context.
    #[error("{0}")]
    Other(String),
}

/// The HTTP code of an apiserver error answer, when the error is one.
pub fn api_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// True for 404 answers.
pub fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.is_not_found())
}

/// True for 409 AlreadyExists answers.
pub fn is_already_exists(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.is_already_exists())
}

/// True for 409 Conflict answers that are not AlreadyExists (stale resourceVersion or a failed
/// uid precondition).
pub fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 409 && !s.is_already_exists())
}

/// True for 429 TooManyRequests (an eviction refused by a PodDisruptionBudget).
pub fn is_too_many_requests(err: &kube::Error) -> bool {
    api_code(err) == Some(429)
}

/// True when a patch carrying `metadata.uid` was refused because the uid differs (the apiserver
/// answers 409 or 422 depending on the path taken).
pub fn is_uid_mismatch(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(s) => {
            (s.code == 409 && !s.is_already_exists())
                || (s.code == 422 && s.message.contains("uid"))
        }
        _ => false,
    }
}
