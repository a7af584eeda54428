//! Scenarios where the world misbehaves: nodes vanish, the operator dies.

use std::time::Duration;

use anyhow::{Result, ensure};
use kube::api::DeleteParams;
use nodewright_crds::keys;
use serde_json::json;

use crate::harness::{Case, hold_for, job_label, wait_for};
use crate::support::*;

/// A13: deleting a Node while its Job runs: that Job is deleted with no replacement; the other
/// node completes; the NodeWright reads complete.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a13_node_deleted_mid_run() -> Result<()> {
    let c = Case::new("a13", 2).await?;
    let r = a13(&c).await;
    c.finish(r).await
}

async fn a13(c: &Case) -> Result<()> {
    let victim = c.nodes[0].clone();
    let v = victim.clone();
    let holder = hold_pods(c, "a13", move |p| {
        p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(v.as_str())
    });
    c.create(c.nodewright(
        "a13",
        json!({ "packages": { "pkg": pkg("1.0.0", json!({})) } }),
    ))
    .await?;
    let on_victim = |jobs: &[k8s_openapi::api::batch::v1::Job]| {
        jobs.iter()
            .filter(|j| {
                job_label(j, keys::LABEL_NODE) == victim && j.metadata.deletion_timestamp.is_none()
            })
            .count()
    };
    wait_for("a Job running on the victim", CONVERGE, || async {
        Ok((on_victim(&c.jobs("a13").await?) > 0).then_some(()))
    })
    .await?;
    c.node_api()
        .delete(&victim, &DeleteParams::default())
        .await?;
    wait_for(
        "the victim's Job deleted",
        Duration::from_secs(60),
        || async { Ok((on_victim(&c.jobs("a13").await?) == 0).then_some(())) },
    )
    .await?;
    holder.abort();
    c.wait_status("a13", "complete", CONVERGE).await?;
    hold_for(
        "no replacement Job for the deleted node",
        Duration::from_secs(5),
        || async { Ok(on_victim(&c.jobs("a13").await?) == 0) },
    )
    .await?;
    let e = c.entry(&c.nodes[1], "a13", "pkg").await?;
    ensure!(
        e == Some(("config".into(), "complete".into())),
        "survivor entry {e:?}"
    );
    Ok(())
}

/// A21-style crash test: the operator is SIGKILLed mid-rollout on three nodes and restarted;
/// the rollout completes with exactly one Job per (package, stage, node) and every entry complete.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a21_operator_killed_mid_rollout() -> Result<()> {
    let c = Case::new("a21", 3).await?;
    let r = a21(&c).await;
    // Whatever happened, leave an operator running for the next tests.
    let restarted = operator_ctl("start").await;
    c.finish(r.and(restarted)).await
}

async fn a21(c: &Case) -> Result<()> {
    c.create(c.nodewright(
        "a21",
        json!({ "packages": { "one": pkg("1.0.0", json!({})), "two": pkg("1.0.0", json!({})) } }),
    ))
    .await?;
    wait_for("rollout under way", CONVERGE, || async {
        let n = c.jobs("a21").await?.len();
        Ok((n >= 1).then_some(()))
    })
    .await?;
    operator_ctl("kill").await?;
    let frozen = c.jobs("a21").await?.len();
    eprintln!("[e2e] operator killed with {frozen} Jobs created");
    tokio::time::sleep(Duration::from_secs(3)).await;
    operator_ctl("start").await?;
    c.wait_status("a21", "complete", CONVERGE).await?;
    let jobs = c.jobs("a21").await?;
    assert_no_duplicates(&jobs)?;
    ensure!(jobs.len() == 3 * 2 * 2, "{} Jobs, want 12", jobs.len());
    for n in &c.nodes {
        ensure!(
            all_complete(&c.node_state(n, "a21").await?),
            "{n} not complete"
        );
    }
    Ok(())
}

/// A14: evicting a running attempt through the eviction subresource (DisruptionTarget) does not
/// count as a failure: `status.failed` stays 0, a replacement pod runs, the stage completes, the
/// entry never reads erroring.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a14_eviction_is_not_a_failure() -> Result<()> {
    let c = Case::new("a14", 1).await?;
    let r = a14(&c).await;
    c.finish(r).await
}

async fn a14(c: &Case) -> Result<()> {
    let holder = hold_pods(c, "a14", |p| pod_label(p, keys::LABEL_STAGE) == "apply");
    c.create(c.nodewright(
        "a14",
        json!({ "packages": { "pkg": pkg("1.0.0", json!({})) } }),
    ))
    .await?;
    let pod = wait_for("apply pod running", CONVERGE, || async {
        let live = live_pods(c, "a14").await?;
        let running = live
            .into_iter()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
        Ok(running)
    })
    .await?;
    holder.abort();
    let name = kube::ResourceExt::name_any(&pod);
    c.pod_api().evict(&name, &Default::default()).await?;
    let erroring = std::cell::Cell::new(false);
    wait_for(
        "NodeWright complete after the eviction",
        CONVERGE,
        || async {
            let e = c.entry(&c.nodes[0], "a14", "pkg").await?;
            erroring.set(erroring.get() || e.as_ref().is_some_and(|e| e.1 == "erroring"));
            Ok((c.status("a14").await? == "complete").then_some(()))
        },
    )
    .await?;
    ensure!(!erroring.get(), "the entry read erroring after an eviction");
    let apply = c
        .jobs("a14")
        .await?
        .into_iter()
        .find(|j| job_label(j, keys::LABEL_STAGE) == "apply")
        .ok_or_else(|| anyhow::anyhow!("apply Job gone"))?;
    let failed = apply.status.as_ref().and_then(|s| s.failed).unwrap_or(0);
    ensure!(failed == 0, "status.failed {failed} after an eviction");
    Ok(())
}

/// A8, action 2 (02-lifecycle §15 option checks): the operator binary refuses to start with a
/// sub-minute Job TTL: exit code 2 and a message naming the option.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a08_sub_minute_ttl_refused_at_startup() -> Result<()> {
    let bin = std::env::var("NODEWRIGHT_E2E_OPERATOR_BIN").map_err(|_| {
        anyhow::anyhow!("NODEWRIGHT_E2E_OPERATOR_BIN unset (run through tests/e2e/run.sh)")
    })?;
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(bin)
            .env("JOB_TTL_SUCCEEDED", "30s")
            .env("PROBE_PORT", "0")
            .env("METRICS_PORT", "0")
            .env("ENABLE_WEBHOOKS", "false")
            .output()
    })
    .await??;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code() == Some(2),
        "exit {:?}, stderr {stderr}",
        out.status.code()
    );
    ensure!(
        stderr.contains("JOB_TTL_SUCCEEDED") && stderr.contains("at least"),
        "message {stderr:?}"
    );
    Ok(())
}
