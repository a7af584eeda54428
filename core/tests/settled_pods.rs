//! D28: the executor pods of a `Complete` Job whose outcome is recorded are reported settled,
//! and a pass without them plans exactly what it plans with them.

mod fixtures;

use std::collections::BTreeMap;
use std::sync::Arc;

use fixtures::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use nodewright_core::jobs::index::CONTROLLER_UID;
use nodewright_core::{SlimJob, SlimPod, SlimPodStatus, Snapshot};
use nodewright_crds::keys;

/// A terminal (or running) executor pod of `job`, as the pod watch would cache it.
fn pod_of(job: &SlimJob, phase: &str, n: usize) -> SlimPod {
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    for key in [keys::LABEL_NAME, keys::PACKAGE] {
        if let Some(v) = job.metadata.label(key) {
            labels.insert(key.to_string(), v.to_string());
        }
    }
    let uid = job.metadata.uid.clone().unwrap_or_default();
    labels.insert(CONTROLLER_UID.to_string(), uid.to_string());
    SlimPod {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}-{n}",
                job.metadata.name.as_deref().unwrap_or_default()
            )),
            namespace: Some("nodewright".into()),
            uid: Some(format!("{uid}-pod-{n}")),
            resource_version: Some("1".into()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(SlimPodStatus {
            phase: Some(phase.into()),
            ..SlimPodStatus::default()
        }),
    }
}

/// Gives every Job without pods one pod in `phase`.
fn add_pods(snapshot: &mut Snapshot, phase: &str) {
    let mut pods = Vec::new();
    for job in &snapshot.jobs {
        let uid = job.metadata.uid.as_deref();
        let has = snapshot.executor_pods.iter().any(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(CONTROLLER_UID))
                .map(String::as_str)
                == uid
        });
        if !has {
            pods.push(Arc::new(pod_of(job, phase, 0)));
        }
    }
    snapshot.executor_pods.extend(pods);
}

/// Two nodes, two packages, run pass by pass with each Job's pod succeeding, until idle.
fn converged() -> Snapshot {
    let nw = with_pkg(with_pkg(nw("nw"), "alpha", "1.0.0"), "bravo", "2.0.0");
    let mut s = snapshot(vec![nw], vec![node("node-a"), node("node-b")]);
    for _ in 0..40 {
        let plan = pass(&s);
        if plan.effects.is_empty() {
            break;
        }
        apply(&mut s, &plan);
        add_pods(&mut s, "Succeeded");
        finish_jobs(&mut s, true);
    }
    s
}

fn uids(s: &Snapshot) -> Vec<String> {
    s.executor_pods
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect()
}

#[test]
fn d28_the_pods_of_recorded_complete_jobs_are_settled() {
    let s = converged();
    assert!(!s.jobs.is_empty() && !s.executor_pods.is_empty());
    let plan = pass(&s);
    assert!(plan.effects.is_empty(), "converged: {:?}", plan.effects);
    let settled: Vec<String> = plan.settled_pods.iter().map(|p| p.uid.clone()).collect();
    assert_eq!(settled.len(), s.executor_pods.len());
    let mut all = uids(&s);
    all.sort();
    let mut got = settled.clone();
    got.sort();
    assert_eq!(got, all);
    assert!(
        plan.settled_pods.iter().all(|p| p.namespace == "nodewright"
            && p.resource_version == "1"
            && !p.name.is_empty())
    );
}

#[test]
fn d28_running_terminating_or_unrecorded_pods_are_not_settled() {
    let mut s = converged();
    let first = s.jobs[0].clone();
    // A second attempt of the first Job still running, and one being deleted.
    s.executor_pods.push(Arc::new(pod_of(&first, "Running", 1)));
    let mut deleting = pod_of(&first, "Failed", 2);
    deleting.metadata.deletion_timestamp = Some(Time(now()));
    s.executor_pods.push(Arc::new(deleting));
    // The second Job's outcome not recorded yet.
    let second = Arc::make_mut(&mut s.jobs[1]);
    second
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .remove(keys::STATE_RECORDED);
    let second_uid = second.metadata.uid.clone().unwrap_or_default();
    let plan = pass(&s);
    let settled: Vec<&str> = plan.settled_pods.iter().map(|p| p.uid.as_str()).collect();
    let first_uid = first.metadata.uid.clone().unwrap_or_default();
    assert!(settled.contains(&format!("{first_uid}-pod-0").as_str()));
    assert!(
        !settled.contains(&format!("{first_uid}-pod-1").as_str()),
        "running"
    );
    assert!(
        !settled.contains(&format!("{first_uid}-pod-2").as_str()),
        "terminating"
    );
    assert!(
        !settled.iter().any(|u| u.starts_with(&*second_uid)),
        "unrecorded"
    );
}

#[test]
fn d28_a_pass_without_the_settled_pods_plans_the_same_effects() {
    // Mid-rollout and converged: every pass with the settled pods dropped plans what the pass
    // with them plans, and a rollout that drops them as it goes converges the same way.
    let nw = with_pkg(with_pkg(nw("nw"), "alpha", "1.0.0"), "bravo", "2.0.0");
    let mut kept = snapshot(vec![nw], vec![node("node-a"), node("node-b")]);
    let mut dropped = kept.clone();
    let mut settled_seen = 0;
    let mut gone = std::collections::BTreeSet::new();
    for _ in 0..40 {
        let plan = pass(&kept);
        let other = pass(&dropped);
        assert_eq!(plan.effects, other.effects);
        settled_seen += plan.settled_pods.len();
        gone.extend(other.settled_pods.iter().map(|p| p.uid.clone()));
        let keep = |p: &Arc<SlimPod>| !gone.contains(p.metadata.uid.as_deref().unwrap_or_default());
        dropped.executor_pods.retain(keep);
        if plan.effects.is_empty() {
            break;
        }
        for s in [&mut kept, &mut dropped] {
            apply(s, &plan);
            add_pods(s, "Succeeded");
            finish_jobs(s, true);
        }
        // `add_pods` gives a Job whose pod was dropped the same pod again; the cache would not
        // see it again (the pod did not change), so drop it again.
        let keep = |p: &Arc<SlimPod>| !gone.contains(p.metadata.uid.as_deref().unwrap_or_default());
        dropped.executor_pods.retain(keep);
    }
    assert!(settled_seen > 0, "the rollout settled no pod");
    assert!(dropped.executor_pods.len() < kept.executor_pods.len());
}
