//! The one place that builds kube clients: every apiserver call gets connect, write and read
//! timeouts plus an overall bound, every request carries a per-process User-Agent (so the
//! apiserver audit log tells replicas apart), and writes can be fenced by leadership.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderValue, Method, Request, header};
use kube::client::{Body, ClientBuilder};
use kube::{Client, Config};
use tower::{BoxError, Layer, Service};

use crate::leader::Fence;

/// Time allowed to open a TCP + TLS connection to the apiserver.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Time allowed to send a request body.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Bound of one plain (non-watch) request, from sending it to the response headers; also the
/// read timeout of the request client's connections.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Read timeout of the watch client's connections: longer than the watch timeout the apiserver is
/// asked for (kube's watcher asks for 290 s) so an idle but healthy watch is not cut.
pub const WATCH_READ_TIMEOUT: Duration = Duration::from_secs(330);

/// Environment variable that overrides the User-Agent (default `nodewright-operator/<version>
/// (<identity>)`).
pub const USER_AGENT_ENV: &str = "NODEWRIGHT_USER_AGENT";

/// How a client will be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// Watches (long reads): no overall bound, a long read timeout.
    Watch,
    /// Plain requests: every call bounded by [`REQUEST_TIMEOUT`].
    Request,
}

/// Errors building a client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No kubeconfig or in-cluster configuration.
    #[error("cannot find a kubeconfig or in-cluster configuration: {0}")]
    Config(#[from] kube::config::InferConfigError),
    /// The configuration could not be turned into a client.
    #[error("cannot build the kubernetes client: {0}")]
    Build(#[from] kube::Error),
    /// The User-Agent is not a valid header value.
    #[error("invalid User-Agent {0:?}")]
    UserAgent(String),
}

/// A write refused because this replica no longer leads.
#[derive(Debug, thiserror::Error)]
#[error("write fenced: this replica does not hold the lease")]
pub struct Fenced;

/// A request that took longer than [`REQUEST_TIMEOUT`].
#[derive(Debug, thiserror::Error)]
#[error("apiserver request timed out after {0:?}")]
pub struct TimedOut(pub Duration);

/// The User-Agent of this process: `NODEWRIGHT_USER_AGENT`, else one naming the identity.
pub fn user_agent(env_value: Option<&str>, identity: &str) -> String {
    match env_value.filter(|v| !v.trim().is_empty()) {
        Some(v) => v.trim().to_string(),
        None => format!(
            "nodewright-operator/{} ({identity})",
            env!("CARGO_PKG_VERSION")
        ),
    }
}

/// Adjusts an inferred config for `purpose`.
pub fn configure(mut config: Config, purpose: Purpose, agent: &str) -> Result<Config, ClientError> {
    let value =
        HeaderValue::from_str(agent).map_err(|_| ClientError::UserAgent(agent.to_string()))?;
    config
        .headers
        .retain(|(name, _)| name != header::USER_AGENT);
    config.headers.push((header::USER_AGENT, value));
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.write_timeout = Some(WRITE_TIMEOUT);
    config.read_timeout = Some(match purpose {
        Purpose::Watch => WATCH_READ_TIMEOUT,
        Purpose::Request => REQUEST_TIMEOUT,
    });
    // The read timeout counts from when a request is sent, not from when its pooled connection
    // went idle.
    config.reset_reader_on_write = true;
    Ok(config)
}

/// Builds a client for `purpose` from the inferred configuration. With a `fence`, every
/// non-read request is refused while the fence is closed.
pub async fn build(
    purpose: Purpose,
    agent: &str,
    fence: Option<Fence>,
) -> Result<Client, ClientError> {
    let config = configure(Config::infer().await?, purpose, agent)?;
    from_config(config, purpose, fence)
}

/// Builds a client from an explicit configuration (see [`build`]).
pub fn from_config(
    mut config: Config,
    purpose: Purpose,
    fence: Option<Fence>,
) -> Result<Client, ClientError> {
    if fence.is_some() {
        // Retries happen below this layer and would bypass the fence; the next pass retries.
        config.default_retry = false;
    }
    let bound = (purpose == Purpose::Request).then_some(REQUEST_TIMEOUT);
    let builder = ClientBuilder::try_from(config)?.with_layer(&GuardLayer { fence, bound });
    Ok(builder.build())
}

/// Tower layer that checks the write fence and bounds the whole request.
#[derive(Clone)]
pub struct GuardLayer {
    fence: Option<Fence>,
    bound: Option<Duration>,
}

impl GuardLayer {
    /// A layer checking `fence` before writes and bounding each request by `bound`.
    pub fn new(fence: Option<Fence>, bound: Option<Duration>) -> Self {
        GuardLayer { fence, bound }
    }
}

impl<S> Layer<S> for GuardLayer {
    type Service = Guard<S>;

    fn layer(&self, inner: S) -> Guard<S> {
        Guard {
            inner,
            fence: self.fence.clone(),
            bound: self.bound,
        }
    }
}

/// The service of [`GuardLayer`].
#[derive(Clone)]
pub struct Guard<S> {
    inner: S,
    fence: Option<Fence>,
    bound: Option<Duration>,
}

/// True for methods that change state.
pub fn is_write(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

type GuardFuture<R> = Pin<Box<dyn Future<Output = Result<R, BoxError>> + Send>>;

impl<S, R> Service<Request<Body>> for Guard<S>
where
    S: Service<Request<Body>, Response = R>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    R: Send + 'static,
{
    type Response = R;
    type Error = BoxError;
    type Future = GuardFuture<R>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<Body>) -> GuardFuture<R> {
        if let Some(fence) = &self.fence
            && is_write(req.method())
            && !fence.open()
        {
            return Box::pin(async { Err(Box::new(Fenced) as BoxError) });
        }
        let response = self.inner.call(req);
        match self.bound {
            Some(bound) => Box::pin(async move {
                match tokio::time::timeout(bound, response).await {
                    Ok(r) => r.map_err(Into::into),
                    Err(_) => Err(Box::new(TimedOut(bound)) as BoxError),
                }
            }),
            None => Box::pin(async move { response.await.map_err(Into::into) }),
        }
    }
}

/// True when `err` is a write refused by the fence.
pub fn is_fenced(err: &kube::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if e.is::<Fenced>() {
            return true;
        }
        source = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leader::Fence;
    use http::Response;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};

    #[test]
    fn user_agent_names_the_identity_unless_overridden() {
        assert!(user_agent(None, "pod_1").ends_with("(pod_1)"));
        assert_eq!(user_agent(Some(" nw-a "), "pod_1"), "nw-a");
        assert!(user_agent(Some(""), "pod_1").starts_with("nodewright-operator/"));
    }

    #[test]
    fn configure_sets_timeouts_and_user_agent() {
        let base = Config::new("https://127.0.0.1:1".parse().expect("uri"));
        let c = configure(base.clone(), Purpose::Request, "nw-a").expect("config");
        assert_eq!(c.read_timeout, Some(REQUEST_TIMEOUT));
        assert_eq!(c.connect_timeout, Some(CONNECT_TIMEOUT));
        assert!(
            c.headers
                .iter()
                .any(|(n, v)| n == header::USER_AGENT && v == "nw-a")
        );
        let w = configure(base, Purpose::Watch, "nw-a").expect("config");
        assert_eq!(w.read_timeout, Some(WATCH_READ_TIMEOUT));
        assert!(configure(w, Purpose::Watch, "bad\nagent").is_err());
    }

    fn guarded(
        fence: Option<Fence>,
        bound: Option<Duration>,
    ) -> (
        Client,
        tower_test::mock::Handle<Request<Body>, Response<Body>>,
    ) {
        let (svc, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let svc = GuardLayer::new(fence, bound).layer(svc);
        (Client::new(svc, "default"), handle)
    }

    #[tokio::test]
    async fn a_closed_fence_refuses_writes_before_they_are_sent() {
        let fence = Fence::closed();
        let (client, mut handle) = guarded(Some(fence), None);
        let api: Api<ConfigMap> = Api::namespaced(client, "nw");
        let err = api
            .create(&PostParams::default(), &ConfigMap::default())
            .await
            .expect_err("fenced");
        assert!(is_fenced(&err), "{err}");
        // Nothing reached the transport.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), handle.next_request())
                .await
                .is_err()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_request_times_out() {
        let (client, mut handle) = guarded(None, Some(Duration::from_secs(3)));
        let api: Api<ConfigMap> = Api::namespaced(client, "nw");
        let hung = tokio::spawn(async move { handle.next_request().await });
        let err = api.get("x").await.expect_err("timed out");
        assert!(err.to_string().contains("timed out"), "{err}");
        hung.abort();
    }
}
