//! Decisions D10–D25 of 09-decisions.md as they apply to the Jobs module (the rule-level tests
//! in `jobs_rules.rs` carry most of them; these pin the decision-specific observables).

#[path = "jobs_support.rs"]
mod support;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use nodewright_core::effect::{DeletionReason, Effect};
use nodewright_core::jobs::{self, ExecutorIndex, OutcomeKind, Outcomes};
use nodewright_core::{Options, Snapshot};
use nodewright_crds::{NodeState, Stage, State, keys};
use support::*;

const NODE: &str = "worker-1";

fn outs_at(snap: &Snapshot, o: &Options, secs: i64) -> Outcomes {
    let index = ExecutorIndex::build(snap, o);
    jobs::outcomes(&index, snap, o, at(secs))
}

fn one(state: &NodeState, jobs_list: Vec<Job>, pods: Vec<Pod>) -> Snapshot {
    snapshot(demo(), vec![node(NODE, Some(state))], jobs_list, pods)
}

fn apply_job() -> Job {
    package_job(&demo(), "baz", Stage::Apply, NODE, "u1")
}

fn in_progress() -> NodeState {
    doc(vec![entry(
        "baz",
        "1.1.0",
        Stage::Apply,
        State::InProgress,
        0,
    )])
}

#[test]
fn d11_package_jobs_get_live_evidence_never_a_log_snapshot() {
    let job = active(apply_job(), 0);
    let pod = pod_of(
        &job,
        "p1",
        t0(),
        status(
            "Pending",
            Some(t0()),
            vec![waiting("baz-init", "ImagePullBackOff", "not found", 0)],
        ),
    );
    let o = outs_at(&one(&in_progress(), vec![job], vec![pod]), &options(), 10);
    let effects: Vec<_> = o.items.iter().flat_map(|x| x.after_state.clone()).collect();
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::PatchJob { annotations, .. }
        if annotations.contains_key(keys::LAST_FAILURE)))
    );
    assert!(
        !effects
            .iter()
            .any(|e| matches!(e, Effect::PatchJob { annotations, .. }
        if annotations.contains_key(keys::LAST_LOGS)))
    );
}

#[test]
fn d12_every_deletion_names_its_reason() {
    let nw = demo();
    let snap = snapshot(
        nw.clone(),
        vec![node(NODE, Some(&NodeState::default()))],
        vec![
            active(apply_job(), 0),
            processed(complete(
                package_job(&nw, "baz", Stage::Config, NODE, "u2"),
                0,
            )),
            active(package_job(&nw, "baz", Stage::Apply, "gone", "u3"), 0),
        ],
        vec![],
    );
    let o = options();
    let index = ExecutorIndex::build(&snap, &o);
    let mut effects = jobs::sweep(
        &index,
        &nw,
        &[NODE.to_string()].into(),
        &[(NODE.to_string(), NodeState::default())].into(),
        &o,
    )
    .effects;
    effects.extend(jobs::reboot_reset(&index, &nw, NODE));
    effects.extend(jobs::config_update_clear(&index, &nw, NODE, "baz", "1.1.0"));
    let reasons: Vec<DeletionReason> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::DeleteJob {
                reason, context, ..
            } => {
                assert!(context.nodewright.is_some() && context.node.is_some());
                Some(*reason)
            }
            _ => None,
        })
        .collect();
    for r in [
        DeletionReason::OrphanedNode,
        DeletionReason::StaleSpec,
        DeletionReason::RebootReset,
        DeletionReason::ConfigUpdate,
    ] {
        assert!(reasons.contains(&r), "{r:?} missing from {reasons:?}");
    }
    assert_eq!(DeletionReason::ArchivePrune.as_str(), "archive-prune");
}

#[test]
fn d14_job_writes_are_patches_of_exactly_the_touched_fields() {
    let nw = demo();
    let snap = one(&in_progress(), vec![active(apply_job(), 0)], vec![]);
    let index = ExecutorIndex::build(&snap, &options());
    let Effect::PatchJob {
        suspend,
        ttl_seconds_after_finished,
        annotations,
        ..
    } = &jobs::suspend(&index, &nw)[0]
    else {
        panic!()
    };
    assert_eq!(
        (*suspend, *ttl_seconds_after_finished, annotations.len()),
        (Some(true), None, 0)
    );
    let snap = one(&in_progress(), vec![complete(apply_job(), 0)], vec![]);
    let o = outs_at(&snap, &options(), 0);
    let Effect::PatchJob {
        suspend,
        ttl_seconds_after_finished,
        annotations,
        ..
    } = o.items[0].after_state.last().unwrap()
    else {
        panic!()
    };
    assert_eq!((*suspend, *ttl_seconds_after_finished), (None, Some(3600)));
    assert_eq!(annotations.len(), 1);
}

#[test]
fn d15_reboot_sweep_is_data_the_lifecycle_gates_the_boot_id_on() {
    let nw = demo();
    let snap = one(&in_progress(), vec![complete(apply_job(), 0)], vec![]);
    let index = ExecutorIndex::build(&snap, &options());
    let effects = jobs::reboot_reset(&index, &nw, NODE);
    assert_eq!(
        effects.len(),
        1,
        "unprocessed Complete Jobs are deleted too"
    );
}

#[test]
fn d16_only_operator_namespace_pods_with_both_labels_are_evidence() {
    let job = active(apply_job(), 0);
    let mut foreign = pod_of(&job, "p1", t0(), genuine_failure());
    foreign.metadata.namespace = Some("default".into());
    let mut unlabelled = pod_of(&job, "p2", t0(), genuine_failure());
    unlabelled
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .remove(keys::PACKAGE);
    let o = outs_at(
        &one(&in_progress(), vec![job], vec![foreign, unlabelled]),
        &options(),
        5,
    );
    assert!(o.items.is_empty());
}

#[test]
fn d17_node_status_follows_only_the_terminal_verdict() {
    let job = active(apply_job(), 2);
    let pod = pod_of(&job, "p1", t0(), genuine_failure());
    let o = outs_at(
        &one(&in_progress(), vec![job], vec![pod.clone()]),
        &options(),
        5,
    );
    assert!(matches!(
        o.items[0].kind,
        OutcomeKind::AttemptFailed {
            restarts: Some(2),
            ..
        }
    ));
    let terminal = failed(apply_job(), "BackoffLimitExceeded", 4);
    let o = outs_at(
        &one(&in_progress(), vec![terminal], vec![pod]),
        &options(),
        5,
    );
    assert!(matches!(
        o.items[0].kind,
        OutcomeKind::TerminalFailed { .. }
    ));
}

#[test]
fn d19_fingerprint_is_stable_across_releases() {
    // Pinned: changing the serialization would make every running Job read stale after an
    // operator upgrade. Bump the scheme only with a migration plan.
    let o = options();
    let pkg = package("baz", "1.1.0");
    assert_eq!(
        jobs::fingerprint::package_fingerprint(&pkg, &o),
        PINNED_PACKAGE_FINGERPRINT
    );
}

/// sha256 of `{"agentImage":"ghcr.io/nvidia/nodewright/agent:latest","configMap":{},"env":[],
/// "image":"ghcr.io/nvidia/skyhook-packages/shellscript:1.1.0","kind":"package","resources":null,
/// "scheme":"nodewright-executor-fingerprint/v1","version":"1.1.0"}` (keys sorted, compact),
/// recomputed independently with `python3 -c "import json,hashlib; ..."`.
const PINNED_PACKAGE_FINGERPRINT: &str =
    "0fc1d2c7854f9a14b94fa0d7612913918c9168a05427cdd6a801a49d5ad07323";

#[test]
fn d25_fingerprint_key_and_pending_measured_from_creation() {
    assert_eq!(
        keys::EXECUTOR_FINGERPRINT,
        "nodewright.nvidia.com/executor-fingerprint"
    );
    let job = active(apply_job(), 0);
    let pod = pod_of(&job, "p1", at(100), status("Pending", None, vec![]));
    let snap = one(&in_progress(), vec![job], vec![pod]);
    let o = outs_at(&snap, &options(), 3650);
    assert!(o.items.is_empty(), "3550 s since creation < 3600 s timeout");
    assert_eq!(o.requeue_after, Some(std::time::Duration::from_secs(51)));
    assert_eq!(outs_at(&snap, &options(), 3701).items.len(), 1);
}
