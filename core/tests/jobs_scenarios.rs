//! Acceptance scenarios of 04-jobs-rules.md §14 at the jobs-module level: a sequence of
//! snapshots, each step checked for the effects and outcomes the lifecycle would emit.

#[path = "jobs_support.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{EnvVar, Pod};
use nodewright_core::effect::{DeletionReason, Effect};
use nodewright_core::jobs::{
    self, CreateDecision, ExecutorIndex, OutcomeKind, Outcomes, WaitReason,
};
use nodewright_core::{Options, Snapshot};
use nodewright_crds::duration::GoDuration;
use nodewright_crds::{NodeState, NodeWright, Stage, State, keys};
use support::*;

const NODE: &str = "worker-1";

/// One pass of the jobs rules over a snapshot: outcomes, the sweep of `demo`, and a create
/// decision for `next` (the Job the lifecycle would build this pass).
struct Pass {
    outcomes: Outcomes,
    sweep: jobs::Sweep,
    create: Option<CreateDecision>,
}

fn pass(
    nw: &NodeWright,
    state: &NodeState,
    jobs_list: Vec<Job>,
    pods: Vec<Pod>,
    next: Option<Job>,
    o: &Options,
    secs: i64,
) -> Pass {
    let snap: Snapshot = snapshot(nw.clone(), vec![node(NODE, Some(state))], jobs_list, pods);
    let index = ExecutorIndex::build(&snap, o);
    let selected: BTreeSet<String> = [NODE.to_string()].into();
    let states: BTreeMap<String, NodeState> = [(NODE.to_string(), state.clone())].into();
    let key = next.as_ref().and_then(|j| {
        jobs::PackageAnnotation::parse(&j.metadata.annotations.as_ref().unwrap()[keys::PACKAGE])
    });
    let entry = key.and_then(|k| state.get(&k.name, &k.version).cloned());
    Pass {
        outcomes: jobs::outcomes(&index, &snap, o, at(secs)),
        sweep: jobs::sweep(&index, nw, &selected, &states, o),
        create: next.map(|j| jobs::plan_create(&index, j, entry.as_ref())),
    }
}

fn kinds(p: &Pass) -> Vec<OutcomeKind> {
    p.outcomes.items.iter().map(|o| o.kind.clone()).collect()
}

fn apply(nw: &NodeWright, state: &NodeState, p: &Pass) -> NodeState {
    let mut next = state.clone();
    for o in &p.outcomes.items {
        for c in jobs::entry_changes(o, Some(nw), state) {
            next.0.remove(&c.key);
            if let Some(set) = c.set {
                next.upsert(set);
            }
        }
    }
    next
}

fn ttl_marker(p: &Pass) -> Option<i32> {
    p.outcomes
        .items
        .iter()
        .flat_map(|o| o.after_state.iter())
        .find_map(|e| match e {
            Effect::PatchJob {
                ttl_seconds_after_finished: Some(t),
                ..
            } => Some(*t),
            _ => None,
        })
}

fn deleted(effects: &[Effect]) -> Vec<DeletionReason> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::DeleteJob { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

fn st(stage: Stage, state: State, restarts: i32) -> NodeState {
    doc(vec![entry("baz", "1.1.0", stage, state, restarts)])
}

fn job(nw: &NodeWright, stage: Stage) -> Job {
    package_job(nw, "baz", stage, NODE, "uid-1")
}

#[test]
fn a1_single_package_apply_then_config() {
    let nw = demo();
    let o = options();
    let s0 = st(Stage::Apply, State::InProgress, 0);
    let p = pass(
        &nw,
        &s0,
        vec![],
        vec![],
        Some(job(&nw, Stage::Apply)),
        &o,
        0,
    );
    let Some(CreateDecision::Create(effects)) = p.create else {
        panic!()
    };
    let Effect::CreateJob { job: created, .. } = &effects[0] else {
        panic!()
    };
    let created = created.to_job();
    let spec = created.spec.as_ref().unwrap();
    assert_eq!(spec.active_deadline_seconds, None);
    assert_eq!(
        spec.template.spec.as_ref().unwrap().active_deadline_seconds,
        Some(3600)
    );
    assert_eq!(spec.backoff_limit, Some(3));
    assert_eq!(spec.ttl_seconds_after_finished, None);
    assert!(
        created
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key(keys::EXECUTOR_FINGERPRINT)
    );
    let done = complete(job(&nw, Stage::Apply), 0);
    let p = pass(&nw, &s0, vec![done.clone()], vec![], None, &o, 30);
    assert_eq!(kinds(&p), [OutcomeKind::Completed { attempts: 0 }]);
    assert_eq!(ttl_marker(&p), Some(3600));
    let s1 = apply(&nw, &s0, &p);
    assert!(s1.get("baz", "1.1.0").unwrap().is_complete());
    // lifecycle advances to config; the retained apply Job is kept and config starts
    let s2 = st(Stage::Config, State::InProgress, 0);
    let p = pass(
        &nw,
        &s2,
        vec![processed(done)],
        vec![],
        Some(job(&nw, Stage::Config)),
        &o,
        31,
    );
    assert!(p.sweep.effects.is_empty());
    assert!(matches!(p.create, Some(CreateDecision::Create(_))));
}

#[test]
fn a3_erroring_retries_exhausted_no_churn_then_edit_releases() {
    let nw = demo();
    let o = options();
    let mut s = st(Stage::Apply, State::InProgress, 0);
    let base = job(&nw, Stage::Apply);
    let mut pods = Vec::new();
    for attempt in 1..=3 {
        pods.push(pod_of(
            &base,
            &format!("p{attempt}"),
            at(attempt * 20),
            genuine_failure(),
        ));
        let p = pass(
            &nw,
            &s,
            vec![active(base.clone(), attempt as i32)],
            pods.clone(),
            None,
            &o,
            attempt * 20 + 1,
        );
        s = apply(&nw, &s, &p);
        let e = s.get("baz", "1.1.0").unwrap();
        assert_eq!(
            (e.state, e.restarts),
            (Some(State::Erroring), attempt as i32),
            "D17: restarts climb"
        );
    }
    pods.push(pod_of(&base, "p4", at(80), genuine_failure()));
    let terminal = failed(base.clone(), "BackoffLimitExceeded", 4);
    let p = pass(&nw, &s, vec![terminal.clone()], pods.clone(), None, &o, 81);
    assert_eq!(
        kinds(&p),
        [OutcomeKind::TerminalFailed {
            reason: "BackoffLimitExceeded".into(),
            restarts: Some(4)
        }]
    );
    let pruned: Vec<_> = p.outcomes.items[0]
        .after_state
        .iter()
        .filter(|e| matches!(e, Effect::DeletePod { .. }))
        .collect();
    assert_eq!(pruned.len(), 2, "exactly two archives remain");
    assert_eq!(ttl_marker(&p), Some(86400));
    s = apply(&nw, &s, &p);
    assert_eq!(s.get("baz", "1.1.0").unwrap().restarts, 4);
    // no churn: the processed timed-out Job stays and absorbs the recreate, pass after pass
    for t in [100, 140] {
        let p = pass(
            &nw,
            &s,
            vec![processed(terminal.clone())],
            vec![],
            Some(job(&nw, Stage::Apply)),
            &o,
            t,
        );
        assert!(p.sweep.effects.is_empty());
        assert_eq!(p.create, Some(CreateDecision::Wait(WaitReason::TimedOut)));
    }
    // an edit elsewhere (D19) leaves it; an env edit of the package releases it
    let mut unrelated = demo_with(vec![package("baz", "1.1.0"), package("qux", "1.0.0")]);
    unrelated.metadata.generation = Some(5);
    assert!(
        pass(
            &unrelated,
            &s,
            vec![processed(terminal.clone())],
            vec![],
            None,
            &o,
            150
        )
        .sweep
        .effects
        .is_empty()
    );
    let mut pkg = package("baz", "1.1.0");
    pkg.env = vec![EnvVar {
        name: "FIX".into(),
        value: Some("1".into()),
        value_from: None,
    }];
    let edited = demo_with(vec![pkg]);
    let p = pass(
        &edited,
        &s,
        vec![processed(terminal)],
        vec![],
        None,
        &o,
        160,
    );
    assert_eq!(deleted(&p.sweep.effects), [DeletionReason::Rerun]);
    let p = pass(
        &edited,
        &s,
        vec![],
        vec![],
        Some(job(&edited, Stage::Apply)),
        &o,
        170,
    );
    assert!(
        matches!(p.create, Some(CreateDecision::Create(_))),
        "the stage re-runs with a new Job"
    );
}

#[test]
fn a4_stage_timeout_attempts_killed_in_place_and_raise_releases() {
    let mut pkg = package("baz", "1.1.0");
    pkg.stage_timeout = Some(GoDuration::new("20s"));
    let nw = demo_with(vec![pkg.clone()]);
    let o = options();
    let base = job(&nw, Stage::Apply);
    assert_eq!(
        base.spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .active_deadline_seconds,
        Some(20)
    );
    let s = st(Stage::Apply, State::InProgress, 0);
    let killed = pod_of(&base, "p1", t0(), deadline_kill());
    let p = pass(
        &nw,
        &s,
        vec![active(base.clone(), 1)],
        vec![killed.clone()],
        None,
        &o,
        21,
    );
    assert!(
        matches!(&kinds(&p)[0], OutcomeKind::AttemptFailed { evidence, .. } if evidence.reason == "DeadlineExceeded")
    );
    let s = st(Stage::Apply, State::Erroring, 4);
    let timed_out = processed(failed(base.clone(), "BackoffLimitExceeded", 4));
    assert!(
        pass(&nw, &s, vec![timed_out.clone()], vec![], None, &o, 200)
            .sweep
            .effects
            .is_empty()
    );
    pkg.stage_timeout = Some(GoDuration::new("10m"));
    let raised = demo_with(vec![pkg]);
    let p = pass(&raised, &s, vec![timed_out], vec![], None, &o, 210);
    assert_eq!(deleted(&p.sweep.effects), [DeletionReason::Rerun]);
    let fresh = job(&raised, Stage::Apply);
    assert_eq!(
        fresh
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .active_deadline_seconds,
        Some(600)
    );
    // raising it while an attempt runs leaves that attempt alone (D19)
    let running = pass(
        &raised,
        &st(Stage::Apply, State::InProgress, 0),
        vec![active(base, 0)],
        vec![],
        None,
        &o,
        220,
    );
    assert!(running.sweep.effects.is_empty());
}

#[test]
fn a7a_d10_uninstall_and_earlier_jobs_keep_their_ttl() {
    let mut cleanly = package("baz", "1.1.0");
    cleanly.uninstall = Some(nodewright_crds::Uninstall {
        enabled: true,
        apply: true,
    });
    let nw = demo_with(vec![cleanly]);
    let o = options();
    let s = st(Stage::Uninstall, State::InProgress, 0);
    let un = complete(job(&nw, Stage::Uninstall), 0);
    let p = pass(&nw, &s, vec![un.clone()], vec![], None, &o, 0);
    let after = apply(&nw, &s, &p);
    assert!(after.get("baz", "1.1.0").is_none(), "entry removed");
    let retained = vec![
        processed(un),
        processed(complete(job(&nw, Stage::Apply), 0)),
        processed(complete(job(&nw, Stage::Config), 0)),
    ];
    assert!(
        pass(&nw, &after, retained, vec![], None, &o, 10)
            .sweep
            .effects
            .is_empty()
    );
}

#[test]
fn a8_ttl_by_outcome() {
    let nw = demo_with(vec![package("baz", "1.1.0"), package("bad", "1.0.0")]);
    let mut o = options();
    o.job_ttl_succeeded = Duration::from_secs(60);
    o.job_ttl_failed = Duration::from_secs(180);
    let s = doc(vec![
        entry("baz", "1.1.0", Stage::Apply, State::InProgress, 0),
        entry("bad", "1.0.0", Stage::Apply, State::Erroring, 3),
    ]);
    let good = complete(job(&nw, Stage::Apply), 0);
    let bad = failed(
        package_job(&nw, "bad", Stage::Apply, NODE, "uid-2"),
        "BackoffLimitExceeded",
        4,
    );
    let p = pass(&nw, &s, vec![good, bad], vec![], None, &o, 0);
    let ttls: BTreeMap<String, i32> = p
        .outcomes
        .items
        .iter()
        .map(|x| {
            (
                x.package.clone(),
                match x.after_state.last() {
                    Some(Effect::PatchJob {
                        ttl_seconds_after_finished: Some(t),
                        ..
                    }) => *t,
                    _ => -1,
                },
            )
        })
        .collect();
    assert_eq!(
        ttls,
        BTreeMap::from([("bad".to_string(), 180), ("baz".to_string(), 60)])
    );
    // after the failure TTL the Job is gone and the erroring stage gets a replacement
    let p = pass(
        &nw,
        &s,
        vec![],
        vec![],
        Some(package_job(&nw, "bad", Stage::Apply, NODE, "n")),
        &o,
        400,
    );
    assert!(matches!(p.create, Some(CreateDecision::Create(_))));
    let err = Options::from_env(&[("JOB_TTL_SUCCEEDED".to_string(), "30s".to_string())].into())
        .unwrap_err();
    assert!(err.to_string().contains("at least 60s"), "{err}");
}

#[test]
fn a9_kubelet_refused_attempts_self_heal() {
    let nw = demo();
    let o = options();
    let s = st(Stage::Apply, State::InProgress, 0);
    let base = job(&nw, Stage::Apply);
    let pods: Vec<_> = (0..4)
        .map(|i| pod_of(&base, &format!("p{i}"), at(i * 10), admission_refusal()))
        .collect();
    let active_pass = pass(
        &nw,
        &s,
        vec![active(base.clone(), 3)],
        pods.clone(),
        None,
        &o,
        35,
    );
    let s_active = apply(&nw, &s, &active_pass);
    assert_eq!(
        s_active.get("baz", "1.1.0").unwrap().state,
        Some(State::InProgress),
        "never erroring"
    );
    let terminal = failed(base.clone(), "BackoffLimitExceeded", 4);
    let p = pass(&nw, &s, vec![terminal.clone()], pods, None, &o, 40);
    assert_eq!(kinds(&p), [OutcomeKind::JobOnly]);
    let p = pass(&nw, &s, vec![processed(terminal)], vec![], None, &o, 41);
    assert_eq!(deleted(&p.sweep.effects), [DeletionReason::Rerun]);
    let p = pass(
        &nw,
        &s,
        vec![],
        vec![],
        Some(job(&nw, Stage::Apply)),
        &o,
        42,
    );
    assert!(matches!(p.create, Some(CreateDecision::Create(_))));
}

#[test]
fn a10_pause_suspends_disable_never_resumes() {
    let o = options();
    let s = st(Stage::Apply, State::InProgress, 0);
    let base = active(job(&demo(), Stage::Apply), 0);
    let mut paused = demo();
    paused.metadata.annotations = Some([(keys::PAUSE.to_string(), "true".to_string())].into());
    let snap = snapshot(
        paused.clone(),
        vec![node(NODE, Some(&s))],
        vec![base.clone()],
        vec![],
    );
    let index = ExecutorIndex::build(&snap, &o);
    assert!(matches!(
        &jobs::suspend(&index, &paused)[..],
        [Effect::PatchJob {
            suspend: Some(true),
            ..
        }]
    ));
    // the suspension-killed pod stays silent; entry held at in_progress
    let mut killed = pod_of(&base, "p1", t0(), genuine_failure());
    killed.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t0()));
    let p = pass(
        &paused,
        &s,
        vec![suspended(base.clone())],
        vec![killed],
        None,
        &o,
        5,
    );
    assert!(p.outcomes.items.is_empty());
    // clear pause → resume
    let snap = snapshot(
        demo(),
        vec![node(NODE, Some(&s))],
        vec![suspended(base.clone())],
        vec![],
    );
    let index = ExecutorIndex::build(&snap, &o);
    let sw = jobs::sweep(
        &index,
        &demo(),
        &[NODE.to_string()].into(),
        &[(NODE.to_string(), s.clone())].into(),
        &o,
    );
    assert!(matches!(
        &jobs::resume(&index, &demo(), &sw)[..],
        [Effect::PatchJob {
            suspend: Some(false),
            ..
        }]
    ));
    // clear pause and set disable in one edit → stays suspended
    let mut disabled = demo();
    disabled.metadata.annotations = Some([(keys::DISABLE.to_string(), "true".to_string())].into());
    assert!(jobs::resume(&index, &disabled, &sw).is_empty());
}

#[test]
fn a11_config_update_mid_flight_replaces_the_running_job() {
    let mut pkg = package("baz", "1.1.0");
    pkg.config_map = [("colour".to_string(), "blue".to_string())].into();
    let nw = demo_with(vec![pkg.clone()]);
    let o = options();
    let s = st(Stage::Config, State::InProgress, 0);
    let running = active(job(&nw, Stage::Config), 0);
    pkg.config_map = [("colour".to_string(), "red".to_string())].into();
    let edited = demo_with(vec![pkg]);
    let p = pass(&edited, &s, vec![running.clone()], vec![], None, &o, 6);
    assert!(p.sweep.changed);
    assert_eq!(deleted(&p.sweep.effects), [DeletionReason::StaleSpec]);
    let replacement = job(&edited, Stage::Config);
    assert_ne!(
        replacement.metadata.annotations.as_ref().unwrap()[keys::EXECUTOR_FINGERPRINT],
        running.metadata.annotations.as_ref().unwrap()[keys::EXECUTOR_FINGERPRINT]
    );
}

#[test]
fn a13_node_deleted_mid_run_job_deleted_without_replacement() {
    let nw = demo();
    let o = options();
    let gone = active(package_job(&nw, "baz", Stage::Apply, "worker-2", "u"), 0);
    let p = pass(
        &nw,
        &st(Stage::Apply, State::InProgress, 0),
        vec![gone],
        vec![],
        None,
        &o,
        0,
    );
    assert_eq!(deleted(&p.sweep.effects), [DeletionReason::OrphanedNode]);
}

#[test]
fn a14_disruption_casualty_is_invisible() {
    let nw = demo();
    let o = options();
    let base = job(&nw, Stage::Apply);
    let evicted = pod_of(&base, "p1", t0(), disrupted());
    let replacement = pod_of(&base, "p2", at(5), status("Pending", Some(at(5)), vec![]));
    let p = pass(
        &nw,
        &st(Stage::Apply, State::InProgress, 0),
        vec![active(base, 0)],
        vec![evicted, replacement],
        None,
        &o,
        10,
    );
    assert!(p.outcomes.items.is_empty());
}

#[test]
fn a16_unpullable_image_entry_erroring_node_only_at_terminal() {
    let mut pkg = package("baz", "1.1.0");
    pkg.stage_timeout = Some(GoDuration::new("60s"));
    let nw = demo_with(vec![pkg]);
    let o = options();
    let base = job(&nw, Stage::Apply);
    let s = st(Stage::Apply, State::InProgress, 0);
    let waiting_pod = pod_of(
        &base,
        "p1",
        t0(),
        status(
            "Pending",
            Some(t0()),
            vec![waiting(
                "baz-init",
                "ImagePullBackOff",
                "manifest unknown",
                0,
            )],
        ),
    );
    let p = pass(
        &nw,
        &s,
        vec![active(base.clone(), 0)],
        vec![waiting_pod],
        None,
        &o,
        30,
    );
    assert_eq!(
        kinds(&p),
        [OutcomeKind::JobOnly],
        "last-failure evidence only, grace 5m > 60s"
    );
    let killed = pod_of(&base, "p1", t0(), deadline_kill());
    let p = pass(
        &nw,
        &s,
        vec![active(base.clone(), 1)],
        vec![killed],
        None,
        &o,
        62,
    );
    assert!(
        matches!(kinds(&p)[0], OutcomeKind::AttemptFailed { .. }),
        "entry erroring, not node (D17)"
    );
}

#[test]
fn a17_reset_during_failing_job_invalidates_without_resurrecting() {
    let nw = demo();
    let o = options();
    let base = job(&nw, Stage::Config);
    let failing = pod_of(&base, "p1", t0(), genuine_failure());
    let reset = NodeState::default();
    let p = pass(
        &nw,
        &reset,
        vec![active(base, 1)],
        vec![failing],
        None,
        &o,
        5,
    );
    for outcome in &p.outcomes.items {
        assert!(jobs::entry_changes(outcome, Some(&nw), &reset).is_empty());
    }
    assert_eq!(deleted(&p.sweep.effects), [DeletionReason::StaleSpec]);
}

#[test]
fn a18_pod_for_unknown_package_creates_nothing() {
    let nw = demo();
    let o = options();
    let stranger = package_job(
        &demo_with(vec![package("ghost", "9.9.9")]),
        "ghost",
        Stage::Apply,
        NODE,
        "g",
    );
    let pod = pod_of(&stranger, "p1", t0(), genuine_failure());
    let s = st(Stage::Apply, State::InProgress, 0);
    let p = pass(&nw, &s, vec![active(stranger, 1)], vec![pod], None, &o, 5);
    for outcome in &p.outcomes.items {
        assert!(jobs::entry_changes(outcome, Some(&nw), &s).is_empty());
    }
}

#[test]
fn a19_lost_completion_self_heals_once() {
    let nw = demo();
    let o = options();
    let s = st(Stage::Apply, State::InProgress, 0);
    let p = pass(
        &nw,
        &s,
        vec![processed(complete(job(&nw, Stage::Apply), 0))],
        vec![],
        None,
        &o,
        0,
    );
    assert_eq!(deleted(&p.sweep.effects), [DeletionReason::Rerun]);
}

#[test]
fn a20_unprocessed_finished_jobs_are_sacred() {
    let nw = demo();
    let o = options();
    let s = st(Stage::Apply, State::InProgress, 0);
    for j in [
        complete(job(&nw, Stage::Apply), 0),
        failed(job(&nw, Stage::Apply), "BackoffLimitExceeded", 4),
    ] {
        let p = pass(
            &nw,
            &s,
            vec![j],
            vec![],
            Some(job(&nw, Stage::Apply)),
            &o,
            0,
        );
        assert!(p.sweep.effects.is_empty());
        assert_eq!(
            p.create,
            Some(CreateDecision::Wait(WaitReason::UnrecordedOutcome))
        );
        assert!(p.outcomes.items.iter().all(|x| {
            x.after_state
                .iter()
                .all(|e| !matches!(e, Effect::DeleteJob { .. }))
        }));
    }
}

#[test]
fn a21_crash_between_state_write_and_marker() {
    let nw = demo_with(vec![package("baz", "1.1.0"), package("qux", "2.0.0")]);
    let o = options();
    let int = complete(
        interrupt_job(&nw, "baz", &service_interrupt(&["a"]), NODE, "i"),
        0,
    );
    let before = doc(vec![
        entry("baz", "1.1.0", Stage::Interrupt, State::InProgress, 0),
        entry("qux", "2.0.0", Stage::Interrupt, State::Skipped, 0),
    ]);
    let p = pass(&nw, &before, vec![int.clone()], vec![], None, &o, 0);
    let after = apply(&nw, &before, &p);
    // crash: the node write landed, the marker did not; the re-served pass writes only the marker
    let p = pass(&nw, &after, vec![int], vec![], None, &o, 1);
    assert!(
        jobs::entry_changes(&p.outcomes.items[0], Some(&nw), &after).is_empty(),
        "no duplicate promotion"
    );
    assert_eq!(ttl_marker(&p), Some(3600));
}

#[test]
fn a22_suspended_job_edited_while_paused_is_invalidated_before_resume() {
    let o = options();
    let s = st(Stage::Apply, State::InProgress, 0);
    let old = suspended(active(job(&demo(), Stage::Apply), 0));
    let mut pkg = package("baz", "1.1.0");
    pkg.image = "ghcr.io/example/fixed".into();
    let edited = demo_with(vec![pkg]);
    let snap = snapshot(
        edited.clone(),
        vec![node(NODE, Some(&s))],
        vec![old],
        vec![],
    );
    let index = ExecutorIndex::build(&snap, &o);
    let sw = jobs::sweep(
        &index,
        &edited,
        &[NODE.to_string()].into(),
        &[(NODE.to_string(), s)].into(),
        &o,
    );
    assert!(sw.changed);
    assert!(
        jobs::resume(&index, &edited, &sw).is_empty(),
        "no attempt with the old spec starts"
    );
}

#[test]
fn a24_unrelated_edit_keeps_the_running_job() {
    let o = options();
    let s = doc(vec![
        entry("baz", "1.1.0", Stage::Apply, State::InProgress, 0),
        entry("qux", "1.0.0", Stage::Apply, State::InProgress, 0),
    ]);
    let nw = demo_with(vec![package("baz", "1.1.0"), package("qux", "1.0.0")]);
    let a = active(job(&nw, Stage::Apply), 0);
    let b = active(package_job(&nw, "qux", Stage::Apply, NODE, "uid-2"), 0);
    let mut qux = package("qux", "1.0.0");
    qux.env = vec![EnvVar {
        name: "X".into(),
        value: Some("1".into()),
        value_from: None,
    }];
    let mut edited = demo_with(vec![package("baz", "1.1.0"), qux]);
    edited.metadata.generation = Some(5);
    let p = pass(&edited, &s, vec![a, b], vec![], None, &o, 0);
    let names: Vec<_> = p
        .sweep
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::DeleteJob { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        names,
        [nodewright_core::jobs::naming::package_job_name(
            "demo",
            "qux",
            "1.0.0",
            Stage::Apply,
            NODE
        )]
    );
}

#[test]
fn a25_interrupt_restart_allowance() {
    let nw = demo();
    let o = options();
    let int = active(
        interrupt_job(&nw, "baz", &service_interrupt(&["broken"]), NODE, "i"),
        0,
    );
    assert_eq!(
        int.metadata.annotations.as_ref().unwrap()[keys::RESTART_ALLOWANCE],
        "3"
    );
    let s = st(Stage::Interrupt, State::InProgress, 0);
    let looping = |n| {
        pod_of(
            &int,
            "p1",
            t0(),
            status(
                "Running",
                Some(t0()),
                vec![waiting("interrupt", "CrashLoopBackOff", "", n)],
            ),
        )
    };
    let p = pass(&nw, &s, vec![int.clone()], vec![looping(2)], None, &o, 60);
    assert!(
        !p.outcomes
            .items
            .iter()
            .flat_map(|x| &x.after_state)
            .any(|e| matches!(e, Effect::EndInterruptJob { .. }))
    );
    let p = pass(&nw, &s, vec![int.clone()], vec![looping(3)], None, &o, 120);
    assert!(
        p.outcomes
            .items
            .iter()
            .flat_map(|x| &x.after_state)
            .any(|e| matches!(e, Effect::EndInterruptJob { restarts: 3, .. }))
    );
    let ended = annotate(
        failed(int, "BackoffLimitExceeded", 0),
        keys::RESTART_LIMIT_EXCEEDED,
        "3",
    );
    let s2 = st(Stage::Interrupt, State::Erroring, 3);
    let p = pass(&nw, &s2, vec![ended], vec![], None, &o, 130);
    assert!(
        matches!(
            kinds(&p)[0],
            OutcomeKind::TerminalFailed { restarts: None, .. }
        ),
        "keeps the in-place restart count"
    );
    let reboot = nodewright_crds::Interrupt {
        type_: nodewright_crds::InterruptType::Reboot,
        services: vec![],
    };
    assert!(
        !interrupt_job(&nw, "baz", &reboot, NODE, "r")
            .metadata
            .annotations
            .unwrap()
            .contains_key(keys::RESTART_ALLOWANCE)
    );
}

#[test]
fn a26_image_pull_grace_one_minute() {
    let nw = demo();
    let mut o = options();
    o.job_image_pull_grace = Duration::from_secs(60);
    let base = job(&nw, Stage::Apply);
    let pod = pod_of(
        &base,
        "p1",
        t0(),
        status(
            "Pending",
            Some(t0()),
            vec![waiting("baz-init", "ErrImagePull", "pull access denied", 0)],
        ),
    );
    let s = st(Stage::Apply, State::InProgress, 0);
    let p = pass(
        &nw,
        &s,
        vec![active(base.clone(), 0)],
        vec![pod.clone()],
        None,
        &o,
        30,
    );
    assert_eq!(p.outcomes.requeue_after, Some(Duration::from_secs(30)));
    let p = pass(&nw, &s, vec![active(base, 0)], vec![pod], None, &o, 61);
    let outcome = p
        .outcomes
        .items
        .iter()
        .find(|x| x.kind != OutcomeKind::JobOnly)
        .unwrap();
    assert!(
        matches!(outcome.kind, OutcomeKind::AttemptFailed { .. }),
        "entry erroring, Job active, node untouched"
    );
    let s2 = apply(&nw, &s, &p);
    assert_eq!(s2.get("baz", "1.1.0").unwrap().state, Some(State::Erroring));
}

#[test]
fn a27_reboot_sweep_deletes_all_jobs_on_the_node() {
    let nw = demo();
    let o = options();
    let snap = snapshot(
        nw.clone(),
        vec![node(NODE, None)],
        vec![
            complete(job(&nw, Stage::Apply), 0),
            active(job(&nw, Stage::Config), 0),
        ],
        vec![],
    );
    let index = ExecutorIndex::build(&snap, &o);
    assert_eq!(
        deleted(&jobs::reboot_reset(&index, &nw, NODE)),
        [DeletionReason::RebootReset, DeletionReason::RebootReset]
    );
}
