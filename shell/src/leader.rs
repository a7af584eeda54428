//! Leader election on a coordination.k8s.io Lease with Update + resourceVersion, the way
//! client-go's leaderelection does it, so the Go and Rust operators exclude each other when they
//! share the lease name (06-operations.md §2.8).

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::error::{is_already_exists, is_conflict};

/// The reconcile lease's historic name (keep it: the Go operator uses it).
pub const RECONCILE_LEASE: &str = "3c22c1ae.nvidia.com";

/// Timings and identity of one candidate.
#[derive(Clone, Debug)]
pub struct LeaderConfig {
    /// Lease name.
    pub name: String,
    /// Lease namespace (the operator namespace).
    pub namespace: String,
    /// This replica's identity (pod name plus a per-process suffix).
    pub identity: String,
    /// How long a lease is valid without renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before giving up leadership.
    pub renew_deadline: Duration,
    /// Pause between attempts.
    pub retry_period: Duration,
}

impl LeaderConfig {
    /// controller-runtime's defaults: 15 s lease, 10 s renew deadline, 2 s retry.
    pub fn new(namespace: &str, identity: &str) -> Self {
        LeaderConfig {
            name: RECONCILE_LEASE.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// What this candidate last saw of someone else's record, and when (local clock, as client-go).
struct Observed {
    holder: Option<String>,
    renew: Option<String>,
    at: Instant,
}

/// Campaigns for the lease until `shutdown` turns true. `leading` is set while this replica
/// holds it; when renewal fails for `renew_deadline` it turns false and campaigning stops.
pub async fn run(
    client: Client,
    config: LeaderConfig,
    leading: watch::Sender<bool>,
    mut shutdown: watch::Receiver<bool>,
) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let mut observed: Option<Observed> = None;
    let mut last_renew = Instant::now();
    loop {
        let is_leader = *leading.borrow();
        match try_acquire_or_renew(&api, &config, &mut observed).await {
            Ok(true) => {
                last_renew = Instant::now();
                if !is_leader {
                    info!(lease = %config.name, identity = %config.identity, "became leader");
                    let _ = leading.send(true);
                }
            }
            Ok(false) => {}
            Err(e) => warn!(lease = %config.name, error = %e, "lease attempt failed"),
        }
        if is_leader && last_renew.elapsed() > config.renew_deadline {
            warn!(lease = %config.name, "could not renew the lease in time; leadership lost");
            let _ = leading.send(false);
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(config.retry_period) => {}
            _ = shutdown.changed() => {
                if *leading.borrow() {
                    release(&api, &config).await;
                }
                return;
            }
        }
    }
}

fn now() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

async fn try_acquire_or_renew(
    api: &Api<Lease>,
    config: &LeaderConfig,
    observed: &mut Option<Observed>,
) -> Result<bool, kube::Error> {
    let Some(mut lease) = api.get_opt(&config.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.name.clone()),
                namespace: Some(config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(held_spec(config, None)),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(e) if is_already_exists(&e) => Ok(false),
            Err(e) => Err(e),
        };
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
    let renew = spec.renew_time.as_ref().map(|t| t.0.to_string());
    let mine = holder.as_deref() == Some(config.identity.as_str());
    if !mine {
        let changed = observed
            .as_ref()
            .is_none_or(|o| o.holder != holder || o.renew != renew);
        if changed {
            *observed = Some(Observed {
                holder: holder.clone(),
                renew,
                at: Instant::now(),
            });
        }
        let duration = spec
            .lease_duration_seconds
            .map_or(config.lease_duration, |s| {
                Duration::from_secs(s.max(1) as u64)
            });
        let expired = observed.as_ref().is_some_and(|o| o.at.elapsed() > duration);
        if holder.is_some() && !expired {
            return Ok(false);
        }
    }
    lease.spec = Some(if mine {
        LeaseSpec {
            renew_time: Some(now()),
            lease_duration_seconds: Some(config.lease_duration.as_secs() as i32),
            ..spec
        }
    } else {
        held_spec(config, Some(&spec))
    });
    match api
        .replace(&config.name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if is_conflict(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A spec naming this candidate as the fresh holder.
fn held_spec(config: &LeaderConfig, previous: Option<&LeaseSpec>) -> LeaseSpec {
    let transitions = previous.and_then(|p| p.lease_transitions).unwrap_or(0);
    let had_holder = previous
        .and_then(|p| p.holder_identity.as_ref())
        .is_some_and(|h| !h.is_empty());
    LeaseSpec {
        holder_identity: Some(config.identity.clone()),
        lease_duration_seconds: Some(config.lease_duration.as_secs() as i32),
        acquire_time: Some(now()),
        renew_time: Some(now()),
        lease_transitions: Some(if had_holder {
            transitions + 1
        } else {
            transitions
        }),
        ..LeaseSpec::default()
    }
}

/// Gives the lease up on shutdown so a standby takes over without waiting for expiry.
async fn release(api: &Api<Lease>, config: &LeaderConfig) {
    let Ok(Some(mut lease)) = api.get_opt(&config.name).await else {
        return;
    };
    let spec = lease.spec.clone().unwrap_or_default();
    if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
        return;
    }
    lease.spec = Some(LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        renew_time: Some(now()),
        ..spec
    });
    match api
        .replace(&config.name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => info!(lease = %config.name, "released the lease"),
        Err(e) => warn!(lease = %config.name, error = %e, "could not release the lease"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::{Value, json};

    fn client(
        script: Vec<(&'static str, u16, Value)>,
    ) -> (Client, tokio::task::JoinHandle<Vec<Value>>) {
        let (svc, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let task = tokio::spawn(async move {
            let mut bodies = Vec::new();
            for (method, status, body) in script {
                let (req, send) = handle.next_request().await.expect("request");
                assert_eq!(req.method().as_str(), method);
                let bytes = req.into_body().collect_bytes().await.unwrap_or_default();
                bodies.push(serde_json::from_slice(&bytes).unwrap_or(Value::Null));
                send.send_response(
                    Response::builder()
                        .status(status)
                        .body(Body::from(serde_json::to_vec(&body).unwrap_or_default()))
                        .expect("response"),
                );
            }
            bodies
        });
        (Client::new(svc, "default"), task)
    }

    fn lease(holder: &str, rv: &str) -> Value {
        json!({"metadata": {"name": RECONCILE_LEASE, "namespace": "nw", "resourceVersion": rv},
               "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "leaseTransitions": 2,
                        "renewTime": "2026-01-01T00:00:00.000000Z"}})
    }

    fn not_found() -> Value {
        json!({"kind": "Status", "status": "Failure", "code": 404, "reason": "NotFound"})
    }

    #[tokio::test]
    async fn leader_creates_absent_lease() {
        let (c, task) = client(vec![
            ("GET", 404, not_found()),
            ("POST", 201, lease("me", "1")),
        ]);
        let api: Api<Lease> = Api::namespaced(c, "nw");
        let cfg = LeaderConfig::new("nw", "me");
        assert!(
            try_acquire_or_renew(&api, &cfg, &mut None)
                .await
                .unwrap_or(false)
        );
        let bodies = task.await.unwrap_or_default();
        assert_eq!(bodies[1]["spec"]["holderIdentity"], "me");
    }

    #[tokio::test]
    async fn leader_does_not_take_a_fresh_foreign_lease_but_takes_an_expired_one() {
        let (c, task) = client(vec![
            ("GET", 200, lease("other", "5")),
            ("GET", 200, lease("other", "5")),
            ("PUT", 200, lease("me", "6")),
        ]);
        let api: Api<Lease> = Api::namespaced(c, "nw");
        let mut cfg = LeaderConfig::new("nw", "me");
        let mut observed = None;
        assert!(
            !try_acquire_or_renew(&api, &cfg, &mut observed)
                .await
                .unwrap_or(true)
        );
        // the record did not change for longer than the lease duration: expired
        cfg.lease_duration = Duration::ZERO;
        if let Some(o) = observed.as_mut() {
            o.at = Instant::now() - Duration::from_secs(20);
        }
        assert!(
            try_acquire_or_renew(&api, &cfg, &mut observed)
                .await
                .unwrap_or(false)
        );
        let bodies = task.await.unwrap_or_default();
        assert_eq!(
            bodies[2]["metadata"]["resourceVersion"], "5",
            "update is guarded"
        );
        assert_eq!(bodies[2]["spec"]["holderIdentity"], "me");
        assert_eq!(bodies[2]["spec"]["leaseTransitions"], 3);
    }

    #[tokio::test]
    async fn leader_renews_own_lease_and_loses_races_quietly() {
        let conflict =
            json!({"kind": "Status", "status": "Failure", "code": 409, "reason": "Conflict"});
        let (c, task) = client(vec![
            ("GET", 200, lease("me", "7")),
            ("PUT", 200, lease("me", "8")),
            ("GET", 200, lease("me", "8")),
            ("PUT", 409, conflict),
        ]);
        let api: Api<Lease> = Api::namespaced(c, "nw");
        let cfg = LeaderConfig::new("nw", "me");
        assert!(
            try_acquire_or_renew(&api, &cfg, &mut None)
                .await
                .unwrap_or(false)
        );
        assert!(
            !try_acquire_or_renew(&api, &cfg, &mut None)
                .await
                .unwrap_or(true)
        );
        let bodies = task.await.unwrap_or_default();
        assert_eq!(
            bodies[1]["spec"]["leaseTransitions"], 2,
            "renewal keeps transitions"
        );
    }
}
