//! Leader election on a coordination.k8s.io Lease with Update + resourceVersion, the way
//! client-go's leaderelection does it, so the Go and Rust operators exclude each other when they
//! share the lease name (06-operations.md §2.8).
//!
//! [`machine`] decides (pure, virtual time); [`run`] drives it with tokio, bounding every attempt
//! by the rest of the leadership window; [`Fence`] lets writes through only inside that window.

pub mod fence;
pub mod lease;
pub mod machine;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

pub use fence::{Fence, Window};
pub use lease::{LeaseWrite, view_of};
pub use machine::{Action, Change, LeaseView, Machine, Timings};

use crate::error::{is_already_exists, is_conflict};

/// The reconcile lease's historic name (keep it: the Go operator uses it).
pub const RECONCILE_LEASE: &str = "3c22c1ae.nvidia.com";

/// Name, place and timings of one candidate.
#[derive(Clone, Debug)]
pub struct LeaderConfig {
    /// Lease name.
    pub name: String,
    /// Lease namespace (the operator namespace).
    pub namespace: String,
    /// This replica's identity (pod name plus a per-process suffix).
    pub identity: String,
    /// Lease duration, renew deadline and retry period.
    pub timings: Timings,
}

impl LeaderConfig {
    /// controller-runtime's timings: 15 s lease, 10 s renew deadline, 2 s retry.
    pub fn new(namespace: &str, identity: &str) -> Self {
        LeaderConfig {
            name: RECONCILE_LEASE.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            timings: Timings::default(),
        }
    }
}

/// Where the driver announces leadership.
#[derive(Clone)]
pub struct Outputs {
    /// True while leading; passes run only then.
    pub leading: watch::Sender<bool>,
    /// Opened for the leadership window, closed when it ends.
    pub fence: Fence,
}

/// Campaigns for the lease until `release` turns true (sent once passes have stopped), then gives
/// the lease up if still held. Losing the lease closes the fence, announces `leading = false` and
/// keeps campaigning.
pub async fn run(
    client: Client,
    config: LeaderConfig,
    out: Outputs,
    mut release: watch::Receiver<bool>,
) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let origin = Instant::now();
    let clock = move || origin.elapsed();
    let mut m = Machine::new(&config.identity, config.timings);
    loop {
        if *release.borrow() {
            break;
        }
        let bound = m.attempt_bound(clock());
        match tokio::time::timeout(bound, attempt(&api, &config, &mut m, &clock)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!(lease = %config.name, error = %e, "lease attempt failed"),
            Err(_) => {
                m.on_write_failed();
                warn!(lease = %config.name, bound_ms = bound.as_millis() as u64, "lease attempt timed out");
            }
        }
        publish(&mut m, clock(), origin, &config, &out);
        let wake = origin + m.next_attempt(clock());
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = release.wait_for(|r| *r) => break,
        }
    }
    give_up(&api, &config, &mut m, clock(), &out).await;
}

/// Opens or closes the fence for the current window and announces transitions.
fn publish(m: &mut Machine, now: Duration, origin: Instant, config: &LeaderConfig, out: &Outputs) {
    match m.fence_until(now) {
        Some(until) => out.fence.open_until(origin + until),
        None => out.fence.close(),
    }
    match m.change(now) {
        Some(Change::Acquired) => {
            info!(lease = %config.name, identity = %config.identity, "became leader");
            let _ = out.leading.send(true);
        }
        Some(Change::Lost) => {
            out.fence.close();
            warn!(lease = %config.name, identity = %config.identity,
                  "could not renew the lease in time; leadership lost, writes fenced");
            let _ = out.leading.send(false);
        }
        None => {}
    }
}

/// One read plus, when the machine asks for it, one write.
async fn attempt(
    api: &Api<Lease>,
    config: &LeaderConfig,
    m: &mut Machine,
    clock: &impl Fn() -> Duration,
) -> Result<(), kube::Error> {
    let lease = api.get_opt(&config.name).await?;
    let view = lease.as_ref().map(view_of);
    let action = m.on_read(clock(), view.as_ref());
    let started = clock();
    let pp = PostParams::default();
    let written = match lease::write_for(action, lease, config, now()) {
        None => return Ok(()),
        Some(LeaseWrite::Create(fresh)) => api.create(&pp, &fresh).await.map(drop),
        Some(LeaseWrite::Replace(lease)) => api.replace(&config.name, &pp, &lease).await.map(drop),
    };
    match written {
        Ok(()) => {
            m.on_write_ok(started);
            Ok(())
        }
        Err(e) if is_conflict(&e) || is_already_exists(&e) => {
            m.on_write_failed();
            Ok(())
        }
        Err(e) => {
            m.on_write_failed();
            Err(e)
        }
    }
}

fn now() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

/// Closes the fence and, when the window is still open, gives the lease up so a standby takes
/// over without waiting for expiry. Called only after passes have stopped.
async fn give_up(
    api: &Api<Lease>,
    config: &LeaderConfig,
    m: &mut Machine,
    now: Duration,
    out: &Outputs,
) {
    out.fence.close();
    let _ = out.leading.send(false);
    if !m.may_release(now) {
        return;
    }
    let bound = m.attempt_bound(now);
    m.on_released();
    match tokio::time::timeout(bound, release(api, config)).await {
        Ok(Ok(true)) => info!(lease = %config.name, "released the lease"),
        Ok(Ok(false)) => {}
        Ok(Err(e)) => warn!(lease = %config.name, error = %e, "could not release the lease"),
        Err(_) => warn!(lease = %config.name, "releasing the lease timed out"),
    }
}

async fn release(api: &Api<Lease>, config: &LeaderConfig) -> Result<bool, kube::Error> {
    let Some(lease) = api.get_opt(&config.name).await? else {
        return Ok(false);
    };
    let Some(lease) = lease::released(lease, config, now()) else {
        return Ok(false);
    };
    api.replace(&config.name, &PostParams::default(), &lease)
        .await
        .map(|_| true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::{Value, json};
    use tokio::sync::mpsc;

    type Answer = Option<(u16, Value)>;

    /// A client whose answers come from `answer(method, body)`; `None` never answers (a hung
    /// call). Every request is also sent to the returned channel.
    fn client(
        mut answer: impl FnMut(&str, &Value) -> Answer + Send + 'static,
    ) -> (Client, mpsc::UnboundedReceiver<(String, Value)>) {
        let (svc, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let (seen_tx, seen) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut hung = Vec::new();
            while let Some((req, send)) = handle.next_request().await {
                let method = req.method().to_string();
                let bytes = req.into_body().collect_bytes().await.unwrap_or_default();
                let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let _ = seen_tx.send((method.clone(), body.clone()));
                match answer(&method, &body) {
                    Some((status, reply)) => send.send_response(
                        Response::builder()
                            .status(status)
                            .body(Body::from(serde_json::to_vec(&reply).unwrap_or_default()))
                            .expect("response"),
                    ),
                    None => hung.push(send),
                }
            }
        });
        (Client::new(svc, "default"), seen)
    }

    fn lease(holder: &str, rv: &str) -> Value {
        json!({"metadata": {"name": RECONCILE_LEASE, "namespace": "nw", "resourceVersion": rv},
               "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "leaseTransitions": 2,
                        "renewTime": "2026-01-01T00:00:00.000000Z"}})
    }

    fn not_found() -> Value {
        json!({"kind": "Status", "status": "Failure", "code": 404, "reason": "NotFound"})
    }

    fn start(client: Client) -> (watch::Receiver<bool>, Fence, watch::Sender<bool>) {
        let (leading_tx, leading) = watch::channel(false);
        let fence = Fence::closed();
        let (release_tx, release) = watch::channel(false);
        let out = Outputs {
            leading: leading_tx,
            fence: fence.clone(),
        };
        tokio::spawn(run(client, LeaderConfig::new("nw", "me"), out, release));
        (leading, fence, release_tx)
    }

    #[tokio::test(start_paused = true)]
    async fn leader_hung_renew_fences_writes_at_the_renew_deadline() {
        let mut created = false;
        let (c, _seen) = client(move |method, _| match method {
            "GET" if !created => Some((404, not_found())),
            "POST" => {
                created = true;
                Some((201, lease("me", "1")))
            }
            "GET" => Some((200, lease("me", "1"))),
            _ => None, // every renew hangs
        });
        let (mut leading, fence, _release) = start(c);
        leading.wait_for(|l| *l).await.expect("leads");
        let since = Instant::now();
        assert!(fence.open());
        leading.wait_for(|l| !*l).await.expect("loses");
        let took = since.elapsed();
        assert!(!fence.open(), "fence closed at the deadline");
        assert!(
            took <= Duration::from_secs(10),
            "leadership outlived the renew deadline: {took:?}"
        );
        assert!(took >= Duration::from_secs(9), "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn leader_takes_an_expired_foreign_lease_with_a_guarded_update() {
        let (c, mut seen) = client(|method, _| match method {
            "GET" => Some((200, lease("other", "5"))),
            _ => Some((200, lease("me", "6"))),
        });
        let started = Instant::now();
        let (mut leading, _fence, _release) = start(c);
        leading.wait_for(|l| *l).await.expect("leads");
        assert!(
            started.elapsed() >= Duration::from_secs(15),
            "waited for expiry"
        );
        let mut put = None;
        while let Ok((method, body)) = seen.try_recv() {
            if method == "PUT" {
                put = Some(body);
            }
        }
        let put = put.expect("one update");
        assert_eq!(put["metadata"]["resourceVersion"], "5", "update is guarded");
        assert_eq!(put["spec"]["holderIdentity"], "me");
        assert_eq!(put["spec"]["leaseTransitions"], 3);
    }

    #[tokio::test(start_paused = true)]
    async fn leader_releases_only_when_told_and_then_stops() {
        let mut created = false;
        let (c, mut seen) = client(move |method, _| match method {
            "GET" if !created => Some((404, not_found())),
            "POST" => {
                created = true;
                Some((201, lease("me", "1")))
            }
            "GET" => Some((200, lease("me", "1"))),
            _ => Some((200, lease("me", "2"))),
        });
        let (mut leading, fence, release) = start(c);
        leading.wait_for(|l| *l).await.expect("leads");
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(*leading.borrow(), "renewals keep it");
        while seen.try_recv().is_ok() {}
        let _ = release.send(true);
        leading.wait_for(|l| !*l).await.expect("stops leading");
        assert!(!fence.open());
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut last_put = None;
        while let Ok((method, body)) = seen.try_recv() {
            if method == "PUT" {
                last_put = Some(body);
            }
        }
        let put = last_put.expect("release write");
        assert!(put["spec"]["holderIdentity"].is_null(), "{put}");
    }
}
