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
