//! Admission webhooks (01-api.md §4) served over TLS, and the self-managed serving certificate.

pub mod admission;
pub mod bootstrap;
pub mod cert;
pub mod envelope;
pub mod files;
pub mod tls;
