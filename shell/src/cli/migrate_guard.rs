//! `migrate`, safety part: the Go operator must be stopped. Three signs that it is not: a
//! Deployment of its Helm chart with replicas, its leader-election Lease (`3c22c1ae.nvidia.com`,
//! controller-runtime, 15 s lease) renewed recently, or a change to its objects, executor pods
//! or node keys during a quiet period.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, bail};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};

use super::migrate_node::LEGACY_PREFIX;
use super::migrate_pods::LEGACY_NAME_LABEL;

/// Name of the Go operator's leader-election Lease.
pub const LEGACY_LEASE: &str = "3c22c1ae.nvidia.com";

/// Labels of the Go operator's Deployment in its Helm chart.
pub const LEGACY_DEPLOYMENT_SELECTOR: &str =
    "app.kubernetes.io/part-of=skyhook-operator,app.kubernetes.io/component=manager";

/// controller-runtime's default lease duration, used when the Lease does not say.
const DEFAULT_LEASE_SECONDS: i64 = 15;

/// Why a Deployment shows a running Go operator, if it does.
pub fn deployment_running(d: &Deployment) -> Option<String> {
    let wanted = d.spec.replicas.unwrap_or(1);
    let have = d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    (wanted > 0 || have > 0).then(|| {
        format!(
            "Deployment {}/{} has {wanted} desired and {have} current replicas; scale it to 0: \
             kubectl -n {} scale deployment {} --replicas=0",
            d.namespace().unwrap_or_default(),
            d.name_any(),
            d.namespace().unwrap_or_default(),
            d.name_any(),
        )
    })
}

/// Why a Lease shows a live leader, if it does: a holder whose renewal is younger than the
/// lease duration at `now`.
pub fn lease_live(l: &Lease, now: jiff::Timestamp) -> Option<String> {
    let spec = l.spec.as_ref()?;
    let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty())?;
    let renewed = spec.renew_time.as_ref()?.0;
    let seconds = spec
        .lease_duration_seconds
        .map_or(DEFAULT_LEASE_SECONDS, i64::from);
    let expires = renewed + jiff::SignedDuration::from_secs(seconds);
    (expires > now).then(|| {
        format!(
            "Lease {}/{} is held by {holder:?} (renewed {renewed}); stop that operator first",
            l.namespace().unwrap_or_default(),
            l.name_any()
        )
    })
}

/// A fingerprint of everything the Go operator writes: Skyhook resourceVersions, executor pod
/// names, and the legacy keys on nodes.
async fn fingerprint(
    client: &Client,
    skyhooks: &Api<DynamicObject>,
) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for s in super::migrate::list_or_empty(skyhooks).await? {
        out.insert(
            format!("skyhook {}", s.name_any()),
            s.resource_version().unwrap_or_default(),
        );
    }
    let pods: Api<Pod> = Api::all(client.clone());
    for p in pods
        .list(&ListParams::default().labels(LEGACY_NAME_LABEL))
        .await?
    {
        let deleting = p.metadata.deletion_timestamp.is_some();
        out.insert(format!("pod {}", p.name_any()), deleting.to_string());
    }
    let nodes: Api<Node> = Api::all(client.clone());
    for n in nodes.list(&ListParams::default()).await? {
        let name = n.name_any();
        for (k, v) in n.annotations().iter().chain(n.labels().iter()) {
            if k.starts_with(LEGACY_PREFIX) {
                out.insert(format!("node {name} {k}"), v.clone());
            }
        }
    }
    Ok(out)
}

/// Checks that the Go operator is stopped; `Ok` lines say what was checked, `Err` says why not.
pub async fn check_stopped(
    client: &Client,
    skyhooks: &Api<DynamicObject>,
    quiet: Duration,
) -> Result<Vec<String>> {
    let mut running = Vec::new();
    let deployments: Api<Deployment> = Api::all(client.clone());
    let list = deployments
        .list(&ListParams::default().labels(LEGACY_DEPLOYMENT_SELECTOR))
        .await?;
    running.extend(list.items.iter().filter_map(deployment_running));
    let leases: Api<Lease> = Api::all(client.clone());
    let list = leases
        .list(&ListParams::default().fields(&format!("metadata.name={LEGACY_LEASE}")))
        .await?;
    let now = jiff::Timestamp::now();
    running.extend(list.items.iter().filter_map(|l| lease_live(l, now)));
    if !running.is_empty() {
        bail!("the Go operator is running:\n  {}", running.join("\n  "));
    }
    let before = fingerprint(client, skyhooks).await?;
    tokio::time::sleep(quiet).await;
    let after = fingerprint(client, skyhooks).await?;
    let changed: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    if let Some(first) = changed.first() {
        bail!(
            "the Go operator looks active: {} legacy object(s) changed within {}s (first: {first}); \
             stop it and run migrate again",
            changed.len(),
            quiet.as_secs()
        );
    }
    Ok(vec![
        format!("no Go operator Deployment ({LEGACY_DEPLOYMENT_SELECTOR}) with replicas"),
        format!("no live holder of Lease {LEGACY_LEASE}"),
        format!(
            "no Skyhook, executor pod or skyhook.nvidia.com/ node key changed in {}s",
            quiet.as_secs()
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStatus};
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    #[test]
    fn m1_migrate_refuses_a_scaled_up_go_deployment() {
        let mut d = Deployment {
            spec: DeploymentSpec {
                replicas: Some(0),
                ..DeploymentSpec::default()
            },
            status: Some(DeploymentStatus {
                replicas: Some(1),
                ..DeploymentStatus::default()
            }),
            ..Deployment::default()
        };
        assert!(deployment_running(&d).is_some(), "a pod still terminating");
        d.status = None;
        assert!(deployment_running(&d).is_none());
        d.spec.replicas = None;
        assert!(deployment_running(&d).is_some(), "replicas default to 1");
    }

    #[test]
    fn m1_migrate_refuses_a_live_go_leader_lease() {
        let now = jiff::Timestamp::from_second(1_000).expect("ts");
        let lease = |holder: &str, renewed: i64| Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(
                    jiff::Timestamp::from_second(renewed).expect("ts"),
                )),
                lease_duration_seconds: Some(15),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        };
        assert!(lease_live(&lease("pod-a", 990), now).is_some());
        assert!(lease_live(&lease("pod-a", 980), now).is_none(), "expired");
        assert!(lease_live(&lease("", 999), now).is_none(), "released");
    }
}
