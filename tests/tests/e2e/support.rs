//! Scenario helpers on top of the harness: package manifests, Job checks, pod holding, operator
//! control and the rollout sampler.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use futures::TryStreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use nodewright_crds::keys;
use serde_json::{Value, json};

use crate::harness::{Case, cordoned, job_finished, job_label};

/// Image repository of every e2e package (never pulled: kwok runs no containers).
pub const IMAGE: &str = "example.invalid/e2e/package";

/// Default time allowed for a small rollout to converge on 2 cores.
pub const CONVERGE: Duration = Duration::from_secs(180);

/// A package manifest at `version` with `extra` fields merged in.
pub fn pkg(version: &str, extra: Value) -> Value {
    let mut p = json!({ "version": version, "image": IMAGE });
    crate::harness::merge(&mut p, extra);
    p
}

/// `JOB_BACKOFF_LIMIT` of the operator under test (the driver exports it).
pub fn backoff_limit() -> i32 {
    crate::harness::operator_int("JOB_BACKOFF_LIMIT", 3) as i32
}

/// `JOB_TTL_SUCCEEDED` in seconds.
pub fn ttl_succeeded() -> i32 {
    crate::harness::operator_int("JOB_TTL_SUCCEEDED_SECONDS", 3600) as i32
}

/// `JOB_TTL_FAILED` in seconds.
pub fn ttl_failed() -> i32 {
    crate::harness::operator_int("JOB_TTL_FAILED_SECONDS", 86400) as i32
}

/// `JOB_STAGE_TIMEOUT` in seconds.
pub fn stage_timeout() -> i64 {
    crate::harness::operator_int("JOB_STAGE_TIMEOUT_SECONDS", 3600)
}

/// (package label, stage, node) of a Job: its identity in a rollout.
pub fn job_key(j: &Job) -> (String, String, String) {
    (
        job_label(j, keys::PACKAGE),
        job_label(j, keys::LABEL_STAGE),
        job_label(j, keys::LABEL_NODE),
    )
}

/// Whether the Job is an interrupt executor (`<P>/interrupt: "True"`).
pub fn is_interrupt(j: &Job) -> bool {
    job_label(j, keys::LABEL_INTERRUPT) == "True"
}

/// Asserts that no two Jobs share (package, stage, node), i.e. no duplicate executors.
pub fn assert_no_duplicates(jobs: &[Job]) -> Result<()> {
    let mut seen = BTreeSet::new();
    for j in jobs {
        if !seen.insert(job_key(j)) {
            bail!("duplicate Job for {:?}: {}", job_key(j), j.name_any());
        }
    }
    Ok(())
}

/// Asserts the A1 shape of a finished stage Job: Complete, recorded, TTL, deadlines, retry policy.
pub fn assert_recorded_stage_job(j: &Job, ttl: i32) -> Result<()> {
    let name = j.name_any();
    let spec = j.spec.as_ref().ok_or_else(|| anyhow!("{name}: no spec"))?;
    let pod = spec
        .template
        .spec
        .as_ref()
        .ok_or_else(|| anyhow!("{name}: no pod spec"))?;
    let ann = j.annotations();
    if ann.get(keys::STATE_RECORDED).map(String::as_str) != Some("true") {
        bail!("{name}: no {} annotation", keys::STATE_RECORDED);
    }
    if spec.ttl_seconds_after_finished != Some(ttl) {
        bail!(
            "{name}: ttlSecondsAfterFinished {:?}, want {ttl}",
            spec.ttl_seconds_after_finished
        );
    }
    if !ann.contains_key(keys::EXECUTOR_FINGERPRINT) {
        bail!("{name}: no {} annotation (D19)", keys::EXECUTOR_FINGERPRINT);
    }
    if spec.active_deadline_seconds.is_some() {
        bail!("{name}: Job-level activeDeadlineSeconds set");
    }
    if pod.active_deadline_seconds != Some(stage_timeout()) {
        bail!(
            "{name}: template activeDeadlineSeconds {:?}",
            pod.active_deadline_seconds
        );
    }
    if spec.backoff_limit != Some(backoff_limit()) {
        bail!(
            "{name}: backoffLimit {:?}, want {}",
            spec.backoff_limit,
            backoff_limit()
        );
    }
    if spec.pod_replacement_policy.as_deref() != Some("Failed") {
        bail!(
            "{name}: podReplacementPolicy {:?}",
            spec.pod_replacement_policy
        );
    }
    if pod.restart_policy.as_deref() != Some("Never") {
        bail!("{name}: restartPolicy {:?}", pod.restart_policy);
    }
    let ignores_disruption = spec.pod_failure_policy.as_ref().is_some_and(|p| {
        p.rules.iter().any(|r| {
            r.action == "Ignore"
                && r.on_pod_conditions
                    .as_ref()
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "DisruptionTarget"))
        })
    });
    if !ignores_disruption {
        bail!("{name}: no Ignore-on-DisruptionTarget podFailurePolicy");
    }
    if pod.node_name.as_deref() != Some(job_label(j, keys::LABEL_NODE).as_str()) {
        bail!(
            "{name}: nodeName {:?} differs from its node label",
            pod.node_name
        );
    }
    if job_finished(j).as_deref() != Some("Complete") {
        bail!("{name}: not Complete");
    }
    Ok(())
}

/// Completion time of a Job (seconds since the epoch), if complete.
pub fn completed_at(j: &Job) -> Option<i64> {
    j.status
        .as_ref()?
        .completion_time
        .as_ref()
        .map(|t| t.0.as_second())
}

/// Creation time of a Job (seconds since the epoch).
pub fn created_at(j: &Job) -> i64 {
    j.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .unwrap_or(0)
}

/// Annotates every pod of NodeWright `nw` matching `filter` with `e2e.kwok/fail: hold` as soon as
/// it appears, until the returned handle is aborted: makes a stage "slow" on demand.
pub fn hold_pods(
    case: &Case,
    nw: &str,
    filter: impl Fn(&Pod) -> bool + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    let api = case.pod_api();
    let lp = format!("{}={nw}", keys::LABEL_NAME);
    tokio::spawn(async move {
        let cfg = watcher::Config::default().labels(&lp);
        let stream = watcher(api.clone(), cfg).applied_objects();
        futures::pin_mut!(stream);
        while let Ok(Some(pod)) = stream.try_next().await {
            let held = pod.annotations().get("e2e.kwok/fail").is_some();
            let done = matches!(
                pod.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            );
            if held || done || !filter(&pod) {
                continue;
            }
            let p = json!({ "metadata": { "annotations": { "e2e.kwok/fail": "hold" } } });
            if let Err(e) = api
                .patch(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&p))
                .await
            {
                eprintln!("[e2e] hold {}: {e}", pod.name_any());
            } else {
                eprintln!("[e2e] holding pod {}", pod.name_any());
            }
        }
    })
}

/// Label `key` of a pod.
pub fn pod_label(p: &Pod, key: &str) -> String {
    p.labels().get(key).cloned().unwrap_or_default()
}

/// Pods of NodeWright `nw` that are neither Succeeded nor Failed nor deleting.
pub async fn live_pods(case: &Case, nw: &str) -> Result<Vec<Pod>> {
    let lp = ListParams::default().labels(&format!("{}={nw}", keys::LABEL_NAME));
    Ok(case
        .pod_api()
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .collect())
}

/// Runs the driver's operator control script (`NODEWRIGHT_E2E_OPERATOR_CTL`) with `verb`
/// (`kill`, `start`, `restart`).
pub async fn operator_ctl(verb: &str) -> Result<()> {
    let ctl = std::env::var("NODEWRIGHT_E2E_OPERATOR_CTL")
        .context("NODEWRIGHT_E2E_OPERATOR_CTL unset (run through tests/e2e/run.sh)")?;
    let (c, v) = (ctl.clone(), verb.to_string());
    let out = tokio::task::spawn_blocking(move || std::process::Command::new(c).arg(v).output())
        .await??;
    if !out.status.success() {
        bail!(
            "{ctl} {verb}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// One sample of a rollout: which nodes are cordoned and which NodeWrights have unfinished Jobs
/// on which node.
#[derive(Debug, Default)]
pub struct Sample {
    /// Cordoned nodes of the case.
    pub cordoned: BTreeSet<String>,
    /// (NodeWright, node) pairs with an unfinished Job.
    pub running: BTreeSet<(String, String)>,
    /// Unfinished interrupt Jobs as (NodeWright, node).
    pub interrupts: BTreeSet<(String, String)>,
}

/// Takes a [`Sample`] of the case's nodes and of the Jobs of `nws`.
pub async fn sample(case: &Case, nws: &[&str]) -> Result<Sample> {
    let mut s = Sample::default();
    for n in &case.nodes {
        if let Ok(node) = case.node(n).await
            && cordoned(&node)
        {
            s.cordoned.insert(n.clone());
        }
    }
    for nw in nws {
        for j in case.jobs(nw).await? {
            if job_finished(&j).is_none() && j.metadata.deletion_timestamp.is_none() {
                let node = job_label(&j, keys::LABEL_NODE);
                s.running.insert((nw.to_string(), node.clone()));
                if is_interrupt(&j) {
                    s.interrupts.insert((nw.to_string(), node));
                }
            }
        }
    }
    Ok(s)
}

/// Samples every 500 ms until every NodeWright of `nws` reads `complete`, checking `invariant` on
/// each sample; returns all samples.
pub async fn sample_until_complete(
    case: &Case,
    nws: &[&str],
    timeout: Duration,
    invariant: impl Fn(&Sample) -> Result<()>,
) -> Result<Vec<Sample>> {
    let start = std::time::Instant::now();
    let mut samples = Vec::new();
    loop {
        let s = sample(case, nws).await?;
        invariant(&s).with_context(|| {
            format!(
                "invariant broken after {:.1}s: {s:?}",
                start.elapsed().as_secs_f64()
            )
        })?;
        samples.push(s);
        let mut all = true;
        for nw in nws {
            all &= case.status(nw).await? == "complete";
        }
        if all {
            return Ok(samples);
        }
        if start.elapsed() > timeout {
            bail!("not complete after {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether every entry of the node-state document reads `complete` (and there is at least one).
pub fn all_complete(state: &nodewright_crds::node_state::NodeState) -> bool {
    let v = serde_json::to_value(state).unwrap_or_default();
    let entries = v.as_object().cloned().unwrap_or_default();
    !entries.is_empty() && entries.values().all(|e| e["state"] == "complete")
}
