//! Repeated uninstall cycles of one package version (issue 13, finding 7; 02-lifecycle.md
//! §7.6–7.7, 04-jobs-rules.md §5.2 and D21): a finished executor of an earlier cycle that holds
//! the deterministic Job name must not block a later cycle.

use std::time::Duration;

use anyhow::{Result, ensure};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use nodewright_crds::keys;
use serde_json::json;

use crate::harness::{Case, cordoned, job_label, wait_for};
use crate::support::*;

const NW: &str = "cyc";
const PKG: &str = "cy";

/// Install; uninstall; cancel while the uninstall-interrupt runs (the cycle finishes, then the
/// package is installed again); uninstall again: the second cycle runs its own uninstall-interrupt
/// Job, the entry is removed, the node is uncordoned and the NodeWright is complete.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn d21_second_uninstall_cycle_not_blocked_by_earlier_cycle_job() -> Result<()> {
    let c = Case::new(NW, 1).await?;
    let r = cycles(&c).await;
    c.finish(r).await
}

fn uninstall(apply: bool) -> serde_json::Value {
    json!({ "spec": { "packages": { PKG: { "uninstall": { "enabled": true, "apply": apply } } } } })
}

async fn cycles(c: &Case) -> Result<()> {
    let intr = json!({ "interrupt": { "type": "service", "services": ["containerd"] },
                       "uninstall": { "enabled": true } });
    c.create(c.nodewright(NW, json!({ "packages": { PKG: pkg("1.0.0", intr) } })))
        .await?;
    c.wait_status(NW, "complete", CONVERGE).await?;
    let node = c.nodes[0].clone();

    // Cycle 1, held at uninstall-interrupt, then cancelled.
    let hold = hold_pods(c, NW, |p| {
        pod_label(p, keys::LABEL_STAGE) == "uninstall-interrupt"
    });
    c.patch(NW, uninstall(true)).await?;
    let first = wait_for("cycle 1 uninstall-interrupt pod held", CONVERGE, || async {
        let pods = live_pods(c, NW).await?;
        Ok(pods.into_iter().find(|p| {
            pod_label(p, keys::LABEL_STAGE) == "uninstall-interrupt"
                && p.annotations().contains_key("e2e.kwok/fail")
        }))
    })
    .await?;
    c.patch(NW, uninstall(false)).await?;
    hold.abort();
    let release = json!({ "metadata": { "annotations": { "e2e.kwok/fail": null } } });
    c.pod_api()
        .patch(
            &first.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&release),
        )
        .await?;
    let first_job = job_of_stage(c, "uninstall-interrupt").await?;

    // The cycle finishes and the package is installed again.
    wait_for(
        "reinstalled after the cancelled cycle",
        CONVERGE,
        || async {
            let e = c.entry(&node, NW, PKG).await?;
            let done = e == Some(("post-interrupt".into(), "complete".into()));
            Ok((done && c.status(NW).await? == "complete").then_some(()))
        },
    )
    .await?;

    // Cycle 2 must finish too: entry gone, node uncordoned, a new uninstall-interrupt Job.
    c.patch(NW, uninstall(true)).await?;
    wait_for("second uninstall cycle finished", CONVERGE, || async {
        let gone = c.entry(&node, NW, PKG).await?.is_none();
        let free = !cordoned(&c.node(&node).await?);
        let complete = c.status(NW).await? == "complete";
        Ok((gone && free && complete).then_some(()))
    })
    .await?;
    let second_job = job_of_stage(c, "uninstall-interrupt").await?;
    ensure!(
        second_job != first_job,
        "the second cycle ran no uninstall-interrupt Job of its own (uid {second_job})"
    );
    Ok(())
}

/// The uid of the newest non-deleting Job of `stage` (waits until one exists).
async fn job_of_stage(c: &Case, stage: &str) -> Result<String> {
    wait_for(&format!("{stage} Job"), Duration::from_secs(30), || async {
        Ok(c.jobs(NW)
            .await?
            .into_iter()
            .rfind(|j| {
                job_label(j, keys::LABEL_STAGE) == stage && j.metadata.deletion_timestamp.is_none()
            })
            .and_then(|j| j.metadata.uid))
    })
    .await
}
