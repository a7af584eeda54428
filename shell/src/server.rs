//! HTTP endpoints: `/healthz` and `/readyz` (probe port), `/metrics` (metrics port), and the
//! admission webhooks over TLS (port 9443).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum_server::Handle;
use axum_server::tls_rustls::RustlsConfig;
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::health::{CONTACT_WINDOW, Contact, PASS_STUCK_AFTER};
use crate::metrics::Metrics;
use crate::metrics_auth::MetricsAuth;
use crate::runner::PassClock;
use crate::webhook::admission::{self, Hook, Lookups};
use crate::webhook::bootstrap::CertManager;
use crate::webhook::files::CertFiles;

/// Port the webhook server listens on (the Service maps 443 to it).
pub const WEBHOOK_PORT: u16 = 9443;

/// Liveness and readiness inputs.
#[derive(Clone)]
pub struct Health {
    /// Watch caches completed their first list.
    pub caches_synced: Arc<AtomicBool>,
    /// The webhook certificate manager, when webhooks are on.
    pub webhook: Option<CertManager>,
    /// Fixed certificate files (`WEBHOOK_CERT_DIR`), when used instead of the Secret.
    pub webhook_files: Option<CertFiles>,
    /// Start of the pass in flight.
    pub pass: PassClock,
    /// Liveness fails when a pass has run longer than this.
    pub stuck_after: Duration,
    /// Last successful apiserver answer.
    pub contact: Contact,
    /// Leadership, when leader election is on. It does not gate readiness: a standby is ready,
    /// serves admission and takes over when the leader goes.
    pub leading: Option<watch::Receiver<bool>>,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            caches_synced: Arc::default(),
            webhook: None,
            webhook_files: None,
            pass: PassClock::default(),
            stuck_after: PASS_STUCK_AFTER,
            contact: Contact::default(),
            leading: None,
        }
    }
}

impl Health {
    /// Live unless a pass has been running longer than `stuck_after`.
    pub fn live(&self) -> Result<(), String> {
        match self.pass.running_for() {
            Some(d) if d > self.stuck_after => Err(format!(
                "a pass has been running for {}s (bound {}s)",
                d.as_secs(),
                self.stuck_after.as_secs()
            )),
            _ => Ok(()),
        }
    }

    /// "leader" or "standby" (for logs and tests; the metric `nodewright_operator_leader`
    /// exposes the same).
    pub fn role(&self) -> &'static str {
        match &self.leading {
            Some(l) if !*l.borrow() => "standby",
            _ => "leader",
        }
    }

    /// Ready when caches are synced, the apiserver answered within [`CONTACT_WINDOW`] and, with
    /// webhooks on, the certificate is served and trusted. Leadership does not gate readiness.
    pub fn ready(&self) -> Result<(), &'static str> {
        if !self.caches_synced.load(Ordering::Relaxed) {
            return Err("caches not synced");
        }
        if !self.contact.within(CONTACT_WINDOW) {
            return Err("no answer from the apiserver within the contact window");
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
        .route(
            "/healthz",
            get(|State(h): State<Health>| async move {
                match h.live() {
                    Ok(()) => (StatusCode::OK, "ok".to_string()),
                    Err(why) => (StatusCode::INTERNAL_SERVER_ERROR, why),
                }
            }),
        )
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
            get(
                |State(m): State<Arc<Metrics>>, headers: axum::http::HeaderMap| async move {
                    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
                    let (content_type, body) = m.negotiate(accept);
                    ([(header::CONTENT_TYPE, content_type)], body).into_response()
                },
            ),
        )
        .with_state(metrics)
}

/// The metrics router behind authentication and authorization (`METRICS_SECURE`).
pub fn secure_metrics_router(metrics: Arc<Metrics>, auth: MetricsAuth) -> Router {
    metrics_router(metrics).layer(axum::middleware::from_fn_with_state(
        auth,
        crate::metrics_auth::require_metrics_access,
    ))
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

/// Serves `router` over TLS until shutdown; the certificate can be swapped in `tls`.
pub async fn serve_tls(
    name: &'static str,
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
        error!(server = name, %addr, error = %e, "cannot listen; exiting");
        std::process::exit(1);
    }
    info!(server = name, %addr, "listening (TLS)");
    if let Err(e) = axum_server::bind_rustls(addr, tls)
        .handle(handle)
        .serve(router.into_make_service())
        .await
    {
        warn!(server = name, error = %e, "server failed");
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
    fn readiness_needs_synced_caches_and_apiserver_contact() {
        let h = Health::default();
        h.contact.touch();
        assert!(h.ready().is_err());
        h.caches_synced.store(true, Ordering::Relaxed);
        assert!(h.ready().is_ok());
        let lost = Health {
            contact: Contact::default(),
            ..h.clone()
        };
        assert_eq!(
            lost.ready(),
            Err("no answer from the apiserver within the contact window")
        );
    }

    #[test]
    fn a_standby_is_ready_and_says_so() {
        let (_tx, rx) = watch::channel(false);
        let h = Health {
            leading: Some(rx),
            ..Health::default()
        };
        h.caches_synced.store(true, Ordering::Relaxed);
        h.contact.touch();
        assert!(h.ready().is_ok());
        assert_eq!(h.role(), "standby");
    }

    #[test]
    fn liveness_fails_when_a_pass_runs_past_the_bound() {
        let h = Health {
            stuck_after: Duration::from_millis(20),
            ..Health::default()
        };
        assert!(h.live().is_ok());
        let running = h.pass.start();
        assert!(h.live().is_ok());
        std::thread::sleep(Duration::from_millis(40));
        assert!(h.live().is_err(), "stuck pass");
        drop(running);
        assert!(h.live().is_ok(), "a finished or cancelled pass clears it");
    }
}
