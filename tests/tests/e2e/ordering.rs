//! Scenarios about who runs when: priorities between NodeWrights, interrupts, budgets.

use std::time::Duration;

use anyhow::{Result, ensure};
use nodewright_crds::keys;
use serde_json::json;

use crate::harness::{Case, cordoned, job_label};
use crate::support::*;

/// A5: two NodeWrights (priority 100 and 200) on one node: the 100 one holds the node until
/// complete; never unfinished Jobs of both at once; separate node-state keys.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a05_two_nodewrights_by_priority() -> Result<()> {
    let c = Case::new("a05", 1).await?;
    let r = a05(&c).await;
    c.finish(r).await
}

async fn a05(c: &Case) -> Result<()> {
    let two = json!({ "pa": pkg("1.0.0", json!({})), "pb": pkg("1.0.0", json!({})) });
    c.create(c.nodewright(
        "a05-late",
        json!({ "priority": 200, "packages": two.clone() }),
    ))
    .await?;
    c.create(c.nodewright("a05-first", json!({ "priority": 100, "packages": two })))
        .await?;
    sample_until_complete(c, &["a05-first", "a05-late"], CONVERGE * 2, |s| {
        let nws: std::collections::BTreeSet<_> = s.running.iter().map(|(nw, _)| nw).collect();
        ensure!(nws.len() <= 1, "both NodeWrights have unfinished Jobs");
        Ok(())
    })
    .await?;
    let first_done = c
        .jobs("a05-first")
        .await?
        .iter()
        .filter_map(completed_at)
        .max()
        .unwrap_or(i64::MAX);
    let late_start = c
        .jobs("a05-late")
        .await?
        .iter()
        .map(created_at)
        .min()
        .unwrap_or(0);
    ensure!(
        late_start >= first_done,
        "priority 200 started before priority 100 finished"
    );
    let node = &c.nodes[0];
    for nw in ["a05-first", "a05-late"] {
        ensure!(
            all_complete(&c.node_state(node, nw).await?),
            "{nw} not complete on the node"
        );
    }
    Ok(())
}

/// A6: two packages with interrupts on one node: exactly one merged interrupt Job; node cordoned
/// while it runs and uncordoned after; NodeWright complete.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a06_interrupt_grouping_cordon() -> Result<()> {
    let c = Case::new("a06", 1).await?;
    let r = a06(&c).await;
    c.finish(r).await
}

async fn a06(c: &Case) -> Result<()> {
    let intr = json!({ "interrupt": { "type": "service", "services": ["containerd"] } });
    c.create(c.nodewright(
        "a06",
        json!({ "packages": { "one": pkg("1.0.0", intr.clone()), "two": pkg("1.0.0", intr) } }),
    ))
    .await?;
    let samples = sample_until_complete(c, &["a06"], CONVERGE, |s| {
        for (_, node) in &s.interrupts {
            ensure!(
                s.cordoned.contains(node),
                "interrupt Job running on uncordoned {node}"
            );
        }
        Ok(())
    })
    .await?;
    ensure!(
        samples.iter().any(|s| !s.cordoned.is_empty()),
        "the node was never seen cordoned"
    );
    let jobs = c.jobs("a06").await?;
    let interrupts = jobs.iter().filter(|j| is_interrupt(j)).count();
    ensure!(
        interrupts == 1,
        "{interrupts} interrupt Jobs, want 1 merged"
    );
    let node = c.node(&c.nodes[0]).await?;
    ensure!(!cordoned(&node), "node still cordoned after completion");
    for p in ["one", "two"] {
        let e = c.entry(&c.nodes[0], "a06", p).await?;
        ensure!(e.as_ref().is_some_and(|e| e.1 == "complete"), "{p}: {e:?}");
    }
    Ok(())
}

/// A12: two nodes, a package with an interrupt, interruption budget 1: never more than one node
/// cordoned; one interrupt Job per node; complete.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a12_budget_one_of_two() -> Result<()> {
    let c = Case::new("a12", 2).await?;
    let r = a12(&c).await;
    c.finish(r).await
}

async fn a12(c: &Case) -> Result<()> {
    let intr = json!({ "interrupt": { "type": "service", "services": ["containerd"] } });
    c.create(c.nodewright(
        "a12",
        json!({ "interruptionBudget": { "count": 1 }, "packages": { "svc": pkg("1.0.0", intr) } }),
    ))
    .await?;
    sample_until_complete(c, &["a12"], CONVERGE * 2, |s| {
        ensure!(s.cordoned.len() <= 1, "{} nodes cordoned", s.cordoned.len());
        let busy: std::collections::BTreeSet<_> = s.running.iter().map(|(_, n)| n).collect();
        ensure!(
            busy.len() <= 1,
            "Jobs on {} nodes at once with budget 1",
            busy.len()
        );
        Ok(())
    })
    .await?;
    let jobs = c.jobs("a12").await?;
    for n in &c.nodes {
        let k = jobs
            .iter()
            .filter(|j| is_interrupt(j) && job_label(j, keys::LABEL_NODE) == *n)
            .count();
        ensure!(k == 1, "{k} interrupt Jobs on {n}");
    }
    let _ = Duration::ZERO;
    Ok(())
}

/// A23 / 05-rollout: a DeploymentPolicy with a budget of one node and fixed batches of one paces
/// three nodes one at a time; the NodeWright completes.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn a23_deployment_policy_one_node_batches() -> Result<()> {
    let c = Case::new("a23", 3).await?;
    let r = a23(&c).await;
    let r = c.finish(r).await;
    let policies: kube::Api<kube::api::DynamicObject> =
        kube::Api::all_with(c_client().await?, &crate::harness::policy_resource());
    let _ = policies.delete("a23-policy", &Default::default()).await;
    r
}

async fn c_client() -> Result<kube::Client> {
    crate::harness::client().await
}

async fn a23(c: &Case) -> Result<()> {
    let policy: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "nodewright.nvidia.com/v1alpha1",
        "kind": "DeploymentPolicy",
        "metadata": { "name": "a23-policy" },
        "spec": { "default": { "budget": { "count": 1 }, "strategy": { "fixed": { "initialBatch": 1 } } } },
    }))?;
    let policies: kube::Api<kube::api::DynamicObject> =
        kube::Api::all_with(c.client.clone(), &crate::harness::policy_resource());
    let _ = policies.delete("a23-policy", &Default::default()).await;
    policies.create(&Default::default(), &policy).await?;
    c.create(c.nodewright(
        "a23",
        json!({ "deploymentPolicy": "a23-policy", "packages": { "pkg": pkg("1.0.0", json!({})) } }),
    ))
    .await?;
    sample_until_complete(c, &["a23"], CONVERGE * 2, |s| {
        let busy: std::collections::BTreeSet<_> = s.running.iter().map(|(_, n)| n).collect();
        ensure!(
            busy.len() <= 1,
            "Jobs on {} nodes at once with a one-node policy",
            busy.len()
        );
        Ok(())
    })
    .await?;
    for n in &c.nodes {
        ensure!(
            all_complete(&c.node_state(n, "a23").await?),
            "{n} not complete"
        );
    }
    Ok(())
}

/// 02-lifecycle §8.2 (EnsureReady) and §8.3 (drain): with a pod matching `podNonInterruptLabels`
/// running, the node is cordoned but nothing else happens (no executor, no eviction); once that pod
/// is gone, the other (unmanaged) pod is evicted and the rollout completes, node uncordoned.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn s8_2_waits_for_non_interrupt_pods_then_drains() -> Result<()> {
    let c = Case::new("s82", 1).await?;
    let r = s8_2(&c).await;
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(c.client.clone(), "default");
    let dp = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    for p in ["s82-training", "s82-victim"] {
        let _ = pods.delete(p, &dp).await;
    }
    c.finish(r).await
}

async fn s8_2(c: &Case) -> Result<()> {
    let node = c.nodes[0].clone();
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(c.client.clone(), "default");
    for (name, labels) in [
        ("s82-training", json!({ "workload-class": "training" })),
        ("s82-victim", json!({})),
    ] {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": name, "labels": labels },
            "spec": { "nodeName": node, "containers": [{ "name": "main", "image": "example.invalid/workload" }] },
        }))?;
        pods.create(&Default::default(), &pod).await?;
    }
    crate::harness::wait_for("workload pods Running", CONVERGE, || async {
        let mut running = 0;
        for p in ["s82-training", "s82-victim"] {
            let pod = pods.get(p).await?;
            running += usize::from(pod.status.and_then(|s| s.phase).as_deref() == Some("Running"));
        }
        Ok((running == 2).then_some(()))
    })
    .await?;
    let intr = json!({ "interrupt": { "type": "service", "services": ["containerd"] } });
    c.create(c.nodewright(
        "s82",
        json!({
            "podNonInterruptLabels": { "matchLabels": { "workload-class": "training" } },
            "packages": { "svc": pkg("1.0.0", intr) },
        }),
    ))
    .await?;
    crate::harness::wait_for("node cordoned", CONVERGE, || async {
        Ok(cordoned(&c.node(&node).await?).then_some(()))
    })
    .await?;
    crate::harness::hold_for(
        "no executor and no eviction while training runs",
        Duration::from_secs(10),
        || async {
            let victim = pods.get_opt("s82-victim").await?;
            Ok(c.jobs("s82").await?.is_empty()
                && victim.is_some_and(|p| p.metadata.deletion_timestamp.is_none()))
        },
    )
    .await?;
    pods.delete("s82-training", &Default::default()).await?;
    crate::harness::wait_for("victim pod evicted", CONVERGE, || async {
        Ok(pods.get_opt("s82-victim").await?.is_none().then_some(()))
    })
    .await?;
    c.wait_status("s82", "complete", CONVERGE).await?;
    ensure!(!cordoned(&c.node(&node).await?), "node still cordoned");
    Ok(())
}

/// R3 + R8 (02-lifecycle §10.3, §10.2): a `runtimeRequired` + `autoTaintNewNodes` NodeWright taints
/// an untouched node with the runtime-required taint (and `<P>/autoTaint_*`), runs its packages
/// anyway, and removes the taint once the node is complete.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn r3_r8_runtime_required_taint_added_then_removed() -> Result<()> {
    let c = Case::new("r38", 1).await?;
    let r = r3_r8(&c).await;
    c.finish(r).await
}

async fn r3_r8(c: &Case) -> Result<()> {
    const TAINT: &str = "nodewright.nvidia.com";
    let node = c.nodes[0].clone();
    let tainted = |n: &k8s_openapi::api::core::v1::Node| {
        n.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|ts| {
                ts.iter()
                    .any(|t| t.key == TAINT && t.effect == "NoSchedule")
            })
    };
    c.create(c.nodewright(
        "r38",
        json!({ "runtimeRequired": true, "autoTaintNewNodes": true, "packages": { "pkg": pkg("1.0.0", json!({})) } }),
    ))
    .await?;
    let seen = std::cell::Cell::new(false);
    crate::harness::wait_for("NodeWright complete", CONVERGE, || async {
        let n = c.node(&node).await?;
        seen.set(seen.get() || tainted(&n));
        Ok((c.status("r38").await? == "complete").then_some(()))
    })
    .await?;
    ensure!(
        seen.get(),
        "the runtime-required taint was never seen on the node"
    );
    crate::harness::wait_for("taint removed", Duration::from_secs(30), || async {
        Ok((!tainted(&c.node(&node).await?)).then_some(()))
    })
    .await?;
    let n = c.node(&node).await?;
    let marked = n
        .metadata
        .annotations
        .unwrap_or_default()
        .keys()
        .any(|k| k.starts_with(&format!("{}/autoTaint_", keys::PREFIX)));
    ensure!(
        marked,
        "no <P>/autoTaint_* annotation (the node would be re-tainted)"
    );
    Ok(())
}

/// 05-rollout §7.2–§7.4: a DeploymentPolicy with `failureThreshold: 1` (batches of one node) stops
/// its compartment when the first node fails: `shouldStop` in the compartment's batch state, no Job
/// on any other node, the NodeWright never complete.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn rollout_7_2_failure_threshold_stops_compartment() -> Result<()> {
    let c = Case::new("f72", 3).await?;
    let r = f72(&c).await;
    let r = c.finish(r).await;
    let policies: kube::Api<kube::api::DynamicObject> =
        kube::Api::all_with(c_client().await?, &crate::harness::policy_resource());
    let _ = policies.delete("f72-policy", &Default::default()).await;
    r
}

async fn f72(c: &Case) -> Result<()> {
    let policy: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "nodewright.nvidia.com/v1alpha1",
        "kind": "DeploymentPolicy",
        "metadata": { "name": "f72-policy" },
        "spec": { "default": {
            "budget": { "count": 1 },
            "strategy": { "fixed": { "initialBatch": 1, "failureThreshold": 1 } },
        } },
    }))?;
    let policies: kube::Api<kube::api::DynamicObject> =
        kube::Api::all_with(c.client.clone(), &crate::harness::policy_resource());
    let _ = policies.delete("f72-policy", &Default::default()).await;
    policies.create(&Default::default(), &policy).await?;
    c.create(c.nodewright(
        "f72",
        json!({ "deploymentPolicy": "f72-policy", "packages": { "e2e-fail-apply-z": pkg("1.0.0", json!({})) } }),
    ))
    .await?;
    let budget = CONVERGE + Duration::from_secs(10 * (1u64 << backoff_limit().clamp(0, 6)));
    crate::harness::wait_for("compartment shouldStop", budget, || async {
        let nw = c
            .get("f72")
            .await?
            .ok_or_else(|| anyhow::anyhow!("NodeWright gone"))?;
        let stop = nw.data["status"]["compartmentStatuses"]
            .as_object()
            .into_iter()
            .flat_map(|m| m.values())
            .any(|cs| cs["batchState"]["shouldStop"] == true);
        if !stop {
            anyhow::bail!(
                "compartmentStatuses {}",
                nw.data["status"]["compartmentStatuses"]
            );
        }
        Ok(Some(()))
    })
    .await?;
    crate::harness::hold_for(
        "no Job on a second node",
        Duration::from_secs(15),
        || async {
            let nodes: std::collections::BTreeSet<_> = c
                .jobs("f72")
                .await?
                .iter()
                .map(|j| job_label(j, keys::LABEL_NODE))
                .collect();
            Ok(nodes.len() <= 1 && c.status("f72").await? != "complete")
        },
    )
    .await?;
    Ok(())
}
