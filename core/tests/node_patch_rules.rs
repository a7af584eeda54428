//! Resolving a node patch against a fresh read (02-lifecycle.md §13.1, §13.4–13.6, invariant
//! 16.13 "merge safety", D14): the one implementation the shell and the simulator share.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
use nodewright_core::effect::{NodeDelta, NodePatchRefusal, resolve_node_patch};
use nodewright_core::{EntryChange, NodePatch};
use nodewright_crds::{NodeState, PackageStatus, Stage, State, keys};

fn entry(name: &str, stage: Stage, state: State) -> PackageStatus {
    PackageStatus {
        name: name.into(),
        version: "1.0.0".into(),
        image: format!("example.com/{name}"),
        container_sha: String::new(),
        stage,
        state: Some(state),
        restarts: 0,
    }
}

fn key(name: &str) -> String {
    format!("{name}|1.0.0")
}

fn doc(entries: &[PackageStatus]) -> String {
    let mut state = NodeState::default();
    for e in entries {
        state
            .0
            .insert(format!("{}|{}", e.name, e.version), e.clone());
    }
    state.to_annotation()
}

fn node(annotations: &[(String, String)]) -> Node {
    let mut node = Node::default();
    node.metadata.name = Some("n1".into());
    node.metadata.resource_version = Some("7".into());
    node.metadata.annotations = Some(annotations.iter().cloned().collect());
    node
}

fn state_key() -> String {
    keys::node_state("demo")
}

fn change(name: &str, expect: Option<PackageStatus>, set: Option<PackageStatus>) -> EntryChange {
    EntryChange {
        nodewright: "demo".into(),
        key: key(name),
        expect,
        set,
    }
}

fn patch(guarded: bool, state: Vec<EntryChange>) -> NodePatch {
    NodePatch {
        node: "n1".into(),
        guarded,
        state,
        ..NodePatch::default()
    }
}

fn resolved(fresh: &Node, patch: &NodePatch) -> NodeDelta {
    match resolve_node_patch(fresh, patch) {
        Ok(Some(delta)) => delta,
        other => panic!("expected a delta, got {other:?}"),
    }
}

fn written_doc(delta: &NodeDelta) -> NodeState {
    let text = delta.annotations.get(&state_key()).cloned().flatten();
    NodeState::parse(&text.unwrap_or_default()).unwrap_or_default()
}

fn taint(key: &str, effect: &str, value: &str) -> Taint {
    Taint {
        key: key.into(),
        effect: effect.into(),
        value: Some(value.into()),
        time_added: None,
    }
}

#[test]
fn inv16_13_merge_safety_entries_the_pass_did_not_change_keep_their_fresh_value() {
    let a0 = entry("a", Stage::Apply, State::InProgress);
    let a1 = entry("a", Stage::Apply, State::Complete);
    // A concurrent writer recorded b after the snapshot.
    let b = entry("b", Stage::Config, State::Complete);
    let fresh = node(&[(state_key(), doc(&[a0.clone(), b.clone()]))]);
    let delta = resolved(
        &fresh,
        &patch(true, vec![change("a", Some(a0), Some(a1.clone()))]),
    );
    let written = written_doc(&delta);
    assert_eq!(written.0.get(&key("a")), Some(&a1));
    assert_eq!(written.0.get(&key("b")), Some(&b));
}

#[test]
fn inv16_13_merge_safety_removal_of_one_entry_keeps_the_others() {
    let a = entry("a", Stage::Uninstall, State::Complete);
    let b = entry("b", Stage::Apply, State::Complete);
    let fresh = node(&[(state_key(), doc(&[a.clone(), b.clone()]))]);
    let delta = resolved(&fresh, &patch(true, vec![change("a", Some(a), None)]));
    let written = written_doc(&delta);
    assert_eq!(written.0.len(), 1);
    assert_eq!(written.0.get(&key("b")), Some(&b));
}

#[test]
fn r13_1_guarded_entry_changed_since_snapshot_refuses_the_whole_patch() {
    let seen = entry("a", Stage::Apply, State::InProgress);
    let now = entry("a", Stage::Apply, State::Complete);
    let fresh = node(&[(state_key(), doc(&[now]))]);
    let mut p = patch(
        true,
        vec![change(
            "a",
            Some(seen),
            Some(entry("a", Stage::Apply, State::Erroring)),
        )],
    );
    p.labels.insert("l".into(), Some("v".into()));
    assert!(matches!(
        resolve_node_patch(&fresh, &p),
        Err(NodePatchRefusal::Mismatch(_))
    ));
}

#[test]
fn r13_1_guarded_absent_entry_expected_absent_is_created() {
    let a = entry("a", Stage::Apply, State::InProgress);
    let delta = resolved(
        &node(&[]),
        &patch(true, vec![change("a", None, Some(a.clone()))]),
    );
    assert_eq!(written_doc(&delta).0.get(&key("a")), Some(&a));
    assert!(delta.needs_resource_version);
    assert_eq!(delta.entries.len(), 1);
    assert_eq!(delta.entries[0].from, None);
    assert_eq!(delta.entries[0].to, Some(a));
    assert_eq!(delta.entries[0].node, "n1");
}

#[test]
fn r13_1_malformed_fresh_document_is_refused() {
    let fresh = node(&[(state_key(), "{not json".into())]);
    let p = patch(
        true,
        vec![change(
            "a",
            None,
            Some(entry("a", Stage::Apply, State::InProgress)),
        )],
    );
    match resolve_node_patch(&fresh, &p) {
        Err(NodePatchRefusal::Malformed(why)) => assert!(why.contains("node n1 nodeState_demo")),
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[test]
fn r13_1_only_values_that_differ_from_the_fresh_read_are_written() {
    let fresh = node(&[("keep".into(), "same".into()), ("drop".into(), "x".into())]);
    let mut p = patch(false, vec![]);
    p.annotations.insert("keep".into(), Some("same".into()));
    p.annotations.insert("drop".into(), None);
    p.annotations.insert("absent".into(), None);
    p.annotations.insert("new".into(), Some("v".into()));
    let delta = resolved(&fresh, &p);
    let expected: BTreeMap<String, Option<String>> = [
        ("drop".to_string(), None),
        ("new".to_string(), Some("v".to_string())),
    ]
    .into();
    assert_eq!(delta.annotations, expected);
    assert!(
        !delta.needs_resource_version,
        "unguarded plain annotations carry no precondition"
    );
}

#[test]
fn r13_1_nothing_to_change_resolves_to_none() {
    let a = entry("a", Stage::Apply, State::Complete);
    let fresh = node(&[(state_key(), doc(std::slice::from_ref(&a)))]);
    let p = patch(true, vec![change("a", Some(a.clone()), Some(a))]);
    assert_eq!(resolve_node_patch(&fresh, &p), Ok(None));
}

#[test]
fn r13_1_keep_state_false_removes_the_document_as_is() {
    let fresh = node(&[(
        state_key(),
        doc(&[entry("a", Stage::Apply, State::Complete)]),
    )]);
    let mut p = patch(false, vec![]);
    p.remove_state_of.push("demo".into());
    p.remove_state_of.push("absent".into());
    let delta = resolved(&fresh, &p);
    assert_eq!(delta.annotations, [(state_key(), None)].into());
    assert!(
        delta.needs_resource_version,
        "a document change carries the precondition"
    );
}

#[test]
fn r13_5_unguarded_reset_writes_whatever_the_fresh_entry_is() {
    let now = entry("a", Stage::Interrupt, State::InProgress);
    let fresh = node(&[(state_key(), doc(std::slice::from_ref(&now)))]);
    let seen = entry("a", Stage::Apply, State::Complete);
    let delta = resolved(&fresh, &patch(false, vec![change("a", Some(seen), None)]));
    assert!(written_doc(&delta).0.is_empty());
    assert_eq!(delta.entries[0].from, Some(now));
}

#[test]
fn r13_4_d14_taints_by_key_and_effect_identity() {
    let mut fresh = node(&[]);
    fresh.spec = Some(NodeSpec {
        taints: Some(vec![
            taint("autoscaler", "NoSchedule", "x"),
            taint("runtime", "NoSchedule", "old"),
        ]),
        ..NodeSpec::default()
    });
    let mut p = patch(false, vec![]);
    p.taints_remove
        .push(taint("runtime", "NoSchedule", "ignored"));
    p.taints_add.push(taint("runtime", "NoExecute", "new"));
    p.taints_add
        .push(taint("autoscaler", "NoSchedule", "other-value"));
    let delta = resolved(&fresh, &p);
    assert_eq!(
        delta.taints,
        Some(vec![
            taint("autoscaler", "NoSchedule", "x"),
            taint("runtime", "NoExecute", "new"),
        ])
    );
    assert!(
        delta.needs_resource_version,
        "the whole list is computed from the fresh read"
    );
}

#[test]
fn r13_4_d14_taint_already_present_changes_nothing() {
    let mut fresh = node(&[]);
    fresh.spec = Some(NodeSpec {
        taints: Some(vec![taint("runtime", "NoSchedule", "x")]),
        ..NodeSpec::default()
    });
    let mut p = patch(false, vec![]);
    p.taints_add.push(taint("runtime", "NoSchedule", "y"));
    assert_eq!(resolve_node_patch(&fresh, &p), Ok(None));
}

#[test]
fn r13_1_cordon_and_labels_written_only_when_they_change() {
    let mut fresh = node(&[]);
    fresh.metadata.labels = Some([("l".to_string(), "v".to_string())].into());
    fresh.spec = Some(NodeSpec {
        unschedulable: Some(true),
        ..NodeSpec::default()
    });
    let mut p = patch(true, vec![]);
    p.labels.insert("l".into(), Some("v".into()));
    p.unschedulable = Some(true);
    assert_eq!(resolve_node_patch(&fresh, &p), Ok(None));
    p.unschedulable = Some(false);
    let delta = resolved(&fresh, &p);
    assert_eq!(delta.unschedulable, Some(false));
    assert!(delta.labels.is_empty());
    assert!(
        delta.needs_resource_version,
        "a guarded patch always carries the precondition"
    );
}

#[test]
fn r13_1_apply_to_leaves_the_node_as_the_merge_patch_would() {
    let a = entry("a", Stage::Apply, State::InProgress);
    let mut fresh = node(&[("drop".into(), "x".into()), ("foreign".into(), "f".into())]);
    fresh.spec = Some(NodeSpec {
        taints: Some(vec![taint("autoscaler", "NoSchedule", "x")]),
        ..NodeSpec::default()
    });
    let mut p = patch(true, vec![change("a", None, Some(a.clone()))]);
    p.annotations.insert("drop".into(), None);
    p.labels.insert("l".into(), Some("v".into()));
    p.taints_add.push(taint("runtime", "NoSchedule", "r"));
    p.unschedulable = Some(true);
    let after = resolved(&fresh, &p).apply_to(fresh.clone());
    let annotations = after.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get("foreign").map(String::as_str), Some("f"));
    assert!(!annotations.contains_key("drop"));
    assert_eq!(annotations.get(&state_key()), Some(&doc(&[a])));
    assert_eq!(
        after
            .metadata
            .labels
            .clone()
            .unwrap_or_default()
            .get("l")
            .map(String::as_str),
        Some("v")
    );
    let spec = after.spec.unwrap_or_default();
    assert_eq!(spec.unschedulable, Some(true));
    assert_eq!(spec.taints.map(|t| t.len()), Some(2));
}

/// An unschedulable node holding NodeWright `nw`'s cordon annotation and the annotations `others`.
fn cordoned_by(nw: &str, others: &[&str]) -> Node {
    let mut list = vec![(keys::cordon(nw), "true".to_string())];
    list.extend(others.iter().map(|k| (k.to_string(), "true".to_string())));
    let mut n = node(&list);
    n.spec = Some(NodeSpec {
        unschedulable: Some(true),
        ..NodeSpec::default()
    });
    n
}

/// §8.7 on the fresh read (explore seeds 898, 3322, 8800): the pass marked the node complete on
/// a snapshot that did not yet show this NodeWright's cordon; the patch releases it on the fresh
/// read, making the node schedulable only when no other cordon remains.
#[test]
fn inv16_6_b7_release_on_write_removes_a_cordon_the_snapshot_missed() {
    let cordoned = |others: &[&str]| cordoned_by("demo", others);
    let mut p = patch(true, vec![]);
    p.annotations
        .insert(keys::node_status("demo"), Some("complete".into()));
    p.release_cordon_of = vec!["demo".into()];
    let delta = resolved(&cordoned(&[]), &p);
    assert_eq!(delta.annotations.get(&keys::cordon("demo")), Some(&None));
    assert_eq!(delta.unschedulable, Some(false));
    assert!(delta.needs_resource_version);
    for other in [
        keys::cordon("other"),
        keys::RUNTIME_REQUIRED_CORDON.to_string(),
    ] {
        let delta = resolved(&cordoned(&[other.as_str()]), &p);
        assert_eq!(delta.annotations.get(&keys::cordon("demo")), Some(&None));
        assert_eq!(delta.unschedulable, None, "{other} still holds the node");
    }
    let delta = resolved(&node(&[]), &p);
    assert!(!delta.annotations.contains_key(&keys::cordon("demo")));
    assert_eq!(delta.unschedulable, None, "nothing of ours to release");
    let mut cordoning = p.clone();
    cordoning.unschedulable = Some(true);
    cordoning
        .annotations
        .insert(keys::cordon("demo"), Some("true".into()));
    assert_eq!(
        resolve_node_patch(&cordoned(&[]), &cordoning)
            .unwrap()
            .map(|d| (
                d.unschedulable,
                d.annotations.contains_key(&keys::cordon("demo"))
            )),
        Some((None, false)),
        "a patch that cordons releases nothing"
    );
}

/// §8.7 on the fresh read (explore seed 9848): a pass released its own cordon on a snapshot that
/// did not yet show another NodeWright's cordon, written by the pass just before; the fresh read
/// shows it, so the node stays unschedulable and only our annotation goes.
#[test]
fn inv16_5_b7_uncordon_is_held_by_a_cordon_written_after_the_snapshot() {
    let fresh = |others: &[&str]| cordoned_by("mine", others);
    let mut p = patch(true, vec![]);
    p.annotations.insert(keys::cordon("mine"), None);
    p.unschedulable = Some(false);
    assert_eq!(resolved(&fresh(&[]), &p).unschedulable, Some(false));
    for other in [
        keys::cordon("other"),
        keys::RUNTIME_REQUIRED_CORDON.to_string(),
    ] {
        let delta = resolved(&fresh(&[other.as_str()]), &p);
        assert_eq!(delta.annotations.get(&keys::cordon("mine")), Some(&None));
        assert_eq!(delta.unschedulable, None, "{other} still holds the node");
        assert!(delta.needs_resource_version);
    }
    let mut unguarded = p.clone();
    unguarded.guarded = false;
    let delta = resolved(&fresh(&[]), &unguarded);
    assert!(
        delta.needs_resource_version,
        "the uncordon rests on the fresh annotations"
    );
}

/// Invariant 16.7, B7 (explore seed 7467): a write that marks a node complete and releases its
/// cordon rests on the whole document, so it is refused when the fresh read shows an entry the
/// snapshot did not (a stage started since, on a node cache that lagged behind it).
#[test]
fn inv16_7_b7_a_completing_write_is_refused_when_the_document_changed_since_the_snapshot() {
    let seen = vec![entry("alpha", Stage::Config, State::Complete)];
    let mut seen_doc = NodeState::default();
    for e in &seen {
        seen_doc.upsert(e.clone());
    }
    let mut completing = patch(true, vec![]);
    completing.annotations = BTreeMap::from([
        (keys::node_status("demo"), Some("complete".to_string())),
        (keys::cordon("demo"), None),
    ]);
    completing.expect_documents = BTreeMap::from([("demo".to_string(), seen_doc)]);
    let cordoned = |entries: &[PackageStatus]| {
        node(&[
            (state_key(), doc(entries)),
            (keys::cordon("demo"), "true".into()),
        ])
    };
    let same = resolved(&cordoned(&seen), &completing);
    assert_eq!(same.annotations.get(&keys::cordon("demo")), Some(&None));
    let started = cordoned(&[
        entry("alpha", Stage::Config, State::Complete),
        entry("bravo", Stage::Apply, State::InProgress),
    ]);
    assert!(matches!(
        resolve_node_patch(&started, &completing),
        Err(NodePatchRefusal::Mismatch(_))
    ));
}
