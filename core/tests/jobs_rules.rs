//! The numbered rules of 04-jobs-rules.md §1–§10 at the jobs-module level: snapshot in, data and
//! effects out.

#[path = "jobs_support.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nodewright_core::effect::{DeletionReason, Effect};
use nodewright_core::jobs::{
    self, CreateDecision, ExecutorIndex, Outcome, OutcomeKind, Outcomes, PodFailureClass,
    WaitReason, classify, naming,
};
use nodewright_core::{Options, Snapshot};
use nodewright_crds::duration::GoDuration;
use nodewright_crds::{NodeState, NodeWright, Stage, State, keys};
use support::*;

const NODE: &str = "worker-1";

type PackageEdit = Box<dyn Fn(&mut nodewright_crds::Package)>;

fn outs_at(snap: &Snapshot, o: &Options, now: Timestamp) -> Outcomes {
    let index = ExecutorIndex::build(snap, o);
    jobs::outcomes(&index, snap, o, now)
}

fn outs(snap: &Snapshot) -> Outcomes {
    outs_at(snap, &options(), t0())
}

fn state_outcome(o: &Outcomes) -> Option<&Outcome> {
    o.items.iter().find(|x| x.kind != OutcomeKind::JobOnly)
}

fn job_only_effects(o: &Outcomes) -> Vec<Effect> {
    o.items
        .iter()
        .filter(|x| x.kind == OutcomeKind::JobOnly)
        .flat_map(|x| x.after_state.clone())
        .collect()
}

fn all_effects(o: &Outcomes) -> Vec<Effect> {
    o.items.iter().flat_map(|x| x.after_state.clone()).collect()
}

fn is_marker(e: &Effect, ttl: i32) -> bool {
    matches!(e, Effect::PatchJob { ttl_seconds_after_finished: Some(t), annotations, .. }
        if *t == ttl && annotations.get(keys::STATE_RECORDED) == Some(&Some("true".to_string())))
}

fn deletions(effects: &[Effect]) -> Vec<(String, DeletionReason)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::DeleteJob { name, reason, .. } => Some((name.clone(), *reason)),
            _ => None,
        })
        .collect()
}

fn one_node(state: &NodeState, jobs: Vec<Job>, pods: Vec<Pod>) -> Snapshot {
    snapshot(demo(), vec![node(NODE, Some(state))], jobs, pods)
}

fn apply_job(uid: &str) -> Job {
    package_job(&demo(), "baz", Stage::Apply, NODE, uid)
}

fn at_stage(stage: Stage, state: State) -> NodeState {
    doc(vec![entry("baz", "1.1.0", stage, state, 0)])
}

fn sweep_of(snap: &Snapshot, nw: &NodeWright, state: &NodeState) -> jobs::Sweep {
    let o = options();
    let index = ExecutorIndex::build(snap, &o);
    let selected: BTreeSet<String> = [NODE.to_string()].into();
    let states: BTreeMap<String, NodeState> = [(NODE.to_string(), state.clone())].into();
    jobs::sweep(&index, nw, &selected, &states, &o)
}

fn decide(snap: &Snapshot, job: Job, e: Option<&nodewright_crds::PackageStatus>) -> CreateDecision {
    let o = options();
    let index = ExecutorIndex::build(snap, &o);
    jobs::plan_create(&index, job, e)
}

// ---------------------------------------------------------------- §1 identity and shape

#[test]
fn r1_1_1_one_job_per_package_version_stage_node() {
    let a = naming::package_job_name("demo", "baz", "1.1.0", Stage::Apply, "n1");
    for other in [
        naming::package_job_name("demo", "baz", "1.1.1", Stage::Apply, "n1"),
        naming::package_job_name("demo", "baz", "1.1.0", Stage::Config, "n1"),
        naming::package_job_name("demo", "baz", "1.1.0", Stage::Apply, "n2"),
        naming::package_job_name("demo", "qux", "1.1.0", Stage::Apply, "n1"),
    ] {
        assert_ne!(a, other);
    }
}

#[test]
fn r1_2_5_unreadable_package_annotation_is_only_marked_processed() {
    let job = annotate(complete(apply_job("u1"), 0), keys::PACKAGE, "{not json");
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::InProgress),
        vec![job],
        vec![],
    ));
    assert_eq!(o.items.len(), 1);
    assert_eq!(o.items[0].kind, OutcomeKind::JobOnly);
    assert!(is_marker(o.items[0].after_state.last().unwrap(), 3600));
}

#[test]
fn r1_3_1_r1_3_3_r1_3_5_r1_3_6_package_job_spec() {
    let spec = apply_job("u").spec.unwrap();
    assert_eq!((spec.parallelism, spec.completions), (Some(1), Some(1)));
    let names: Vec<_> = spec
        .template
        .spec
        .as_ref()
        .unwrap()
        .init_containers
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(names, ["baz-init", "baz-apply", "baz-applycheck"]);
    let rule = &spec.pod_failure_policy.unwrap().rules[0];
    assert_eq!(rule.action, "Ignore");
    assert_eq!(
        rule.on_pod_conditions.as_ref().unwrap()[0].type_,
        "DisruptionTarget"
    );
    assert_eq!(spec.pod_replacement_policy.as_deref(), Some("Failed"));
    assert_eq!(
        spec.template.spec.unwrap().restart_policy.as_deref(),
        Some("Never")
    );
}

#[test]
fn r1_3_10_operator_bound_edits_never_touch_a_running_job() {
    let job = active(apply_job("u1"), 0);
    let snap = one_node(
        &at_stage(Stage::Apply, State::InProgress),
        vec![job],
        vec![],
    );
    let mut o = options();
    o.job_stage_timeout = Duration::from_secs(10);
    o.job_backoff_limit = 9;
    let index = ExecutorIndex::build(&snap, &o);
    let state = at_stage(Stage::Apply, State::InProgress);
    let sw = jobs::sweep(
        &index,
        &demo(),
        &[NODE.to_string()].into(),
        &[(NODE.to_string(), state)].into(),
        &o,
    );
    assert!(sw.effects.is_empty(), "{:?}", sw.effects);
}

#[test]
fn r1_3_11_never_started_pod_is_reported_not_failed() {
    let job = active(apply_job("u1"), 0);
    let pod = pod_of(&job, "p1", t0(), status("Pending", None, vec![]));
    let snap = one_node(
        &at_stage(Stage::Apply, State::InProgress),
        vec![job],
        vec![pod],
    );
    let early = outs_at(&snap, &options(), at(100));
    assert!(state_outcome(&early).is_none());
    assert!(early.requeue_after.is_some());
    let late = outs_at(&snap, &options(), at(3601));
    assert!(state_outcome(&late).is_none(), "no node state change");
    let effects = job_only_effects(&late);
    assert!(effects.iter().any(|e| matches!(e, Effect::PatchJob { annotations, .. }
        if annotations.get(keys::LAST_FAILURE) == Some(&Some("p1: not started by the kubelet".into())))));
}

#[test]
fn r1_4_3_interrupt_job_shares_replacement_policy_and_tolerations() {
    let nw = demo();
    let int = interrupt_job(&nw, "baz", &service_interrupt(&["a"]), NODE, "u");
    let pkg = apply_job("v");
    let (is, ps) = (int.spec.unwrap(), pkg.spec.unwrap());
    assert_eq!(is.pod_replacement_policy, ps.pod_replacement_policy);
    assert_eq!(
        is.template.spec.unwrap().tolerations,
        ps.template.spec.unwrap().tolerations
    );
}

#[test]
fn r1_4_4_interrupt_deadline_failure_is_genuine_without_evidence() {
    let nw = demo();
    let job = failed(
        interrupt_job(&nw, "baz", &service_interrupt(&["a"]), NODE, "u"),
        "DeadlineExceeded",
        0,
    );
    let o = outs(&one_node(
        &at_stage(Stage::Interrupt, State::InProgress),
        vec![job],
        vec![],
    ));
    assert!(matches!(&state_outcome(&o).unwrap().kind,
        OutcomeKind::TerminalFailed { reason, restarts: None } if reason == "DeadlineExceeded"));
}

// ---------------------------------------------------------------- §2 creation gating

#[test]
fn r2_1_create_only_without_unfinished_job() {
    let state = at_stage(Stage::Config, State::InProgress);
    let running = active(apply_job("u1"), 0);
    let snap = one_node(&state, vec![running], vec![]);
    let config = package_job(&demo(), "baz", Stage::Config, NODE, "new");
    assert_eq!(
        decide(&snap, config.clone(), state.get("baz", "1.1.0")),
        CreateDecision::Wait(WaitReason::ExecutorExists)
    );
    let done = processed(complete(apply_job("u1"), 0));
    let snap = one_node(&state, vec![done], vec![]);
    assert!(matches!(
        decide(&snap, config, state.get("baz", "1.1.0")),
        CreateDecision::Create(_)
    ));
}

/// Invariant 16.1 is per package: an unfinished Job of another version of the package (an old
/// version's uninstall, or a stale Job still terminating) holds back the new version's Job.
#[test]
fn r2_1_inv16_1_an_unfinished_job_of_another_version_holds_back_the_create() {
    let old = demo_with(vec![package("baz", "1.0.0")]);
    let state = doc(vec![
        entry("baz", "1.0.0", Stage::Uninstall, State::InProgress, 0),
        entry("baz", "1.1.0", Stage::Upgrade, State::InProgress, 0),
    ]);
    let upgrade = package_job(&demo(), "baz", Stage::Upgrade, NODE, "new");
    let uninstall = package_job(&old, "baz", Stage::Uninstall, NODE, "u0");
    let mut terminating = package_job(&old, "baz", Stage::Config, NODE, "u1");
    terminating.metadata.deletion_timestamp = Some(Time(t0()));
    for running in [active(uninstall.clone(), 0), terminating] {
        let snap = one_node(&state, vec![running], vec![]);
        assert_eq!(
            decide(&snap, upgrade.clone(), state.get("baz", "1.1.0")),
            CreateDecision::Wait(WaitReason::ExecutorExists)
        );
    }
    let other = package_job(
        &demo_with(vec![package("qux", "1.1.0")]),
        "qux",
        Stage::Apply,
        NODE,
        "q",
    );
    for idle in [processed(complete(uninstall, 0)), active(other, 0)] {
        let snap = one_node(&state, vec![idle], vec![]);
        assert!(matches!(
            decide(&snap, upgrade.clone(), state.get("baz", "1.1.0")),
            CreateDecision::Create(_)
        ));
    }
}

#[test]
fn r2_2_suspended_and_terminating_jobs_count_as_unfinished() {
    let mut terminating = apply_job("u2");
    terminating.metadata.deletion_timestamp = Some(Time(t0()));
    for job in [suspended(active(apply_job("u1"), 0)), terminating] {
        let snap = one_node(&NodeState::default(), vec![job], vec![]);
        let index = ExecutorIndex::build(&snap, &options());
        assert!(index.unfinished("demo", NODE, "baz", "1.1.0"));
        assert!(index.node_busy(NODE));
    }
}

#[test]
fn r2_3_node_busy_counts_any_nodewright_but_never_finished_jobs() {
    let mut other = demo();
    other.metadata.name = Some("other".into());
    let foreign = active(package_job(&other, "baz", Stage::Apply, NODE, "f1"), 0);
    let snap = one_node(&NodeState::default(), vec![foreign], vec![]);
    assert!(ExecutorIndex::build(&snap, &options()).node_busy(NODE));
    let retained = processed(complete(apply_job("u1"), 0));
    let snap = one_node(&NodeState::default(), vec![retained], vec![]);
    assert!(!ExecutorIndex::build(&snap, &options()).node_busy(NODE));
}

#[test]
fn r2_4_skipped_entry_never_starts_an_executor() {
    let state = at_stage(Stage::Interrupt, State::Skipped);
    let snap = one_node(&state, vec![], vec![]);
    let job = package_job(&demo(), "baz", Stage::PostInterrupt, NODE, "n");
    assert_eq!(
        decide(&snap, job, state.get("baz", "1.1.0")),
        CreateDecision::Wait(WaitReason::Skipped)
    );
}

#[test]
fn r2_6_create_carries_the_built_job() {
    let snap = one_node(&NodeState::default(), vec![], vec![]);
    let job = apply_job("n");
    match decide(&snap, job.clone(), None) {
        CreateDecision::Create(effects) => {
            assert!(
                matches!(&effects[..], [Effect::CreateJob { job: j, context, .. }]
                if j.to_job() == job && context.stage.as_deref() == Some("apply"))
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn r2_7_unfinished_matching_job_means_another_pass_won() {
    let existing = active(apply_job("u1"), 0);
    let snap = one_node(&NodeState::default(), vec![existing], vec![]);
    let index = ExecutorIndex::build(&snap, &options());
    let e = index
        .by_name("demo-baz-1-1-0-apply-worker-1-64dabc20")
        .unwrap();
    assert_eq!(
        jobs::create::existing_name_decision(e, &apply_job("n"), None),
        CreateDecision::Wait(WaitReason::AlreadyRunning)
    );
}

#[test]
fn r2_7_unfinished_mismatching_job_is_deleted_stale_spec() {
    let existing = active(apply_job("u1"), 0);
    let snap = one_node(&NodeState::default(), vec![existing], vec![]);
    let index = ExecutorIndex::build(&snap, &options());
    let e = index
        .by_name("demo-baz-1-1-0-apply-worker-1-64dabc20")
        .unwrap();
    let mut pkg = package("baz", "1.1.0");
    pkg.image = "other/image".into();
    let nw2 = demo_with(vec![pkg]);
    let wanted = package_job(&nw2, "baz", Stage::Apply, NODE, "n");
    let CreateDecision::ClearFirst(effects) =
        jobs::create::existing_name_decision(e, &wanted, None)
    else {
        panic!()
    };
    assert_eq!(deletions(&effects)[0].1, DeletionReason::StaleSpec);
}

#[test]
fn r2_7_unprocessed_finished_job_is_never_deleted_by_create() {
    let state = at_stage(Stage::Apply, State::InProgress);
    for job in [
        complete(apply_job("u1"), 0),
        failed(apply_job("u1"), "BackoffLimitExceeded", 4),
    ] {
        let snap = one_node(&state, vec![job], vec![]);
        assert_eq!(
            decide(&snap, apply_job("n"), state.get("baz", "1.1.0")),
            CreateDecision::Wait(WaitReason::UnrecordedOutcome)
        );
    }
}

#[test]
fn r2_7_timed_out_matching_job_absorbs_the_recreate() {
    let state = at_stage(Stage::Apply, State::Erroring);
    let timed_out = processed(failed(apply_job("u1"), "BackoffLimitExceeded", 4));
    let snap = one_node(&state, vec![timed_out], vec![]);
    assert_eq!(
        decide(&snap, apply_job("n"), state.get("baz", "1.1.0")),
        CreateDecision::Wait(WaitReason::TimedOut)
    );
}

#[test]
fn r2_7_other_processed_finished_job_is_cleared_with_rerun() {
    let state = at_stage(Stage::Apply, State::InProgress);
    for job in [
        processed(complete(apply_job("u1"), 0)),
        processed(failed(apply_job("u1"), "BackoffLimitExceeded", 4)),
    ] {
        let snap = one_node(&state, vec![job], vec![]);
        let CreateDecision::ClearFirst(effects) =
            decide(&snap, apply_job("n"), state.get("baz", "1.1.0"))
        else {
            panic!()
        };
        assert_eq!(
            deletions(&effects),
            [(
                "demo-baz-1-1-0-apply-worker-1-64dabc20".to_string(),
                DeletionReason::Rerun
            )]
        );
    }
}

#[test]
fn r2_8_clear_first_never_creates() {
    let state = at_stage(Stage::Apply, State::InProgress);
    let snap = one_node(
        &state,
        vec![processed(complete(apply_job("u1"), 0))],
        vec![],
    );
    let CreateDecision::ClearFirst(effects) =
        decide(&snap, apply_job("n"), state.get("baz", "1.1.0"))
    else {
        panic!()
    };
    assert!(
        !effects
            .iter()
            .any(|e| matches!(e, Effect::CreateJob { .. }))
    );
}

#[test]
fn r2_9_create_table_and_finished_predicate_agree_on_keeps() {
    let nw = demo();
    let cases = [
        (complete(apply_job("u1"), 0), State::InProgress),
        (
            failed(apply_job("u1"), "BackoffLimitExceeded", 4),
            State::InProgress,
        ),
        (
            processed(failed(apply_job("u1"), "BackoffLimitExceeded", 4)),
            State::Erroring,
        ),
    ];
    for (job, s) in cases {
        let state = at_stage(Stage::Apply, s);
        let snap = one_node(&state, vec![job], vec![]);
        let kept_by_create = matches!(
            decide(&snap, apply_job("n"), state.get("baz", "1.1.0")),
            CreateDecision::Wait(_)
        );
        let kept_by_sweep = sweep_of(&snap, &nw, &state).effects.is_empty();
        assert!(kept_by_create && kept_by_sweep);
    }
}

#[test]
fn r2_10_d21_never_emits_a_create_the_snapshot_shows_would_collide() {
    let state = at_stage(Stage::Apply, State::InProgress);
    let holders = [
        processed(complete(apply_job("u1"), 0)),
        complete(apply_job("u1"), 0),
        processed(failed(apply_job("u1"), "BackoffLimitExceeded", 4)),
        active(apply_job("u1"), 1),
    ];
    for holder in holders {
        let snap = one_node(&state, vec![holder], vec![]);
        let d = decide(&snap, apply_job("n"), state.get("baz", "1.1.0"));
        assert!(!matches!(d, CreateDecision::Create(_)), "{d:?}");
    }
}

// ---------------------------------------------------------------- §3 completion

#[test]
fn r3_1_dispatch_order_terminating_invalid_processed() {
    let state = at_stage(Stage::Apply, State::InProgress);
    let mut terminating = complete(apply_job("u1"), 0);
    terminating.metadata.deletion_timestamp = Some(Time(t0()));
    assert!(
        outs(&one_node(&state, vec![terminating], vec![]))
            .items
            .is_empty()
    );
    let mut invalid = complete(apply_job("u1"), 0);
    let mut p = jobs::PackageAnnotation::parse(
        &invalid.metadata.annotations.as_ref().unwrap()[keys::PACKAGE],
    )
    .unwrap();
    p.invalid = true;
    invalid = annotate(invalid, keys::PACKAGE, &p.to_json());
    let o = outs(&one_node(&state, vec![invalid], vec![]));
    assert_eq!(
        deletions(&all_effects(&o)),
        [(
            "demo-baz-1-1-0-apply-worker-1-64dabc20".to_string(),
            DeletionReason::StaleSpec
        )]
    );
    let done = processed(complete(apply_job("u1"), 0));
    assert!(outs(&one_node(&state, vec![done], vec![])).items.is_empty());
}

#[test]
fn r3_2_completion_is_read_from_the_job_condition_not_pods() {
    let state = at_stage(Stage::Apply, State::InProgress);
    let o = outs(&one_node(
        &state,
        vec![complete(apply_job("u1"), 0)],
        vec![],
    ));
    assert_eq!(
        state_outcome(&o).unwrap().kind,
        OutcomeKind::Completed { attempts: 0 }
    );
}

#[test]
fn r3_3_guard_absent_other_stage_or_complete_writes_nothing() {
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::InProgress),
        vec![complete(apply_job("u1"), 0)],
        vec![],
    ));
    let outcome = state_outcome(&o).unwrap();
    let nw = demo();
    for state in [
        NodeState::default(),
        at_stage(Stage::Config, State::InProgress),
        at_stage(Stage::Apply, State::Complete),
    ] {
        assert!(jobs::entry_changes(outcome, Some(&nw), &state).is_empty());
    }
    let changes = jobs::entry_changes(
        outcome,
        Some(&nw),
        &at_stage(Stage::Apply, State::InProgress),
    );
    assert_eq!(changes.len(), 1);
    assert_eq!(
        changes[0].set.as_ref().unwrap().state,
        Some(State::Complete)
    );
}

#[test]
fn r3_4_upgrade_completion_removes_other_versions() {
    let nw = demo_with(vec![package("baz", "1.2.0")]);
    let job = complete(package_job(&nw, "baz", Stage::Upgrade, NODE, "u1"), 0);
    let state = doc(vec![
        entry("baz", "1.1.0", Stage::Config, State::Complete, 0),
        entry("baz", "1.2.0", Stage::Upgrade, State::InProgress, 0),
    ]);
    let snap = snapshot(
        nw.clone(),
        vec![node(NODE, Some(&state))],
        vec![job],
        vec![],
    );
    let o = outs(&snap);
    let changes = jobs::entry_changes(state_outcome(&o).unwrap(), Some(&nw), &state);
    assert_eq!(changes.len(), 2);
    assert_eq!(
        (changes[0].key.as_str(), changes[0].set.is_none()),
        ("baz|1.1.0", true)
    );
    assert_eq!(
        changes[1].set.as_ref().unwrap().state,
        Some(State::Complete)
    );
}

#[test]
fn r3_4_uninstall_completion_advances_or_removes() {
    let mut with_interrupt = package("baz", "1.1.0");
    with_interrupt.interrupt = Some(service_interrupt(&["x"]));
    let state = at_stage(Stage::Uninstall, State::InProgress);
    for (nw, expect_advance) in [
        (demo_with(vec![with_interrupt]), true),
        (demo(), false),
        (demo_with(vec![]), false),
    ] {
        let job = complete(package_job(&demo(), "baz", Stage::Uninstall, NODE, "u1"), 0);
        let snap = snapshot(
            nw.clone(),
            vec![node(NODE, Some(&state))],
            vec![job],
            vec![],
        );
        let o = outs(&snap);
        let changes = jobs::entry_changes(state_outcome(&o).unwrap(), Some(&nw), &state);
        assert_eq!(changes.len(), 1);
        match &changes[0].set {
            Some(e) => {
                assert!(expect_advance);
                assert_eq!(
                    (e.stage, e.state),
                    (Stage::UninstallInterrupt, Some(State::InProgress))
                );
            }
            None => assert!(!expect_advance),
        }
    }
}

#[test]
fn r3_4_interrupt_completion_promotes_skipped_but_never_recreates_its_entry() {
    let nw = demo_with(vec![package("baz", "1.1.0"), package("qux", "2.0.0")]);
    let job = complete(
        interrupt_job(&nw, "baz", &service_interrupt(&["a"]), NODE, "u1"),
        0,
    );
    let state = doc(vec![entry(
        "qux",
        "2.0.0",
        Stage::Interrupt,
        State::Skipped,
        0,
    )]);
    let snap = snapshot(
        nw.clone(),
        vec![node(NODE, Some(&state))],
        vec![job],
        vec![],
    );
    let o = outs(&snap);
    let outcome = state_outcome(&o).unwrap();
    assert!(matches!(
        outcome.kind,
        OutcomeKind::InterruptCompleted { .. }
    ));
    let changes = jobs::entry_changes(outcome, Some(&nw), &state);
    assert_eq!(
        changes.len(),
        1,
        "only the skipped sibling; baz's absent entry is not recreated"
    );
    assert_eq!(changes[0].key, "qux|2.0.0");
    assert_eq!(
        changes[0].set.as_ref().unwrap().state,
        Some(State::Complete)
    );
    assert!(
        jobs::entry_changes(outcome, None, &state).is_empty(),
        "no promotion once the NodeWright is gone"
    );
    let events = jobs::record_events(outcome, &changes);
    assert!(
        matches!(&events[0], Effect::Event(e) if e.message.contains("promoted packages skipped"))
    );
}

#[test]
fn r3_5_marker_and_success_ttl_in_one_patch() {
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::InProgress),
        vec![complete(apply_job("u1"), 0)],
        vec![],
    ));
    let after = &state_outcome(&o).unwrap().after_state;
    assert_eq!(after.len(), 1);
    assert!(is_marker(&after[0], 3600));
}

#[test]
fn r3_5_marker_after_node_state() {
    // The marker is never part of the state write: it is only in after_state, which the lifecycle
    // emits after the PatchNode carrying entry_changes.
    let state = at_stage(Stage::Apply, State::InProgress);
    let o = outs(&one_node(
        &state,
        vec![complete(apply_job("u1"), 0)],
        vec![],
    ));
    let outcome = state_outcome(&o).unwrap();
    assert!(!jobs::entry_changes(outcome, Some(&demo()), &state).is_empty());
    assert!(
        outcome
            .after_state
            .iter()
            .all(|e| !matches!(e, Effect::PatchNode(_)))
    );
    assert!(is_marker(outcome.after_state.last().unwrap(), 3600));
}

#[test]
fn r3_6_crash_between_state_and_marker_writes_only_the_marker() {
    // A21: the node write landed, the marker did not; the next pass sees entry complete.
    let state = at_stage(Stage::Apply, State::Complete);
    let o = outs(&one_node(
        &state,
        vec![complete(apply_job("u1"), 0)],
        vec![],
    ));
    let outcome = state_outcome(&o).unwrap();
    assert!(jobs::entry_changes(outcome, Some(&demo()), &state).is_empty());
    assert!(is_marker(&outcome.after_state[0], 3600));
}

#[test]
fn r3_7_node_gone_marks_processed_only() {
    let snap = snapshot(demo(), vec![], vec![complete(apply_job("u1"), 0)], vec![]);
    let o = outs(&snap);
    assert_eq!(o.items[0].kind, OutcomeKind::JobOnly);
    assert!(is_marker(o.items[0].after_state.last().unwrap(), 3600));
}

#[test]
fn r3_8_missing_package_annotation_marks_processed() {
    let mut job = complete(apply_job("u1"), 0);
    job.metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(keys::PACKAGE);
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::InProgress),
        vec![job],
        vec![],
    ));
    assert_eq!(o.items[0].kind, OutcomeKind::JobOnly);
}

#[test]
fn r3_9_events_only_for_written_entries() {
    let state = at_stage(Stage::Apply, State::InProgress);
    let o = outs(&one_node(
        &state,
        vec![complete(apply_job("u1"), 0)],
        vec![],
    ));
    let outcome = state_outcome(&o).unwrap();
    assert!(jobs::record_events(outcome, &[]).is_empty());
    let changes = jobs::entry_changes(outcome, Some(&demo()), &state);
    let events = jobs::record_events(outcome, &changes);
    assert!(matches!(&events[..], [Effect::Event(e)]
        if e.message == "Package [baz:1.1.0] state complete on [nodewright:demo]" && e.action == "JobComplete"));
}

#[test]
fn r3_10_attempt_count_is_status_failed() {
    let state = at_stage(Stage::Apply, State::InProgress);
    let o = outs(&one_node(
        &state,
        vec![complete(apply_job("u1"), 2)],
        vec![],
    ));
    let changes = jobs::entry_changes(state_outcome(&o).unwrap(), Some(&demo()), &state);
    assert_eq!(changes[0].set.as_ref().unwrap().restarts, 2);
}

#[test]
fn r3_11_outcomes_are_a_pure_function_of_the_snapshot() {
    let state = at_stage(Stage::Apply, State::InProgress);
    let jobs_list = vec![
        complete(apply_job("u1"), 0),
        active(
            package_job(&demo(), "baz", Stage::Config, "worker-2", "u2"),
            1,
        ),
    ];
    let a = outs(&snapshot(
        demo(),
        vec![node(NODE, Some(&state)), node("worker-2", Some(&state))],
        jobs_list.clone(),
        vec![],
    ));
    let mut reversed = jobs_list;
    reversed.reverse();
    let b = outs(&snapshot(
        demo(),
        vec![node("worker-2", Some(&state)), node(NODE, Some(&state))],
        reversed,
        vec![],
    ));
    assert_eq!(a, b);
}

// ---------------------------------------------------------------- §4 failures

fn failing_job_with(
    pods: &[(&str, i64, k8s_openapi::api::core::v1::PodStatus)],
    failed_count: i32,
    terminal: bool,
) -> (Job, Vec<Pod>) {
    let base = apply_job("u1");
    let job = if terminal {
        failed(base, "BackoffLimitExceeded", failed_count)
    } else {
        active(base, failed_count)
    };
    let pods = pods
        .iter()
        .map(|(n, t, s)| pod_of(&job, n, at(*t), s.clone()))
        .collect();
    (job, pods)
}

#[test]
fn r4_1_1_operator_never_recreates_pods() {
    let (job, pods) = failing_job_with(&[("p1", 0, genuine_failure())], 1, false);
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::InProgress),
        vec![job],
        pods,
    ));
    assert!(
        !all_effects(&o)
            .iter()
            .any(|e| matches!(e, Effect::CreateJob { .. }))
    );
}

#[test]
fn r4_1_2_budget_exhaustion_by_admission_refusals_is_not_a_timeout() {
    let (job, pods) = failing_job_with(
        &[
            ("p1", 0, admission_refusal()),
            ("p2", 10, admission_refusal()),
        ],
        4,
        true,
    );
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::InProgress),
        vec![job],
        pods,
    ));
    assert_eq!(o.items[0].kind, OutcomeKind::JobOnly);
    assert!(is_marker(o.items[0].after_state.last().unwrap(), 86400));
}

#[test]
fn r4_1_3_crash_loop_times_out_after_backoff_limit_plus_one_attempts() {
    let pods: Vec<_> = (0..4)
        .map(|i| {
            (
                ["p1", "p2", "p3", "p4"][i],
                i as i64 * 20,
                genuine_failure(),
            )
        })
        .collect();
    let (job, pods) = failing_job_with(&pods, 4, true);
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::Erroring),
        vec![job],
        pods,
    ));
    assert_eq!(
        state_outcome(&o).unwrap().kind,
        OutcomeKind::TerminalFailed {
            reason: "BackoffLimitExceeded".into(),
            restarts: Some(4)
        }
    );
}

#[test]
fn r4_2_1_r4_2_2_r4_2_3_three_failure_classes() {
    let job = apply_job("u");
    let class = |s| classify::failure_class(&pod_of(&job, "p", t0(), s).into());
    assert_eq!(class(disrupted()), Some(PodFailureClass::Disruption));
    assert_eq!(
        class(admission_refusal()),
        Some(PodFailureClass::AdmissionRefusal)
    );
    assert_eq!(class(genuine_failure()), Some(PodFailureClass::Genuine));
    assert_eq!(class(deadline_kill()), Some(PodFailureClass::Genuine));
    assert_eq!(class(status("Running", Some(t0()), vec![])), None);
}

#[test]
fn r4_3_1_genuine_predicate() {
    let job = apply_job("u");
    let p = |s| -> nodewright_core::SlimPod { pod_of(&job, "p", t0(), s).into() };
    assert!(jobs::pod_failed_genuinely(&p(genuine_failure())));
    let oom = status(
        "Failed",
        Some(t0()),
        vec![terminated("baz-init", 137, "OOMKilled", t0())],
    );
    assert!(jobs::pod_failed_genuinely(&p(oom)));
    let unknown = status(
        "Failed",
        Some(t0()),
        vec![terminated("baz-init", 137, "ContainerStatusUnknown", t0())],
    );
    assert!(!jobs::pod_failed_genuinely(&p(unknown)));
    let crash = status(
        "Failed",
        Some(t0()),
        vec![waiting("interrupt", "CrashLoopBackOff", "", 3)],
    );
    assert!(jobs::pod_failed_genuinely(&p(crash)));
    assert!(!jobs::pod_failed_genuinely(&p(disrupted())));
    assert!(!jobs::pod_failed_genuinely(&p(admission_refusal())));
}

#[test]
fn r4_3_2_deadline_kill_is_genuine_without_exit_code() {
    let job = apply_job("u");
    assert!(jobs::pod_failed_genuinely(
        &pod_of(&job, "p", t0(), deadline_kill()).into()
    ));
}

#[test]
fn r4_3_3_in_flight_failure_marks_entry_erroring_but_not_node() {
    let (job, pods) = failing_job_with(&[("p1", 0, genuine_failure())], 1, false);
    let state = at_stage(Stage::Apply, State::InProgress);
    let o = outs(&one_node(&state, vec![job], pods));
    let outcome = state_outcome(&o).unwrap();
    assert!(
        matches!(&outcome.kind, OutcomeKind::AttemptFailed { restarts: Some(1), evidence } if evidence.container == "baz-apply")
    );
    let changes = jobs::entry_changes(outcome, Some(&demo()), &state);
    let set = changes[0].set.as_ref().unwrap();
    assert_eq!((set.state, set.restarts), (Some(State::Erroring), 1));
    let events = jobs::record_events(outcome, &changes);
    assert!(matches!(&events[0], Effect::Event(e) if e.action == "UpdateNodeState"));
}

#[test]
fn r4_3_4_in_flight_guard_present_same_stage_not_complete() {
    let (job, pods) = failing_job_with(&[("p1", 0, genuine_failure())], 1, false);
    for state in [
        NodeState::default(),
        at_stage(Stage::Config, State::InProgress),
        at_stage(Stage::Apply, State::Complete),
    ] {
        let o = outs(&one_node(&state, vec![job.clone()], pods.clone()));
        assert!(state_outcome(&o).is_none(), "{state:?}");
    }
}

#[test]
fn r4_3_5_evidence_never_deletes_the_live_pod_or_records_completion() {
    let (job, pods) = failing_job_with(&[("p1", 0, genuine_failure())], 1, false);
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::InProgress),
        vec![job],
        pods,
    ));
    assert!(
        !all_effects(&o)
            .iter()
            .any(|e| matches!(e, Effect::DeletePod { .. }))
    );
    assert!(
        !o.items
            .iter()
            .any(|x| matches!(x.kind, OutcomeKind::Completed { .. }))
    );
}

#[test]
fn r4_3_6_silent_for_terminating_disrupted_refused_and_unknown() {
    let mut terminating = genuine_failure();
    terminating.phase = Some("Running".into());
    let unknown = status(
        "Failed",
        Some(t0()),
        vec![terminated("baz-init", 137, "ContainerStatusUnknown", t0())],
    );
    for (s, delete) in [
        (terminating, true),
        (disrupted(), false),
        (admission_refusal(), false),
        (unknown, false),
    ] {
        let (job, mut pods) = failing_job_with(&[("p1", 0, s)], 0, false);
        if delete {
            pods[0].metadata.deletion_timestamp = Some(Time(t0()));
        }
        let o = outs(&one_node(
            &at_stage(Stage::Apply, State::InProgress),
            vec![job],
            pods,
        ));
        assert!(state_outcome(&o).is_none());
    }
}

#[test]
fn r4_3_7_hard_crash_137_error_reads_erroring() {
    let crash = status(
        "Failed",
        Some(t0()),
        vec![terminated("baz-init", 137, "Error", t0())],
    );
    let (job, pods) = failing_job_with(&[("p1", 0, crash)], 1, false);
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::InProgress),
        vec![job],
        pods,
    ));
    assert!(matches!(
        state_outcome(&o).unwrap().kind,
        OutcomeKind::AttemptFailed { .. }
    ));
}

fn pulling(started: Timestamp) -> k8s_openapi::api::core::v1::PodStatus {
    status(
        "Pending",
        Some(started),
        vec![waiting(
            "baz-init",
            "ImagePullBackOff",
            "manifest unknown",
            0,
        )],
    )
}

#[test]
fn r4_3_8_image_pull_grace_d13() {
    let (job, pods) = failing_job_with(&[("p1", 0, pulling(t0()))], 0, false);
    let snap = one_node(&at_stage(Stage::Apply, State::InProgress), vec![job], pods);
    let early = outs_at(&snap, &options(), at(60));
    assert!(state_outcome(&early).is_none());
    assert_eq!(early.requeue_after, Some(Duration::from_secs(240)));
    let late = outs_at(&snap, &options(), at(300));
    let outcome = state_outcome(&late).unwrap();
    assert!(
        matches!(&outcome.kind, OutcomeKind::AttemptFailed { evidence, .. } if evidence.reason == "ImagePullBackOff")
    );
    assert!(outcome.after_state.iter().any(|e| matches!(e, Effect::PatchJob { annotations, .. }
        if annotations.get(keys::LAST_FAILURE) == Some(&Some("baz-init: ImagePullBackOff: manifest unknown".into())))));
    let mut disabled = options();
    disabled.job_image_pull_grace = Duration::ZERO;
    assert!(state_outcome(&outs_at(&snap, &disabled, at(100_000))).is_none());
}

#[test]
fn r4_3_8_grace_measured_from_previous_init_container_finish() {
    let s = status(
        "Pending",
        Some(t0()),
        vec![
            terminated("baz-init", 0, "Completed", at(200)),
            waiting("baz-apply", "ErrImagePull", "denied", 0),
        ],
    );
    let (job, pods) = failing_job_with(&[("p1", 0, s)], 0, false);
    let snap = one_node(&at_stage(Stage::Apply, State::InProgress), vec![job], pods);
    assert!(state_outcome(&outs_at(&snap, &options(), at(400))).is_none());
    assert!(state_outcome(&outs_at(&snap, &options(), at(500))).is_some());
}

#[test]
fn r4_3_9_last_failure_records_waiting_reason_once() {
    let s = status(
        "Pending",
        Some(t0()),
        vec![waiting(
            "baz-init",
            "CreateContainerConfigError",
            "secret \"x\" not found",
            0,
        )],
    );
    let (job, pods) = failing_job_with(&[("p1", 0, s.clone())], 0, false);
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::InProgress),
        vec![job.clone()],
        pods.clone(),
    ));
    assert!(state_outcome(&o).is_none(), "evidence only");
    let effects = job_only_effects(&o);
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Event(ev) if ev.warning))
    );
    let recorded = annotate(
        job,
        keys::LAST_FAILURE,
        "baz-init: CreateContainerConfigError: secret \"x\" not found",
    );
    let again = outs(&one_node(
        &at_stage(Stage::Apply, State::InProgress),
        vec![recorded],
        pods,
    ));
    assert!(
        job_only_effects(&again).is_empty(),
        "write only when the value changes"
    );
    let benign = status(
        "Pending",
        Some(t0()),
        vec![waiting("baz-init", "PodInitializing", "", 0)],
    );
    let (job, pods) = failing_job_with(&[("p1", 0, benign)], 0, false);
    assert!(
        outs(&one_node(
            &at_stage(Stage::Apply, State::InProgress),
            vec![job],
            pods
        ))
        .items
        .is_empty()
    );
}

#[test]
fn r4_4_1_genuine_terminal_verdict_sources() {
    // (a) a genuine archive; (b) entry already erroring with no pods left; (c) D18 annotation.
    let (job, pods) = failing_job_with(&[("p1", 0, genuine_failure())], 4, true);
    assert!(matches!(
        state_outcome(&outs(&one_node(
            &at_stage(Stage::Apply, State::InProgress),
            vec![job.clone()],
            pods
        )))
        .unwrap()
        .kind,
        OutcomeKind::TerminalFailed { .. }
    ));
    assert!(matches!(
        state_outcome(&outs(&one_node(
            &at_stage(Stage::Apply, State::Erroring),
            vec![job],
            vec![]
        )))
        .unwrap()
        .kind,
        OutcomeKind::TerminalFailed { .. }
    ));
    let nw = demo();
    let int = annotate(
        failed(
            interrupt_job(&nw, "baz", &service_interrupt(&["a"]), NODE, "i"),
            "BackoffLimitExceeded",
            0,
        ),
        keys::RESTART_LIMIT_EXCEEDED,
        "3",
    );
    assert!(matches!(
        state_outcome(&outs(&one_node(
            &at_stage(Stage::Interrupt, State::InProgress),
            vec![int],
            vec![]
        )))
        .unwrap()
        .kind,
        OutcomeKind::TerminalFailed { restarts: None, .. }
    ));
}

#[test]
fn r4_4_2_genuine_terminal_failure_keeps_the_job_with_failure_ttl() {
    let (job, pods) = failing_job_with(&[("p1", 0, genuine_failure())], 4, true);
    let state = at_stage(Stage::Apply, State::Erroring);
    let o = outs(&one_node(&state, vec![job], pods));
    let outcome = state_outcome(&o).unwrap();
    assert!(deletions(&outcome.after_state).is_empty());
    assert!(is_marker(outcome.after_state.last().unwrap(), 86400));
    let changes = jobs::entry_changes(outcome, Some(&demo()), &state);
    assert_eq!(
        changes.len(),
        1,
        "written even when already erroring so the node turns erroring"
    );
    assert_eq!(changes[0].set.as_ref().unwrap().restarts, 4);
}

#[test]
fn r4_4_3_not_genuine_terminal_failure_marks_only() {
    let (job, pods) = failing_job_with(&[("p1", 0, admission_refusal())], 4, true);
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::InProgress),
        vec![job],
        pods,
    ));
    assert_eq!(o.items.len(), 1);
    assert_eq!(o.items[0].kind, OutcomeKind::JobOnly);
}

#[test]
fn r4_4_4_node_gone_on_failure_marks_only() {
    let (job, pods) = failing_job_with(&[("p1", 0, genuine_failure())], 4, true);
    let o = outs(&snapshot(demo(), vec![], vec![job], pods));
    assert_eq!(o.items[0].kind, OutcomeKind::JobOnly);
    assert!(is_marker(o.items[0].after_state.last().unwrap(), 86400));
}

#[test]
fn r4_4_5_terminal_path_survives_archive_gc_through_the_erroring_entry() {
    let (job, _) = failing_job_with(&[], 4, true);
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::Erroring),
        vec![job],
        vec![],
    ));
    assert!(matches!(
        state_outcome(&o).unwrap().kind,
        OutcomeKind::TerminalFailed { .. }
    ));
}

#[test]
fn r4_4_6_terminal_failure_never_regresses_a_completion() {
    let (job, pods) = failing_job_with(&[("p1", 0, genuine_failure())], 4, true);
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::InProgress),
        vec![job],
        pods,
    ));
    let outcome = state_outcome(&o).unwrap();
    assert!(
        jobs::entry_changes(
            outcome,
            Some(&demo()),
            &at_stage(Stage::Apply, State::Complete)
        )
        .is_empty()
    );
}

#[test]
fn r4_5_1_prune_keeps_first_and_latest_genuine_archive() {
    let pods = [
        ("p1", 0, genuine_failure()),
        ("p2", 10, genuine_failure()),
        ("p3", 20, genuine_failure()),
        ("p4", 30, genuine_failure()),
    ];
    let (job, pods) = failing_job_with(&pods, 4, false);
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::Erroring),
        vec![job],
        pods,
    ));
    let pruned: Vec<_> = all_effects(&o)
        .into_iter()
        .filter_map(|e| match e {
            Effect::DeletePod {
                name,
                reason: DeletionReason::ArchivePrune,
                ..
            } => Some(name),
            _ => None,
        })
        .collect();
    assert_eq!(pruned, ["p2", "p3"]);
}

#[test]
fn r4_5_2_non_genuine_pods_are_neither_kept_nor_pruned() {
    let pods = [
        ("p1", 0, genuine_failure()),
        ("p2", 10, admission_refusal()),
        ("p3", 20, disrupted()),
        ("p4", 30, genuine_failure()),
    ];
    let (job, pods) = failing_job_with(&pods, 3, false);
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::Erroring),
        vec![job],
        pods,
    ));
    assert!(
        !all_effects(&o)
            .iter()
            .any(|e| matches!(e, Effect::DeletePod { .. }))
    );
}

#[test]
fn r4_5_3_footprint_at_most_two_archives_also_at_terminal_processing() {
    let pods = [
        ("p1", 0, genuine_failure()),
        ("p2", 10, genuine_failure()),
        ("p3", 20, genuine_failure()),
    ];
    let (job, pods) = failing_job_with(&pods, 4, true);
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::Erroring),
        vec![job],
        pods,
    ));
    let after = &state_outcome(&o).unwrap().after_state;
    assert!(
        matches!(&after[0], Effect::DeletePod { name, .. } if name == "p2"),
        "pruned before the marker"
    );
    assert!(is_marker(after.last().unwrap(), 86400));
}

#[test]
fn r4_5_4_restarts_follow_status_failed_for_package_jobs_only() {
    let (job, pods) = failing_job_with(
        &[
            ("p1", 0, admission_refusal()),
            ("p2", 5, status("Running", Some(at(5)), vec![])),
        ],
        1,
        false,
    );
    let state = at_stage(Stage::Apply, State::InProgress);
    let o = outs(&one_node(&state, vec![job], pods));
    let outcome = state_outcome(&o).unwrap();
    assert_eq!(outcome.kind, OutcomeKind::Restarts { restarts: 1 });
    let changes = jobs::entry_changes(outcome, Some(&demo()), &state);
    let set = changes[0].set.as_ref().unwrap();
    assert_eq!((set.state, set.restarts), (Some(State::InProgress), 1));
    let nw = demo();
    let int = active(
        interrupt_job(&nw, "baz", &service_interrupt(&["a"]), NODE, "i"),
        2,
    );
    let o = outs(&one_node(
        &at_stage(Stage::Interrupt, State::InProgress),
        vec![int],
        vec![],
    ));
    assert!(state_outcome(&o).is_none());
}

#[test]
fn r4_6_1_r4_6_4_interrupt_failure_target_records_waiting_reason_as_last_logs() {
    let nw = demo();
    let job = failure_target(
        interrupt_job(&nw, "baz", &service_interrupt(&["a"]), NODE, "i"),
        t0(),
    );
    let pod = pod_of(
        &job,
        "p1",
        t0(),
        status(
            "Pending",
            Some(t0()),
            vec![waiting("interrupt", "ImagePullBackOff", "not found", 0)],
        ),
    );
    let o = outs_at(
        &one_node(
            &at_stage(Stage::Interrupt, State::InProgress),
            vec![job],
            vec![pod],
        ),
        &options(),
        at(10),
    );
    let patches: Vec<_> = all_effects(&o)
        .into_iter()
        .filter_map(|e| match e {
            Effect::PatchJob { annotations, .. } if annotations.contains_key(keys::LAST_LOGS) => {
                Some(annotations)
            }
            _ => None,
        })
        .collect();
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0].len(), 1, "a merge patch of one annotation");
}

#[test]
fn r4_6_2_stale_failure_target_records_erroring_without_marker() {
    let job = failure_target(apply_job("u1"), t0());
    let snap = one_node(
        &at_stage(Stage::Apply, State::InProgress),
        vec![job],
        vec![],
    );
    let early = outs_at(&snap, &options(), at(60));
    assert!(state_outcome(&early).is_none());
    assert_eq!(early.requeue_after, Some(Duration::from_secs(241)));
    let late = outs_at(&snap, &options(), at(301));
    let outcome = state_outcome(&late).unwrap();
    assert!(
        matches!(&outcome.kind, OutcomeKind::TerminalFailed { reason, .. } if reason == "FailureTarget")
    );
    assert!(!outcome.after_state.iter().any(|e| is_marker(e, 86400)));
}

#[test]
fn r4_6_3_package_jobs_get_no_last_logs_snapshot() {
    let job = failure_target(apply_job("u1"), t0());
    let pod = pod_of(&job, "p1", t0(), pulling(t0()));
    let o = outs_at(
        &one_node(
            &at_stage(Stage::Apply, State::InProgress),
            vec![job],
            vec![pod],
        ),
        &options(),
        at(10),
    );
    assert!(!all_effects(&o).iter().any(|e| matches!(e, Effect::PatchJob { annotations, .. } if annotations.contains_key(keys::LAST_LOGS))));
}

#[test]
fn r4_7_1_archives_remain_readable_after_terminal_processing() {
    let pods = [("p1", 0, genuine_failure()), ("p2", 10, genuine_failure())];
    let (job, pods) = failing_job_with(&pods, 4, true);
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::Erroring),
        vec![job],
        pods,
    ));
    assert!(
        !all_effects(&o)
            .iter()
            .any(|e| matches!(e, Effect::DeletePod { .. }))
    );
}

// ---------------------------------------------------------------- §5 finished-Job rules

#[test]
fn r5_1_every_sweep_deletion_carries_a_reason() {
    let state = at_stage(Stage::Apply, State::InProgress);
    let snap = snapshot(
        demo(),
        vec![node(NODE, Some(&state))],
        vec![
            processed(complete(apply_job("u1"), 0)),
            active(package_job(&demo(), "baz", Stage::Apply, "gone", "u2"), 0),
        ],
        vec![],
    );
    let sw = sweep_of(&snap, &demo(), &state);
    let d = deletions(&sw.effects);
    assert_eq!(d.len(), 2);
    assert!(d.iter().any(|(_, r)| *r == DeletionReason::OrphanedNode));
    assert!(d.iter().any(|(_, r)| *r == DeletionReason::Rerun));
}

#[test]
fn r5_2_finished_predicate_steps() {
    let nw = demo();
    // step 1: unprocessed kept
    let state = at_stage(Stage::Apply, State::InProgress);
    assert!(
        sweep_of(
            &one_node(&state, vec![complete(apply_job("u1"), 0)], vec![]),
            &nw,
            &state
        )
        .effects
        .is_empty()
    );
    // step 2: timed out and matching kept
    let erroring = at_stage(Stage::Apply, State::Erroring);
    let timed_out = processed(failed(apply_job("u1"), "BackoffLimitExceeded", 4));
    assert!(
        sweep_of(
            &one_node(&erroring, vec![timed_out.clone()], vec![]),
            &nw,
            &erroring
        )
        .effects
        .is_empty()
    );
    // step 2 fails once the package's fingerprint changed: the timed-out Job is released
    let mut pkg = package("baz", "1.1.0");
    pkg.env = vec![k8s_openapi::api::core::v1::EnvVar {
        name: "FIX".into(),
        value: Some("1".into()),
        value_from: None,
    }];
    let edited = demo_with(vec![pkg]);
    let snap = snapshot(
        edited.clone(),
        vec![node(NODE, Some(&erroring))],
        vec![timed_out],
        vec![],
    );
    assert_eq!(
        deletions(&sweep_of(&snap, &edited, &erroring).effects)[0].1,
        DeletionReason::Rerun
    );
}

#[test]
fn r5_2a_d10_retains_jobs_whose_stage_is_done_or_whose_entry_is_absent() {
    let nw = demo();
    let job = processed(complete(apply_job("u1"), 0));
    for state in [
        NodeState::default(),
        at_stage(Stage::Config, State::InProgress),
        at_stage(Stage::Apply, State::Complete),
    ] {
        assert!(
            sweep_of(&one_node(&state, vec![job.clone()], vec![]), &nw, &state)
                .effects
                .is_empty(),
            "{state:?}"
        );
    }
}

#[test]
fn r5_3_clobbered_completion_self_heals_by_rerun() {
    let state = at_stage(Stage::Apply, State::InProgress);
    let snap = one_node(
        &state,
        vec![processed(complete(apply_job("u1"), 0))],
        vec![],
    );
    assert_eq!(
        deletions(&sweep_of(&snap, &demo(), &state).effects)[0].1,
        DeletionReason::Rerun
    );
}

#[test]
fn d21_k22_rerun_deletion_asks_for_a_fresh_read_of_the_entry() {
    let state = at_stage(Stage::Apply, State::InProgress);
    let snap = one_node(
        &state,
        vec![processed(complete(apply_job("u1"), 0))],
        vec![],
    );
    let effects = sweep_of(&snap, &demo(), &state).effects;
    let Some(Effect::DeleteJob {
        confirm: Some(check),
        ..
    }) = effects.first()
    else {
        panic!("a re-run deletion carries its entry check: {effects:?}");
    };
    assert_eq!(check.node, NODE);
    assert_eq!(check.stage, Stage::Apply);
    let entry = state.0.values().next().cloned().unwrap();
    assert_eq!(
        (check.package.as_str(), check.version.as_str()),
        (entry.name.as_str(), entry.version.as_str())
    );
    // The fresh read decides: open at the stage → delete; recorded meanwhile → keep.
    assert!(check.holds(&snap.nodes[0]));
    let recorded = at_stage(Stage::Apply, State::Complete);
    let later = one_node(&recorded, vec![], vec![]);
    assert!(!check.holds(&later.nodes[0]));
}

/// Issue 13 finding 7: this pass's outcome write moved the entry onto the stage of a finished Job
/// of an earlier cycle (T11: uninstall done -> uninstall-interrupt). The node holds the entry where
/// the snapshot has it until that write lands (after the deletion), so the fresh-read check must
/// confirm the recorded entry; checking the working one refused the deletion on every pass.
#[test]
fn d21_rerun_deletion_of_an_earlier_cycle_job_confirms_the_recorded_entry() {
    let working = at_stage(Stage::Config, State::InProgress);
    let recorded = at_stage(Stage::Apply, State::InProgress);
    let old = processed(complete(
        package_job(&demo(), "baz", Stage::Config, NODE, "earlier"),
        0,
    ));
    let snap = one_node(&recorded, vec![old], vec![]);
    let o = options();
    let index = ExecutorIndex::build(&snap, &o);
    let selected: BTreeSet<String> = [NODE.to_string()].into();
    let sw = jobs::sweep_split(
        &index,
        &demo(),
        |n| selected.contains(n),
        |_| Some(&working),
        |_| Some(&recorded),
        &o,
    );
    let Some(Effect::DeleteJob {
        reason: DeletionReason::Rerun,
        confirm: Some(check),
        ..
    }) = sw.effects.first()
    else {
        panic!(
            "the earlier cycle's Job is deleted for the re-run: {:?}",
            sw.effects
        );
    };
    assert_eq!(check.stage, Stage::Apply);
    assert!(
        check.holds(&snap.nodes[0]),
        "the node holds the recorded entry"
    );
    // Without the projection split the check asks for the working stage the node lacks.
    let plain = sweep_of(&snap, &demo(), &working).effects;
    let Some(Effect::DeleteJob {
        confirm: Some(stale),
        ..
    }) = plain.first()
    else {
        panic!("{plain:?}");
    };
    assert!(!stale.holds(&snap.nodes[0]));
}

#[test]
fn r5_4_non_genuine_failed_job_is_swept_and_rerun() {
    let state = at_stage(Stage::Apply, State::InProgress);
    let snap = one_node(
        &state,
        vec![processed(failed(
            apply_job("u1"),
            "BackoffLimitExceeded",
            4,
        ))],
        vec![],
    );
    assert_eq!(
        deletions(&sweep_of(&snap, &demo(), &state).effects)[0].1,
        DeletionReason::Rerun
    );
}

#[test]
fn r5_5_after_ttl_expiry_the_erroring_stage_gets_a_fresh_job() {
    let state = at_stage(Stage::Apply, State::Erroring);
    let snap = one_node(&state, vec![], vec![]);
    assert!(matches!(
        decide(&snap, apply_job("n"), state.get("baz", "1.1.0")),
        CreateDecision::Create(_)
    ));
}

#[test]
fn r5_6_orphaned_node_sweep_regardless_of_status() {
    let state = NodeState::default();
    for job in [
        active(package_job(&demo(), "baz", Stage::Apply, "gone", "u"), 0),
        complete(package_job(&demo(), "baz", Stage::Apply, "gone", "u"), 0),
    ] {
        let snap = one_node(&state, vec![job], vec![]);
        assert_eq!(
            deletions(&sweep_of(&snap, &demo(), &state).effects)[0].1,
            DeletionReason::OrphanedNode
        );
    }
}

#[test]
fn r5_7_reboot_reset_deletes_every_job_of_the_nodewright_on_the_node() {
    let snap = one_node(
        &NodeState::default(),
        vec![
            complete(apply_job("u1"), 0),
            active(package_job(&demo(), "baz", Stage::Config, NODE, "u2"), 0),
        ],
        vec![],
    );
    let index = ExecutorIndex::build(&snap, &options());
    let effects = jobs::reboot_reset(&index, &demo(), NODE);
    assert_eq!(deletions(&effects).len(), 2);
    assert!(
        deletions(&effects)
            .iter()
            .all(|(_, r)| *r == DeletionReason::RebootReset)
    );
}

#[test]
fn r5_8_config_update_clears_unfinished_and_failed_keeps_successful() {
    let nw = demo();
    let snap = one_node(
        &NodeState::default(),
        vec![
            processed(complete(apply_job("u1"), 0)),
            processed(failed(
                package_job(&nw, "baz", Stage::Config, NODE, "u2"),
                "BackoffLimitExceeded",
                4,
            )),
            active(package_job(&nw, "baz", Stage::PostInterrupt, NODE, "u3"), 0),
        ],
        vec![],
    );
    let index = ExecutorIndex::build(&snap, &options());
    let d = deletions(&jobs::config_update_clear(
        &index, &nw, NODE, "baz", "1.1.0",
    ));
    assert_eq!(d.len(), 2);
    assert!(
        d.iter()
            .all(|(n, r)| *r == DeletionReason::ConfigUpdate && !n.contains("apply"))
    );
}

#[test]
fn r5_9_d10_successful_uninstall_job_is_retained() {
    let job = processed(complete(
        package_job(&demo(), "baz", Stage::Uninstall, NODE, "u1"),
        0,
    ));
    let state = NodeState::default();
    assert!(
        sweep_of(
            &one_node(&state, vec![job], vec![]),
            &demo_with(vec![]),
            &state
        )
        .effects
        .is_empty()
    );
}

#[test]
fn r5_10_jobs_go_with_the_nodewright_through_owner_references() {
    let owner = &apply_job("u").metadata.owner_references.unwrap()[0];
    assert_eq!(owner.block_owner_deletion, Some(true));
}

#[test]
fn r5_11_unfinished_jobs_are_judged_by_staleness_not_by_the_finished_predicate() {
    let state = NodeState::default();
    let snap = one_node(&state, vec![active(apply_job("u1"), 0)], vec![]);
    let sw = sweep_of(&snap, &demo(), &state);
    assert_eq!(deletions(&sw.effects)[0].1, DeletionReason::StaleSpec);
}

// ---------------------------------------------------------------- §6 staleness sweep

#[test]
fn r6_1_sweep_is_scoped_to_the_nodewright() {
    let mut other = demo();
    other.metadata.name = Some("other".into());
    let foreign = active(package_job(&other, "baz", Stage::Apply, "gone", "f"), 0);
    let state = NodeState::default();
    assert!(
        sweep_of(&one_node(&state, vec![foreign], vec![]), &demo(), &state)
            .effects
            .is_empty()
    );
}

#[test]
fn r6_2_stale_when_entry_absent_or_at_another_stage() {
    for state in [
        NodeState::default(),
        at_stage(Stage::Config, State::InProgress),
    ] {
        let snap = one_node(&state, vec![active(apply_job("u1"), 0)], vec![]);
        assert!(sweep_of(&snap, &demo(), &state).changed);
    }
    let state = at_stage(Stage::Apply, State::InProgress);
    assert!(
        !sweep_of(
            &one_node(&state, vec![active(apply_job("u1"), 0)], vec![]),
            &demo(),
            &state
        )
        .changed
    );
}

#[test]
fn r6_3_invalidation_patches_invalid_flag_then_deletes() {
    let state = NodeState::default();
    let sw = sweep_of(
        &one_node(&state, vec![active(apply_job("u1"), 0)], vec![]),
        &demo(),
        &state,
    );
    assert!(sw.changed);
    let Effect::PatchJob { annotations, .. } = &sw.effects[0] else {
        panic!("{:?}", sw.effects)
    };
    let p = jobs::PackageAnnotation::parse(annotations[keys::PACKAGE].as_deref().unwrap()).unwrap();
    assert!(p.invalid);
    assert!(matches!(
        sw.effects[1],
        Effect::DeleteJob {
            reason: DeletionReason::StaleSpec,
            ..
        }
    ));
}

/// A Job as the Go operator built it: no fingerprint annotation.
fn go_built(job: Job) -> Job {
    let mut job = job;
    job.metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(keys::EXECUTOR_FINGERPRINT);
    job
}

#[test]
fn r6_4_go_built_jobs_compare_env_without_operator_variables() {
    let state = at_stage(Stage::Apply, State::InProgress);
    let mut job = go_built(active(apply_job("u1"), 0));
    // operator variable values differ (node order), which is not compared
    for c in job
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .init_containers
        .as_mut()
        .unwrap()
    {
        for e in c.env.iter_mut().flatten() {
            if e.name == "SKYHOOK_NODE_ORDER" {
                e.value = Some("7".into());
            }
        }
    }
    assert!(
        !sweep_of(
            &one_node(&state, vec![job.clone()], vec![]),
            &demo(),
            &state
        )
        .changed
    );
    let mut pkg = package("baz", "1.1.0");
    pkg.env = vec![k8s_openapi::api::core::v1::EnvVar {
        name: "NEW".into(),
        value: Some("1".into()),
        value_from: None,
    }];
    let edited = demo_with(vec![pkg]);
    let snap = snapshot(
        edited.clone(),
        vec![node(NODE, Some(&state))],
        vec![job],
        vec![],
    );
    assert!(sweep_of(&snap, &edited, &state).changed);
}

#[test]
fn r6_4_go_built_jobs_compare_resources_by_value_and_survive_extra_init_containers() {
    let mut pkg = package("baz", "1.1.0");
    pkg.resources = Some(nodewright_crds::ResourceRequirements {
        cpu_request: Some(Quantity("4000m".into())),
        cpu_limit: Some(Quantity("4000m".into())),
        memory_request: Some(Quantity("8192Mi".into())),
        memory_limit: Some(Quantity("8192Mi".into())),
    });
    let nw = demo_with(vec![pkg]);
    let state = at_stage(Stage::Apply, State::InProgress);
    let mut job = go_built(active(package_job(&nw, "baz", Stage::Apply, NODE, "u1"), 0));
    // the apiserver canonicalises quantities on read-back
    for c in job
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .init_containers
        .as_mut()
        .unwrap()
    {
        let r = c.resources.as_mut().unwrap();
        for m in [r.limits.as_mut().unwrap(), r.requests.as_mut().unwrap()] {
            m.insert("cpu".into(), Quantity("4".into()));
            m.insert("memory".into(), Quantity("8Gi".into()));
        }
    }
    let snap = snapshot(
        nw.clone(),
        vec![node(NODE, Some(&state))],
        vec![job.clone()],
        vec![],
    );
    assert!(!sweep_of(&snap, &nw, &state).changed);
    let extra = job
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .init_containers
        .as_ref()
        .unwrap()[0]
        .clone();
    job.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .init_containers
        .as_mut()
        .unwrap()
        .push(extra);
    let snap = snapshot(
        nw.clone(),
        vec![node(NODE, Some(&state))],
        vec![job],
        vec![],
    );
    assert!(
        sweep_of(&snap, &nw, &state).changed,
        "count mismatch is a mismatch, never a crash"
    );
}

#[test]
fn r6_4_go_built_generation_bump_is_stale_the_reference_way() {
    let state = at_stage(Stage::Apply, State::InProgress);
    let job = go_built(active(apply_job("u1"), 0));
    let mut bumped = demo();
    bumped.metadata.generation = Some(5);
    let snap = snapshot(
        bumped.clone(),
        vec![node(NODE, Some(&state))],
        vec![job],
        vec![],
    );
    assert!(
        sweep_of(&snap, &bumped, &state).changed,
        "SKYHOOK_DIR embeds the generation"
    );
}

#[test]
fn r6_5_uninstall_job_of_removed_package_counts_as_matching() {
    let state = at_stage(Stage::Uninstall, State::InProgress);
    let job = active(package_job(&demo(), "baz", Stage::Uninstall, NODE, "u1"), 0);
    let empty = demo_with(vec![]);
    let snap = snapshot(
        empty.clone(),
        vec![node(NODE, Some(&state))],
        vec![job],
        vec![],
    );
    assert!(!sweep_of(&snap, &empty, &state).changed);
}

#[test]
fn r6_6_fingerprint_ignores_unrelated_edit() {
    // A24: editing another package, the generation, tolerations, gracefulShutdown or stageTimeout
    // leaves a running Job alone.
    let state = at_stage(Stage::Apply, State::InProgress);
    let job = active(apply_job("u1"), 0);
    let mut baz = package("baz", "1.1.0");
    baz.graceful_shutdown = Some(GoDuration::new("30s"));
    baz.stage_timeout = Some(GoDuration::new("10m"));
    let mut other = package("qux", "1.0.0");
    other.env = vec![k8s_openapi::api::core::v1::EnvVar {
        name: "X".into(),
        value: Some("y".into()),
        value_from: None,
    }];
    let mut edited = demo_with(vec![baz, other]);
    edited.metadata.generation = Some(9);
    edited.spec.additional_tolerations = vec![Default::default()];
    let snap = snapshot(
        edited.clone(),
        vec![node(NODE, Some(&state))],
        vec![job],
        vec![],
    );
    assert!(!sweep_of(&snap, &edited, &state).changed);
}

#[test]
fn r6_6_fingerprint_inputs_replace_unfinished_jobs() {
    let state = at_stage(Stage::Apply, State::InProgress);
    let job = active(apply_job("u1"), 0);
    let edits: Vec<PackageEdit> = vec![
        Box::new(|p| p.image = "other/image".into()),
        Box::new(|p| p.container_sha = format!("sha256:{}", "0".repeat(64))),
        Box::new(|p| p.agent_image_override = "a/agent:2".into()),
        Box::new(|p| p.config_map = [("k".to_string(), "v".to_string())].into()),
        Box::new(|p| {
            p.resources = Some(nodewright_crds::ResourceRequirements {
                cpu_request: Some(Quantity("1".into())),
                cpu_limit: Some(Quantity("1".into())),
                memory_request: Some(Quantity("1Gi".into())),
                memory_limit: Some(Quantity("1Gi".into())),
            })
        }),
    ];
    for edit in edits {
        let mut pkg = package("baz", "1.1.0");
        edit(&mut pkg);
        let nw = demo_with(vec![pkg]);
        let snap = snapshot(
            nw.clone(),
            vec![node(NODE, Some(&state))],
            vec![job.clone()],
            vec![],
        );
        assert!(sweep_of(&snap, &nw, &state).changed);
    }
}

#[test]
fn r6_6_fingerprint_compares_quantities_by_value() {
    let res = |cpu: &str, mem: &str| nodewright_crds::ResourceRequirements {
        cpu_request: Some(Quantity(cpu.into())),
        cpu_limit: Some(Quantity(cpu.into())),
        memory_request: Some(Quantity(mem.into())),
        memory_limit: Some(Quantity(mem.into())),
    };
    let mut a = package("baz", "1.1.0");
    a.resources = Some(res("4000m", "8192Mi"));
    let mut b = a.clone();
    b.resources = Some(res("4", "8Gi"));
    let o = options();
    assert_eq!(
        jobs::fingerprint::package_fingerprint(&a, &o),
        jobs::fingerprint::package_fingerprint(&b, &o)
    );
}

#[test]
fn r6_6_deadline_test_releases_timed_out_job_on_stage_timeout_edit() {
    let erroring = at_stage(Stage::Apply, State::Erroring);
    let timed_out = processed(failed(apply_job("u1"), "BackoffLimitExceeded", 4));
    let mut pkg = package("baz", "1.1.0");
    pkg.stage_timeout = Some(GoDuration::new("10m"));
    let nw = demo_with(vec![pkg]);
    let snap = snapshot(
        nw.clone(),
        vec![node(NODE, Some(&erroring))],
        vec![timed_out],
        vec![],
    );
    assert_eq!(
        deletions(&sweep_of(&snap, &nw, &erroring).effects)[0].1,
        DeletionReason::Rerun
    );
}

#[test]
fn r6_6_interrupt_fingerprint_ignores_env_resources_and_config() {
    let mut pkg = package("baz", "1.1.0");
    pkg.interrupt = Some(service_interrupt(&["a"]));
    let o = options();
    let before = jobs::fingerprint::interrupt_fingerprint(&pkg, &o);
    pkg.env = vec![k8s_openapi::api::core::v1::EnvVar {
        name: "X".into(),
        value: Some("y".into()),
        value_from: None,
    }];
    pkg.config_map = [("k".to_string(), "v".to_string())].into();
    assert_eq!(before, jobs::fingerprint::interrupt_fingerprint(&pkg, &o));
    pkg.interrupt = Some(service_interrupt(&["b"]));
    assert_ne!(before, jobs::fingerprint::interrupt_fingerprint(&pkg, &o));
}

#[test]
fn r6_7_paused_nodewright_skips_validation() {
    let state = NodeState::default();
    let mut paused = demo();
    paused.metadata.annotations = Some([(keys::PAUSE.to_string(), "true".to_string())].into());
    let snap = snapshot(
        paused.clone(),
        vec![node(NODE, Some(&state))],
        vec![active(apply_job("u1"), 0)],
        vec![],
    );
    assert!(sweep_of(&snap, &paused, &state).effects.is_empty());
}

// ---------------------------------------------------------------- §7 pause / disable

fn with_annotations(pairs: &[(&str, &str)]) -> NodeWright {
    let mut nw = demo();
    nw.metadata.annotations = Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    nw
}

fn suspend_values(effects: &[Effect]) -> Vec<(String, bool)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::PatchJob {
                name,
                suspend: Some(s),
                ..
            } => Some((name.clone(), *s)),
            _ => None,
        })
        .collect()
}

#[test]
fn r7_1_r7_3_pause_suspends_unfinished_valid_unsuspended_jobs_only() {
    let nw = demo();
    let snap = one_node(
        &NodeState::default(),
        vec![
            active(apply_job("u1"), 0),
            suspended(active(
                package_job(&nw, "baz", Stage::Config, NODE, "u2"),
                0,
            )),
            processed(complete(
                package_job(&nw, "baz", Stage::Upgrade, NODE, "u3"),
                0,
            )),
        ],
        vec![],
    );
    let index = ExecutorIndex::build(&snap, &options());
    assert_eq!(
        suspend_values(&jobs::suspend(&index, &nw)),
        [("demo-baz-1-1-0-apply-worker-1-64dabc20".to_string(), true)]
    );
}

#[test]
fn r7_2_suspension_killed_pod_is_not_a_failure() {
    let (job, mut pods) = failing_job_with(&[("p1", 0, genuine_failure())], 0, false);
    pods[0].metadata.deletion_timestamp = Some(Time(t0()));
    let o = outs(&one_node(
        &at_stage(Stage::Apply, State::InProgress),
        vec![suspended(job)],
        pods,
    ));
    assert!(state_outcome(&o).is_none());
}

#[test]
fn r7_4_resume_only_after_a_quiet_sweep() {
    let nw = demo();
    let snap = one_node(
        &NodeState::default(),
        vec![suspended(active(apply_job("u1"), 0))],
        vec![],
    );
    let index = ExecutorIndex::build(&snap, &options());
    let noisy = jobs::Sweep {
        effects: vec![],
        changed: true,
    };
    assert!(jobs::resume(&index, &nw, &noisy).is_empty());
    assert_eq!(
        suspend_values(&jobs::resume(&index, &nw, &jobs::Sweep::default())).len(),
        1
    );
}

#[test]
fn r7_5_resume_never_clears_suspend_on_an_invalid_job() {
    let job = suspended(active(apply_job("u1"), 0));
    let mut p =
        jobs::PackageAnnotation::parse(&job.metadata.annotations.as_ref().unwrap()[keys::PACKAGE])
            .unwrap();
    p.invalid = true;
    let job = annotate(job, keys::PACKAGE, &p.to_json());
    let snap = one_node(&NodeState::default(), vec![job], vec![]);
    let index = ExecutorIndex::build(&snap, &options());
    assert!(jobs::resume(&index, &demo(), &jobs::Sweep::default()).is_empty());
}

#[test]
fn r7_6_r7_7_disable_never_resumes_and_both_must_clear() {
    let snap = one_node(
        &NodeState::default(),
        vec![suspended(active(apply_job("u1"), 0))],
        vec![],
    );
    let index = ExecutorIndex::build(&snap, &options());
    for nw in [
        with_annotations(&[(keys::DISABLE, "true")]),
        with_annotations(&[(keys::PAUSE, "true")]),
        with_annotations(&[(keys::PAUSE, "true"), (keys::DISABLE, "true")]),
    ] {
        assert!(jobs::resume(&index, &nw, &jobs::Sweep::default()).is_empty());
    }
    let cleared = with_annotations(&[(keys::PAUSE, "false"), (keys::DISABLE, "false")]);
    assert_eq!(
        jobs::resume(&index, &cleared, &jobs::Sweep::default()).len(),
        1
    );
}

#[test]
fn r7_8_suspended_jobs_gate_and_never_complete() {
    let state = at_stage(Stage::Apply, State::InProgress);
    let snap = one_node(&state, vec![suspended(active(apply_job("u1"), 0))], vec![]);
    let index = ExecutorIndex::build(&snap, &options());
    assert!(index.unfinished("demo", NODE, "baz", "1.1.0"));
    assert!(
        !outs(&snap)
            .items
            .iter()
            .any(|x| matches!(x.kind, OutcomeKind::Completed { .. }))
    );
}

#[test]
fn r7_9_suspended_job_collects_no_stuck_attempt_evidence() {
    let (job, pods) = failing_job_with(&[("p1", 0, pulling(t0()))], 0, false);
    let o = outs_at(
        &one_node(
            &at_stage(Stage::Apply, State::InProgress),
            vec![suspended(job)],
            pods,
        ),
        &options(),
        at(100_000),
    );
    assert!(o.items.is_empty());
}

#[test]
fn r7_10_interrupt_jobs_resume_like_package_jobs() {
    let nw = demo();
    let job = suspended(active(
        interrupt_job(&nw, "baz", &service_interrupt(&["a"]), NODE, "i"),
        0,
    ));
    let snap = one_node(&NodeState::default(), vec![job], vec![]);
    let index = ExecutorIndex::build(&snap, &options());
    assert!(!suspend_values(&jobs::resume(&index, &nw, &jobs::Sweep::default()))[0].1);
}

// ---------------------------------------------------------------- §8 interrupts

#[test]
fn r8_1_r8_2_interrupt_completion_from_the_label_after_reboot() {
    let nw = demo();
    let reboot = nodewright_crds::Interrupt {
        type_: nodewright_crds::InterruptType::Reboot,
        services: vec![],
    };
    let job = complete(interrupt_job(&nw, "baz", &reboot, NODE, "i"), 0);
    let state = at_stage(Stage::Interrupt, State::InProgress);
    let o = outs(&one_node(&state, vec![job], vec![]));
    let outcome = state_outcome(&o).unwrap();
    assert_eq!(
        outcome.kind,
        OutcomeKind::InterruptCompleted { attempts: 0 }
    );
    let changes = jobs::entry_changes(outcome, Some(&nw), &state);
    assert_eq!(
        changes[0].set.as_ref().unwrap().state,
        Some(State::Complete)
    );
}

#[test]
fn r8_4_interrupt_waits_for_a_quiet_node() {
    let nw = demo_with(vec![package("baz", "1.1.0"), package("qux", "2.0.0")]);
    let running = active(package_job(&nw, "qux", Stage::Apply, NODE, "q"), 0);
    let snap = snapshot(
        nw.clone(),
        vec![node(NODE, Some(&NodeState::default()))],
        vec![running],
        vec![],
    );
    let int = interrupt_job(&nw, "baz", &service_interrupt(&["a"]), NODE, "n");
    assert_eq!(
        decide(&snap, int, None),
        CreateDecision::Wait(WaitReason::NodeBusy)
    );
}

#[test]
fn r8_7_r8_8_missing_interrupt_job_is_recreated_including_uninstall_interrupt() {
    let nw = demo();
    let state = at_stage(Stage::UninstallInterrupt, State::InProgress);
    let snap = one_node(&state, vec![], vec![]);
    let o = options();
    let pkg = nw.spec.packages["baz"].clone();
    let job = jobs::build_interrupt_job(
        &inputs(&nw, &pkg, Stage::UninstallInterrupt, NODE, &o),
        &service_interrupt(&["a"]),
    );
    assert_eq!(
        job.metadata.name.as_deref(),
        Some(
            naming::interrupt_job_name(
                "demo",
                Stage::UninstallInterrupt,
                nodewright_crds::InterruptType::Service,
                NODE
            )
            .as_str()
        )
    );
    assert!(matches!(
        decide(&snap, job, state.get("baz", "1.1.0")),
        CreateDecision::Create(_)
    ));
}

fn crash_looping(restarts: i32) -> k8s_openapi::api::core::v1::PodStatus {
    status(
        "Pending",
        Some(t0()),
        vec![waiting(
            "interrupt",
            "CrashLoopBackOff",
            "back-off",
            restarts,
        )],
    )
}

#[test]
fn r8_9_interrupt_crash_loop_surfaces_with_restart_count() {
    let nw = demo();
    let job = active(
        interrupt_job(&nw, "baz", &service_interrupt(&["a"]), NODE, "i"),
        0,
    );
    let pod = pod_of(&job, "p1", t0(), crash_looping(1));
    let o = outs(&one_node(
        &at_stage(Stage::Interrupt, State::InProgress),
        vec![job],
        vec![pod],
    ));
    assert!(matches!(
        state_outcome(&o).unwrap().kind,
        OutcomeKind::AttemptFailed {
            restarts: Some(1),
            ..
        }
    ));
    assert!(
        !all_effects(&o)
            .iter()
            .any(|e| matches!(e, Effect::EndInterruptJob { .. }))
    );
}

#[test]
fn r8_10_d18_interrupt_ended_at_its_restart_allowance() {
    let nw = demo();
    let job = active(
        interrupt_job(&nw, "baz", &service_interrupt(&["a"]), NODE, "i"),
        0,
    );
    let pod = pod_of(&job, "p1", t0(), crash_looping(3));
    let state = at_stage(Stage::Interrupt, State::InProgress);
    let o = outs(&one_node(&state, vec![job.clone()], vec![pod.clone()]));
    let ends: Vec<_> = all_effects(&o)
        .into_iter()
        .filter(|e| matches!(e, Effect::EndInterruptJob { restarts: 3, .. }))
        .collect();
    assert_eq!(ends.len(), 1);
    // skipped when already marked, or for a Job without the allowance (Go-built or reboot)
    let marked = annotate(job.clone(), keys::RESTART_LIMIT_EXCEEDED, "3");
    let o = outs(&one_node(&state, vec![marked], vec![pod.clone()]));
    assert!(
        !all_effects(&o)
            .iter()
            .any(|e| matches!(e, Effect::EndInterruptJob { .. }))
    );
    let mut no_allowance = job;
    no_allowance
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(keys::RESTART_ALLOWANCE);
    let o = outs(&one_node(&state, vec![no_allowance], vec![pod]));
    assert!(
        !all_effects(&o)
            .iter()
            .any(|e| matches!(e, Effect::EndInterruptJob { .. }))
    );
}

// ---------------------------------------------------------------- §9 node-state concurrency

#[test]
fn r9_3_r9_4_outcomes_never_create_or_resurrect_entries() {
    let state = NodeState::default();
    let nw = demo();
    let (job, pods) = failing_job_with(&[("p1", 0, genuine_failure())], 4, true);
    let cases = [
        complete(apply_job("u1"), 0),
        job,
        active(apply_job("u1"), 2),
    ];
    for j in cases {
        let snap = one_node(
            &at_stage(Stage::Apply, State::InProgress),
            vec![j],
            pods.clone(),
        );
        for o in outs(&snap).items {
            assert!(jobs::entry_changes(&o, Some(&nw), &state).is_empty());
        }
    }
}

#[test]
fn r9_5_changes_are_per_entry_deltas_with_expectations() {
    let state = doc(vec![
        entry("baz", "1.1.0", Stage::Apply, State::InProgress, 0),
        entry("other", "1.0.0", Stage::Config, State::Erroring, 2),
    ]);
    let o = outs(&one_node(
        &state,
        vec![complete(apply_job("u1"), 0)],
        vec![],
    ));
    let changes = jobs::entry_changes(state_outcome(&o).unwrap(), Some(&demo()), &state);
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].key, "baz|1.1.0");
    assert_eq!(changes[0].expect.as_ref(), state.get("baz", "1.1.0"));
}

// ---------------------------------------------------------------- §10 config update

#[test]
fn r10_5_d24_config_swap_invalidates_other_nodes_package_jobs() {
    let nw = demo();
    let snap = snapshot(
        nw.clone(),
        vec![node("n1", None), node("n2", None), node("n3", None)],
        vec![
            active(package_job(&nw, "baz", Stage::Config, "n1", "a"), 0),
            active(package_job(&nw, "baz", Stage::Config, "n2", "b"), 0),
            active(
                interrupt_job(&nw, "baz", &service_interrupt(&["x"]), "n3", "c"),
                0,
            ),
            processed(complete(
                package_job(&nw, "baz", Stage::Apply, "n3", "d"),
                0,
            )),
        ],
        vec![],
    );
    let index = ExecutorIndex::build(&snap, &options());
    let effects =
        jobs::invalidate_for_config_swap(&index, &nw, "baz", "1.1.0", &["n1".to_string()].into());
    let d = deletions(&effects);
    let expected = naming::package_job_name("demo", "baz", "1.1.0", Stage::Config, "n2");
    assert_eq!(d, [(expected, DeletionReason::ConfigUpdate)]);
    assert!(effects.iter().any(|e| matches!(e, Effect::PatchJob { annotations, .. } if annotations.contains_key(keys::PACKAGE))));
}

#[test]
fn r10_6_config_rerun_carries_a_new_resource_id() {
    let mut bumped = demo();
    bumped.metadata.generation = Some(5);
    let job = package_job(&bumped, "baz", Stage::Config, NODE, "u");
    assert_eq!(
        job.metadata.annotations.unwrap()[keys::RESOURCE_ID],
        format!("demo-{UID}-5")
    );
}

#[test]
fn r4_6_2_stale_failure_target_is_not_re_recorded_every_pass() {
    let job = failure_target(apply_job("u1"), t0());
    let state = at_stage(Stage::Apply, State::Erroring);
    let mut n = node(NODE, Some(&state));
    n.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(keys::node_status("demo"), "erroring".into());
    let snap = snapshot(demo(), vec![n], vec![job], vec![]);
    assert!(state_outcome(&outs_at(&snap, &options(), at(400))).is_none());
}

#[test]
fn r8_5_interrupt_job_carries_the_merged_interrupt_of_the_winner() {
    use base64::Engine;
    let nw = demo_with(vec![package("baz", "1.1.0"), package("qux", "2.0.0")]);
    let merged = service_interrupt(&["containerd", "kubelet", "kubelet"]);
    let job = interrupt_job(&nw, "baz", &merged, NODE, "i");
    assert_eq!(
        job.metadata.name.as_deref(),
        Some("demo-interrupt-service-worker-1-58d80ec4")
    );
    let args = job
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .init_containers
        .unwrap()[0]
        .args
        .clone()
        .unwrap();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(&args[3])
        .unwrap();
    assert_eq!(
        String::from_utf8(decoded).unwrap(),
        r#"{"type":"service_restart","services":["containerd","kubelet","kubelet"]}"#,
        "duplicates inside the winner's list survive (03 §2.1)"
    );
}

#[test]
fn r8_6_skipped_siblings_are_promoted_when_the_interrupt_completes() {
    let nw = demo_with(vec![package("baz", "1.1.0"), package("qux", "2.0.0")]);
    let job = complete(
        interrupt_job(&nw, "baz", &service_interrupt(&["a"]), NODE, "u1"),
        0,
    );
    let state = doc(vec![
        entry("baz", "1.1.0", Stage::Interrupt, State::InProgress, 0),
        entry("qux", "2.0.0", Stage::Interrupt, State::Skipped, 0),
    ]);
    let snap = snapshot(
        nw.clone(),
        vec![node(NODE, Some(&state))],
        vec![job],
        vec![],
    );
    let o = outs(&snap);
    let changes = jobs::entry_changes(state_outcome(&o).unwrap(), Some(&nw), &state);
    let states: Vec<_> = changes
        .iter()
        .map(|c| (c.key.as_str(), c.set.as_ref().unwrap().state))
        .collect();
    assert_eq!(
        states,
        [
            ("qux|2.0.0", Some(State::Complete)),
            ("baz|1.1.0", Some(State::Complete))
        ]
    );
}

#[test]
fn r9_2_changes_carry_the_entry_they_were_decided_on() {
    let (job, pods) = failing_job_with(&[("p1", 0, genuine_failure())], 1, false);
    let state = at_stage(Stage::Apply, State::InProgress);
    let o = outs(&one_node(&state, vec![job], pods));
    let changes = jobs::entry_changes(state_outcome(&o).unwrap(), Some(&demo()), &state);
    assert_eq!(changes[0].expect.as_ref(), state.get("baz", "1.1.0"));
    assert_eq!(changes[0].nodewright, "demo");
}

#[test]
fn r10_2_config_gate_sees_unfinished_jobs_and_clears_the_erroring_node() {
    let nw = demo();
    let snap = snapshot(
        nw.clone(),
        vec![node("n1", None), node("n2", None)],
        vec![
            active(package_job(&nw, "baz", Stage::Config, "n1", "a"), 0),
            processed(failed(
                package_job(&nw, "baz", Stage::Config, "n2", "b"),
                "BackoffLimitExceeded",
                4,
            )),
        ],
        vec![],
    );
    let index = ExecutorIndex::build(&snap, &options());
    assert!(
        index.unfinished("demo", "n1", "baz", "1.1.0"),
        "n1 is not idle"
    );
    assert!(!index.unfinished("demo", "n2", "baz", "1.1.0"));
    let cleared = jobs::config_update_clear(&index, &nw, "n2", "baz", "1.1.0");
    assert_eq!(deletions(&cleared).len(), 1);
}
