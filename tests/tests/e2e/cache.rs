//! D28 against the operator as deployed: the executor pods of recorded, `Complete` Jobs stay in
//! the cluster for the Job's TTL but leave the operator's pod cache.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use nodewright_crds::keys;
use serde_json::json;

use crate::harness::{Case, wait_for};
use crate::monitoring::scrape;
use crate::support::*;

/// The operator's `cache_objects{kind="pod"}` gauge.
fn cached_pods(url: &str) -> Result<u64> {
    let text = scrape(url)?;
    let line = text
        .lines()
        .find(|l| l.starts_with("nodewright_operator_cache_objects{kind=\"pod\"}"))
        .context("no cache_objects{kind=\"pod\"} sample")?;
    let value = line.rsplit(' ').next().context("sample value")?;
    Ok(value.parse::<f64>()? as u64)
}

/// Once a NodeWright is complete and its Jobs recorded, the pod cache holds fewer pods than the
/// cluster has scheduled, by at least this NodeWright's succeeded executor pods (tests run one at
/// a time, so nothing else creates pods meanwhile; each probe touches the NodeWright so a pass
/// runs and refreshes the gauge).
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn d28_settled_executor_pods_leave_the_operator_pod_cache() -> Result<()> {
    let c = Case::new("d28", 1).await?;
    let r = settled_pods_case(&c).await;
    c.finish(r).await
}

async fn settled_pods_case(c: &Case) -> Result<()> {
    let url =
        std::env::var("NODEWRIGHT_E2E_METRICS_URL").context("NODEWRIGHT_E2E_METRICS_URL unset")?;
    c.create(c.nodewright(
        "d28",
        json!({ "packages": { "tuning": pkg("1.0.0", json!({})) } }),
    ))
    .await?;
    c.wait_status("d28", "complete", CONVERGE).await?;
    let ours: Api<Pod> = Api::namespaced(c.client.clone(), &c.ns);
    let mine = ListParams::default().labels(&format!("{}=d28", keys::LABEL_NAME));
    let all: Api<Pod> = Api::all(c.client.clone());
    let scheduled = ListParams::default().fields("spec.nodeName!=");
    let mut touch = 0u32;
    wait_for(
        "the succeeded executor pods to leave the pod cache",
        Duration::from_secs(90),
        || {
            touch += 1;
            let (ours, all, mine, scheduled, url) = (&ours, &all, &mine, &scheduled, &url);
            async move {
                let succeeded = ours
                    .list(mine)
                    .await?
                    .items
                    .iter()
                    .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded"))
                    .count() as u64;
                anyhow::ensure!(succeeded >= 2, "{succeeded} succeeded executor pods");
                c.annotate("d28", "e2e.nodewright.nvidia.com/touch", Some(&touch.to_string()))
                    .await?;
                tokio::time::sleep(Duration::from_secs(2)).await;
                let in_cluster = all.list(scheduled).await?.items.len() as u64;
                let cached = cached_pods(url)?;
                eprintln!("[e2e] d28: {in_cluster} scheduled pods, {cached} cached, {succeeded} ours succeeded");
                Ok((cached + succeeded <= in_cluster).then_some(()))
            }
        },
    )
    .await
}
