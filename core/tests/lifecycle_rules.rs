//! Rule tests for the pass: each test names the rule ids it covers (02-lifecycle.md).

mod fixtures;

use fixtures::*;
use nodewright_core::Effect;
use nodewright_core::lifecycle::{dag::Dag, interrupts, predicates, status};
use nodewright_crds::{InterruptType, Stage, State, Status, keys};
use std::sync::Arc;

/// Runs one pass and applies it.
fn step(s: &mut nodewright_core::Snapshot) -> nodewright_core::Plan {
    let plan = pass(s);
    apply(s, &plan);
    plan
}

/// Steps until a pass creates a Job (or `max` passes); returns that pass's plan.
fn until_created(s: &mut nodewright_core::Snapshot, max: usize) -> nodewright_core::Plan {
    for _ in 0..max {
        let plan = step(s);
        if !created(&plan).is_empty() {
            return plan;
        }
    }
    panic!("nothing created in {max} passes");
}

/// Steps until a pass emits an effect of `tag`; returns that plan.
fn until(s: &mut nodewright_core::Snapshot, tag: &str, max: usize) -> nodewright_core::Plan {
    for _ in 0..max {
        let plan = step(s);
        if count(&plan, tag) > 0 {
            return plan;
        }
    }
    panic!("no {tag} in {max} passes");
}

fn events(plan: &nodewright_core::Plan) -> Vec<(String, String)> {
    plan.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Event(ev) => Some((ev.reason.clone(), ev.action.clone())),
            _ => None,
        })
        .collect()
}

fn one_pkg() -> nodewright_core::Snapshot {
    snapshot(
        vec![with_pkg(nw("demo"), "dexter", "1.2.3")],
        vec![node("n1")],
    )
}

#[test]
fn r1_no_nodewright_plans_nothing_and_never_requeues() {
    let plan = pass(&snapshot(vec![], vec![node("n1")]));
    assert!(plan.effects.is_empty());
    assert_eq!(plan.requeue_after, None);
}

#[test]
fn r1_r6_2_no_nodes_still_adds_finalizer() {
    let mut n = nw("demo");
    n.metadata.finalizers = None;
    let plan = pass(&snapshot(vec![n], vec![]));
    assert_eq!(count(&plan, "addFinalizer"), 1);
}

#[test]
fn r2_1_invalid_selector_is_an_error_and_other_nodewrights_proceed() {
    let mut bad = with_pkg(nw("bad"), "a", "1.0.0");
    bad.spec.node_selector = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_expressions: Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                    key: "x".into(),
                    operator: "Bogus".into(),
                    values: None,
                },
            ]),
            match_labels: None,
        },
    );
    let mut s = snapshot(
        vec![bad, with_pkg(nw("good"), "a", "1.0.0")],
        vec![node("n1")],
    );
    let plan = step(&mut s);
    assert!(plan.errors.iter().any(|e| e.to_string().contains("bad")));
    assert!(events(&plan).contains(&("InvalidSpec".into(), "ValidateSpec".into())));
    let bad = s
        .nodewrights
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some("bad"))
        .unwrap();
    assert_eq!(
        status::condition(&bad.status.as_ref().unwrap().conditions, "Blocked")
            .unwrap()
            .reason,
        "InvalidSpec"
    );
    converge(&mut s, 10);
    assert_eq!(node_status(&s, "n1", "good"), Some(Status::Complete));
}

#[test]
fn r2_2_malformed_node_state_raises_condition_and_leaves_other_nodewright_alone() {
    let mut n1 = node("n1");
    set_annotation(&mut n1, &keys::node_state("broken"), "{not json");
    let mut fine = with_pkg(nw("fine"), "b", "1.0.0");
    fine.spec.priority = 1; // a malformed predecessor would (correctly) hold it waiting
    let mut s = snapshot(vec![with_pkg(nw("broken"), "a", "1.0.0"), fine], vec![n1]);
    let mut plan = step(&mut s);
    for _ in 0..4 {
        if s.nodewrights.iter().any(|n| {
            n.metadata.name.as_deref() == Some("broken")
                && n.status.as_ref().is_some_and(|st| {
                    status::condition(&st.conditions, "NodeStateMalformed").is_some()
                })
        }) {
            break;
        }
        plan = step(&mut s);
    }
    let st = s
        .nodewrights
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some("broken"))
        .unwrap();
    let cond = status::condition(
        &st.status.as_ref().unwrap().conditions,
        "NodeStateMalformed",
    )
    .unwrap();
    assert_eq!(cond.reason, "ParseError");
    assert!(events(&plan).contains(&("NodeStateMalformed".into(), "ParseNodeState".into())));
    assert!(plan.effects.iter().all(
        |e| !matches!(e, Effect::PatchNode(p) if p.state.iter().any(|c| c.nodewright == "broken"))
    ));
    converge(&mut s, 20);
    assert_eq!(node_status(&s, "n1", "fine"), Some(Status::Complete));
    assert_eq!(doc_raw(&s, "n1", "broken").as_deref(), Some("{not json"));
}

fn doc_raw(s: &nodewright_core::Snapshot, node: &str, nw: &str) -> Option<String> {
    let n = s
        .nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(node))
        .unwrap();
    n.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&keys::node_state(nw)))
        .cloned()
}

#[test]
fn r6_6_first_pass_introspects_then_t01_e01_e02_apply_starts() {
    let mut s = one_pkg();
    let first = step(&mut s);
    assert!(
        created(&first).is_empty(),
        "adding the finalizer ends the pass (R6.2)"
    );
    assert_eq!(first.requeue_after, Some(std::time::Duration::from_secs(2)));
    let second = until_created(&mut s, 10);
    assert_eq!(
        created_stages(&second),
        vec![("n1".to_string(), "apply".to_string())]
    );
    let e = doc(&s, "n1", "demo")
        .get("dexter", "1.2.3")
        .cloned()
        .unwrap();
    assert_eq!(
        (e.stage, e.state, e.restarts),
        (Stage::Apply, Some(State::InProgress), 0)
    );
    assert_eq!(node_status(&s, "n1", "demo"), Some(Status::InProgress));
    let ev = events(&second);
    assert_eq!(
        ev.iter()
            .filter(|e| e.0 == "Apply" && e.1 == "ApplyPackage")
            .count(),
        2
    );
    let st = s.nodewrights[0].status.clone().unwrap();
    assert!(status::condition(&st.conditions, "ApplyPackage").is_some());
}

/// R6.6 (issue 15): a pass that records no executor outcome goes on from introspection to the
/// work phase, so the pass that first writes the node's status also starts its first Job.
#[test]
fn r6_6_introspection_without_a_recorded_outcome_goes_on_to_the_work_phase() {
    let mut s = one_pkg();
    assert!(
        created(&step(&mut s)).is_empty(),
        "the finalizer pass (R6.2)"
    );
    let second = step(&mut s);
    let introspected = second.effects.iter().any(|e| match e {
        Effect::PatchStatus { status, .. } => status.node_status.contains_key("n1"),
        _ => false,
    });
    assert!(introspected, "the pass writes the node's status");
    assert_eq!(
        created_stages(&second),
        vec![("n1".to_string(), "apply".to_string())],
        "and starts the first Job"
    );
}

/// Invariant 16.1 (I1): every create carries the package's entry as the snapshot showed it, for a
/// fresh read of the node before the create: the first start expects no entry (explore seed
/// 7022: a lagging node cache), the re-create of a lost executor the open entry (seed 60).
#[test]
fn inv16_1_every_create_is_confirmed_against_the_snapshot_entry() {
    let confirms =
        |plan: &nodewright_core::Plan| -> Vec<Option<nodewright_core::effect::EntryExpect>> {
            plan.effects
                .iter()
                .filter_map(|e| match e {
                    Effect::CreateJob { confirm, .. } => Some(confirm.clone()),
                    _ => None,
                })
                .collect()
        };
    let mut s = one_pkg();
    let first = until_created(&mut s, 10);
    let check = confirms(&first)
        .pop()
        .flatten()
        .expect("the first create carries an entry check");
    assert_eq!(
        (check.node.as_str(), check.package.as_str(), check.entry),
        ("n1", "dexter", None),
        "the snapshot had no entry"
    );
    s.jobs.clear(); // the executor is lost; the node still shows (apply, in_progress)
    let again = until_created(&mut s, 10);
    let check = confirms(&again)
        .pop()
        .flatten()
        .expect("the re-create carries an entry check");
    let entry = check.entry.expect("the snapshot's open entry");
    assert_eq!(
        (check.node.as_str(), entry.stage, entry.state),
        ("n1", Stage::Apply, Some(State::InProgress))
    );
}

/// D27: a pass's creates carry recipes, not built Jobs, and each builds the manifest the eager
/// builder makes from the same inputs (package and interrupt Jobs, two nodes).
#[test]
fn d27_creates_carry_recipes_built_as_the_eager_builder_would() {
    use nodewright_core::jobs::{JobInputs, JobManifest, build_interrupt_job, build_package_job};
    let n = reboot_demo();
    let mut s = snapshot(vec![n], vec![node("n1"), node("n2")]);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        let plan = step(&mut s);
        let nw = s.nodewrights[0].clone();
        let options = nodewright_core::Options::default();
        for e in &plan.effects {
            let Effect::CreateJob { job, context, .. } = e else {
                continue;
            };
            assert!(matches!(job, JobManifest::Recipe(_)), "{job:?}");
            let built = job.to_job();
            let node = context.node.clone().unwrap();
            let stage: Stage = serde_json::from_value(serde_json::json!(context.stage)).unwrap();
            let env = built.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
            let order = env
                .init_containers
                .iter()
                .flatten()
                .flat_map(|c| c.env.iter().flatten())
                .find(|v| v.name == "SKYHOOK_NODE_ORDER")
                .and_then(|v| v.value.clone())
                .map(|v| v.parse().unwrap())
                .unwrap_or(0);
            let inputs = JobInputs {
                nodewright: &nw,
                package: &nw.spec.packages["dexter"],
                stage,
                node: &node,
                node_order: order,
                options: &options,
            };
            let eager = match &nw.spec.packages["dexter"].interrupt {
                Some(i) if job.is_interrupt() => build_interrupt_job(&inputs, i),
                _ => build_package_job(&inputs),
            };
            assert_eq!(built, eager, "{stage:?} on {node}");
            assert_eq!(job.name(), eager.metadata.name.clone().unwrap());
            seen.insert((stage, job.is_interrupt()));
        }
        finish_jobs(&mut s, true);
    }
    assert!(seen.contains(&(Stage::Apply, false)), "{seen:?}");
    assert!(
        seen.iter().any(|(_, i)| *i),
        "an interrupt Job was built: {seen:?}"
    );
}

/// Invariant 16.3 (I3, explore seed 673): the create of a package with an interrupt rests on
/// the node's cordon, so its fresh-read check asks for the cordon too; a package without an
/// interrupt does not.
#[test]
fn inv16_3_a_create_resting_on_the_cordon_asks_the_fresh_read_for_it() {
    let cordon_checks = |plan: &nodewright_core::Plan| -> Vec<bool> {
        plan.effects
            .iter()
            .filter_map(|e| match e {
                Effect::CreateJob {
                    confirm: Some(c), ..
                } => Some(c.cordoned),
                _ => None,
            })
            .collect()
    };
    let n = reboot_demo();
    let mut s = snapshot(vec![n], vec![node("n1")]);
    let first = until_created(&mut s, 10);
    assert_eq!(cordon_checks(&first), [true], "apply of a reboot package");
    let mut plain = one_pkg();
    let first = until_created(&mut plain, 10);
    assert_eq!(
        cordon_checks(&first),
        [false],
        "a package without an interrupt"
    );
}

/// Invariant 16.7 (I7): the pass that selects a batch records it (`RecordBatch`, the rollout
/// bookkeeping only) before any write acting on it, so a pass on a snapshot that misses the
/// status write cannot choose another batch beside it (explore seed 6592); a pass that selects
/// no new node records nothing.
#[test]
fn inv16_7_a_new_batch_is_recorded_before_any_write_acting_on_it() {
    let mut s = one_pkg();
    let first = until_created(&mut s, 10);
    let at = first
        .effects
        .iter()
        .position(|e| matches!(e, Effect::RecordBatch { .. }))
        .expect("the pass records its batch");
    let acting = first
        .effects
        .iter()
        .position(|e| matches!(e, Effect::CreateJob { .. } | Effect::PatchNode(_)))
        .expect("and acts on it");
    assert!(
        at < acting,
        "the batch is recorded before any write acting on it"
    );
    let Effect::RecordBatch { nodewright, status } = &first.effects[at] else {
        unreachable!("found above")
    };
    assert_eq!(nodewright, "demo");
    assert!(status.node_priority.contains_key("n1"));
    assert_eq!(status.package_list, "", "only the rollout bookkeeping");
    for _ in 0..3 {
        let plan = step(&mut s);
        assert!(
            !plan
                .effects
                .iter()
                .any(|e| matches!(e, Effect::RecordBatch { .. })),
            "the batch is already recorded"
        );
    }
}

/// Invariant 16.7 (explore seed 7467): the pass whose introspection marks a node complete (and
/// releases its cordon) ends there (R6.6), so the next batch is chosen only on a later pass, once
/// that write is durable; the completing write expects the node's whole document.
#[test]
fn inv16_7_a_pass_that_marks_a_node_complete_chooses_no_new_batch() {
    let mut n1 = with_state(
        node("n1"),
        "demo",
        &[entry("a", "1.0.0", Stage::Config, State::Complete)],
    );
    set_annotation(&mut n1, &keys::node_status("demo"), "in_progress");
    set_annotation(&mut n1, &keys::cordon("demo"), "true");
    let mut s = snapshot(
        vec![with_budget(with_pkg(nw("demo"), "a", "1.0.0"), 1)],
        vec![n1, node("n2")],
    );
    assert!(
        created(&step(&mut s)).is_empty(),
        "the finalizer pass (R6.2)"
    );
    let completing = step(&mut s);
    let expects_doc = completing.effects.iter().any(|e| match e {
        Effect::PatchNode(p) => {
            p.node == "n1"
                && p.annotations.get(&keys::node_status("demo"))
                    == Some(&Some("complete".to_string()))
                && p.expect_documents.contains_key("demo")
        }
        _ => false,
    });
    assert!(
        expects_doc,
        "n1 is marked complete, expecting its whole document"
    );
    assert!(
        created(&completing).is_empty(),
        "no start in the completing pass"
    );
    assert!(
        !completing
            .effects
            .iter()
            .any(|e| matches!(e, Effect::RecordBatch { .. })),
        "no new batch in the completing pass"
    );
    let next = until_created(&mut s, 5);
    assert_eq!(
        created_stages(&next),
        vec![("n2".to_string(), "apply".to_string())]
    );
}

#[test]
fn t05_t06_e13_completion_recorded_then_config_started() {
    let mut s = one_pkg();
    until_created(&mut s, 10);
    finish_jobs(&mut s, true);
    let recorded = pass(&s);
    assert!(
        events(&recorded).contains(&("State".into(), "JobComplete".into())),
        "E13"
    );
    let plan = until_created(&mut s, 10);
    assert_eq!(
        created_stages(&plan),
        vec![("n1".to_string(), "config".to_string())]
    );
    let e = doc(&s, "n1", "demo")
        .get("dexter", "1.2.3")
        .cloned()
        .unwrap();
    assert_eq!((e.stage, e.state), (Stage::Config, Some(State::InProgress)));
}

#[test]
fn inv16_1_one_executor_per_package_per_node() {
    let mut s = one_pkg();
    until_created(&mut s, 10);
    for _ in 0..3 {
        let plan = step(&mut s);
        assert!(created(&plan).is_empty(), "an unfinished executor exists");
    }
}

#[test]
fn t02_vanished_executor_is_replaced_at_the_same_stage() {
    let mut s = snapshot(
        vec![with_pkg(nw("demo"), "dexter", "1.2.3")],
        vec![with_state(
            node("n1"),
            "demo",
            &[entry("dexter", "1.2.3", Stage::Config, State::InProgress)],
        )],
    );
    let plan = until_created(&mut s, 10);
    assert_eq!(
        created_stages(&plan),
        vec![("n1".to_string(), "config".to_string())]
    );
}

#[test]
fn d4_q10_erroring_post_interrupt_resumes_at_its_own_stage() {
    let n = with_interrupt(
        with_pkg(nw("demo"), "dexter", "1.2.3"),
        "dexter",
        InterruptType::Noop,
        &[],
    );
    let mut n1 = with_state(
        node("n1"),
        "demo",
        &[entry(
            "dexter",
            "1.2.3",
            Stage::PostInterrupt,
            State::Erroring,
        )],
    );
    n1.spec.as_mut().unwrap().unschedulable = Some(true);
    set_annotation(&mut n1, &keys::cordon("demo"), "true");
    let mut s = snapshot(vec![n], vec![n1]);
    let plan = until_created(&mut s, 10);
    assert_eq!(
        created_stages(&plan),
        vec![("n1".to_string(), "post-interrupt".to_string())]
    );
}

#[test]
fn t04_e14_terminal_failure_marks_entry_and_node_erroring() {
    let mut s = one_pkg();
    until_created(&mut s, 10);
    finish_jobs(&mut s, false);
    let plan = step(&mut s);
    assert!(
        events(&plan).contains(&("State".into(), "JobFailed".into())),
        "E14"
    );
    let e = doc(&s, "n1", "demo")
        .get("dexter", "1.2.3")
        .cloned()
        .unwrap();
    assert_eq!((e.stage, e.state), (Stage::Apply, Some(State::Erroring)));
    assert_eq!(node_status(&s, "n1", "demo"), Some(Status::Erroring));
    let plan = step(&mut s);
    assert!(
        created(&plan).is_empty(),
        "A6: a parked failure is not recreated"
    );
}

#[test]
fn t20_inv16_12_outcome_for_absent_entry_writes_no_state() {
    let mut s = one_pkg();
    until_created(&mut s, 10);
    // A reset removed the document while the Job ran.
    Arc::make_mut(&mut s.nodes[0])
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(&keys::node_state("demo"));
    finish_jobs(&mut s, true);
    let plan = pass(&s);
    assert!(plan.effects.iter().all(|e| !matches!(e, Effect::PatchNode(p) if p.state.iter().any(|c| c.set.as_ref().is_some_and(|x| x.state == Some(State::Complete))))));
}

/// NodeWright `demo` with package dexter 1.2.3, which reboots its node.
fn reboot_demo() -> nodewright_crds::NodeWright {
    with_interrupt(
        with_pkg(nw("demo"), "dexter", "1.2.3"),
        "dexter",
        InterruptType::Reboot,
        &[],
    )
}

fn interrupt_world() -> nodewright_core::Snapshot {
    let n = reboot_demo();
    let mut s = snapshot(vec![n], vec![node("n1")]);
    s.workload_pods.push(Arc::new(workload_pod("web", "n1")));
    s
}

#[test]
fn b1_inv16_3_inv16_4_e04_cordon_first_then_drain_on_a_later_pass() {
    let mut s = interrupt_world();
    let cordon = {
        let mut found = None;
        for _ in 0..8 {
            let plan = step(&mut s);
            if plan
                .effects
                .iter()
                .any(|e| matches!(e, Effect::PatchNode(p) if p.unschedulable.is_some()))
            {
                found = Some(plan);
                break;
            }
        }
        found.expect("a cordon pass")
    };
    assert_eq!(
        count(&cordon, "evict"),
        0,
        "no eviction in the cordoning pass"
    );
    assert!(created(&cordon).is_empty());
    let patch = cordon
        .effects
        .iter()
        .find_map(|e| match e {
            Effect::PatchNode(p) if p.unschedulable.is_some() => Some(p),
            _ => None,
        })
        .unwrap();
    assert_eq!(patch.unschedulable, Some(true));
    assert_eq!(
        patch.annotations.get(&keys::cordon("demo")),
        Some(&Some("true".to_string()))
    );
    let drain = step(&mut s);
    assert_eq!(count(&drain, "evict"), 1);
    assert!(
        events(&drain).contains(&("Drain".into(), "DrainNode".into())),
        "E4"
    );
    assert!(
        created(&drain).is_empty(),
        "inv16_3: not before the drain finished"
    );
    let start = until_created(&mut s, 10);
    assert_eq!(
        created_stages(&start),
        vec![("n1".to_string(), "apply".to_string())]
    );
}

#[test]
fn inv16_5_b7_inv16_6_uncordon_only_when_complete_and_through_ownership() {
    let mut s = interrupt_world();
    let n = converge(&mut s, 40);
    assert!(n < 40);
    let node = &s.nodes[0];
    assert_eq!(node_status(&s, "n1", "demo"), Some(Status::Complete));
    assert!(
        node.metadata
            .annotations
            .as_ref()
            .unwrap()
            .get(&keys::cordon("demo"))
            .is_none()
    );
    assert_eq!(node.spec.as_ref().unwrap().unschedulable, Some(false));
    let e = doc(&s, "n1", "demo")
        .get("dexter", "1.2.3")
        .cloned()
        .unwrap();
    assert_eq!(
        (e.stage, e.state),
        (Stage::PostInterrupt, Some(State::Complete))
    );
}

/// Explore seeds 898, 3322, 8800: the pass that marks a node complete saw a snapshot without
/// this NodeWright's cordon (the cache lagged behind the cordon write), so the status write
/// carries the release to be resolved on the fresh read (invariant 16.6).
#[test]
fn inv16_6_b7_complete_on_a_lagging_snapshot_releases_the_cordon_on_write() {
    let n = with_pkg(nw("demo"), "dexter", "1.2.3");
    let mut n1 = with_state(
        node("n1"),
        "demo",
        &[entry("dexter", "1.2.3", Stage::Config, State::Complete)],
    );
    set_annotation(&mut n1, &keys::node_status("demo"), "in_progress");
    let patch = status_write(&mut snapshot(vec![n.clone()], vec![n1.clone()]));
    assert_eq!(
        patch.annotations.get(&keys::node_status("demo")),
        Some(&Some("complete".to_string()))
    );
    assert_eq!(patch.release_cordon_of, vec!["demo".to_string()]);
    assert_eq!(patch.unschedulable, None, "decided on the fresh read");
    set_annotation(&mut n1, &keys::cordon("demo"), "true");
    n1.spec.as_mut().unwrap().unschedulable = Some(true);
    let patch = status_write(&mut snapshot(vec![n], vec![n1]));
    assert!(
        patch.release_cordon_of.is_empty(),
        "a cordon the snapshot shows is released as before"
    );
    assert_eq!(patch.annotations.get(&keys::cordon("demo")), Some(&None));
    assert_eq!(patch.unschedulable, Some(false));
}

/// Explore seed 4622: the version is bumped while the old version's uninstall runs and the
/// uninstall is still requested, so the new key is absent and requested: the node reads complete
/// and introspection releases the cordon. The same pass's version change (T16) reopens the node
/// and cordons it for the upgrade; that write must not leave it `complete` (invariant 16.6).
#[test]
fn inv16_6_t16_the_pass_that_cordons_a_complete_node_writes_it_in_progress() {
    let n = with_interrupt(
        with_uninstall(with_pkg(nw("demo"), "dexter", "1.2.3"), "dexter", true),
        "dexter",
        InterruptType::Service,
        &["containerd"],
    );
    let mut s = snapshot(
        vec![n],
        vec![with_state(
            node("n1"),
            "demo",
            &[entry(
                "dexter",
                "1.2.3",
                Stage::PostInterrupt,
                State::Complete,
            )],
        )],
    );
    let plan = until_created(&mut s, 10);
    assert_eq!(
        created_stages(&plan),
        vec![("n1".to_string(), "uninstall".to_string())]
    );
    let mut bumped = (*s.nodewrights[0]).clone();
    pkg_mut(&mut bumped, "dexter").version = "1.3.0".into();
    s.nodewrights = nodewright_core::shared(vec![bumped]);
    for _ in 0..8 {
        step(&mut s);
        let node = &s.nodes[0];
        let held = node
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(&keys::cordon("demo")));
        assert!(
            !(held && node_status(&s, "n1", "demo") == Some(Status::Complete)),
            "complete and cordoned after a pass"
        );
    }
}

/// Explore seed 8499: the node cache lags behind this NodeWright's own `complete` write (the
/// snapshot still shows `in_progress`) when a new package with an interrupt reopens the node.
/// The pass that cordons it writes the working status even though the snapshot shows it, so the
/// fresh read cannot keep `complete` beside the cordon (invariant 16.6).
#[test]
fn inv16_6_a_cordoning_write_carries_the_status_a_lagging_snapshot_already_shows() {
    let mut s = interrupt_world();
    let cordon = (0..8)
        .find_map(|_| {
            step(&mut s).effects.into_iter().find_map(|e| match e {
                Effect::PatchNode(p) if p.unschedulable == Some(true) => Some(*p),
                _ => None,
            })
        })
        .expect("a cordoning write");
    let status = cordon
        .annotations
        .get(&keys::node_status("demo"))
        .cloned()
        .flatten();
    assert!(
        status.as_deref().is_some_and(|v| v != "complete"),
        "the cordoning write carries a status that is not complete: {status:?}"
    );
    assert_eq!(
        cordon
            .labels
            .get(&keys::node_status("demo"))
            .cloned()
            .flatten(),
        status
    );
    let mut fresh = s.nodes[0].as_ref().clone();
    set_annotation(&mut fresh, &keys::node_status("demo"), "complete");
    let delta = nodewright_core::effect::resolve_node_patch(&fresh, &cordon)
        .unwrap()
        .unwrap();
    assert_eq!(
        delta.annotations.get(&keys::node_status("demo")),
        Some(&status),
        "the fresh `complete` is overwritten with the cordon"
    );
}

/// Steps until a pass writes the `demo` node Status; returns that node patch.
fn status_write(s: &mut nodewright_core::Snapshot) -> nodewright_core::NodePatch {
    for _ in 0..5 {
        let plan = step(s);
        let found = plan.effects.iter().find_map(|e| match e {
            Effect::PatchNode(p) if p.annotations.contains_key(&keys::node_status("demo")) => {
                Some((**p).clone())
            }
            _ => None,
        });
        if let Some(p) = found {
            return p;
        }
    }
    panic!("no status write in 5 passes");
}

#[test]
fn inv16_5_uncordon_keeps_another_nodewrights_cordon() {
    let mut s = interrupt_world();
    set_annotation(
        Arc::make_mut(&mut s.nodes[0]),
        &keys::cordon("other"),
        "true",
    );
    converge(&mut s, 40);
    assert_eq!(s.nodes[0].spec.as_ref().unwrap().unschedulable, Some(true));
}

#[test]
fn b6_inv16_2_e03_interrupt_waits_for_unfinished_executors() {
    let n = reboot_demo();
    let mut n1 = with_state(
        node("n1"),
        "demo",
        &[entry("dexter", "1.2.3", Stage::Config, State::Complete)],
    );
    n1.spec.as_mut().unwrap().unschedulable = Some(true);
    set_annotation(&mut n1, &keys::cordon("demo"), "true");
    // Another NodeWright's unfinished executor on the node, recorded in its node state (an
    // unrecorded one would be swept as stale and no longer hold the interrupt back).
    let mut busy = snapshot(vec![with_pkg(nw("zother"), "z", "1.0.0")], vec![node("n1")]);
    until_created(&mut busy, 5);
    let zother_state =
        busy.nodes[0].metadata.annotations.as_ref().unwrap()[&keys::node_state("zother")].clone();
    set_annotation(&mut n1, &keys::node_state("zother"), &zother_state);
    let mut s = snapshot(vec![n, with_pkg(nw("zother"), "z", "1.0.0")], vec![n1]);
    s.jobs = busy.jobs.clone();
    assert_eq!(s.jobs.len(), 1);
    for _ in 0..4 {
        let plan = step(&mut s);
        assert!(created(&plan).iter().all(|j| {
            j.metadata
                .labels
                .as_ref()
                .unwrap()
                .get(keys::LABEL_INTERRUPT)
                .is_none()
        }));
    }
    finish_jobs(&mut s, true);
    let mut fired = 0;
    for _ in 0..5 {
        let plan = step(&mut s);
        fired += created(&plan)
            .iter()
            .filter(|j| {
                j.metadata
                    .labels
                    .as_ref()
                    .unwrap()
                    .get(keys::LABEL_INTERRUPT)
                    .is_some()
            })
            .count();
        if fired > 0 {
            assert!(
                events(&plan).contains(&("Interrupt".into(), "InterruptNode".into())),
                "E3"
            );
            break;
        }
    }
    assert_eq!(fired, 1);
}

#[test]
fn t07_t08_owner_fires_and_sibling_is_skipped_then_t09_promoted() {
    let mut n = with_pkg(with_pkg(nw("demo"), "dax", "1.0.0"), "zeb", "1.0.0");
    n = with_interrupt(n, "dax", InterruptType::Service, &["containerd", "foobar"]);
    n = with_interrupt(n, "zeb", InterruptType::Service, &["cron"]);
    let mut s = snapshot(vec![n], vec![node("n1")]);
    let mut saw_skipped = false;
    for _ in 0..40 {
        let plan = step(&mut s);
        for job in created(&plan) {
            if job
                .metadata
                .labels
                .as_ref()
                .unwrap()
                .get(keys::LABEL_INTERRUPT)
                .is_some()
            {
                let pkg = job
                    .metadata
                    .labels
                    .as_ref()
                    .unwrap()
                    .get(keys::PACKAGE)
                    .cloned()
                    .unwrap();
                assert!(
                    pkg.starts_with("dax"),
                    "owner is the alphabetically first package"
                );
            }
        }
        saw_skipped |= doc(&s, "n1", "demo")
            .get("zeb", "1.0.0")
            .is_some_and(|e| e.state == Some(State::Skipped));
        finish_jobs(&mut s, true);
        if plan.effects.is_empty() {
            break;
        }
    }
    assert!(saw_skipped);
    for p in ["dax", "zeb"] {
        let e = doc(&s, "n1", "demo").get(p, "1.0.0").cloned().unwrap();
        assert_eq!(
            (e.stage, e.state),
            (Stage::PostInterrupt, Some(State::Complete)),
            "{p}"
        );
    }
}

#[test]
fn t09_backstop_promotion_is_one_transition_per_write_inv16_11() {
    let mut n = with_pkg(with_pkg(nw("demo"), "bravo", "1.0.0"), "charlie", "1.0.0");
    n = with_interrupt(n, "bravo", InterruptType::Service, &["containerd"]);
    n = with_interrupt(n, "charlie", InterruptType::Service, &["containerd"]);
    let skipped = |p: &str| entry(p, "1.0.0", Stage::Interrupt, State::Skipped);
    let n1 = with_state(node("n1"), "demo", &[skipped("bravo"), skipped("charlie")]);
    let mut s = snapshot(vec![n], vec![n1]);
    let state = |s: &nodewright_core::Snapshot, p: &str| {
        doc(s, "n1", "demo").get(p, "1.0.0").and_then(|e| e.state)
    };
    for _ in 0..5 {
        let plan = step(&mut s);
        assert!(
            created(&plan).is_empty(),
            "no executor before or in the promoting pass"
        );
        if state(&s, "bravo") != Some(State::Skipped) {
            break;
        }
    }
    for p in ["bravo", "charlie"] {
        let e = doc(&s, "n1", "demo").get(p, "1.0.0").cloned().unwrap();
        assert_eq!(
            (e.stage, e.state),
            (Stage::Interrupt, Some(State::Complete)),
            "{p}"
        );
    }
    let plan = until_created(&mut s, 5);
    let stages = created_stages(&plan);
    assert_eq!(
        stages.len(),
        2,
        "both start post-interrupt together: {stages:?}"
    );
    assert!(
        stages.iter().all(|(_, st)| st == "post-interrupt"),
        "{stages:?}"
    );
}

#[test]
fn inv16_22_merge_picks_one_owner_and_unions_services() {
    let n = with_interrupt(
        with_interrupt(
            with_pkg(with_pkg(nw("x"), "dax", "1"), "zeb", "1"),
            "dax",
            InterruptType::Service,
            &["foobar", "containerd"],
        ),
        "zeb",
        InterruptType::Service,
        &["cron"],
    );
    let m = interrupts::merge(n.spec.packages.values(), &Default::default()).unwrap();
    assert_eq!(m.owner, "dax");
    assert_eq!(m.interrupt.services, vec!["containerd", "cron", "foobar"]);
    let n = with_interrupt(n, "zeb", InterruptType::Reboot, &[]);
    let m = interrupts::merge(n.spec.packages.values(), &Default::default()).unwrap();
    assert_eq!(
        (m.owner.as_str(), m.interrupt.type_),
        ("zeb", InterruptType::Reboot)
    );
}

#[test]
fn inv16_10_dag_next_offers_every_ready_vertex_and_no_cycle() {
    let n = with_dep(
        with_dep(
            with_pkg(with_pkg(with_pkg(nw("x"), "a", "1"), "b", "1"), "c", "1"),
            "b",
            "a",
        ),
        "c",
        "b",
    );
    let dag = Dag::build(&n.spec.packages).unwrap();
    let done = |keys: &[&str]| keys.iter().map(|k| k.to_string()).collect();
    assert_eq!(dag.next(&done(&[])), vec!["a|1"]);
    assert_eq!(dag.next(&done(&["a|1"])), vec!["b|1"]);
    assert_eq!(dag.next(&done(&["a|1", "b|1"])), vec!["c|1"]);
    // Q1: a dependency-free package finishing last is still offered.
    assert_eq!(dag.next(&done(&["b|1", "c|1"])), vec!["a|1"]);
    let cyc = with_dep(
        with_dep(with_pkg(with_pkg(nw("y"), "p", "1"), "q", "1"), "p", "q"),
        "q",
        "p",
    );
    let dag = Dag::build(&cyc.spec.packages).unwrap();
    assert!(dag.next(&done(&[])).is_empty(), "cycles are never runnable");
}

#[test]
fn inv16_9_depends_on_chain_runs_in_order() {
    let n = with_dep(
        with_pkg(with_pkg(nw("demo"), "base", "1.0.0"), "top", "1.0.0"),
        "top",
        "base",
    );
    let mut s = snapshot(vec![n], vec![node("n1")]);
    let mut order = Vec::new();
    for _ in 0..20 {
        let plan = step(&mut s);
        for j in created(&plan) {
            order.push(
                j.metadata
                    .labels
                    .as_ref()
                    .unwrap()
                    .get(keys::PACKAGE)
                    .cloned()
                    .unwrap(),
            );
        }
        finish_jobs(&mut s, true);
        if plan.effects.is_empty() {
            break;
        }
    }
    assert_eq!(
        order,
        vec!["base-1.0.0", "base-1.0.0", "top-1.0.0", "top-1.0.0"]
    );
}

#[test]
fn t14_t11_uninstall_runs_from_complete_and_removes_the_entry() {
    let n = with_uninstall(with_pkg(nw("demo"), "dexter", "1.2.3"), "dexter", true);
    let mut s = snapshot(
        vec![n],
        vec![with_state(
            node("n1"),
            "demo",
            &[entry("dexter", "1.2.3", Stage::Config, State::Complete)],
        )],
    );
    let mut stages = Vec::new();
    for _ in 0..10 {
        let plan = step(&mut s);
        stages.extend(created_stages(&plan).into_iter().map(|x| x.1));
        finish_jobs(&mut s, true);
    }
    assert_eq!(stages, vec!["uninstall"]);
    assert!(doc(&s, "n1", "demo").get("dexter", "1.2.3").is_none());
}

/// Explore seed 2972: the version is bumped while the old version's uninstall Job runs. §7.8
/// marks the new key for upgrade (the *spec* key is not in its uninstall cycle), but the upgrade
/// Job must not start beside the old version's uninstall Job (invariant 16.1 counts per package,
/// so the executor-exists check of rule 2.1 matches the package at any version).
#[test]
fn inv16_1_t16_upgrade_waits_for_the_old_version_uninstall_job() {
    let n = with_uninstall(with_pkg(nw("demo"), "dexter", "1.2.3"), "dexter", true);
    let mut s = snapshot(
        vec![n],
        vec![with_state(
            node("n1"),
            "demo",
            &[entry("dexter", "1.2.3", Stage::Config, State::Complete)],
        )],
    );
    let plan = until_created(&mut s, 10);
    assert_eq!(
        created_stages(&plan),
        vec![("n1".to_string(), "uninstall".to_string())]
    );
    let mut bumped = (*s.nodewrights[0]).clone();
    pkg_mut(&mut bumped, "dexter").version = "1.3.0".into();
    s.nodewrights = nodewright_core::shared(vec![bumped]);
    for _ in 0..12 {
        let plan = step(&mut s);
        assert!(
            created(&plan).is_empty(),
            "nothing starts beside the 1.2.3 uninstall Job: {:?}",
            created_stages(&plan)
        );
    }
    let upgrade = doc(&s, "n1", "demo").get("dexter", "1.3.0").cloned();
    assert_eq!(
        upgrade.map(|e| (e.stage, e.state)),
        Some((Stage::Upgrade, Some(State::InProgress))),
        "T16 marked the new key"
    );
    finish_jobs(&mut s, true);
    let plan = until_created(&mut s, 10);
    let job = created(&plan)[0].clone();
    let labels = job.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(keys::PACKAGE).map(String::as_str),
        Some("dexter-1.3.0")
    );
    assert!(doc(&s, "n1", "demo").get("dexter", "1.2.3").is_none());
}

#[test]
fn t14_inv16_11_uninstall_never_interrupts_an_unfinished_install() {
    let n = with_uninstall(with_pkg(nw("demo"), "dexter", "1.2.3"), "dexter", true);
    let mut s = snapshot(
        vec![n],
        vec![with_state(
            node("n1"),
            "demo",
            &[entry("dexter", "1.2.3", Stage::Apply, State::InProgress)],
        )],
    );
    for _ in 0..4 {
        step(&mut s);
    }
    let e = doc(&s, "n1", "demo")
        .get("dexter", "1.2.3")
        .cloned()
        .unwrap();
    assert_eq!(e.stage, Stage::Apply);
}

#[test]
fn t13_completed_uninstall_interrupt_entry_is_removed() {
    let n = with_interrupt(
        with_uninstall(with_pkg(nw("demo"), "dexter", "1.2.3"), "dexter", true),
        "dexter",
        InterruptType::Noop,
        &[],
    );
    let mut s = snapshot(
        vec![n],
        vec![with_state(
            node("n1"),
            "demo",
            &[entry(
                "dexter",
                "1.2.3",
                Stage::UninstallInterrupt,
                State::Complete,
            )],
        )],
    );
    for _ in 0..5 {
        step(&mut s);
    }
    assert!(doc(&s, "n1", "demo").get("dexter", "1.2.3").is_none());
}

/// Explore seed 5032: the request was withdrawn during uninstall-interrupt on a cordoned node.
/// The pass that removes the entry (T13) must not also start the first install, or the one
/// node write carries (uninstall-interrupt, complete) -> (apply, in_progress) (invariant 16.11).
#[test]
fn t13_inv16_11_removal_is_written_before_the_reinstall_starts() {
    let n = with_interrupt(
        with_uninstall(with_pkg(nw("demo"), "dexter", "1.2.3"), "dexter", false),
        "dexter",
        InterruptType::Noop,
        &[],
    );
    let mut n1 = with_state(
        node("n1"),
        "demo",
        &[entry(
            "dexter",
            "1.2.3",
            Stage::UninstallInterrupt,
            State::Complete,
        )],
    );
    n1.spec.as_mut().unwrap().unschedulable = Some(true);
    set_annotation(&mut n1, &keys::cordon("demo"), "true");
    let mut s = snapshot(vec![n], vec![n1]);
    let removing = (0..10)
        .map(|_| step(&mut s))
        .find(|plan| {
            plan.effects.iter().any(|e| match e {
                Effect::PatchNode(p) => p.state.iter().any(|w| w.set.is_none()),
                _ => false,
            })
        })
        .expect("a pass removes the entry");
    assert!(
        created(&removing).is_empty(),
        "no start in the removing pass"
    );
    assert!(removing.requeue_after.is_some());
    let plan = until_created(&mut s, 10);
    assert_eq!(
        created_stages(&plan),
        vec![("n1".to_string(), "apply".to_string())]
    );
}

/// Explore seed 5270: a tracked config update without a matching configInterrupt makes D2
/// HasInterrupt false, but T11 entered uninstall-interrupt because the package's own `interrupt` is
/// set; the gate must still fire that executor (§7.5 step 6), or the entry waits forever.
#[test]
fn t11_d2_uninstall_interrupt_fires_while_a_config_update_is_tracked() {
    let mut n = with_interrupt(
        with_uninstall(with_pkg(nw("demo"), "dexter", "1.2.3"), "dexter", true),
        "dexter",
        InterruptType::Noop,
        &[],
    );
    let mut status = nodewright_crds::NodeWrightStatus::default();
    status
        .config_updates
        .insert("dexter".into(), vec!["config.yaml".into()]);
    n.status = Some(status);
    let updates = n.status.as_ref().unwrap().config_updates.clone();
    let pkg = n.spec.packages.get("dexter").cloned().unwrap();
    assert!(!predicates::has_interrupt(&pkg, &updates), "D2 reads false");
    let mut n1 = with_state(
        node("n1"),
        "demo",
        &[entry(
            "dexter",
            "1.2.3",
            Stage::UninstallInterrupt,
            State::InProgress,
        )],
    );
    n1.spec.as_mut().unwrap().unschedulable = Some(true);
    set_annotation(&mut n1, &keys::cordon("demo"), "true");
    let mut s = snapshot(vec![n], vec![n1]);
    let plan = until_created(&mut s, 10);
    assert_eq!(
        created_stages(&plan),
        vec![("n1".to_string(), "uninstall-interrupt".to_string())]
    );
}

#[test]
fn t15_cancelled_uninstall_returns_to_apply() {
    let n = with_uninstall(with_pkg(nw("demo"), "dexter", "1.2.3"), "dexter", false);
    let mut s = snapshot(
        vec![n],
        vec![with_state(
            node("n1"),
            "demo",
            &[entry(
                "dexter",
                "1.2.3",
                Stage::Uninstall,
                State::InProgress,
            )],
        )],
    );
    for _ in 0..5 {
        step(&mut s);
    }
    let e = doc(&s, "n1", "demo")
        .get("dexter", "1.2.3")
        .cloned()
        .unwrap();
    assert_eq!(e.stage, Stage::Apply);
}

#[test]
fn t16_t10_upgrade_marks_new_key_only_and_removes_old_on_completion() {
    let n = with_pkg(nw("demo"), "dexter", "2.0.0");
    let mut s = snapshot(
        vec![n],
        vec![with_state(
            node("n1"),
            "demo",
            &[entry("dexter", "1.0.0", Stage::Config, State::Complete)],
        )],
    );
    let mut stages = Vec::new();
    for _ in 0..12 {
        let plan = step(&mut s);
        stages.extend(created_stages(&plan).into_iter().map(|x| x.1));
        finish_jobs(&mut s, true);
    }
    assert_eq!(stages, vec!["upgrade", "config"]);
    let d = doc(&s, "n1", "demo");
    assert!(d.get("dexter", "1.0.0").is_none());
    assert!(d.get("dexter", "2.0.0").is_some_and(|e| e.is_complete()));
}

#[test]
fn t19_removed_package_entry_is_kept() {
    let mut s = snapshot(
        vec![with_pkg(nw("demo"), "b", "1.0.0")],
        vec![with_state(
            node("n1"),
            "demo",
            &[entry("gone", "1.0.0", Stage::Config, State::Complete)],
        )],
    );
    converge(&mut s, 20);
    assert!(doc(&s, "n1", "demo").get("gone", "1.0.0").is_some());
}

#[test]
fn inv16_14_paused_starts_nothing_and_suspends() {
    let mut s = one_pkg();
    until_created(&mut s, 10);
    s.nodewrights[0] = Arc::new(annotate_nw(
        (*s.nodewrights[0]).clone(),
        keys::PAUSE,
        "true",
    ));
    let plan = step(&mut s);
    assert!(created(&plan).is_empty());
    assert_eq!(count(&plan, "evict"), 0);
    let suspends = plan
        .effects
        .iter()
        .filter(|e| {
            matches!(
                e,
                Effect::PatchJob {
                    suspend: Some(true),
                    ..
                }
            )
        })
        .count();
    assert_eq!(suspends, 1);
    assert_eq!(node_status(&s, "n1", "demo"), Some(Status::Paused));
    assert_eq!(
        s.nodewrights[0].status.as_ref().unwrap().status,
        Some(Status::Paused)
    );
}

#[test]
fn inv16_15_disabled_starts_nothing_and_never_resumes() {
    let mut s = one_pkg();
    until_created(&mut s, 10);
    s.nodewrights[0] = Arc::new(annotate_nw(
        (*s.nodewrights[0]).clone(),
        keys::PAUSE,
        "true",
    ));
    step(&mut s);
    let mut n = (*s.nodewrights[0]).clone();
    n.metadata.annotations.as_mut().unwrap().remove(keys::PAUSE);
    s.nodewrights[0] = Arc::new(annotate_nw(n, keys::DISABLE, "true"));
    for _ in 0..3 {
        let plan = step(&mut s);
        assert!(created(&plan).is_empty());
        assert!(!plan.effects.iter().any(|e| matches!(
            e,
            Effect::PatchJob {
                suspend: Some(false),
                ..
            }
        )));
    }
    assert_eq!(node_status(&s, "n1", "demo"), Some(Status::Disabled));
}

#[test]
fn inv16_8_r7_4_lower_priority_waits_on_the_node() {
    let mut first = with_pkg(nw("first"), "a", "1.0.0");
    first.spec.priority = 1;
    let second = with_pkg(nw("second"), "b", "1.0.0");
    let mut s = snapshot(vec![second, first], vec![node("n1")]);
    let plan = until_created(&mut s, 10);
    let names: Vec<_> = created(&plan)
        .iter()
        .map(|j| j.metadata.labels.as_ref().unwrap()[keys::LABEL_NAME].clone())
        .collect();
    assert_eq!(names, vec!["first"]);
    assert_eq!(node_status(&s, "n1", "second"), Some(Status::Waiting));
    converge(&mut s, 30);
    assert_eq!(node_status(&s, "n1", "second"), Some(Status::Complete));
}

#[test]
fn inv16_7_budget_limits_nodes_per_batch() {
    let mut s = snapshot(
        vec![with_budget(with_pkg(nw("demo"), "a", "1.0.0"), 1)],
        vec![node("n1"), node("n2"), node("n3")],
    );
    let plan = until_created(&mut s, 10);
    assert_eq!(created(&plan).len(), 1);
    converge(&mut s, 60);
    for n in ["n1", "n2", "n3"] {
        assert_eq!(node_status(&s, n, "demo"), Some(Status::Complete), "{n}");
    }
}

#[test]
fn r7_5_serial_starts_one_package_per_node_per_pass() {
    let mut n = with_pkg(with_pkg(nw("demo"), "a", "1.0.0"), "b", "1.0.0");
    n.spec.serial = true;
    let mut s = snapshot(vec![n], vec![node("n1")]);
    let plan = until_created(&mut s, 10);
    assert_eq!(created(&plan).len(), 1);
}

#[test]
fn inv16_21_deterministic_same_snapshot_same_bytes_even_shuffled() {
    let mut a = snapshot(
        vec![
            with_pkg(nw("one"), "a", "1.0.0"),
            with_pkg(nw("two"), "b", "1.0.0"),
        ],
        vec![node("n1"), node("n2"), node("n3")],
    );
    step(&mut a);
    let p1 = serde_json::to_string(&pass(&a)).unwrap();
    let p2 = serde_json::to_string(&pass(&a)).unwrap();
    assert_eq!(p1, p2);
    let mut b = a.clone();
    b.nodes.reverse();
    b.nodewrights.reverse();
    assert_eq!(p1, serde_json::to_string(&pass(&b)).unwrap());
}

#[test]
fn inv16_21_fixpoint_with_frozen_world() {
    let mut s = interrupt_world();
    s.workload_pods.clear();
    for _ in 0..6 {
        step(&mut s);
    }
    let plan = pass(&s);
    assert!(created(&plan).is_empty());
    assert_eq!(count(&plan, "patchNode"), 0, "no re-cordon");
}

#[test]
fn inv16_19_status_consistency_after_convergence() {
    let mut s = snapshot(
        vec![with_pkg(nw("demo"), "a", "1.0.0")],
        vec![node("n1"), node("n2")],
    );
    converge(&mut s, 30);
    let st = s.nodewrights[0].status.clone().unwrap();
    assert_eq!(st.status, Some(Status::Complete));
    let ready = status::condition(&st.conditions, "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "NodesConverged")
    );
    assert_eq!(ready.message, "2/2 nodes complete (n1, n2)");
    assert_eq!(st.complete_nodes, "2/2");
    assert_eq!(st.package_list, "a:1.0.0");
    assert_eq!(st.observed_generation, 1, "D7");
}

#[test]
fn e09_transition_event_on_status_change() {
    let mut s = one_pkg();
    step(&mut s);
    let mut seen = false;
    for _ in 0..10 {
        let plan = step(&mut s);
        seen |= events(&plan).contains(&("State".into(), "Transition".into()));
        finish_jobs(&mut s, true);
    }
    assert!(seen);
}

#[test]
fn r9_requeue_smallest_positive_wins() {
    let mut plan = nodewright_core::Plan::default();
    plan.requeue_at_most(std::time::Duration::from_secs(30));
    plan.requeue_at_most(std::time::Duration::from_secs(2));
    plan.requeue_at_most(std::time::Duration::from_secs(600));
    assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(2)));
}

#[test]
fn r9_idle_complete_cluster_requeues_after_default_interval() {
    let mut s = one_pkg();
    converge(&mut s, 20);
    let plan = pass(&s);
    assert!(plan.effects.is_empty());
    assert_eq!(
        plan.requeue_after,
        Some(std::time::Duration::from_secs(600))
    );
}

#[test]
fn d3_d7_predicates_post_interrupt_is_terminal_and_next_stage_table() {
    let n = with_pkg(nw("x"), "p", "1.0.0");
    let p = &n.spec.packages["p"];
    let mut d = nodewright_crds::NodeState::default();
    d.upsert(entry("p", "1.0.0", Stage::PostInterrupt, State::Complete));
    assert!(predicates::is_package_complete(&d, p, &Default::default()));
    let e = entry("p", "1.0.0", Stage::Interrupt, State::Complete);
    assert_eq!(
        predicates::next_stage(&e, p, &Default::default()),
        Some(Stage::PostInterrupt)
    );
    let e = entry("p", "1.0.0", Stage::Config, State::Complete);
    assert_eq!(predicates::next_stage(&e, p, &Default::default()), None);
    let e = entry("p", "1.0.0", Stage::Apply, State::InProgress);
    assert_eq!(predicates::next_stage(&e, p, &Default::default()), None);
}

#[test]
fn d1_d2_config_interrupts_steer_has_interrupt() {
    let mut n = with_interrupt(
        with_pkg(nw("x"), "p", "1.0.0"),
        "p",
        InterruptType::Reboot,
        &[],
    );
    pkg_mut(&mut n, "p").config_interrupts.insert(
        "*.conf".into(),
        nodewright_crds::Interrupt {
            type_: InterruptType::Service,
            services: vec!["a".into()],
        },
    );
    let p = &n.spec.packages["p"];
    let mut updates = std::collections::BTreeMap::new();
    updates.insert("p".to_string(), vec!["x.yaml".to_string()]);
    assert!(
        !predicates::has_interrupt(p, &updates),
        "e2e config-skyhook"
    );
    updates.insert("p".to_string(), vec!["x.conf".to_string()]);
    assert!(predicates::has_interrupt(p, &updates));
}

#[test]
fn r6_6_status_aggregate_and_node_status_rules() {
    use status::{NodeFacts, aggregate, node_status as ns};
    assert_eq!(aggregate([]), Status::Complete);
    assert_eq!(
        aggregate([(true, Status::Complete), (false, Status::InProgress)]),
        Status::InProgress
    );
    assert_eq!(
        aggregate([(false, Status::Erroring), (false, Status::Erroring)]),
        Status::Erroring
    );
    assert_eq!(
        aggregate([(false, Status::Erroring), (false, Status::Waiting)]),
        Status::Unknown
    );
    let f = NodeFacts {
        current: Status::Unknown,
        complete: false,
        ineligible: true,
        ready: true,
    };
    assert_eq!(ns(Status::InProgress, true, f), Status::Blocked);
    let f = NodeFacts {
        current: Status::InProgress,
        complete: false,
        ineligible: false,
        ready: false,
    };
    assert_eq!(ns(Status::InProgress, true, f), Status::Waiting);
    let f = NodeFacts {
        current: Status::Complete,
        complete: false,
        ineligible: false,
        ready: true,
    };
    assert_eq!(ns(Status::InProgress, true, f), Status::Unknown);
    assert_eq!(ns(Status::Paused, true, f), Status::Paused);
}

#[test]
fn inv16_17_b5_finalizer_cleanup_then_removal() {
    let mut s = one_pkg();
    converge(&mut s, 20);
    Arc::make_mut(&mut s.nodewrights[0])
        .metadata
        .deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    let plan = until(&mut s, "removeFinalizer", 5);
    let kinds: Vec<String> = plan
        .effects
        .iter()
        .map(|e| {
            serde_json::to_value(e).unwrap()["effect"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let node_at = kinds.iter().position(|k| k == "patchNode").unwrap();
    let fin_at = kinds.iter().position(|k| k == "removeFinalizer").unwrap();
    assert!(
        node_at < fin_at,
        "B5: cleanup before the finalizer goes: {kinds:?}"
    );
    assert!(s.nodewrights.is_empty());
    assert_eq!(node_status(&s, "n1", "demo"), None);
}

#[test]
fn inv16_17_deletion_waits_for_enabled_uninstalls() {
    let n = with_uninstall(with_pkg(nw("demo"), "dexter", "1.2.3"), "dexter", false);
    let mut s = snapshot(
        vec![n],
        vec![with_state(
            node("n1"),
            "demo",
            &[entry("dexter", "1.2.3", Stage::Config, State::Complete)],
        )],
    );
    Arc::make_mut(&mut s.nodewrights[0])
        .metadata
        .deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    let plan = until_created(&mut s, 10);
    assert_eq!(
        created_stages(&plan),
        vec![("n1".to_string(), "uninstall".to_string())]
    );
    assert_eq!(
        s.nodewrights.len(),
        1,
        "finalizer stays while the uninstall runs"
    );
}

#[test]
fn b4_t18_e10_e11_reboot_reset_before_boot_id_is_recorded() {
    let mut s = one_pkg();
    converge(&mut s, 20);
    Arc::make_mut(&mut s.nodes[0])
        .status
        .as_mut()
        .unwrap()
        .node_info
        .as_mut()
        .unwrap()
        .boot_id = "boot-2".into();
    let options = nodewright_core::Options {
        reapply_on_reboot: true,
        ..Default::default()
    };
    let plan = nodewright_core::reconcile(&s, &options, now());
    let st = plan
        .effects
        .iter()
        .find_map(|e| match e {
            Effect::PatchStatus { status, .. } => Some(status.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        st.node_boot_ids.get("n1").map(String::as_str),
        Some("boot-1"),
        "B4"
    );
    assert!(
        events(&plan).contains(&("Reboot".into(), "ResetNodeState".into())),
        "E10/E11"
    );
    apply(&mut s, &plan);
    assert!(doc(&s, "n1", "demo").is_empty());
    let plan = nodewright_core::reconcile(&s, &options, now());
    apply(&mut s, &plan);
    assert_eq!(
        s.nodewrights[0].status.as_ref().unwrap().node_boot_ids["n1"],
        "boot-2"
    );
}

#[test]
fn r5_reboot_without_reapply_only_records_boot_id() {
    let mut s = one_pkg();
    converge(&mut s, 20);
    Arc::make_mut(&mut s.nodes[0])
        .status
        .as_mut()
        .unwrap()
        .node_info
        .as_mut()
        .unwrap()
        .boot_id = "boot-2".into();
    step(&mut s);
    assert_eq!(
        s.nodewrights[0].status.as_ref().unwrap().node_boot_ids["n1"],
        "boot-2"
    );
    assert!(doc(&s, "n1", "demo").get("dexter", "1.2.3").is_some());
}

#[test]
fn r9_metrics_zero_filled_for_every_status() {
    let mut s = one_pkg();
    converge(&mut s, 20);
    let plan = pass(&s);
    let status: Vec<_> = plan.metrics.iter().filter(|m| m.name == "status").collect();
    assert_eq!(status.len(), 8);
    assert_eq!(status.iter().filter(|m| m.value == 1.0).count(), 1);
    assert!(
        plan.metrics
            .iter()
            .any(|m| m.name == "package_stage_count" && m.value == 1.0)
    );
}

fn rr_world(auto: bool) -> nodewright_core::Snapshot {
    let mut n = with_pkg(nw("demo"), "a", "1.0.0");
    n.spec.runtime_required = true;
    n.spec.auto_taint_new_nodes = auto;
    snapshot(vec![n], vec![node("n1")])
}

#[test]
fn r3_inv16_16_auto_taint_new_node_once() {
    let mut s = rr_world(true);
    let plan = step(&mut s);
    let patch = plan
        .effects
        .iter()
        .find_map(|e| match e {
            Effect::PatchNode(p) => Some(p),
            _ => None,
        })
        .unwrap();
    assert_eq!(patch.taints_add.len(), 1);
    assert_eq!(patch.taints_add[0].key, "nodewright.nvidia.com");
}

#[test]
fn r8_inv16_16_runtime_required_taint_removed_when_complete() {
    let mut s = rr_world(true);
    converge(&mut s, 30);
    let taints = s.nodes[0]
        .spec
        .as_ref()
        .unwrap()
        .taints
        .clone()
        .unwrap_or_default();
    assert!(taints.is_empty(), "{taints:?}");
    assert_eq!(node_status(&s, "n1", "demo"), Some(Status::Complete));
    assert_eq!(
        Arc::make_mut(&mut s.nodes[0])
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .get(&keys::auto_taint("nodewright.nvidia.com"))
            .map(String::as_str),
        Some("true")
    );
}

fn config_world() -> nodewright_core::Snapshot {
    let mut n = reboot_demo();
    pkg_mut(&mut n, "dexter")
        .config_map
        .insert("a.yaml".into(), "1".into());
    pkg_mut(&mut n, "dexter").config_interrupts.insert(
        "*.conf".into(),
        nodewright_crds::Interrupt {
            type_: InterruptType::Service,
            services: vec!["svc".into()],
        },
    );
    snapshot(vec![n], vec![node("n1"), node("n2")])
}

fn all_stages(s: &mut nodewright_core::Snapshot, max: usize) -> Vec<String> {
    let mut stages = Vec::new();
    for _ in 0..max {
        let plan = step(s);
        stages.extend(created_stages(&plan).into_iter().map(|x| x.1));
        finish_jobs(s, true);
        if plan.effects.is_empty() {
            break;
        }
    }
    stages
}

#[test]
fn t17_b3_config_change_marks_entries_and_reruns_config_only() {
    let mut s = config_world();
    converge(&mut s, 60);
    assert_eq!(node_status(&s, "n1", "demo"), Some(Status::Complete));
    pkg_mut(Arc::make_mut(&mut s.nodewrights[0]), "dexter")
        .config_map
        .insert("a.yaml".into(), "2".into());
    let plan = until(&mut s, "upsertConfigMap", 5);
    let kinds: Vec<String> = plan
        .effects
        .iter()
        .map(|e| {
            serde_json::to_value(e).unwrap()["effect"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let node_at = kinds.iter().position(|k| k == "patchNode").unwrap();
    let cm_at = kinds.iter().position(|k| k == "upsertConfigMap").unwrap();
    assert!(
        node_at < cm_at,
        "B3: entries persisted before the ConfigMap swap: {kinds:?}"
    );
    assert!(
        created(&plan).is_empty(),
        "B3: no executor in the commit pass"
    );
    let st = s.nodewrights[0].status.clone().unwrap();
    assert_eq!(st.config_updates["dexter"], vec!["a.yaml"]);
    let e = doc(&s, "n1", "demo")
        .get("dexter", "1.2.3")
        .cloned()
        .unwrap();
    assert_eq!((e.stage, e.state), (Stage::Config, Some(State::InProgress)));
    let stages = all_stages(&mut s, 40);
    assert_eq!(
        stages,
        vec!["config", "config"],
        "e2e config-skyhook: no interrupt for a non-matching key"
    );
    let e = doc(&s, "n2", "demo")
        .get("dexter", "1.2.3")
        .cloned()
        .unwrap();
    assert_eq!((e.stage, e.state), (Stage::Config, Some(State::Complete)));
    converge(&mut s, 10);
    let st = s.nodewrights[0].status.clone().unwrap();
    assert_eq!(
        st.config_updates["dexter"],
        vec!["a.yaml"],
        "kept: clearing would re-arm the reboot"
    );
}

#[test]
fn d1_t17_q13_config_change_with_matching_config_interrupt_runs_interrupt() {
    let mut s = config_world();
    converge(&mut s, 60);
    pkg_mut(Arc::make_mut(&mut s.nodewrights[0]), "dexter")
        .config_map
        .insert("x.conf".into(), "on".into());
    let stages = all_stages(&mut s, 60);
    assert!(
        stages.iter().filter(|s| *s == "interrupt").count() == 2,
        "{stages:?}"
    );
    assert_eq!(node_status(&s, "n1", "demo"), Some(Status::Complete));
    converge(&mut s, 10);
    let st = s.nodewrights[0].status.clone().unwrap();
    assert!(
        !st.config_updates.contains_key("dexter"),
        "D9/Q13: cleared once complete everywhere"
    );
}

#[test]
fn inv16_18_config_change_deferred_while_installing() {
    let mut n = with_pkg(nw("demo"), "dexter", "1.2.3");
    pkg_mut(&mut n, "dexter")
        .config_map
        .insert("a".into(), "1".into());
    let mut s = snapshot(vec![n], vec![node("n1")]);
    until_created(&mut s, 10); // apply running, ConfigMap created
    pkg_mut(Arc::make_mut(&mut s.nodewrights[0]), "dexter")
        .config_map
        .insert("a".into(), "2".into());
    for _ in 0..3 {
        step(&mut s);
    }
    let cm = s
        .config_maps
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some("demo-dexter-1.2.3"))
        .unwrap();
    assert_eq!(
        cm.data.as_ref().unwrap()["a"],
        "1",
        "the ConfigMap is not swapped mid-stage"
    );
    assert!(
        Arc::make_mut(&mut s.nodewrights[0])
            .status
            .as_ref()
            .unwrap()
            .config_updates
            .is_empty()
    );
}

/// M2 (issue 16): like the Go operator, every node the NodeWright reports a status on carries
/// `<P>/version_<name>` with the operator version (the NodeWright's own `<P>/version` is written
/// by the shell with the finalizer).
#[test]
fn m2_converged_node_carries_the_operator_version() {
    let mut s = one_pkg();
    converge(&mut s, 20);
    let a = s.nodes[0].metadata.annotations.clone().unwrap();
    assert_eq!(
        a.get(&keys::node_version("demo")).map(String::as_str),
        Some(keys::OPERATOR_VERSION)
    );
}

#[test]
fn b2_stale_executor_is_removed_before_any_resume() {
    let mut s = one_pkg();
    until_created(&mut s, 10);
    s.nodewrights[0] = Arc::new(annotate_nw(
        (*s.nodewrights[0]).clone(),
        keys::PAUSE,
        "true",
    ));
    step(&mut s); // suspended
    let mut n = (*s.nodewrights[0]).clone();
    n.metadata.annotations.as_mut().unwrap().remove(keys::PAUSE);
    pkg_mut(&mut n, "dexter").image = "ghcr.io/example/other".into(); // spec drift
    s.nodewrights[0] = Arc::new(n);
    let plan = pass(&s);
    assert!(count(&plan, "deleteJob") + count(&plan, "patchJob") >= 1);
    assert!(
        !plan.effects.iter().any(|e| matches!(
            e,
            Effect::PatchJob {
                suspend: Some(false),
                ..
            }
        )),
        "B2: a stale executor is invalidated, never resumed"
    );
}

#[test]
fn t03_in_flight_failure_is_guarded_and_leaves_node_status() {
    use nodewright_core::jobs::{Evidence, Outcome, OutcomeKind, entry_changes};
    let n = with_pkg(nw("demo"), "dexter", "1.2.3");
    let mut d = nodewright_crds::NodeState::default();
    d.upsert(entry("dexter", "1.2.3", Stage::Apply, State::InProgress));
    let o = Outcome {
        nodewright: "demo".into(),
        node: "n1".into(),
        package: "dexter".into(),
        version: "1.2.3".into(),
        stage: Some(Stage::Apply),
        job: "j".into(),
        kind: OutcomeKind::AttemptFailed {
            restarts: Some(1),
            evidence: Evidence {
                pod: "p".into(),
                container: "c".into(),
                reason: "Error".into(),
                message: String::new(),
            },
        },
        image: "ghcr.io/example/dexter".into(),
        container_sha: String::new(),
        after_state: vec![],
    };
    let changes = entry_changes(&o, Some(&n), &d);
    assert_eq!(changes.len(), 1);
    assert_eq!(
        changes[0].set.as_ref().unwrap().state,
        Some(State::Erroring)
    );
    // Guard: another stage, or an absent entry, is never written (T20, inv16_12).
    d.upsert(entry("dexter", "1.2.3", Stage::Config, State::InProgress));
    assert!(entry_changes(&o, Some(&n), &d).is_empty());
}

#[test]
fn t11_t12_t13_uninstall_with_interrupt_runs_uninstall_interrupt_then_removes() {
    let mut n = with_interrupt(
        with_uninstall(with_pkg(nw("demo"), "dexter", "1.2.3"), "dexter", true),
        "dexter",
        InterruptType::Noop,
        &[],
    );
    n.spec
        .packages
        .get_mut("dexter")
        .unwrap()
        .uninstall
        .as_mut()
        .unwrap()
        .apply = true;
    let mut n1 = with_state(
        node("n1"),
        "demo",
        &[entry(
            "dexter",
            "1.2.3",
            Stage::PostInterrupt,
            State::Complete,
        )],
    );
    n1.spec.as_mut().unwrap().unschedulable = Some(true);
    set_annotation(&mut n1, &keys::cordon("demo"), "true");
    let mut s = snapshot(vec![n], vec![n1]);
    let stages = all_stages(&mut s, 30);
    assert_eq!(stages, vec!["uninstall", "uninstall-interrupt"]);
    assert!(doc(&s, "n1", "demo").get("dexter", "1.2.3").is_none());
}

#[test]
fn e05_e06_r6_1_non_interrupt_pods_block_the_drain() {
    let mut n = reboot_demo();
    n.spec.pod_non_interrupt_labels = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_labels: Some([("app".to_string(), "training".to_string())].into()),
            match_expressions: None,
        },
    );
    let mut s = snapshot(vec![n], vec![node("n1")]);
    let mut pod = workload_pod("train", "n1");
    pod.metadata.labels = Some([("app".to_string(), "training".to_string())].into());
    s.workload_pods.push(Arc::new(pod));
    let mut warned = false;
    let mut nw_warned = false;
    for _ in 0..8 {
        let plan = step(&mut s);
        warned |= events(&plan).contains(&("Drain".into(), "NonInterruptPodsRunning".into()));
        nw_warned |= plan.effects.iter().any(|e| {
            matches!(e, Effect::Event(ev) if ev.regarding.kind == "NodeWright" && ev.action == "NonInterruptPodsRunning")
        });
        assert_eq!(
            count(&plan, "evict"),
            0,
            "no eviction while non-interrupt work runs"
        );
        assert!(created(&plan).is_empty());
    }
    assert!(warned, "E5");
    assert!(nw_warned, "E6");
    let st = s.nodewrights[0].status.clone().unwrap();
    assert_eq!(
        status::condition(&st.conditions, "Blocked").unwrap().reason,
        "NonInterruptPodsRunning"
    );
}

#[test]
fn e07_drain_timeout_marks_node_erroring_and_keeps_waiting() {
    let mut n = reboot_demo();
    n.spec.drain_config = Some(nodewright_crds::DrainConfig {
        timeout: Some(nodewright_crds::duration::GoDuration("1m".into())),
        ..Default::default()
    });
    let mut n1 = node("n1");
    n1.spec.as_mut().unwrap().unschedulable = Some(true);
    set_annotation(&mut n1, &keys::cordon("demo"), "true");
    set_annotation(&mut n1, &keys::drain_start("demo"), "2025-12-31T23:00:00Z");
    let mut s = snapshot(vec![n], vec![n1]);
    let mut pod = workload_pod("stuck", "n1");
    pod.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    s.workload_pods.push(Arc::new(pod));
    let mut timed_out = false;
    for _ in 0..8 {
        let plan = step(&mut s);
        timed_out |= events(&plan).contains(&("Drain".into(), "DrainTimeout".into()));
        assert!(created(&plan).is_empty());
    }
    assert!(timed_out);
}

#[test]
fn e08_mark_complete_event_when_node_completes() {
    let mut s = one_pkg();
    let mut seen = false;
    for _ in 0..20 {
        let plan = step(&mut s);
        seen |= events(&plan).contains(&("State".into(), "MarkComplete".into()));
        finish_jobs(&mut s, true);
    }
    assert!(seen);
}

#[test]
fn e12_paused_deletion_with_pending_uninstall_is_blocked() {
    let n = annotate_nw(
        with_uninstall(with_pkg(nw("demo"), "dexter", "1.2.3"), "dexter", false),
        keys::PAUSE,
        "true",
    );
    let mut s = snapshot(
        vec![n],
        vec![with_state(
            node("n1"),
            "demo",
            &[entry("dexter", "1.2.3", Stage::Config, State::Complete)],
        )],
    );
    Arc::make_mut(&mut s.nodewrights[0])
        .metadata
        .deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    let plan = until(&mut s, "event", 5);
    assert!(events(&plan).contains(&("DeletionBlocked".into(), "BlockDelete".into())));
    let st = s.nodewrights[0].status.clone().unwrap();
    assert_eq!(
        status::condition(&st.conditions, "DeletionBlocked")
            .unwrap()
            .reason,
        "PausedWithPendingUninstall"
    );
    assert_eq!(count(&pass(&s), "removeFinalizer"), 0);
}

#[test]
fn e15_attempt_failed_event_via_jobs_seam() {
    // E15 is emitted by jobs::record_events for AttemptFailed outcomes the pass applies.
    use nodewright_core::jobs::{Evidence, Outcome, OutcomeKind, record_events};
    let o = Outcome {
        nodewright: "demo".into(),
        node: "n1".into(),
        package: "dexter".into(),
        version: "1.2.3".into(),
        stage: Some(Stage::Apply),
        job: "j".into(),
        kind: OutcomeKind::AttemptFailed {
            restarts: Some(1),
            evidence: Evidence {
                pod: "p".into(),
                container: "c".into(),
                reason: "Error".into(),
                message: String::new(),
            },
        },
        image: String::new(),
        container_sha: String::new(),
        after_state: vec![],
    };
    let change = nodewright_core::EntryChange {
        nodewright: "demo".into(),
        key: "dexter|1.2.3".into(),
        expect: None,
        set: None,
    };
    let ev = record_events(&o, &[change]);
    assert!(
        ev.iter()
            .any(|e| matches!(e, Effect::Event(x) if x.action == "UpdateNodeState"))
    );
}

#[test]
fn inv16_13_patch_carries_only_changed_entries_with_snapshot_expectations() {
    let n = with_pkg(with_pkg(nw("demo"), "a", "1.0.0"), "b", "1.0.0");
    let done = entry("b", "1.0.0", Stage::Config, State::Complete);
    let mut s = snapshot(
        vec![n],
        vec![with_state(node("n1"), "demo", std::slice::from_ref(&done))],
    );
    let plan = until_created(&mut s, 10);
    let patch = plan
        .effects
        .iter()
        .find_map(|e| match e {
            Effect::PatchNode(p) if !p.state.is_empty() => Some(p),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        patch.state.len(),
        1,
        "b is untouched, so absent from the patch"
    );
    assert_eq!(patch.state[0].key, "a|1.0.0");
    assert_eq!(patch.state[0].expect, None);
}

#[test]
fn inv16_20_node_order_offset_never_decreases() {
    let mut s = snapshot(
        vec![with_budget(with_pkg(nw("demo"), "a", "1.0.0"), 1)],
        vec![node("n1"), node("n2"), node("n3")],
    );
    let mut last = 0;
    for _ in 0..60 {
        let plan = step(&mut s);
        finish_jobs(&mut s, true);
        let offset = s.nodewrights[0]
            .status
            .as_ref()
            .map_or(0, |st| st.node_order_offset);
        assert!(offset >= last);
        last = offset;
        if plan.effects.is_empty() {
            break;
        }
    }
    assert_eq!(last, 3);
}

#[test]
fn inv16_23_no_resurrection_after_reset() {
    let mut s = one_pkg();
    until_created(&mut s, 10);
    Arc::make_mut(&mut s.nodes[0])
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(&keys::node_state("demo"));
    finish_jobs(&mut s, true);
    for _ in 0..3 {
        let plan = step(&mut s);
        for e in &plan.effects {
            if let Effect::PatchNode(p) = e {
                for c in &p.state {
                    if c.expect.is_none() {
                        let set = c.set.as_ref().unwrap();
                        assert_eq!(
                            (set.stage, set.state),
                            (Stage::Apply, Some(State::InProgress)),
                            "only T1 creates entries"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn r2_3_dependency_cycle_blocks_only_that_nodewright() {
    let cyc = with_dep(
        with_dep(
            with_pkg(with_pkg(nw("cyc"), "p", "1.0.0"), "q", "1.0.0"),
            "p",
            "q",
        ),
        "q",
        "p",
    );
    let mut ok = with_pkg(nw("ok"), "a", "1.0.0");
    ok.spec.priority = 1;
    let mut s = snapshot(vec![cyc, ok], vec![node("n1")]);
    converge(&mut s, 30);
    assert_eq!(node_status(&s, "n1", "ok"), Some(Status::Complete));
    let st = s
        .nodewrights
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some("cyc"))
        .unwrap()
        .status
        .clone()
        .unwrap();
    let blocked = status::condition(&st.conditions, "Blocked").unwrap();
    assert_eq!(blocked.reason, "InvalidDependencyGraph");
    assert!(doc(&s, "n1", "cyc").is_empty());
}

#[test]
fn r9_metrics_include_rollout_gauges() {
    let mut s = one_pkg();
    converge(&mut s, 20);
    let plan = pass(&s);
    let _ = &plan;
    let mut s2 = one_pkg();
    let first = step(&mut s2);
    let second = step(&mut s2);
    assert!(
        first
            .metrics
            .iter()
            .chain(&second.metrics)
            .any(|m| m.name.starts_with("rollout_")),
        "rollout gauges come from the rollout decision"
    );
}

#[test]
fn r6_4b_metadata_packages_json_rewritten_and_orphans_deleted() {
    let mut s = snapshot(
        vec![with_pkg(nw("demo"), "dexter", "1.2.3")],
        vec![node("n1"), node("n2")],
    );
    converge(&mut s, 30);
    assert_eq!(s.config_maps.len(), 2, "one metadata ConfigMap per node");
    s.nodewrights[0] = Arc::new(with_interrupt(
        (*s.nodewrights[0]).clone(),
        "dexter",
        InterruptType::Noop,
        &[],
    ));
    let plan = until(&mut s, "upsertConfigMap", 3);
    assert_eq!(count(&plan, "upsertConfigMap"), 2);
    let sel = k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
        match_labels: Some([("kubernetes.io/hostname".to_string(), "n1".to_string())].into()),
        match_expressions: None,
    };
    Arc::make_mut(&mut s.nodewrights[0]).spec.node_selector = Some(sel);
    let plan = until(&mut s, "deleteConfigMap", 3);
    assert_eq!(count(&plan, "deleteConfigMap"), 1);
}

#[test]
fn e04_r6_1_pdb_blocked_pod_is_not_evicted_and_drain_blocked_is_reported() {
    use k8s_openapi::api::policy::v1::{
        PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
    };
    let mut s = interrupt_world();
    Arc::make_mut(&mut s.workload_pods[0]).metadata.labels =
        Some([("app".to_string(), "web".to_string())].into());
    s.pod_disruption_budgets.push(Arc::new(PodDisruptionBudget {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("web-pdb".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                    match_labels: Some([("app".to_string(), "web".to_string())].into()),
                    match_expressions: None,
                },
            ),
            ..Default::default()
        }),
        status: Some(PodDisruptionBudgetStatus {
            disruptions_allowed: Some(0),
            ..Default::default()
        }),
    }));
    for _ in 0..8 {
        let plan = step(&mut s);
        assert_eq!(count(&plan, "evict"), 0);
        assert!(created(&plan).is_empty());
    }
    let st = s.nodewrights[0].status.clone().unwrap();
    let c = status::condition(&st.conditions, "DrainBlocked").unwrap();
    assert_eq!(c.reason, "PodDisruptionBudget");
    assert!(
        c.message
            .starts_with("1/1 nodes blocked draining (n1); default/web on n1"),
        "{}",
        c.message
    );
}

#[test]
fn r6_6_condition_transition_time_rules() {
    let t0 = now();
    let t1 = t0.checked_add(jiff::SignedDuration::from_secs(60)).unwrap();
    let mut c = Vec::new();
    assert!(status::set_condition(
        &mut c,
        "Ready",
        false,
        "Progressing",
        "a",
        1,
        t0
    ));
    assert!(
        !status::set_condition(&mut c, "Ready", false, "Progressing", "a", 1, t1),
        "identical is a no-op"
    );
    assert!(status::set_condition(
        &mut c,
        "Ready",
        false,
        "Progressing",
        "b",
        1,
        t1
    ));
    assert_eq!(
        c[0].last_transition_time.0, t0,
        "same status keeps the time"
    );
    let ty = format!("{}/Transition", keys::PREFIX);
    status::set_condition(&mut c, &ty, false, "in_progress", "a", 1, t0);
    status::set_condition(&mut c, &ty, false, "in_progress", "b", 1, t1);
    assert_eq!(
        status::condition(&c, &ty).unwrap().last_transition_time.0,
        t1,
        "Transition: message change moves the time"
    );
}

/// (package label, stage) of each Job a plan creates.
fn created_packages(plan: &nodewright_core::Plan) -> Vec<(String, String)> {
    created(plan)
        .iter()
        .map(|j| {
            let stage = j.metadata.labels.as_ref().unwrap()[keys::LABEL_STAGE].clone();
            (job_package(j), stage)
        })
        .collect()
}

/// Marks the unfinished Jobs of package label `label` (`<name>-<version>`) complete.
fn finish_package(s: &mut nodewright_core::Snapshot, label: &str) {
    finish_jobs_where(s, true, |j| job_package(j) == label);
}

/// Steps until a pass plans nothing (at most 10 passes), without finishing any Job.
fn settle(s: &mut nodewright_core::Snapshot) {
    for _ in 0..10 {
        if step(s).effects.is_empty() {
            return;
        }
    }
    panic!("no fixpoint in 10 passes");
}

/// Invariant 16.9 narrowed to what it protects: the pass that records an outcome on a node holds
/// back the starts that rest on it (the same package's next stage) and starts an unrelated
/// package of the node beside it.
#[test]
fn inv16_9_an_outcome_holds_back_its_own_package_and_not_an_unrelated_one() {
    let n = with_pkg(with_pkg(nw("demo"), "a", "1.0.0"), "b", "1.0.0");
    let mut s = snapshot(vec![n], vec![node("n1")]);
    let first = until_created(&mut s, 10);
    assert_eq!(
        created_packages(&first),
        vec![
            ("a-1.0.0".into(), "apply".into()),
            ("b-1.0.0".into(), "apply".into())
        ]
    );
    settle(&mut s);
    finish_package(&mut s, "a-1.0.0");
    let recorded_a = step(&mut s);
    assert!(
        created(&recorded_a).is_empty(),
        "a's config rests on its own outcome"
    );
    finish_package(&mut s, "b-1.0.0");
    let recorded_b = step(&mut s);
    assert_eq!(
        created_packages(&recorded_b),
        vec![("a-1.0.0".into(), "config".into())],
        "a starts beside b's outcome; b's own config waits"
    );
    assert_eq!(
        created_packages(&step(&mut s)),
        vec![("b-1.0.0".into(), "config".into())]
    );
}

/// 16.9 dependencies: a `dependsOn` package waits for the pass after its dependency's
/// completion was recorded, while an independent package of the node starts in that pass.
#[test]
fn inv16_9_a_dependent_waits_for_the_recorded_completion_to_land() {
    let n = with_dep(
        with_pkg(
            with_pkg(with_pkg(nw("demo"), "base", "1.0.0"), "top", "1.0.0"),
            "other",
            "1.0.0",
        ),
        "top",
        "base",
    );
    let mut s = snapshot(vec![n], vec![node("n1")]);
    let first = until_created(&mut s, 10);
    assert_eq!(
        created_packages(&first),
        vec![
            ("base-1.0.0".into(), "apply".into()),
            ("other-1.0.0".into(), "apply".into())
        ]
    );
    settle(&mut s);
    finish_package(&mut s, "base-1.0.0");
    step(&mut s); // records base's apply
    finish_package(&mut s, "other-1.0.0");
    let config = step(&mut s); // records other's apply
    assert_eq!(
        created_packages(&config),
        vec![("base-1.0.0".into(), "config".into())]
    );
    finish_package(&mut s, "base-1.0.0");
    let recorded = step(&mut s);
    assert_eq!(
        created_packages(&recorded),
        vec![("other-1.0.0".into(), "config".into())],
        "top rests on base's completion recorded in this pass"
    );
    assert_eq!(
        created_packages(&step(&mut s)),
        vec![("top-1.0.0".into(), "apply".into())]
    );
}

/// 16.9 with B6/16.3: a package with an interrupt (cordon, drain, node-wide interrupt) does not
/// start in a pass that recorded any outcome on its node.
#[test]
fn inv16_9_b6_an_interrupt_package_waits_for_any_recorded_outcome_on_the_node() {
    let n = with_interrupt(
        with_pkg(with_pkg(nw("demo"), "a", "1.0.0"), "b", "1.0.0"),
        "b",
        InterruptType::Reboot,
        &[],
    );
    let mut s = snapshot(vec![n], vec![node("n1")]);
    let first = until_created(&mut s, 10);
    assert_eq!(
        created_packages(&first),
        vec![("a-1.0.0".into(), "apply".into())]
    );
    // b cordons, then drains; it would start in the pass after a's start.
    let mut quiet = nodewright_core::Snapshot::clone(&s);
    let unblocked = step(&mut quiet);
    assert!(
        created_packages(&unblocked).contains(&("b-1.0.0".into(), "apply".into())),
        "without an outcome b starts here: {:?}",
        created_packages(&unblocked)
    );
    finish_package(&mut s, "a-1.0.0");
    let recorded = step(&mut s);
    assert!(
        created(&recorded).is_empty(),
        "b waits for a's outcome to land"
    );
    assert_eq!(
        created_packages(&step(&mut s)),
        vec![
            ("a-1.0.0".into(), "config".into()),
            ("b-1.0.0".into(), "apply".into())
        ]
    );
}

/// 16.9 with 16.8: a lower-priority NodeWright does not start on a node in the pass that
/// recorded the completion of the higher-priority NodeWright there (its start rests on it).
/// That pass also changes the node's status for `first`; since R6.6 no longer ends the pass,
/// the other-NodeWright rule of `Recorded::blocks` is what holds `second` back.
#[test]
fn inv16_9_inv16_8_another_nodewrights_outcome_holds_back_the_next_priority() {
    let mut second = with_pkg(nw("second"), "b", "1.0.0");
    second.spec.priority = 2;
    let mut first = with_pkg(nw("first"), "a", "1.0.0");
    first.spec.priority = 1;
    let mut s = snapshot(vec![first, second], vec![node("n1")]);
    let a_done = |s: &nodewright_core::Snapshot| {
        doc(s, "n1", "first")
            .get("a", "1.0.0")
            .is_some_and(|e| e.stage == Stage::Config && e.state == Some(State::Complete))
    };
    let mut log = Vec::new();
    for _ in 0..30 {
        let before = a_done(&s);
        let plan = step(&mut s);
        let recording = !before && a_done(&s);
        let made = created_packages(&plan);
        log.push((recording, made.clone()));
        if made.iter().any(|(p, _)| p == "b-1.0.0") {
            assert!(
                before,
                "second started before first was recorded complete: {log:?}"
            );
            return;
        }
        finish_package(&mut s, "a-1.0.0");
    }
    panic!("second never started: {log:?}");
}

/// 16.11 with 16.9: the pass that records an outcome writes no second transition of that entry
/// (here T14, uninstall from complete, with another package still running on the node); the
/// next pass does.
#[test]
fn inv16_11_t14_a_recorded_completion_moves_to_uninstall_in_the_next_pass() {
    let n = with_pkg(with_pkg(nw("demo"), "a", "1.0.0"), "b", "1.0.0");
    let mut s = snapshot(vec![n], vec![node("n1")]);
    until_created(&mut s, 10);
    settle(&mut s); // b's apply keeps running, so the node does not turn complete
    finish_package(&mut s, "a-1.0.0");
    let config = until_created(&mut s, 10);
    assert_eq!(
        created_packages(&config),
        vec![("a-1.0.0".into(), "config".into())]
    );
    let spec = Arc::make_mut(&mut s.nodewrights[0]);
    *spec = with_uninstall(spec.clone(), "a", true);
    finish_package(&mut s, "a-1.0.0");
    let recorded = step(&mut s);
    assert!(created(&recorded).is_empty());
    let e = doc(&s, "n1", "demo").get("a", "1.0.0").cloned().unwrap();
    assert_eq!((e.stage, e.state), (Stage::Config, Some(State::Complete)));
    let next = until_created(&mut s, 10);
    assert_eq!(
        created_packages(&next),
        vec![("a-1.0.0".into(), "uninstall".into())]
    );
}
