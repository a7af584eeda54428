//! Authenticated metrics (`METRICS_SECURE`): every `/metrics` request carries a bearer token that
//! a TokenReview authenticates (else 401) and a SubjectAccessReview for `get` on the non-resource
//! URL `/metrics` authorizes (else 403), as controller-runtime's secure metrics do. Decisions are
//! cached for [`CACHE_TTL`] so a scraper costs two reviews per interval, not per request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use tracing::{debug, warn};

/// How long a review result is reused for the same token.
pub const CACHE_TTL: Duration = Duration::from_secs(10);

/// Upper bound on one TokenReview or SubjectAccessReview call.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// Cached tokens at most; the cache is emptied when full.
const CACHE_MAX: usize = 1024;

/// The outcome of checking one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Authenticated and allowed.
    Allowed,
    /// No token, or the token does not authenticate (401).
    Unauthenticated(String),
    /// Authenticated but not allowed to get /metrics (403).
    Forbidden(String),
}

/// TokenReview + SubjectAccessReview client with a short-lived decision cache.
#[derive(Clone)]
pub struct MetricsAuth {
    client: Client,
    cache: Arc<Mutex<HashMap<String, (Instant, Decision)>>>,
}

impl MetricsAuth {
    /// Reviews with `client` (needs create on tokenreviews and subjectaccessreviews).
    pub fn new(client: Client) -> Self {
        MetricsAuth {
            client,
            cache: Arc::default(),
        }
    }

    /// Decides for a bearer token (cached); an apiserver failure is an error, never cached.
    pub async fn decide(&self, token: &str) -> Result<Decision, String> {
        if let Some(d) = self.cached(token) {
            return Ok(d);
        }
        let decision = match self.authenticate(token).await? {
            None => Decision::Unauthenticated("token not authenticated".into()),
            Some(user) => self.authorize(user).await?,
        };
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= CACHE_MAX {
                cache.clear();
            }
            cache.insert(token.to_string(), (Instant::now(), decision.clone()));
        }
        Ok(decision)
    }

    fn cached(&self, token: &str) -> Option<Decision> {
        let cache = self.cache.lock().ok()?;
        let (at, d) = cache.get(token)?;
        (at.elapsed() < CACHE_TTL).then(|| d.clone())
    }

    async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, String> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..Default::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let done =
            tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| "TokenReview timed out".to_string())?
                .map_err(|e| format!("TokenReview failed: {e}"))?;
        let status = done.status.unwrap_or_default();
        Ok(match (status.authenticated, status.user) {
            (Some(true), Some(user)) => Some(user),
            _ => None,
        })
    }

    async fn authorize(&self, user: UserInfo) -> Result<Decision, String> {
        let name = user.username.clone().unwrap_or_default();
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some("/metrics".into()),
                    verb: Some("get".into()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let done =
            tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| "SubjectAccessReview timed out".to_string())?
                .map_err(|e| format!("SubjectAccessReview failed: {e}"))?;
        let status = done.status.unwrap_or_default();
        Ok(if status.allowed {
            Decision::Allowed
        } else {
            Decision::Forbidden(format!("{name} may not get /metrics"))
        })
    }
}

/// The bearer token of an `Authorization` header value, if it is one.
pub fn bearer(value: Option<&str>) -> Option<&str> {
    let v = value?.trim();
    let (scheme, token) = v.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Middleware: lets the request through only when [`MetricsAuth::decide`] allows it.
pub async fn require_metrics_access(
    State(auth): State<MetricsAuth>,
    request: Request,
    next: Next,
) -> Response {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let Some(token) = bearer(value) else {
        return (StatusCode::UNAUTHORIZED, "Unauthorized: no bearer token\n").into_response();
    };
    match auth.decide(token).await {
        Ok(Decision::Allowed) => next.run(request).await,
        Ok(Decision::Unauthenticated(why)) => {
            debug!(why = %why, "metrics request refused");
            (StatusCode::UNAUTHORIZED, format!("Unauthorized: {why}\n")).into_response()
        }
        Ok(Decision::Forbidden(why)) => {
            debug!(why = %why, "metrics request refused");
            (StatusCode::FORBIDDEN, format!("Forbidden: {why}\n")).into_response()
        }
        Err(e) => {
            warn!(error = %e, "metrics authentication unavailable");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "authentication or authorization failed\n",
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use http::Response;
    use kube::client::Body;
    use serde_json::{Value, json};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tower::ServiceExt;

    #[test]
    fn bearer_tokens_are_parsed_strictly() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(Some("Bearer ")), None);
        assert_eq!(bearer(Some("Bearer")), None);
        assert_eq!(bearer(None), None);
    }

    /// A fake apiserver: token "good" and "plain" authenticate (as "reader" and "nobody"),
    /// "reader" may get /metrics. Counts the review calls.
    fn fake_apiserver() -> (Client, Arc<AtomicUsize>) {
        let (svc, mut handle) =
            tower_test::mock::pair::<http::Request<Body>, http::Response<Body>>();
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        tokio::spawn(async move {
            while let Some((req, send)) = handle.next_request().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let path = req.uri().path().to_string();
                let bytes = req.into_body().collect_bytes().await.unwrap_or_default();
                let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let reply = if path.ends_with("/tokenreviews") {
                    let user = match body["spec"]["token"].as_str() {
                        Some("good") => Some("reader"),
                        Some("plain") => Some("nobody"),
                        _ => None,
                    };
                    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                           "spec": body["spec"],
                           "status": {"authenticated": user.is_some(),
                                      "user": user.map(|u| json!({"username": u}))}})
                } else {
                    let ok = body["spec"]["user"] == "reader"
                        && body["spec"]["nonResourceAttributes"]
                            == json!({"path": "/metrics", "verb": "get"});
                    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                           "spec": body["spec"], "status": {"allowed": ok}})
                };
                send.send_response(
                    Response::builder()
                        .status(201)
                        .body(Body::from(serde_json::to_vec(&reply).unwrap_or_default()))
                        .expect("response"),
                );
            }
        });
        (Client::new(svc, "default"), calls)
    }

    async fn get(router: &axum::Router, token: Option<&str>) -> u16 {
        let mut req = http::Request::get("/metrics");
        if let Some(t) = token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let req = req.body(axum::body::Body::empty()).expect("request");
        let resp = router.clone().oneshot(req).await.expect("response");
        resp.status().as_u16()
    }

    #[tokio::test]
    async fn metrics_need_an_authenticated_and_authorized_token() {
        let (client, calls) = fake_apiserver();
        let router = crate::server::secure_metrics_router(
            Arc::new(Metrics::new(false)),
            MetricsAuth::new(client),
        );
        assert_eq!(get(&router, None).await, 401);
        assert_eq!(calls.load(Ordering::SeqCst), 0, "no token, no review");
        assert_eq!(get(&router, Some("forged")).await, 401);
        assert_eq!(get(&router, Some("plain")).await, 403);
        assert_eq!(get(&router, Some("good")).await, 200);
        let before = calls.load(Ordering::SeqCst);
        assert_eq!(get(&router, Some("good")).await, 200);
        assert_eq!(get(&router, Some("plain")).await, 403);
        assert_eq!(calls.load(Ordering::SeqCst), before, "decisions are cached");
    }
}
