//! HTTP endpoints: `/healthz` and `/readyz` (probe port), `/metrics` (metrics port), and the
//! admission webhooks over TLS (port 9443).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum_server::Handle;
use axum_server::tls_rustls::RustlsConfig;
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::metrics::{CONTENT_TYPE, Metrics};
use crate::webhook::admission::{self, Hook, Lookups};
use crate::webhook::bootstrap::CertManager;
use crate::webhook::files::CertFiles;

/// Port the webhook server listens on (the Service maps 443 to it).
pub const WEBHOOK_PORT: u16 = 9443;

/// Readiness inputs.
#[derive(Clone, Default)]
pub struct Health {
    /// Watch caches completed their first list.
    pub caches_synced: Arc<AtomicBool>,
    /// The webhook certificate manager, when webhooks are on.
    pub webhook: Option<CertManager>,
    /// Fixed certificate files (`WEBHOOK_CERT_DIR`), when used instead of the Secret.
    pub webhook_files: Option<CertFiles>,
}

impl Health {
    /// Ready when caches are synced and, with webhooks on, the certificate is served and trusted.
    pub fn ready(&self) -> Result<(), &'static str> {
        if !self.caches_synced.load(Ordering::Relaxed) {
            return Err("caches not synced");
        }
        if let Some(w) = &self.webhook
            && !w.is_ready()
        {
            return Err("webhook certificate not served or CA bundle not injected");
        }
        if let Some(f) = &self.webhook_files
            && !f.is_ready()
        {
            return Err("webhook certificate files not loaded");
        }
        Ok(())
    }
}

/// Parses Go-style listen addresses (`:8080`, `127.0.0.1:8080`); `0` or empty disables.
pub fn parse_addr(text: &str) -> Result<Option<SocketAddr>, String> {
    let t = text.trim();
    if t.is_empty() || t == "0" {
        return Ok(None);
    }
    let full = if t.starts_with(':') {
        format!("0.0.0.0{t}")
    } else {
        t.to_string()
    };
    full.parse()
        .map(Some)
        .map_err(|e| format!("invalid listen address {text:?}: {e}"))
}

/// The probe router.
pub fn probe_router(health: Health) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State(h): State<Health>| async move {
                match h.ready() {
                    Ok(()) => (StatusCode::OK, "ok".to_string()),
                    Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why.to_string()),
                }
            }),
        )
        .with_state(health)
}

/// The metrics router.
pub fn metrics_router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(m): State<Arc<Metrics>>| async move {
                ([(header::CONTENT_TYPE, CONTENT_TYPE)], m.encode()).into_response()
            }),
        )
        .with_state(metrics)
}

/// The admission router (01-api.md §4.1 paths). Bodies up to
/// [`admission::MAX_REVIEW_BYTES`] are accepted; larger ones get HTTP 413.
pub fn webhook_router<L: Lookups + Clone + 'static>(lookups: L) -> Router {
    let route = |hook: Hook| {
        post(
            move |State(l): State<L>, body: axum::body::Bytes| async move {
                axum::Json(admission::review(hook, &body, &l).await)
            },
        )
    };
    Router::new()
        .route(admission::MUTATE_NODEWRIGHT, route(Hook::MutateNodeWright))
        .route(
            admission::VALIDATE_NODEWRIGHT,
            route(Hook::ValidateNodeWright),
        )
        .route(admission::MUTATE_POLICY, route(Hook::MutatePolicy))
        .route(admission::VALIDATE_POLICY, route(Hook::ValidatePolicy))
        .route("/healthz", get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(admission::MAX_REVIEW_BYTES))
        .with_state(lookups)
}

/// Serves plain HTTP until shutdown.
pub async fn serve_http(
    name: &'static str,
    addr: SocketAddr,
    router: Router,
    mut shutdown: watch::Receiver<bool>,
) {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            error!(server = name, %addr, error = %e, "cannot listen; exiting");
            std::process::exit(1);
        }
    };
    info!(server = name, %addr, "listening");
    let stop = async move {
        let _ = shutdown.changed().await;
    };
    if let Err(e) = axum::serve(listener, router)
        .with_graceful_shutdown(stop)
        .await
    {
        warn!(server = name, error = %e, "server failed");
    }
}

/// Serves the webhooks over TLS until shutdown; the certificate can be swapped in `tls`.
pub async fn serve_tls(
    addr: SocketAddr,
    router: Router,
    tls: RustlsConfig,
    mut shutdown: watch::Receiver<bool>,
) {
    let handle = Handle::new();
    let stopper = handle.clone();
    tokio::spawn(async move {
        let _ = shutdown.changed().await;
        stopper.graceful_shutdown(Some(std::time::Duration::from_secs(5)));
    });
    if let Err(e) = std::net::TcpListener::bind(addr) {
        error!(server = "webhook", %addr, error = %e, "cannot listen; exiting");
        std::process::exit(1);
    }
    info!(server = "webhook", %addr, "listening (TLS)");
    if let Err(e) = axum_server::bind_rustls(addr, tls)
        .handle(handle)
        .serve(router.into_make_service())
        .await
    {
        warn!(server = "webhook", error = %e, "server failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_style_addresses() {
        assert_eq!(
            parse_addr(":8080").ok().flatten().map(|a| a.port()),
            Some(8080)
        );
        assert_eq!(
            parse_addr("127.0.0.1:1").ok().flatten().map(|a| a.port()),
            Some(1)
        );
        assert_eq!(parse_addr("0"), Ok(None));
        assert!(parse_addr("nope").is_err());
    }

    #[test]
    fn readiness_needs_synced_caches() {
        let h = Health::default();
        assert!(h.ready().is_err());
        h.caches_synced.store(true, Ordering::Relaxed);
        assert!(h.ready().is_ok());
    }
}
