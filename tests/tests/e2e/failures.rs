//! Failure scenarios: exhausted retries, stage deadlines, unpullable images.

use std::time::Duration;

use anyhow::{Result, bail, ensure};
use kube::ResourceExt;
use kube::api::ListParams;
use nodewright_crds::keys;
use serde_json::json;

use crate::harness::{Case, hold_for, job_finished, job_label, wait_for};
use crate::support::*;

/// The single Job of stage `stage` of NodeWright `nw`, once it exists.
async fn one_job(c: &Case, nw: &str, stage: &str) -> Result<k8s_openapi::api::batch::v1::Job> {
    wait_for(&format!("{nw} {stage} Job"), CONVERGE, || async {
        let jobs: Vec<_> = c
            .jobs(nw)
            .await?
            .into_iter()
            .filter(|j| {
                job_label(j, keys::LABEL_STAGE) == stage && j.metadata.deletion_timestamp.is_none()
            })
            .collect();
        ensure!(jobs.len() <= 1, "{} {stage} Jobs", jobs.len());
        Ok(jobs.into_iter().next())
    })
    .await
}

/// A3: an apply step that always fails: Job Failed/BackoffLimitExceeded after backoffLimit+1
/// attempts, recorded with the failure TTL, entry/node/NodeWright erroring, restarts = attempts
/// (D17), no Job churn; editing a fingerprint input (env) replaces the terminal Job (D19).
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a03_retries_exhausted_erroring() -> Result<()> {
    let c = Case::new("a03", 1).await?;
    let r = a03(&c).await;
    c.finish(r).await
}

async fn a03(c: &Case) -> Result<()> {
    c.create(c.nodewright(
        "a03",
        json!({ "packages": { "e2e-fail-apply-x": pkg("1.0.0", json!({})) } }),
    ))
    .await?;
    let attempts = backoff_limit() + 1;
    // Job-controller backoff 10 s, 20 s, 40 s, ... between attempts.
    let budget = CONVERGE + Duration::from_secs(10 * (1u64 << backoff_limit().clamp(0, 6)));
    let job = wait_for("apply Job Failed and recorded", budget, || async {
        let Some(j) = c.jobs("a03").await?.into_iter().next() else {
            return Ok(None);
        };
        let recorded = j.annotations().get(keys::STATE_RECORDED).is_some();
        Ok((job_finished(&j).as_deref() == Some("Failed") && recorded).then_some(j))
    })
    .await?;
    let st = job.status.clone().unwrap_or_default();
    ensure!(
        st.failed == Some(attempts),
        "status.failed {:?}, want {attempts}",
        st.failed
    );
    let reason = st
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .and_then(|c| c.reason);
    ensure!(
        reason.as_deref() == Some("BackoffLimitExceeded"),
        "reason {reason:?}"
    );
    let ttl = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished);
    ensure!(
        ttl == Some(ttl_failed()),
        "ttl {ttl:?}, want {}",
        ttl_failed()
    );
    let node = &c.nodes[0];
    let e = c.entry(node, "a03", "e2e-fail-apply-x").await?;
    ensure!(
        e == Some(("apply".into(), "erroring".into())),
        "entry {e:?}"
    );
    let restarts = c
        .node_state(node, "a03")
        .await?
        .entries_of("e2e-fail-apply-x")
        .next()
        .map(|e| e.restarts);
    ensure!(
        restarts == Some(attempts),
        "restarts {restarts:?}, want {attempts} (D17)"
    );
    c.wait_status("a03", "erroring", Duration::from_secs(30))
        .await?;
    let uid = job.metadata.uid.clone();
    hold_for(
        "the failed Job is kept (no churn)",
        Duration::from_secs(10),
        || async {
            let jobs = c.jobs("a03").await?;
            Ok(jobs.len() == 1 && jobs[0].metadata.uid == uid)
        },
    )
    .await?;
    c.patch(
        "a03",
        json!({ "spec": { "packages": { "e2e-fail-apply-x": { "env": [{ "name": "FIX", "value": "1" }] } } } }),
    )
    .await?;
    wait_for(
        "terminal Job replaced after a fingerprint edit",
        CONVERGE,
        || async {
            let jobs = c.jobs("a03").await?;
            Ok(jobs
                .iter()
                .any(|j| j.metadata.uid != uid && j.metadata.deletion_timestamp.is_none())
                .then_some(()))
        },
    )
    .await?;
    Ok(())
}

/// A4: stageTimeout 4s on a step that never finishes: template deadline 4, no Job-level deadline,
/// the attempt fails in place with DeadlineExceeded and the entry reads erroring; raising
/// stageTimeout to 10m replaces the Job with one whose template carries 600.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a04_stage_timeout() -> Result<()> {
    let c = Case::new("a04", 1).await?;
    let r = a04(&c).await;
    c.finish(r).await
}

async fn a04(c: &Case) -> Result<()> {
    c.create(c.nodewright(
        "a04",
        json!({ "packages": { "e2e-hold-t": pkg("1.0.0", json!({ "stageTimeout": "4s" })) } }),
    ))
    .await?;
    let job = one_job(c, "a04", "apply").await?;
    let spec = job.spec.clone().unwrap_or_default();
    ensure!(
        spec.active_deadline_seconds.is_none(),
        "Job-level deadline set"
    );
    let tmpl = spec.template.spec.clone().unwrap_or_default();
    ensure!(
        tmpl.active_deadline_seconds == Some(4),
        "template deadline {:?}",
        tmpl.active_deadline_seconds
    );
    let lp = ListParams::default().labels(&format!("{}=a04", keys::LABEL_NAME));
    wait_for(
        "a pod Failed/DeadlineExceeded in place",
        Duration::from_secs(60),
        || async {
            let pods = c.pod_api().list(&lp).await?.items;
            Ok(pods
                .iter()
                .any(|p| {
                    let s = p.status.clone().unwrap_or_default();
                    s.phase.as_deref() == Some("Failed")
                        && s.reason.as_deref() == Some("DeadlineExceeded")
                })
                .then_some(()))
        },
    )
    .await?;
    let node = &c.nodes[0];
    wait_for(
        "entry (apply, erroring)",
        Duration::from_secs(60),
        || async {
            let e = c.entry(node, "a04", "e2e-hold-t").await?;
            Ok((e == Some(("apply".into(), "erroring".into()))).then_some(()))
        },
    )
    .await?;
    c.patch(
        "a04",
        json!({ "spec": { "packages": { "e2e-hold-t": { "stageTimeout": "10m" } } } }),
    )
    .await?;
    let old = job.metadata.uid.clone();
    wait_for(
        "Job replaced with a 600 s template deadline",
        CONVERGE,
        || async {
            let jobs = c.jobs("a04").await?;
            let new = jobs
                .iter()
                .find(|j| j.metadata.uid != old && j.metadata.deletion_timestamp.is_none());
            let Some(new) = new else { return Ok(None) };
            let d = new
                .spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref()?.active_deadline_seconds);
            if d != Some(600) {
                bail!("new Job template deadline {d:?}");
            }
            Ok(Some(()))
        },
    )
    .await?;
    Ok(())
}

/// A16 (port form): an unpullable image with stageTimeout 6s: the waiting attempt's Job carries
/// `<P>/last-failure` naming ImagePullBackOff (D11); the entry reads erroring after the deadline;
/// the node/NodeWright turn erroring once the Job is terminal (D17).
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a16_unpullable_image() -> Result<()> {
    let c = Case::new("a16", 1).await?;
    let r = a16(&c).await;
    c.finish(r).await
}

async fn a16(c: &Case) -> Result<()> {
    c.create(c.nodewright(
        "a16",
        json!({ "packages": { "e2e-pull-i": pkg("1.0.0", json!({ "stageTimeout": "6s" })) } }),
    ))
    .await?;
    wait_for(
        "last-failure names ImagePullBackOff",
        Duration::from_secs(60),
        || async {
            let Some(j) = c.jobs("a16").await?.into_iter().next() else {
                return Ok(None);
            };
            let lf = j
                .annotations()
                .get(keys::LAST_FAILURE)
                .cloned()
                .unwrap_or_default();
            Ok(lf.contains("ImagePullBackOff").then_some(()))
        },
    )
    .await?;
    let node = &c.nodes[0];
    wait_for(
        "entry (apply, erroring)",
        Duration::from_secs(60),
        || async {
            let e = c.entry(node, "a16", "e2e-pull-i").await?;
            Ok((e == Some(("apply".into(), "erroring".into()))).then_some(()))
        },
    )
    .await?;
    let budget = CONVERGE + Duration::from_secs(10 * (1u64 << backoff_limit().clamp(0, 6)));
    wait_for("Job terminal", budget, || async {
        let Some(j) = c.jobs("a16").await?.into_iter().next() else {
            return Ok(None);
        };
        Ok(job_finished(&j).is_some().then_some(()))
    })
    .await?;
    c.wait_status("a16", "erroring", Duration::from_secs(60))
        .await?;
    Ok(())
}

/// A3, last action, through the CLI: `kubectl nodewright package rerun` on a package whose Job
/// failed terminally replaces that Job (new UID) and the stage runs again.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a03b_cli_package_rerun_replaces_failed_job() -> Result<()> {
    let c = Case::new("a03b", 1).await?;
    let r = a03b(&c).await;
    c.finish(r).await
}

async fn a03b(c: &Case) -> Result<()> {
    c.create(c.nodewright(
        "a03b",
        json!({ "packages": { "e2e-fail-apply-q": pkg("1.0.0", json!({})) } }),
    ))
    .await?;
    let budget = CONVERGE + Duration::from_secs(10 * (1u64 << backoff_limit().clamp(0, 6)));
    let failed = wait_for("apply Job Failed and recorded", budget, || async {
        let Some(j) = c.jobs("a03b").await?.into_iter().next() else {
            return Ok(None);
        };
        let recorded = j.annotations().get(keys::STATE_RECORDED).is_some();
        Ok((job_finished(&j).as_deref() == Some("Failed") && recorded).then_some(j))
    })
    .await?;
    let node = c.nodes[0].clone();
    let out = cli(&[
        "package",
        "rerun",
        "e2e-fail-apply-q",
        "--nodewright",
        "a03b",
        "--node",
        &node,
        "-y",
    ])
    .await?;
    eprintln!("[e2e] cli: {out}");
    let uid = failed.metadata.uid.clone();
    wait_for("a new apply Job after package rerun", CONVERGE, || async {
        let jobs = c.jobs("a03b").await?;
        Ok(jobs
            .iter()
            .any(|j| {
                j.metadata.uid != uid
                    && j.metadata.deletion_timestamp.is_none()
                    && job_label(j, keys::LABEL_STAGE) == "apply"
            })
            .then_some(()))
    })
    .await?;
    Ok(())
}

/// Runs `kubectl-nodewright` (built by the driver, `NODEWRIGHT_E2E_CLI_BIN`) and returns stdout.
async fn cli(args: &[&str]) -> Result<String> {
    let bin = std::env::var("NODEWRIGHT_E2E_CLI_BIN").map_err(|_| {
        anyhow::anyhow!("NODEWRIGHT_E2E_CLI_BIN unset (run through tests/e2e/run.sh)")
    })?;
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let out =
        tokio::task::spawn_blocking(move || std::process::Command::new(bin).args(&args).output())
            .await??;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    ensure!(
        out.status.success(),
        "kubectl-nodewright failed ({:?}): {stdout}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(stdout)
}

/// D18 / A25: a service interrupt whose init container crash-loops in place (kwok restarts it
/// every second, restartCount 0, 1, 2, ...; restartPolicy OnFailure): the Job carries the restart
/// allowance (`JOB_BACKOFF_LIMIT`); once the `interrupt` init container reached it, the operator
/// marks the Job `<P>/restart-limit-exceeded` with `backoffLimit: 0`, the Job controller fails it
/// with BackoffLimitExceeded and the entry/node/NodeWright read (interrupt, erroring) — long
/// before the stage deadline.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn d18_interrupt_restart_allowance_ends_crash_looping_init_container() -> Result<()> {
    let c = Case::new("d18", 1).await?;
    let r = d18(&c).await;
    c.finish(r).await
}

async fn d18(c: &Case) -> Result<()> {
    let intr = json!({ "interrupt": { "type": "service", "services": ["containerd"] } });
    c.create(c.nodewright(
        "d18",
        json!({ "packages": { "e2e-fail-interrupt-x": pkg("1.0.0", intr) } }),
    ))
    .await?;
    let job = one_job(c, "d18", "interrupt").await?;
    let allowance = backoff_limit().to_string();
    ensure!(
        job.annotations().get(keys::RESTART_ALLOWANCE) == Some(&allowance),
        "restart allowance {:?}, want {allowance}",
        job.annotations().get(keys::RESTART_ALLOWANCE)
    );
    // One kwok restart per second: allowance + a few seconds, plus the Job controller's reaction;
    // the stage deadline (stageTimeout) is an hour away.
    let budget = Duration::from_secs(90 + 2 * backoff_limit().max(0) as u64);
    let ended = wait_for(
        "interrupt Job ended at its restart allowance",
        budget,
        || async {
            let Some(j) = c
                .job_api()
                .get_opt(&job.name_any())
                .await?
                .filter(|j| j.metadata.uid == job.metadata.uid)
            else {
                bail!("interrupt Job {} replaced or gone", job.name_any());
            };
            let marked = j.annotations().get(keys::RESTART_LIMIT_EXCEEDED).is_some();
            Ok((marked && job_finished(&j).as_deref() == Some("Failed")).then_some(j))
        },
    )
    .await?;
    let spec = ended.spec.clone().unwrap_or_default();
    ensure!(
        spec.backoff_limit == Some(0),
        "backoffLimit {:?}",
        spec.backoff_limit
    );
    let marked: i32 = ended.annotations()[keys::RESTART_LIMIT_EXCEEDED].parse()?;
    ensure!(
        marked >= backoff_limit(),
        "restart-limit-exceeded {marked} < allowance {allowance}"
    );
    let reason = ended
        .status
        .clone()
        .unwrap_or_default()
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .and_then(|c| c.reason);
    ensure!(
        reason.as_deref() == Some("BackoffLimitExceeded"),
        "Failed reason {reason:?}"
    );
    let node = &c.nodes[0];
    wait_for(
        "entry (interrupt, erroring)",
        Duration::from_secs(60),
        || async {
            let e = c.entry(node, "d18", "e2e-fail-interrupt-x").await?;
            Ok((e == Some(("interrupt".into(), "erroring".into()))).then_some(()))
        },
    )
    .await?;
    c.wait_status("d18", "erroring", Duration::from_secs(60))
        .await?;
    Ok(())
}
