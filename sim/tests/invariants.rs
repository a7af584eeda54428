//! The invariant checker itself: each check named after its 02-lifecycle.md §16 id must fire on a
//! hand-made violation and stay quiet on the legal counterpart, so an explore run with zero
//! violations means something.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use nodewright_core::effect::EntryTransition;
use nodewright_core::{Effect, Plan, Snapshot};
use nodewright_crds::{NodeWright, PackageStatus, Stage, State, keys};
use nodewright_sim::invariants::{Checker, illegal_transition};
use serde_json::json;

fn nodewright(package: serde_json::Value) -> NodeWright {
    serde_json::from_value(json!({
        "apiVersion": "nodewright.nvidia.com/v1alpha1",
        "kind": "NodeWright",
        "metadata": {"name": "demo", "uid": "u1"},
        "spec": {"packages": {"dexter": package}},
    }))
    .expect("valid NodeWright")
}

fn node(cordoned: bool, state: Option<&str>) -> Node {
    let mut annotations = serde_json::Map::new();
    if cordoned {
        annotations.insert(keys::cordon("demo"), json!("true"));
    }
    if let Some(doc) = state {
        annotations.insert(keys::node_state("demo"), json!(doc));
    }
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "annotations": annotations},
        "spec": {"unschedulable": cordoned},
    }))
    .expect("valid Node")
}

fn job(stage: &str, complete: bool) -> Job {
    let package = json!({"name": "dexter", "version": "1.0.0", "skyhook": "demo", "stage": stage});
    let conditions = if complete {
        json!([{"type": "Complete", "status": "True"}])
    } else {
        json!([])
    };
    serde_json::from_value(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": format!("demo-dexter-{stage}-n1"),
            "labels": {(keys::LABEL_NAME): "demo", (keys::LABEL_NODE): "n1", (keys::LABEL_STAGE): stage},
            "annotations": {(keys::PACKAGE): package.to_string()},
        },
        "spec": {"template": {"spec": {"nodeName": "n1", "containers": []}}},
        "status": {"conditions": conditions},
    }))
    .expect("valid Job")
}

fn check(snapshot: &Snapshot, effects: Vec<Effect>) -> Vec<String> {
    let mut checker = Checker::default();
    checker.operator_namespace = "nodewright".into();
    let plan = Plan {
        effects,
        ..Plan::default()
    };
    checker.check_plan(snapshot, &plan, 0);
    checker.violations.into_iter().map(|v| v.rule).collect()
}

fn start(stage: &str) -> Effect {
    Effect::CreateJob {
        job: (job(stage, false)).into(),
        context: Default::default(),
        precondition: None,
        confirm: None,
    }
}

#[test]
fn i03_apply_of_interrupt_package_needs_a_durable_cordon() {
    let pkg = json!({"version": "1.0.0", "image": "r/dexter", "interrupt": {"type": "reboot"}});
    let mut snapshot = Snapshot {
        nodewrights: vec![std::sync::Arc::new(nodewright(pkg))],
        nodes: vec![std::sync::Arc::new(node(false, None))],
        ..Snapshot::default()
    };
    let rules = check(&snapshot, vec![start("apply")]);
    assert!(rules.iter().any(|r| r.starts_with("I3 ")), "{rules:?}");
    snapshot.nodes = vec![std::sync::Arc::new(node(true, None))];
    assert_eq!(check(&snapshot, vec![start("apply")]), Vec::<String>::new());
}

fn running_pod() -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "default",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                          "uid": "rs1", "controller": true}]},
        "spec": {"nodeName": "n1", "containers": []},
        "status": {"phase": "Running"},
    }))
    .expect("valid Pod")
}

/// 02-lifecycle.md §16.3 gates apply, upgrade, uninstall and a config *re-entry*: a `config` that
/// follows `apply` (entry still (apply, complete), NextStage) runs under the cordon and drain of
/// the apply and is not held back by a pod a stale cache still shows (explore seeds 487, 5053);
/// a config re-entry (entry at config after a config commit) is, and either needs the cordon.
#[test]
fn i03_inv16_3_config_after_apply_needs_the_cordon_but_no_second_drain() {
    let pkg = json!({"version": "1.0.0", "image": "r/dexter", "interrupt": {"type": "reboot"}});
    let applied = r#"{"dexter|1.0.0":{"name":"dexter","version":"1.0.0","image":"r/dexter","stage":"apply","state":"complete"}}"#;
    let reentry = r#"{"dexter|1.0.0":{"name":"dexter","version":"1.0.0","image":"r/dexter","stage":"config","state":"in_progress"}}"#;
    let with = |cordoned: bool, doc: &str| Snapshot {
        nodewrights: vec![std::sync::Arc::new(nodewright(pkg.clone()))],
        nodes: vec![std::sync::Arc::new(node(cordoned, Some(doc)))],
        workload_pods: vec![std::sync::Arc::new(running_pod())],
        ..Snapshot::default()
    };
    let i3 = |s: &Snapshot| {
        check(s, vec![start("config")])
            .iter()
            .any(|r| r.starts_with("I3 "))
    };
    assert!(
        !i3(&with(true, applied)),
        "config after apply: no second drain"
    );
    assert!(
        i3(&with(false, applied)),
        "config after apply still needs the cordon"
    );
    assert!(
        i3(&with(true, reentry)),
        "a config re-entry needs the drain"
    );
    assert!(
        check(&with(true, applied), vec![start("apply")])
            .iter()
            .any(|r| r.starts_with("I3 ")),
        "apply needs the drain"
    );
}

#[test]
fn i03_package_without_interrupt_needs_no_cordon() {
    let pkg = json!({"version": "1.0.0", "image": "r/dexter"});
    let snapshot = Snapshot {
        nodewrights: vec![std::sync::Arc::new(nodewright(pkg))],
        nodes: vec![std::sync::Arc::new(node(false, None))],
        ..Snapshot::default()
    };
    assert_eq!(check(&snapshot, vec![start("apply")]), Vec::<String>::new());
}

#[test]
fn i17_finalizer_stays_while_an_enabled_package_is_installed() {
    let pkg = json!({"version": "1.0.0", "image": "r/dexter", "uninstall": {"enabled": true}});
    let doc = r#"{"dexter|1.0.0":{"name":"dexter","version":"1.0.0","image":"r/dexter","stage":"uninstall","state":"in_progress"}}"#;
    let remove = || Effect::RemoveFinalizer {
        nodewright: "demo".into(),
        uid: "u1".into(),
    };
    let mut snapshot = Snapshot {
        nodewrights: vec![std::sync::Arc::new(nodewright(pkg))],
        nodes: vec![std::sync::Arc::new(node(false, Some(doc)))],
        jobs: vec![std::sync::Arc::new(job("uninstall", false).into())],
        ..Snapshot::default()
    };
    let rules = check(&snapshot, vec![remove()]);
    assert!(rules.iter().any(|r| r.starts_with("I17 ")), "{rules:?}");
    // The uninstall Job succeeded: the same pass records it and may let the CR go.
    snapshot.jobs = vec![std::sync::Arc::new(job("uninstall", true).into())];
    assert_eq!(check(&snapshot, vec![remove()]), Vec::<String>::new());
}

fn transition(from: Option<PackageStatus>, to: Option<PackageStatus>) -> EntryTransition {
    EntryTransition {
        nodewright: "demo".into(),
        node: "n1".into(),
        key: "dexter|1.0.0".into(),
        from,
        to,
    }
}

fn entry(stage: Stage, state: State, restarts: i32) -> PackageStatus {
    PackageStatus {
        name: "dexter".into(),
        version: "1.0.0".into(),
        image: "r/dexter".into(),
        container_sha: String::new(),
        stage,
        state: Some(state),
        restarts,
    }
}

#[test]
fn i23_only_a_started_executor_creates_an_entry() {
    let created = |e| illegal_transition(&transition(None, Some(e)));
    assert_eq!(created(entry(Stage::Apply, State::InProgress, 0)), None);
    assert_eq!(created(entry(Stage::Config, State::InProgress, 0)), None);
    assert!(created(entry(Stage::Apply, State::Complete, 0)).is_some());
    assert!(created(entry(Stage::Apply, State::Erroring, 2)).is_some());
}

#[test]
fn i11_promotion_and_next_stage_in_one_write_is_illegal() {
    let t = transition(
        Some(entry(Stage::Interrupt, State::Skipped, 0)),
        Some(entry(Stage::PostInterrupt, State::InProgress, 0)),
    );
    assert!(illegal_transition(&t).is_some());
    let t = transition(
        Some(entry(Stage::Interrupt, State::Skipped, 0)),
        Some(entry(Stage::Interrupt, State::Complete, 0)),
    );
    assert_eq!(illegal_transition(&t), None);
}
