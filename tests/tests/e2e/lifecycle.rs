//! Happy-path lifecycle scenarios: install, dependencies, upgrade, uninstall, config updates,
//! pause/disable.

use std::time::Duration;

use anyhow::{Result, bail, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::ListParams;
use nodewright_crds::keys;
use serde_json::json;

use crate::harness::{Case, hold_for, job_finished, job_label, wait_for};
use crate::support::*;

/// A1 (04-jobs-rules.md §14) on two nodes: apply then config Jobs per node, each with the A1 Job
/// shape, recorded with the success TTL; entries (config, complete); NodeWright complete, Ready.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a01_single_package_apply_config_two_nodes() -> Result<()> {
    let c = Case::new("a01", 2).await?;
    let r = a01(&c).await;
    c.finish(r).await
}

async fn a01(c: &Case) -> Result<()> {
    c.create(c.nodewright(
        "a01",
        json!({ "packages": { "tuning": pkg("1.0.0", json!({})) } }),
    ))
    .await?;
    c.wait_status("a01", "complete", CONVERGE).await?;
    for node in &c.nodes {
        let e = c.entry(node, "a01", "tuning").await?;
        ensure!(
            e == Some(("config".into(), "complete".into())),
            "{node}: entry {e:?}"
        );
        let n = c.node(node).await?;
        let st = n.annotations().get(&keys::node_status("a01")).cloned();
        ensure!(
            st.as_deref() == Some("complete"),
            "{node}: node status {st:?}"
        );
    }
    let ready = c.condition("a01", "Ready").await?;
    ensure!(
        ready.as_ref().map(|r| r.0.as_str()) == Some("True"),
        "Ready condition {ready:?}"
    );
    // The marker and TTL are written right after completion; allow the recorder a moment.
    let jobs = wait_for("4 recorded Jobs", Duration::from_secs(30), || async {
        let jobs = c.jobs("a01").await?;
        if jobs.len() != 4 {
            bail!("{} Jobs", jobs.len());
        }
        for j in &jobs {
            assert_recorded_stage_job(j, ttl_succeeded())?;
        }
        Ok(Some(jobs))
    })
    .await?;
    assert_no_duplicates(&jobs)?;
    for node in &c.nodes {
        let of = |stage: &str| {
            jobs.iter()
                .find(|j| {
                    job_label(j, keys::LABEL_NODE) == *node
                        && job_label(j, keys::LABEL_STAGE) == stage
                })
                .cloned()
        };
        let (Some(apply), Some(config)) = (of("apply"), of("config")) else {
            bail!("{node}: missing apply or config Job");
        };
        ensure!(
            job_label(&apply, keys::PACKAGE) == "tuning-1.0.0",
            "package label"
        );
        let done = completed_at(&apply).unwrap_or(i64::MAX);
        ensure!(
            created_at(&config) >= done,
            "{node}: config Job created before apply completed"
        );
    }
    Ok(())
}

/// A2: three packages, two depending on the third: one Job per (package, stage) and no
/// dependent's Job before the dependency's config completed.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a02_depends_on() -> Result<()> {
    let c = Case::new("a02", 1).await?;
    let r = a02(&c).await;
    c.finish(r).await
}

async fn a02(c: &Case) -> Result<()> {
    let dep = json!({ "dependsOn": { "base": "1.0.0" } });
    c.create(c.nodewright(
        "a02",
        json!({ "packages": {
            "base": pkg("1.0.0", json!({})),
            "left": pkg("2.0.0", dep.clone()),
            "right": pkg("3.0.0", dep),
        } }),
    ))
    .await?;
    c.wait_status("a02", "complete", CONVERGE).await?;
    let jobs = c.jobs("a02").await?;
    assert_no_duplicates(&jobs)?;
    ensure!(jobs.len() == 6, "{} Jobs, want 6", jobs.len());
    let base_config = jobs
        .iter()
        .find(|j| {
            job_label(j, keys::PACKAGE) == "base-1.0.0"
                && job_label(j, keys::LABEL_STAGE) == "config"
        })
        .and_then(completed_at)
        .unwrap_or(i64::MAX);
    for j in jobs
        .iter()
        .filter(|j| !job_label(j, keys::PACKAGE).starts_with("base-"))
    {
        ensure!(
            created_at(j) >= base_config,
            "{} created before base's config completed",
            j.name_any()
        );
    }
    Ok(())
}

/// A15 (first half): bumping the version runs an upgrade-stage Job; the superseded entry is
/// removed when it completes and the new version ends (config, complete).
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a15_upgrade_replaces_entry() -> Result<()> {
    let c = Case::new("a15", 1).await?;
    let r = a15(&c).await;
    c.finish(r).await
}

async fn a15(c: &Case) -> Result<()> {
    c.create(c.nodewright(
        "a15",
        json!({ "packages": { "agent": pkg("1.0.0", json!({})) } }),
    ))
    .await?;
    c.wait_status("a15", "complete", CONVERGE).await?;
    c.patch(
        "a15",
        json!({ "spec": { "packages": { "agent": { "version": "1.1.0" } } } }),
    )
    .await?;
    let node = &c.nodes[0];
    wait_for("upgrade to 1.1.0 complete", CONVERGE, || async {
        let state = c.node_state(node, "a15").await?;
        let entries: Vec<_> = state.entries_of("agent").collect();
        let v = serde_json::to_value(&entries)?;
        let done = entries.len() == 1
            && entries[0].version == "1.1.0"
            && v[0]["state"] == "complete"
            && v[0]["stage"] == "config";
        if !done {
            bail!("entries {v}");
        }
        Ok(Some(()))
    })
    .await?;
    c.wait_status("a15", "complete", CONVERGE).await?;
    let jobs = c.jobs("a15").await?;
    let upgrade = jobs
        .iter()
        .filter(|j| {
            job_label(j, keys::PACKAGE) == "agent-1.1.0"
                && job_label(j, keys::LABEL_STAGE) == "upgrade"
        })
        .count();
    ensure!(upgrade == 1, "{upgrade} upgrade Jobs for agent-1.1.0");
    let reapplied = jobs.iter().any(|j| {
        job_label(j, keys::PACKAGE) == "agent-1.1.0" && job_label(j, keys::LABEL_STAGE) == "apply"
    });
    ensure!(!reapplied, "an upgrade must not run apply");
    Ok(())
}

/// A7a: explicit uninstall of `cleanly` (uninstall enabled, apply set) removes its entry, keeps
/// `stays`, and retains the uninstall Job with the success TTL (D10).
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a07a_explicit_uninstall() -> Result<()> {
    let c = Case::new("a07a", 1).await?;
    let r = a07a(&c).await;
    c.finish(r).await
}

async fn a07a(c: &Case) -> Result<()> {
    c.create(c.nodewright(
        "a07a",
        json!({ "packages": {
            "cleanly": pkg("1.0.0", json!({ "uninstall": { "enabled": true } })),
            "stays": pkg("1.0.0", json!({})),
        } }),
    ))
    .await?;
    c.wait_status("a07a", "complete", CONVERGE).await?;
    c.patch(
        "a07a",
        json!({ "spec": { "packages": { "cleanly": { "uninstall": { "apply": true } } } } }),
    )
    .await?;
    let node = &c.nodes[0];
    wait_for("cleanly uninstalled", CONVERGE, || async {
        let gone = c.entry(node, "a07a", "cleanly").await?.is_none();
        let stays = c.entry(node, "a07a", "stays").await?;
        let uninstall_done = c.jobs("a07a").await?.iter().any(|j| {
            job_label(j, keys::LABEL_STAGE) == "uninstall"
                && job_finished(j).as_deref() == Some("Complete")
        });
        if !(gone && uninstall_done) {
            bail!("cleanly gone={gone} uninstall Job complete={uninstall_done} stays={stays:?}");
        }
        ensure!(
            stays == Some(("config".into(), "complete".into())),
            "stays entry {stays:?}"
        );
        Ok(Some(()))
    })
    .await?;
    c.wait_status("a07a", "complete", CONVERGE).await?;
    let jobs = c.jobs("a07a").await?;
    for stage in ["apply", "config", "uninstall"] {
        let j = jobs.iter().find(|j| {
            job_label(j, keys::PACKAGE) == "cleanly-1.0.0"
                && job_label(j, keys::LABEL_STAGE) == stage
        });
        let Some(j) = j else {
            bail!("cleanly's {stage} Job was not retained (D10)")
        };
        let ttl = j.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished);
        ensure!(ttl == Some(ttl_succeeded()), "cleanly {stage} TTL {ttl:?}");
    }
    Ok(())
}

/// A7b: deleting a NodeWright whose package has uninstall enabled runs the uninstall through the
/// finalizer, then leaves no `<P>/*_<name>` annotation on the node and the node schedulable.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a07b_uninstall_on_delete() -> Result<()> {
    let c = Case::new("a07b", 1).await?;
    let r = a07b(&c).await;
    c.finish(r).await
}

async fn a07b(c: &Case) -> Result<()> {
    c.create(c.nodewright(
        "a07b",
        json!({ "packages": { "gone": pkg("1.0.0", json!({ "uninstall": { "enabled": true } })) } }),
    ))
    .await?;
    c.wait_status("a07b", "complete", CONVERGE).await?;
    c.nodewrights().delete("a07b", &Default::default()).await?;
    let saw_uninstall = std::cell::Cell::new(false);
    wait_for(
        "NodeWright a07b deleted by its finalizer",
        CONVERGE,
        || async {
            let seen = c
                .jobs("a07b")
                .await?
                .iter()
                .any(|j| job_label(j, keys::LABEL_STAGE) == "uninstall");
            saw_uninstall.set(saw_uninstall.get() || seen);
            Ok(c.get("a07b").await?.is_none().then_some(()))
        },
    )
    .await?;
    ensure!(
        saw_uninstall.get(),
        "no uninstall Job was seen during deletion"
    );
    let node = c.node(&c.nodes[0]).await?;
    let left: Vec<_> = node
        .annotations()
        .keys()
        .filter(|k| k.starts_with(keys::PREFIX) && k.ends_with("_a07b"))
        .cloned()
        .collect();
    ensure!(left.is_empty(), "annotations left: {left:?}");
    ensure!(!crate::harness::cordoned(&node), "node left cordoned");
    Ok(())
}

/// A10: pause suspends the running Job (pod gone, entry stays in_progress); resume unsuspends;
/// pause then (clear pause + set disable) keeps it suspended; clearing disable resumes.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a10_pause_and_disable() -> Result<()> {
    let c = Case::new("a10", 1).await?;
    let r = a10(&c).await;
    c.finish(r).await
}

async fn a10(c: &Case) -> Result<()> {
    c.create(c.nodewright(
        "a10",
        json!({ "packages": { "e2e-hold-p": pkg("1.0.0", json!({})) } }),
    ))
    .await?;
    let running = || async {
        let live = live_pods(c, "a10").await?;
        let phase = live.first().and_then(|p| p.status.as_ref()?.phase.clone());
        Ok((phase.as_deref() == Some("Running")).then_some(()))
    };
    wait_for("apply pod running", CONVERGE, running).await?;
    let suspended = |want: bool| async move {
        let jobs = c.jobs("a10").await?;
        let unfinished: Vec<_> = jobs.iter().filter(|j| job_finished(j).is_none()).collect();
        ensure!(
            unfinished.len() == 1,
            "{} unfinished Jobs",
            unfinished.len()
        );
        let s = unfinished[0]
            .spec
            .as_ref()
            .and_then(|s| s.suspend)
            .unwrap_or(false);
        Ok(s == want)
    };
    c.annotate("a10", keys::PAUSE, Some("true")).await?;
    wait_for("Job suspended, pod gone", CONVERGE, || async {
        Ok((suspended(true).await? && live_pods(c, "a10").await?.is_empty()).then_some(()))
    })
    .await?;
    c.wait_status("a10", "paused", CONVERGE).await?;
    let e = c.entry(&c.nodes[0], "a10", "e2e-hold-p").await?;
    ensure!(
        e == Some(("apply".into(), "in_progress".into())),
        "paused entry {e:?}"
    );
    c.annotate("a10", keys::PAUSE, None).await?;
    wait_for("Job resumed", CONVERGE, || async {
        Ok(suspended(false).await?.then_some(()))
    })
    .await?;
    wait_for("fresh pod running", CONVERGE, running).await?;
    c.annotate("a10", keys::PAUSE, Some("true")).await?;
    wait_for("Job suspended again", CONVERGE, || async {
        Ok(suspended(true).await?.then_some(()))
    })
    .await?;
    c.patch(
        "a10",
        json!({ "metadata": { "annotations": { keys::PAUSE: null, keys::DISABLE: "true" } } }),
    )
    .await?;
    hold_for(
        "Job stays suspended while disabled",
        Duration::from_secs(10),
        || suspended(true),
    )
    .await?;
    c.wait_status("a10", "disabled", CONVERGE).await?;
    c.annotate("a10", keys::DISABLE, None).await?;
    wait_for("Job resumed after disable cleared", CONVERGE, || async {
        Ok(suspended(false).await?.then_some(()))
    })
    .await?;
    Ok(())
}

/// A11 on two nodes: editing the package ConfigMap while config runs replaces the in-flight
/// config Job; the ConfigMap changes only when the update is committed, and every node re-runs
/// config and ends with the new value.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a11_config_update_mid_flight() -> Result<()> {
    let c = Case::new("a11", 2).await?;
    let r = a11(&c).await;
    c.finish(r).await
}

async fn a11(c: &Case) -> Result<()> {
    let holder = hold_pods(c, "a11", |p| pod_label(p, keys::LABEL_STAGE) == "config");
    let spec = json!({ "packages": { "colour": pkg("1.0.0", json!({ "configMap": { "colour": "blue" } })) } });
    c.create(c.nodewright("a11", spec)).await?;
    let first = wait_for("config Job running on every node", CONVERGE, || async {
        let jobs = c.jobs("a11").await?;
        let cfg: Vec<_> = jobs
            .into_iter()
            .filter(|j| job_label(j, keys::LABEL_STAGE) == "config" && job_finished(j).is_none())
            .collect();
        Ok((cfg.len() == c.nodes.len()).then_some(cfg))
    })
    .await?;
    let old_uids: Vec<String> = first
        .iter()
        .filter_map(|j| j.metadata.uid.clone())
        .collect();
    c.patch(
        "a11",
        json!({ "spec": { "packages": { "colour": { "configMap": { "colour": "red" } } } } }),
    )
    .await?;
    wait_for(
        "in-flight config Jobs replaced",
        Duration::from_secs(60),
        || async {
            let jobs = c.jobs("a11").await?;
            let live_old = jobs.iter().any(|j| {
                old_uids.contains(&j.metadata.uid.clone().unwrap_or_default())
                    && j.metadata.deletion_timestamp.is_none()
            });
            Ok((!live_old).then_some(()))
        },
    )
    .await?;
    holder.abort();
    c.wait_status("a11", "complete", CONVERGE).await?;
    let cms: kube::Api<ConfigMap> = kube::Api::namespaced(c.client.clone(), &c.ns);
    let lp = ListParams::default().labels(&format!("{}=a11", keys::LABEL_NAME));
    let colours: Vec<_> = cms
        .list(&lp)
        .await?
        .items
        .iter()
        .filter_map(|cm| cm.data.as_ref()?.get("colour").cloned())
        .collect();
    ensure!(colours == ["red"], "package ConfigMap colour {colours:?}");
    for node in &c.nodes {
        let e = c.entry(node, "a11", "colour").await?;
        ensure!(
            e == Some(("config".into(), "complete".into())),
            "{node}: {e:?}"
        );
    }
    Ok(())
}

/// A24 (D19): editing package `b`'s env while `a`'s apply runs leaves `a`'s Job (same UID) alone.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a24_unrelated_edit_keeps_running_job() -> Result<()> {
    let c = Case::new("a24", 1).await?;
    let r = a24(&c).await;
    c.finish(r).await
}

async fn a24(c: &Case) -> Result<()> {
    let holder = hold_pods(c, "a24", |p| pod_label(p, keys::PACKAGE) == "pa-1.0.0");
    c.create(c.nodewright(
        "a24",
        json!({ "packages": { "pa": pkg("1.0.0", json!({})), "pb": pkg("1.0.0", json!({})) } }),
    ))
    .await?;
    let a_job = wait_for("pa's apply Job running", CONVERGE, || async {
        let jobs = c.jobs("a24").await?;
        Ok(jobs.into_iter().find(|j| {
            job_label(j, keys::PACKAGE) == "pa-1.0.0" && job_label(j, keys::LABEL_STAGE) == "apply"
        }))
    })
    .await?;
    c.patch(
        "a24",
        json!({ "spec": { "packages": { "pb": { "env": [{ "name": "X", "value": "1" }] } } } }),
    )
    .await?;
    let uid = a_job.metadata.uid.clone();
    hold_for(
        "pa's running Job keeps its UID",
        Duration::from_secs(10),
        || async {
            let jobs = c.jobs("a24").await?;
            Ok(jobs
                .iter()
                .any(|j| j.metadata.uid == uid && j.metadata.deletion_timestamp.is_none()))
        },
    )
    .await?;
    holder.abort();
    Ok(())
}

/// A15 (second half): a downgrade of a package without uninstall installs the old version from
/// apply and keeps the newer entry ("superseded, not cleanly uninstalled").
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a15b_downgrade_keeps_both_entries() -> Result<()> {
    let c = Case::new("a15b", 1).await?;
    let r = a15b(&c).await;
    c.finish(r).await
}

async fn a15b(c: &Case) -> Result<()> {
    c.create(c.nodewright(
        "a15b",
        json!({ "packages": { "agent": pkg("2.0.0", json!({})) } }),
    ))
    .await?;
    c.wait_status("a15b", "complete", CONVERGE).await?;
    c.patch(
        "a15b",
        json!({ "spec": { "packages": { "agent": { "version": "1.0.0" } } } }),
    )
    .await?;
    let node = &c.nodes[0];
    wait_for("1.0.0 installed next to 2.0.0", CONVERGE, || async {
        let state = c.node_state(node, "a15b").await?;
        let v = serde_json::to_value(state.entries_of("agent").collect::<Vec<_>>())?;
        let versions: Vec<_> = v
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| e["version"].clone())
            .collect();
        let old_done =
            v.as_array().into_iter().flatten().any(|e| {
                e["version"] == "1.0.0" && e["stage"] == "config" && e["state"] == "complete"
            });
        if !(old_done && versions.len() == 2) {
            bail!("entries {v}");
        }
        Ok(Some(()))
    })
    .await?;
    c.wait_status("a15b", "complete", CONVERGE).await?;
    let reinstalled = c.jobs("a15b").await?.iter().any(|j| {
        job_label(j, keys::PACKAGE) == "agent-1.0.0" && job_label(j, keys::LABEL_STAGE) == "apply"
    });
    ensure!(reinstalled, "no apply Job for the downgraded version");
    Ok(())
}

/// R5 (02-lifecycle §8.8) with `REAPPLY_ON_REBOOT=true` (set by the driver): a new boot id resets
/// the node's state for the NodeWright, deletes its old Jobs, re-runs the package from apply and
/// records the new boot id in `status.nodeBootIds`.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn r5_reboot_reapplies_package() -> Result<()> {
    let c = Case::new("r5", 1).await?;
    let r = r5(&c).await;
    c.finish(r).await
}

async fn r5(c: &Case) -> Result<()> {
    ensure!(
        crate::harness::operator_int("REAPPLY_ON_REBOOT", 0) == 1,
        "the driver did not start the operator with REAPPLY_ON_REBOOT=true"
    );
    c.create(c.nodewright(
        "r5",
        json!({ "packages": { "pkg": pkg("1.0.0", json!({})) } }),
    ))
    .await?;
    c.wait_status("r5", "complete", CONVERGE).await?;
    let node = &c.nodes[0];
    let before: Vec<_> = c
        .jobs("r5")
        .await?
        .iter()
        .filter_map(|j| j.metadata.uid.clone())
        .collect();
    let boot = crate::harness::uuid();
    c.set_boot_id(node, &boot).await?;
    wait_for("boot id recorded and package re-applied", CONVERGE, || async {
        let nw = c.get("r5").await?.ok_or_else(|| anyhow::anyhow!("NodeWright gone"))?;
        let recorded = nw.data["status"]["nodeBootIds"][node.as_str()].as_str() == Some(boot.as_str());
        let jobs = c.jobs("r5").await?;
        let old_left = jobs.iter().any(|j| before.contains(&j.metadata.uid.clone().unwrap_or_default()));
        let new_done = jobs.iter().any(|j| {
            !before.contains(&j.metadata.uid.clone().unwrap_or_default())
                && job_label(j, keys::LABEL_STAGE) == "config"
                && job_finished(j).as_deref() == Some("Complete")
        });
        let status = nw.data["status"]["status"].as_str().unwrap_or_default().to_string();
        if !(recorded && !old_left && new_done && status == "complete") {
            bail!("recorded={recorded} old Jobs left={old_left} re-run config done={new_done} status={status}");
        }
        Ok(Some(()))
    })
    .await?;
    Ok(())
}

/// A22 (D19): pause, change the package image (a fingerprint input), unpause: the stale suspended
/// Job is deleted and never resumed; a new Job with the new image runs.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a22_suspended_job_edited_while_paused() -> Result<()> {
    let c = Case::new("a22", 1).await?;
    let r = a22(&c).await;
    c.finish(r).await
}

async fn a22(c: &Case) -> Result<()> {
    c.create(c.nodewright(
        "a22",
        json!({ "packages": { "e2e-hold-s": pkg("1.0.0", json!({})) } }),
    ))
    .await?;
    let old = wait_for("apply Job", CONVERGE, || async {
        Ok(c.jobs("a22").await?.into_iter().next())
    })
    .await?;
    let uid = old.metadata.uid.clone();
    c.annotate("a22", keys::PAUSE, Some("true")).await?;
    wait_for("Job suspended", CONVERGE, || async {
        let j = c.job_api().get_opt(&old.name_any()).await?;
        Ok(j.and_then(|j| j.spec?.suspend).filter(|s| *s).map(|_| ()))
    })
    .await?;
    let new_image = "example.invalid/e2e/other";
    c.patch(
        "a22",
        json!({ "spec": { "packages": { "e2e-hold-s": { "image": new_image } } } }),
    )
    .await?;
    c.annotate("a22", keys::PAUSE, None).await?;
    wait_for(
        "a new Job with the new image; the stale one never resumed",
        CONVERGE,
        || async {
            let jobs = c.jobs("a22").await?;
            for j in jobs.iter().filter(|j| j.metadata.uid == uid) {
                let suspended = j.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false);
                if !suspended && j.metadata.deletion_timestamp.is_none() {
                    bail!("the stale Job was resumed");
                }
            }
            let fresh = jobs
                .iter()
                .find(|j| j.metadata.uid != uid && j.metadata.deletion_timestamp.is_none());
            let images: Vec<String> = fresh
                .and_then(|j| j.spec.as_ref()?.template.spec.as_ref())
                .map(|p| {
                    p.init_containers
                        .iter()
                        .flatten()
                        .chain(p.containers.iter())
                        .filter_map(|c| c.image.clone())
                        .collect()
                })
                .unwrap_or_default();
            Ok(images
                .iter()
                .any(|i| i.starts_with(new_image))
                .then_some(()))
        },
    )
    .await
    .map_err(|e| {
        if e.to_string().contains("stale Job was resumed") {
            e.context("A22 violated")
        } else {
            e
        }
    })?;
    Ok(())
}

/// 01-api §5.9: the node-metadata ConfigMap exists for every selected node and is deleted when a
/// node leaves the selection.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn s5_9_node_metadata_configmap_follows_selection() -> Result<()> {
    let c = Case::new("s59", 2).await?;
    let r = s5_9(&c).await;
    c.finish(r).await
}

async fn s5_9(c: &Case) -> Result<()> {
    c.create(c.nodewright(
        "s59",
        json!({ "packages": { "pkg": pkg("1.0.0", json!({})) } }),
    ))
    .await?;
    c.wait_status("s59", "complete", CONVERGE).await?;
    let cms: kube::Api<ConfigMap> = kube::Api::namespaced(c.client.clone(), &c.ns);
    let lp = ListParams::default().labels(&format!("{}=s59", keys::NODE_META));
    let nodes_with_cm = || async {
        let list = cms.list(&lp).await?.items;
        let mut nodes: Vec<String> = list
            .iter()
            .filter(|cm| cm.metadata.deletion_timestamp.is_none())
            .filter_map(|cm| {
                cm.annotations()
                    .get(&format!("{}/Node.name", keys::PREFIX))
                    .cloned()
            })
            .collect();
        nodes.sort();
        anyhow::Ok(nodes)
    };
    let got = nodes_with_cm().await?;
    ensure!(
        got == c.nodes,
        "metadata ConfigMaps for {got:?}, want {:?}",
        c.nodes
    );
    let leaving = &c.nodes[1];
    let p = json!({ "metadata": { "labels": { crate::harness::CASE_LABEL: null } } });
    c.node_api()
        .patch(
            leaving,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&p),
        )
        .await?;
    wait_for(
        "the departed node's metadata ConfigMap deleted",
        CONVERGE,
        || async {
            let got = nodes_with_cm().await?;
            if got != c.nodes[..1] {
                bail!("metadata ConfigMaps for {got:?}");
            }
            Ok(Some(()))
        },
    )
    .await?;
    Ok(())
}
