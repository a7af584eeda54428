//! Interpreter tests against a scripted fake apiserver (tower-test mock service).

use std::collections::BTreeMap;

use http::{Request, Response};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, NodeCondition, Taint};
use kube::Client;
use kube::client::Body;
use nodewright_core::effect::FreshReadPrecondition;
use nodewright_core::{
    Context, DeletionReason, Effect, EntryChange, EventSpec, NodePatch, ObjectRef, Plan, Snapshot,
};
use nodewright_crds::{
    NodeState, NodeWright, NodeWrightSpec, NodeWrightStatus, PackageStatus, Stage, State, keys,
};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::*;

/// One expected request and the answer to give.
struct Expect {
    method: &'static str,
    path: String,
    status: u16,
    body: Value,
}

fn expect(method: &'static str, path: &str, status: u16, body: Value) -> Expect {
    Expect {
        method,
        path: path.to_string(),
        status,
        body,
    }
}

/// A request the fake received: path with query and JSON body.
#[derive(Debug)]
struct Seen {
    uri: String,
    body: Value,
}

/// A client whose apiserver answers `script` in order and returns what it received.
fn fake(script: Vec<Expect>) -> (Client, JoinHandle<Vec<Seen>>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let task = tokio::spawn(async move {
        let mut seen = Vec::new();
        for step in script {
            let (request, send) = handle.next_request().await.expect("expected a request");
            let method = request.method().to_string();
            let uri = request.uri().to_string();
            let bytes = request
                .into_body()
                .collect_bytes()
                .await
                .unwrap_or_default();
            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            assert_eq!(method, step.method, "method of {uri}");
            assert_eq!(uri.split('?').next().unwrap_or_default(), step.path, "path");
            seen.push(Seen { uri, body });
            let response = Response::builder()
                .status(step.status)
                .header("content-type", "application/json")
                .body(Body::from(
                    serde_json::to_vec(&step.body).unwrap_or_default(),
                ))
                .expect("valid response");
            send.send_response(response);
        }
        seen
    });
    (Client::new(service, "default"), task)
}

fn interpreter(client: Client) -> Interpreter {
    let events = EventRecorder::new("test-pod");
    let mut i = Interpreter::new(client, "nodewright", events);
    i.retry_backoff = std::time::Duration::from_millis(1);
    i
}

fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
           "reason": reason, "message": format!("{reason} from the fake")})
}

fn ctx(node: &str) -> Context {
    Context {
        nodewright: Some("nw".into()),
        node: Some(node.into()),
        package: Some("pkg".into()),
        version: Some("1.0.0".into()),
        stage: Some("apply".into()),
    }
}

fn entry(stage: Stage, state: State) -> PackageStatus {
    PackageStatus {
        name: "pkg".into(),
        version: "1.0.0".into(),
        image: "ghcr.io/x/pkg".into(),
        container_sha: String::new(),
        stage,
        state: Some(state),
        restarts: 0,
    }
}

fn node_json(rv: &str, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": "n1", "resourceVersion": rv, "annotations": annotations},
           "spec": {}})
}

fn state_patch(expect_entry: Option<PackageStatus>, set: Option<PackageStatus>) -> Effect {
    Effect::PatchNode(Box::new(NodePatch {
        node: "n1".into(),
        guarded: true,
        state: vec![EntryChange {
            nodewright: "nw".into(),
            key: "pkg|1.0.0".into(),
            expect: expect_entry,
            set,
        }],
        context: ctx("n1"),
        ..NodePatch::default()
    }))
}

fn doc(entries: &[PackageStatus]) -> String {
    let mut d = NodeState::default();
    for e in entries {
        d.upsert(e.clone());
    }
    d.to_annotation()
}

async fn run(client: Client, effect: Effect) -> Outcome {
    interpreter(client)
        .apply_one(&Snapshot::default(), &effect)
        .await
}

fn job(name: &str) -> Job {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"template": {}}}))
        .unwrap_or_default()
}

// ---- CreateJob ----

#[tokio::test]
async fn create_job_applied() {
    let (client, task) = fake(vec![expect(
        "POST",
        "/apis/batch/v1/namespaces/nodewright/jobs",
        201,
        json!({"metadata": {"name": "j1", "namespace": "nodewright"}}),
    )]);
    let out = run(
        client,
        Effect::CreateJob {
            job: (job("j1")).into(),
            context: ctx("n1"),
            precondition: None,
            confirm: None,
        },
    )
    .await;
    assert!(matches!(out, Outcome::Applied), "{out:?}");
    let seen = task.await.unwrap();
    assert_eq!(seen[0].body["metadata"]["namespace"], "nodewright");
}

#[tokio::test]
async fn create_job_already_exists_is_dropped() {
    let (client, task) = fake(vec![expect(
        "POST",
        "/apis/batch/v1/namespaces/nodewright/jobs",
        409,
        status(409, "AlreadyExists"),
    )]);
    let out = run(
        client,
        Effect::CreateJob {
            job: (job("j1")).into(),
            context: ctx("n1"),
            precondition: None,
            confirm: None,
        },
    )
    .await;
    assert!(matches!(out, Outcome::Dropped(_)), "{out:?}");
    task.await.unwrap();
}

fn labelled_interrupt_job(name: &str) -> Job {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {
        "nodewright.nvidia.com/interrupt": "True",
        "nodewright.nvidia.com/node": "n1"}}, "spec": {"template": {}}}))
    .unwrap_or_default()
}

#[tokio::test]
async fn b6_interrupt_create_dropped_when_fresh_read_shows_unfinished_job() {
    let (client, task) = fake(vec![expect(
        "GET",
        "/apis/batch/v1/namespaces/nodewright/jobs",
        200,
        json!({"metadata": {}, "items": [
            {"metadata": {"name": "other-apply"}, "spec": {"template": {}}, "status": {}}
        ]}),
    )]);
    let out = run(
        client,
        Effect::CreateJob {
            job: (labelled_interrupt_job("int")).into(),
            context: ctx("n1"),
            precondition: Some(FreshReadPrecondition::NoUnfinishedJobsOn { node: "n1".into() }),
            confirm: None,
        },
    )
    .await;
    assert!(matches!(out, Outcome::Dropped(_)), "{out:?}");
    let seen = task.await.unwrap();
    assert!(seen[0].uri.contains("labelSelector"), "{}", seen[0].uri);
}

#[tokio::test]
async fn b6_interrupt_create_applied_when_other_jobs_finished() {
    let (client, task) = fake(vec![
        expect(
            "GET",
            "/apis/batch/v1/namespaces/nodewright/jobs",
            200,
            json!({"metadata": {}, "items": [
                {"metadata": {"name": "done"}, "spec": {"template": {}},
                 "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
            ]}),
        ),
        expect(
            "POST",
            "/apis/batch/v1/namespaces/nodewright/jobs",
            201,
            json!({"metadata": {"name": "int", "namespace": "nodewright"}}),
        ),
    ]);
    let out = run(
        client,
        Effect::CreateJob {
            job: (labelled_interrupt_job("int")).into(),
            context: ctx("n1"),
            precondition: Some(FreshReadPrecondition::NoUnfinishedJobsOn { node: "n1".into() }),
            confirm: None,
        },
    )
    .await;
    assert!(matches!(out, Outcome::Applied), "{out:?}");
    task.await.unwrap();
}

// ---- DeleteJob / DeletePod ----

fn delete_job() -> Effect {
    Effect::DeleteJob {
        name: "j1".into(),
        uid: "u1".into(),
        reason: DeletionReason::StaleSpec,
        context: ctx("n1"),
        confirm: None,
    }
}

#[tokio::test]
async fn d12_delete_job_foreground_with_uid_and_reason_event() {
    let (client, task) = fake(vec![
        expect(
            "DELETE",
            "/apis/batch/v1/namespaces/nodewright/jobs/j1",
            200,
            json!({"metadata": {"name": "j1"}}),
        ),
        expect(
            "POST",
            "/apis/events.k8s.io/v1/namespaces/nodewright/events",
            201,
            json!({}),
        ),
    ]);
    let out = run(client, delete_job()).await;
    assert!(matches!(out, Outcome::Applied), "{out:?}");
    let seen = task.await.unwrap();
    assert_eq!(seen[0].body["propagationPolicy"], "Foreground");
    assert_eq!(seen[0].body["preconditions"]["uid"], "u1");
    assert_eq!(seen[1].body["regarding"]["kind"], "Job");
    assert!(
        seen[1].body["note"]
            .as_str()
            .unwrap_or_default()
            .contains("stale-spec")
    );
}

fn rerun_delete(stage_state: &str) -> (Effect, Value) {
    let check = nodewright_core::effect::EntryCheck {
        nodewright: "nw".into(),
        node: "n1".into(),
        package: "pkg".into(),
        version: "1.0.0".into(),
        stage: nodewright_crds::Stage::Config,
    };
    let doc = format!(
        r#"{{"pkg|1.0.0":{{"name":"pkg","version":"1.0.0","image":"r/pkg","stage":"config","state":"{stage_state}"}}}}"#
    );
    let node = node_json("7", json!({ keys::node_state("nw"): doc }));
    let effect = Effect::DeleteJob {
        name: "j1".into(),
        uid: "u1".into(),
        reason: DeletionReason::Rerun,
        context: ctx("n1"),
        confirm: Some(check),
    };
    (effect, node)
}

#[tokio::test]
async fn d21_k22_rerun_delete_goes_ahead_when_the_fresh_read_shows_the_entry_open() {
    let (effect, node) = rerun_delete("in_progress");
    let (client, task) = fake(vec![
        expect("GET", "/api/v1/nodes/n1", 200, node),
        expect(
            "DELETE",
            "/apis/batch/v1/namespaces/nodewright/jobs/j1",
            200,
            json!({"metadata": {"name": "j1"}}),
        ),
        expect(
            "POST",
            "/apis/events.k8s.io/v1/namespaces/nodewright/events",
            201,
            json!({}),
        ),
    ]);
    let out = run(client, effect).await;
    assert!(matches!(out, Outcome::Applied), "{out:?}");
    assert_eq!(task.await.unwrap().len(), 3);
}

#[tokio::test]
async fn d21_k22_rerun_delete_dropped_when_the_fresh_read_shows_it_recorded() {
    let (effect, node) = rerun_delete("complete");
    let (client, task) = fake(vec![expect("GET", "/api/v1/nodes/n1", 200, node)]);
    let out = run(client, effect).await;
    assert!(matches!(out, Outcome::Dropped(_)), "{out:?}");
    assert_eq!(task.await.unwrap().len(), 1, "no DELETE was sent");
}

/// Invariant 16.1 (I1): every create carries the package's entry as the snapshot showed it and
/// goes ahead only when a fresh read of the node still shows that entry.
fn confirmed_create(fresh_state: Option<(&str, &str)>) -> (Effect, Value) {
    let expected = nodewright_crds::PackageStatus {
        name: "pkg".into(),
        version: "1.0.0".into(),
        image: "r/pkg".into(),
        container_sha: String::new(),
        stage: nodewright_crds::Stage::Apply,
        state: Some(nodewright_crds::State::Complete),
        restarts: 0,
    };
    let check = nodewright_core::effect::EntryExpect {
        nodewright: "nw".into(),
        node: "n1".into(),
        package: "pkg".into(),
        version: "1.0.0".into(),
        entry: Some(expected),
        cordoned: false,
    };
    let annotations = match fresh_state {
        Some((stage, state)) => {
            let doc = format!(
                r#"{{"pkg|1.0.0":{{"name":"pkg","version":"1.0.0","image":"r/pkg","stage":"{stage}","state":"{state}"}}}}"#
            );
            json!({ keys::node_state("nw"): doc })
        }
        None => json!({}),
    };
    let node = node_json("7", annotations);
    let effect = Effect::CreateJob {
        job: (job("j1")).into(),
        context: ctx("n1"),
        precondition: None,
        confirm: Some(check),
    };
    (effect, node)
}

#[tokio::test]
async fn inv16_1_create_goes_ahead_when_the_fresh_read_shows_the_snapshot_entry() {
    let (effect, node) = confirmed_create(Some(("apply", "complete")));
    let (client, task) = fake(vec![
        expect("GET", "/api/v1/nodes/n1", 200, node),
        expect(
            "POST",
            "/apis/batch/v1/namespaces/nodewright/jobs",
            201,
            json!({"metadata": {"name": "j1", "namespace": "nodewright"}}),
        ),
    ]);
    let out = run(client, effect).await;
    assert!(matches!(out, Outcome::Applied), "{out:?}");
    assert_eq!(task.await.unwrap().len(), 2);
}

#[tokio::test]
async fn inv16_1_create_is_dropped_when_the_fresh_read_shows_the_entry_moved_on() {
    // Explore seed 7022: the node cache still showed `apply`/`complete` while the apiserver
    // already had `config`/`in_progress` from an earlier pass.
    for fresh in [
        Some(("config", "in_progress")),
        Some(("apply", "in_progress")),
        None,
    ] {
        let (effect, node) = confirmed_create(fresh);
        let (client, task) = fake(vec![expect("GET", "/api/v1/nodes/n1", 200, node)]);
        let out = run(client, effect).await;
        assert!(matches!(out, Outcome::Dropped(_)), "{fresh:?}: {out:?}");
        assert_eq!(task.await.unwrap().len(), 1, "{fresh:?}: no POST was sent");
    }
}

#[tokio::test]
async fn inv16_3_create_resting_on_the_cordon_is_dropped_when_the_fresh_read_shows_it_released() {
    // Explore seed 673: the node cache still showed the cordon a pass had just released.
    let (effect, node) = confirmed_create(Some(("apply", "complete")));
    let Effect::CreateJob {
        job,
        context,
        precondition,
        confirm: Some(mut check),
    } = effect
    else {
        unreachable!("confirmed_create builds a confirmed CreateJob")
    };
    check.cordoned = true;
    let effect = Effect::CreateJob {
        job,
        context,
        precondition,
        confirm: Some(check),
    };
    let (client, task) = fake(vec![expect("GET", "/api/v1/nodes/n1", 200, node)]);
    let out = run(client, effect).await;
    assert!(matches!(out, Outcome::Dropped(_)), "{out:?}");
    assert_eq!(task.await.unwrap().len(), 1, "no POST was sent");
}

#[tokio::test]
async fn inv16_1_creates_on_one_node_share_one_fresh_read() {
    let (first, node) = confirmed_create(Some(("apply", "complete")));
    let Effect::CreateJob {
        context, confirm, ..
    } = first.clone()
    else {
        unreachable!("confirmed_create builds a CreateJob")
    };
    let second = Effect::CreateJob {
        job: (job("j2")).into(),
        context,
        precondition: None,
        confirm,
    };
    let post = |name: &str| {
        expect(
            "POST",
            "/apis/batch/v1/namespaces/nodewright/jobs",
            201,
            json!({"metadata": {"name": name, "namespace": "nodewright"}}),
        )
    };
    let (client, task) = fake(vec![
        expect("GET", "/api/v1/nodes/n1", 200, node),
        post("j1"),
        post("j2"),
    ]);
    let report = interpreter(client)
        .apply_effects(&Snapshot::default(), &[first, second])
        .await;
    let labels: Vec<_> = report.outcomes.iter().map(|(_, o)| o.label()).collect();
    assert_eq!(labels, vec!["applied", "applied"]);
    assert_eq!(task.await.unwrap().len(), 3, "one GET for both creates");
}

#[tokio::test]
async fn delete_job_not_found_is_noop() {
    let (client, task) = fake(vec![expect(
        "DELETE",
        "/apis/batch/v1/namespaces/nodewright/jobs/j1",
        404,
        status(404, "NotFound"),
    )]);
    assert!(matches!(run(client, delete_job()).await, Outcome::Noop));
    task.await.unwrap();
}

#[tokio::test]
async fn delete_job_uid_precondition_failure_is_dropped() {
    let (client, task) = fake(vec![expect(
        "DELETE",
        "/apis/batch/v1/namespaces/nodewright/jobs/j1",
        409,
        status(409, "Conflict"),
    )]);
    assert!(matches!(
        run(client, delete_job()).await,
        Outcome::Dropped(_)
    ));
    task.await.unwrap();
}

#[tokio::test]
async fn d12_delete_pod_archive_prune_guarded() {
    let (client, task) = fake(vec![
        expect(
            "DELETE",
            "/api/v1/namespaces/nodewright/pods/p1",
            200,
            json!({"metadata": {"name": "p1"}}),
        ),
        expect(
            "POST",
            "/apis/events.k8s.io/v1/namespaces/nodewright/events",
            201,
            json!({}),
        ),
    ]);
    let effect = Effect::DeletePod {
        namespace: "nodewright".into(),
        name: "p1".into(),
        uid: "pu".into(),
        reason: DeletionReason::ArchivePrune,
        context: ctx("n1"),
    };
    assert!(matches!(run(client, effect).await, Outcome::Applied));
    let seen = task.await.unwrap();
    assert_eq!(seen[0].body["preconditions"]["uid"], "pu");
    assert!(
        seen[1].body["note"]
            .as_str()
            .unwrap_or_default()
            .contains("archive-prune")
    );
}

#[tokio::test]
async fn delete_pod_not_found_and_conflict() {
    let effect = Effect::DeletePod {
        namespace: "nodewright".into(),
        name: "p1".into(),
        uid: "pu".into(),
        reason: DeletionReason::ArchivePrune,
        context: ctx("n1"),
    };
    let (client, task) = fake(vec![expect(
        "DELETE",
        "/api/v1/namespaces/nodewright/pods/p1",
        404,
        status(404, "NotFound"),
    )]);
    assert!(matches!(run(client, effect.clone()).await, Outcome::Noop));
    task.await.unwrap();
    let (client, task) = fake(vec![expect(
        "DELETE",
        "/api/v1/namespaces/nodewright/pods/p1",
        409,
        status(409, "Conflict"),
    )]);
    assert!(matches!(run(client, effect).await, Outcome::Dropped(_)));
    task.await.unwrap();
}

// ---- PatchJob ----

fn patch_job() -> Effect {
    Effect::PatchJob {
        name: "j1".into(),
        uid: "u1".into(),
        suspend: Some(true),
        ttl_seconds_after_finished: None,
        annotations: BTreeMap::from([
            (keys::STATE_RECORDED.to_string(), Some("true".to_string())),
            (keys::LAST_FAILURE.to_string(), None),
        ]),
        context: ctx("n1"),
    }
}

#[tokio::test]
async fn d14_patch_job_merge_patch_of_exactly_those_fields() {
    let (client, task) = fake(vec![expect(
        "PATCH",
        "/apis/batch/v1/namespaces/nodewright/jobs/j1",
        200,
        json!({"metadata": {"name": "j1"}}),
    )]);
    assert!(matches!(run(client, patch_job()).await, Outcome::Applied));
    let seen = task.await.unwrap();
    assert_eq!(
        seen[0].body,
        json!({"metadata": {"uid": "u1", "annotations": {
            keys::STATE_RECORDED: "true", keys::LAST_FAILURE: null}},
            "spec": {"suspend": true}})
    );
}

#[tokio::test]
async fn patch_job_not_found_noop_and_uid_mismatch_dropped() {
    let (client, task) = fake(vec![expect(
        "PATCH",
        "/apis/batch/v1/namespaces/nodewright/jobs/j1",
        404,
        status(404, "NotFound"),
    )]);
    assert!(matches!(run(client, patch_job()).await, Outcome::Noop));
    task.await.unwrap();
    let (client, task) = fake(vec![expect(
        "PATCH",
        "/apis/batch/v1/namespaces/nodewright/jobs/j1",
        409,
        status(409, "Conflict"),
    )]);
    assert!(matches!(
        run(client, patch_job()).await,
        Outcome::Dropped(_)
    ));
    task.await.unwrap();
}

// ---- EndInterruptJob ----

fn end_interrupt() -> Effect {
    Effect::EndInterruptJob {
        name: "j1".into(),
        uid: "u1".into(),
        resource_version: Some("7".into()),
        restarts: 3,
        context: ctx("n1"),
    }
}

fn interrupt_job(rv: &str, marked: bool) -> Value {
    let mut annotations = json!({keys::RESTART_ALLOWANCE: "3"});
    if marked {
        annotations[keys::RESTART_LIMIT_EXCEEDED] = json!("3");
    }
    json!({"metadata": {"name": "j1", "uid": "u1", "resourceVersion": rv, "annotations": annotations},
           "spec": {"template": {}}})
}

/// An interrupt pod as a kubelet reports it: the `interrupt` init container carries the restart
/// count; the main `done` container never started (a count there must not be read).
fn pods_with_restarts(n: i32) -> Value {
    json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [
        {"metadata": {"name": "p"}, "status": {
            "initContainerStatuses": [
                {"name": "interrupt", "restartCount": n, "ready": false, "image": "i", "imageID": ""}],
            "containerStatuses": [
                {"name": "done", "restartCount": 0, "ready": false, "image": "i", "imageID": ""}]}}]})
}

#[tokio::test]
async fn d18_end_interrupt_job_rechecks_then_locked_patch() {
    let (client, task) = fake(vec![
        expect(
            "GET",
            "/apis/batch/v1/namespaces/nodewright/jobs/j1",
            200,
            interrupt_job("7", false),
        ),
        expect(
            "GET",
            "/api/v1/namespaces/nodewright/pods",
            200,
            pods_with_restarts(3),
        ),
        expect(
            "PATCH",
            "/apis/batch/v1/namespaces/nodewright/jobs/j1",
            200,
            interrupt_job("8", true),
        ),
    ]);
    assert!(matches!(
        run(client, end_interrupt()).await,
        Outcome::Applied
    ));
    let seen = task.await.unwrap();
    assert!(
        seen[1].uri.contains("controller-uid%3Du1") || seen[1].uri.contains("controller-uid=u1")
    );
    assert_eq!(seen[2].body["metadata"]["resourceVersion"], "7");
    assert_eq!(
        seen[2].body["metadata"]["annotations"][keys::RESTART_LIMIT_EXCEEDED],
        "3"
    );
    assert_eq!(seen[2].body["spec"]["backoffLimit"], 0);
}

#[tokio::test]
async fn d18_end_interrupt_job_precondition_failures_are_dropped() {
    // resourceVersion moved since the snapshot
    let (client, task) = fake(vec![expect(
        "GET",
        "/apis/batch/v1/namespaces/nodewright/jobs/j1",
        200,
        interrupt_job("9", false),
    )]);
    assert!(matches!(
        run(client, end_interrupt()).await,
        Outcome::Dropped(_)
    ));
    task.await.unwrap();
    // fresh pod read shows fewer restarts
    let (client, task) = fake(vec![
        expect(
            "GET",
            "/apis/batch/v1/namespaces/nodewright/jobs/j1",
            200,
            interrupt_job("7", false),
        ),
        expect(
            "GET",
            "/api/v1/namespaces/nodewright/pods",
            200,
            pods_with_restarts(1),
        ),
    ]);
    assert!(matches!(
        run(client, end_interrupt()).await,
        Outcome::Dropped(_)
    ));
    task.await.unwrap();
    // lost the race on the patch
    let (client, task) = fake(vec![
        expect(
            "GET",
            "/apis/batch/v1/namespaces/nodewright/jobs/j1",
            200,
            interrupt_job("7", false),
        ),
        expect(
            "GET",
            "/api/v1/namespaces/nodewright/pods",
            200,
            pods_with_restarts(4),
        ),
        expect(
            "PATCH",
            "/apis/batch/v1/namespaces/nodewright/jobs/j1",
            409,
            status(409, "Conflict"),
        ),
    ]);
    assert!(matches!(
        run(client, end_interrupt()).await,
        Outcome::Dropped(_)
    ));
    task.await.unwrap();
    // gone
    let (client, task) = fake(vec![expect(
        "GET",
        "/apis/batch/v1/namespaces/nodewright/jobs/j1",
        404,
        status(404, "NotFound"),
    )]);
    assert!(matches!(run(client, end_interrupt()).await, Outcome::Noop));
    task.await.unwrap();
}

// ---- PatchNode ----

#[tokio::test]
async fn r13_1_node_state_entry_merged_into_fresh_read_with_rv_precondition() {
    let other = PackageStatus {
        name: "other".into(),
        ..entry(Stage::Config, State::Complete)
    };
    let before = entry(Stage::Apply, State::InProgress);
    let after = entry(Stage::Apply, State::Complete);
    let fresh = node_json(
        "42",
        json!({keys::node_state("nw"): doc(&[before.clone(), other.clone()]),
                                       "foreign": "x"}),
    );
    let (client, task) = fake(vec![
        expect("GET", "/api/v1/nodes/n1", 200, fresh),
        expect("PATCH", "/api/v1/nodes/n1", 200, node_json("43", json!({}))),
    ]);
    let out = run(client, state_patch(Some(before), Some(after.clone()))).await;
    assert!(matches!(out, Outcome::Applied), "{out:?}");
    let seen = task.await.unwrap();
    let meta = &seen[1].body["metadata"];
    assert_eq!(meta["resourceVersion"], "42");
    assert_eq!(
        meta["annotations"][keys::node_state("nw")],
        doc(&[after, other])
    );
    assert!(
        meta["annotations"].get("foreign").is_none(),
        "foreign keys untouched"
    );
    assert!(
        seen[1].body.get("spec").is_none(),
        "no spec fields restamped"
    );
}

#[tokio::test]
async fn r13_1_conflict_rereads_uncached_and_rechecks() {
    let before = entry(Stage::Apply, State::InProgress);
    let after = entry(Stage::Apply, State::Complete);
    let ann = json!({keys::node_state("nw"): doc(std::slice::from_ref(&before))});
    let (client, task) = fake(vec![
        expect("GET", "/api/v1/nodes/n1", 200, node_json("1", ann.clone())),
        expect("PATCH", "/api/v1/nodes/n1", 409, status(409, "Conflict")),
        expect("GET", "/api/v1/nodes/n1", 200, node_json("2", ann)),
        expect("PATCH", "/api/v1/nodes/n1", 200, node_json("3", json!({}))),
    ]);
    let out = run(client, state_patch(Some(before), Some(after))).await;
    assert!(matches!(out, Outcome::Applied), "{out:?}");
    let seen = task.await.unwrap();
    assert_eq!(seen[1].body["metadata"]["resourceVersion"], "1");
    assert_eq!(seen[3].body["metadata"]["resourceVersion"], "2");
}

#[tokio::test]
async fn r13_1_conflict_then_changed_entry_is_dropped() {
    let before = entry(Stage::Apply, State::InProgress);
    let recorded = entry(Stage::Apply, State::Erroring);
    let (client, task) = fake(vec![
        expect(
            "GET",
            "/api/v1/nodes/n1",
            200,
            node_json(
                "1",
                json!({keys::node_state("nw"): doc(std::slice::from_ref(&before))}),
            ),
        ),
        expect("PATCH", "/api/v1/nodes/n1", 409, status(409, "Conflict")),
        expect(
            "GET",
            "/api/v1/nodes/n1",
            200,
            node_json("2", json!({keys::node_state("nw"): doc(&[recorded])})),
        ),
    ]);
    let out = run(
        client,
        state_patch(Some(before), Some(entry(Stage::Apply, State::Complete))),
    )
    .await;
    assert!(matches!(out, Outcome::Dropped(_)), "{out:?}");
    task.await.unwrap();
}

#[tokio::test]
async fn r13_1_expect_mismatch_on_first_read_is_dropped_without_write() {
    let (client, task) = fake(vec![expect(
        "GET",
        "/api/v1/nodes/n1",
        200,
        node_json("1", json!({})),
    )]);
    let out = run(
        client,
        state_patch(Some(entry(Stage::Apply, State::InProgress)), None),
    )
    .await;
    assert!(matches!(out, Outcome::Dropped(_)), "{out:?}");
    task.await.unwrap();
}

#[tokio::test]
async fn r13_1_node_gone_is_noop() {
    let (client, task) = fake(vec![expect(
        "GET",
        "/api/v1/nodes/n1",
        404,
        status(404, "NotFound"),
    )]);
    let out = run(
        client,
        state_patch(None, Some(entry(Stage::Apply, State::InProgress))),
    )
    .await;
    assert!(matches!(out, Outcome::Noop), "{out:?}");
    task.await.unwrap();
}

#[tokio::test]
async fn r13_1_malformed_fresh_annotation_fails_without_write() {
    let (client, task) = fake(vec![expect(
        "GET",
        "/api/v1/nodes/n1",
        200,
        node_json("1", json!({keys::node_state("nw"): "{"})),
    )]);
    let out = run(
        client,
        state_patch(None, Some(entry(Stage::Apply, State::InProgress))),
    )
    .await;
    assert!(
        matches!(out, Outcome::Failed(ShellError::Malformed(_))),
        "{out:?}"
    );
    task.await.unwrap();
}

#[tokio::test]
async fn r13_1_conflicts_exhaust_retries() {
    let ann = json!({});
    let mut script = Vec::new();
    for rv in 0..5 {
        script.push(expect(
            "GET",
            "/api/v1/nodes/n1",
            200,
            node_json(&rv.to_string(), ann.clone()),
        ));
        script.push(expect(
            "PATCH",
            "/api/v1/nodes/n1",
            409,
            status(409, "Conflict"),
        ));
    }
    let (client, task) = fake(script);
    let out = run(
        client,
        state_patch(None, Some(entry(Stage::Apply, State::InProgress))),
    )
    .await;
    assert!(
        matches!(
            out,
            Outcome::Failed(ShellError::ConflictRetriesExhausted(5))
        ),
        "{out:?}"
    );
    task.await.unwrap();
}

#[tokio::test]
async fn d14_taints_by_identity_and_cordon_deltas_only() {
    let fresh = json!({"metadata": {"name": "n1", "resourceVersion": "5", "labels": {"keep": "1"}},
        "spec": {"taints": [
            {"key": "autoscaler", "effect": "NoSchedule"},
            {"key": "nodewright.nvidia.com", "value": "runtime-required", "effect": "NoSchedule"}]}});
    let (client, task) = fake(vec![
        expect("GET", "/api/v1/nodes/n1", 200, fresh),
        expect("PATCH", "/api/v1/nodes/n1", 200, node_json("6", json!({}))),
    ]);
    let taint = |k: &str, v: Option<&str>| Taint {
        key: k.into(),
        value: v.map(str::to_string),
        effect: "NoSchedule".into(),
        time_added: None,
    };
    let effect = Effect::PatchNode(Box::new(NodePatch {
        node: "n1".into(),
        guarded: false,
        taints_remove: vec![taint("nodewright.nvidia.com", None)],
        taints_add: vec![taint("autoscaler", Some("other-value"))],
        unschedulable: Some(true),
        labels: BTreeMap::from([
            ("keep".into(), Some("1".into())),
            ("gone".into(), None),
            ("new".into(), Some("v".into())),
        ]),
        annotations: BTreeMap::from([(keys::cordon("nw"), Some("true".into()))]),
        ..NodePatch::default()
    }));
    assert!(matches!(run(client, effect).await, Outcome::Applied));
    let seen = task.await.unwrap();
    let body = &seen[1].body;
    assert_eq!(
        body["spec"]["taints"],
        json!([{"key": "autoscaler", "effect": "NoSchedule"}])
    );
    assert_eq!(body["spec"]["unschedulable"], true);
    assert_eq!(
        body["metadata"]["labels"],
        json!({"new": "v"}),
        "unchanged and absent labels not sent"
    );
    assert_eq!(body["metadata"]["annotations"][keys::cordon("nw")], "true");
    assert_eq!(
        body["metadata"]["resourceVersion"], "5",
        "taint list is guarded"
    );
}

#[tokio::test]
async fn patch_node_without_changes_is_noop() {
    let (client, task) = fake(vec![expect(
        "GET",
        "/api/v1/nodes/n1",
        200,
        node_json("1", json!({"a": "1"})),
    )]);
    let effect = Effect::PatchNode(Box::new(NodePatch {
        node: "n1".into(),
        annotations: BTreeMap::from([("a".into(), Some("1".into())), ("b".into(), None)]),
        ..NodePatch::default()
    }));
    assert!(matches!(run(client, effect).await, Outcome::Noop));
    task.await.unwrap();
}

#[tokio::test]
async fn reset_removes_whole_document() {
    let (client, task) = fake(vec![
        expect(
            "GET",
            "/api/v1/nodes/n1",
            200,
            node_json("1", json!({keys::node_state("nw"): "{}"})),
        ),
        expect("PATCH", "/api/v1/nodes/n1", 200, node_json("2", json!({}))),
    ]);
    let effect = Effect::PatchNode(Box::new(NodePatch {
        node: "n1".into(),
        remove_state_of: vec!["nw".into()],
        ..NodePatch::default()
    }));
    assert!(matches!(run(client, effect).await, Outcome::Applied));
    let seen = task.await.unwrap();
    assert_eq!(
        seen[1].body["metadata"]["annotations"][keys::node_state("nw")],
        Value::Null
    );
    assert!(seen[1].body["metadata"].get("resourceVersion").is_some());
}

#[tokio::test]
async fn r13_2_node_conditions_strategic_patch_on_status() {
    let (client, task) = fake(vec![expect(
        "PATCH",
        "/api/v1/nodes/n1/status",
        200,
        node_json("2", json!({})),
    )]);
    let effect = Effect::PatchNodeConditions {
        node: "n1".into(),
        set: vec![NodeCondition {
            type_: "nodewright.nvidia.com/nw/Erroring".into(),
            status: "True".into(),
            ..NodeCondition::default()
        }],
        remove: vec!["nodewright.nvidia.com/nw/NotReady".into()],
    };
    assert!(matches!(run(client, effect).await, Outcome::Applied));
    let seen = task.await.unwrap();
    let conditions = &seen[0].body["status"]["conditions"];
    assert_eq!(conditions[0]["type"], "nodewright.nvidia.com/nw/Erroring");
    assert_eq!(conditions[1]["$patch"], "delete");
}

// ---- Evict ----

fn evict(delete_instead: bool) -> Effect {
    Effect::Evict {
        namespace: "work".into(),
        name: "w1".into(),
        uid: "wu".into(),
        delete_instead,
        grace_period_seconds: Some(30),
        context: ctx("n1"),
    }
}

#[tokio::test]
async fn r8_2_evict_uses_eviction_subresource_with_uid() {
    let (client, task) = fake(vec![expect(
        "POST",
        "/api/v1/namespaces/work/pods/w1/eviction",
        201,
        json!({"kind": "Status", "status": "Success"}),
    )]);
    assert!(matches!(run(client, evict(false)).await, Outcome::Applied));
    let seen = task.await.unwrap();
    assert_eq!(seen[0].body["deleteOptions"]["preconditions"]["uid"], "wu");
    assert_eq!(seen[0].body["deleteOptions"]["gracePeriodSeconds"], 30);
}

#[tokio::test]
async fn r8_2_evict_429_is_a_wait_not_an_error() {
    let (client, task) = fake(vec![expect(
        "POST",
        "/api/v1/namespaces/work/pods/w1/eviction",
        429,
        status(429, "TooManyRequests"),
    )]);
    assert!(matches!(
        run(client, evict(false)).await,
        Outcome::Waiting(_)
    ));
    task.await.unwrap();
}

#[tokio::test]
async fn evict_not_found_noop_and_delete_instead() {
    let (client, task) = fake(vec![expect(
        "POST",
        "/api/v1/namespaces/work/pods/w1/eviction",
        404,
        status(404, "NotFound"),
    )]);
    assert!(matches!(run(client, evict(false)).await, Outcome::Noop));
    task.await.unwrap();
    let (client, task) = fake(vec![expect(
        "DELETE",
        "/api/v1/namespaces/work/pods/w1",
        200,
        json!({"metadata": {"name": "w1"}}),
    )]);
    assert!(matches!(run(client, evict(true)).await, Outcome::Applied));
    let seen = task.await.unwrap();
    assert_eq!(seen[0].body["preconditions"]["uid"], "wu");
}

// ---- NodeWright status and finalizers ----

fn nodewright(rv: &str, finalizers: &[&str], status: Option<NodeWrightStatus>) -> NodeWright {
    let mut nw = NodeWright::new("nw", NodeWrightSpec::default());
    nw.metadata.uid = Some("nwu".into());
    nw.metadata.resource_version = Some(rv.into());
    nw.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
    nw.status = status;
    nw
}

#[tokio::test]
async fn r13_7_status_merge_patch_of_changed_fields_only() {
    let old = NodeWrightStatus {
        package_list: "a:1".into(),
        complete_nodes: "0/1".into(),
        nodes_in_progress: 1,
        ..NodeWrightStatus::default()
    };
    let new = NodeWrightStatus {
        package_list: "a:1".into(),
        complete_nodes: "1/1".into(),
        ..NodeWrightStatus::default()
    };
    let snapshot = Snapshot {
        nodewrights: vec![std::sync::Arc::new(nodewright("1", &[], Some(old)))],
        ..Snapshot::default()
    };
    let (client, task) = fake(vec![expect(
        "PATCH",
        "/apis/nodewright.nvidia.com/v1alpha1/nodewrights/nw/status",
        200,
        serde_json::to_value(nodewright("2", &[], None)).unwrap_or_default(),
    )]);
    let effect = Effect::PatchStatus {
        nodewright: "nw".into(),
        status: Box::new(new),
    };
    let out = interpreter(client).apply_one(&snapshot, &effect).await;
    assert!(matches!(out, Outcome::Applied), "{out:?}");
    let seen = task.await.unwrap();
    assert_eq!(
        seen[0].body,
        json!({
            "metadata": {"resourceVersion": "1"},
            "status": {"completeNodes": "1/1", "nodesInProgress": null}
        })
    );
}

fn changed_status(snapshot_rv: &str) -> (Snapshot, Effect) {
    let snapshot = Snapshot {
        nodewrights: vec![std::sync::Arc::new(nodewright(snapshot_rv, &[], None))],
        ..Snapshot::default()
    };
    let effect = Effect::PatchStatus {
        nodewright: "nw".into(),
        status: Box::new(NodeWrightStatus {
            package_list: "a:1".into(),
            ..NodeWrightStatus::default()
        }),
    };
    (snapshot, effect)
}

#[tokio::test]
async fn r13_7_status_computed_from_a_stale_snapshot_is_dropped_on_conflict() {
    let (snapshot, effect) = changed_status("1");
    let (client, task) = fake(vec![expect(
        "PATCH",
        "/apis/nodewright.nvidia.com/v1alpha1/nodewrights/nw/status",
        409,
        status(409, "Conflict"),
    )]);
    let out = interpreter(client).apply_one(&snapshot, &effect).await;
    assert!(matches!(out, Outcome::Dropped(_)), "{out:?}");
    let seen = task.await.unwrap();
    assert_eq!(seen.len(), 1, "no retry: the next pass recomputes");
    assert_eq!(seen[0].body["metadata"], json!({"resourceVersion": "1"}));
}

#[tokio::test]
async fn r13_7_status_after_our_finalizer_write_expects_its_version() {
    let (snapshot, status_effect) = changed_status("1");
    let written =
        serde_json::to_value(nodewright("2", &[keys::FINALIZER], None)).unwrap_or_default();
    let (client, task) = fake(vec![
        expect(
            "PATCH",
            "/apis/nodewright.nvidia.com/v1alpha1/nodewrights/nw",
            200,
            written.clone(),
        ),
        expect(
            "PATCH",
            "/apis/nodewright.nvidia.com/v1alpha1/nodewrights/nw/status",
            200,
            written,
        ),
    ]);
    let interpreter = interpreter(client);
    let add = Effect::AddFinalizer {
        nodewright: "nw".into(),
        uid: "nwu".into(),
    };
    assert!(matches!(
        interpreter.apply_one(&snapshot, &add).await,
        Outcome::Applied
    ));
    let out = interpreter.apply_one(&snapshot, &status_effect).await;
    assert!(matches!(out, Outcome::Applied), "{out:?}");
    let seen = task.await.unwrap();
    assert_eq!(seen[1].body["metadata"], json!({"resourceVersion": "2"}));
}

/// A plan that records a new batch, then acts on it (a start and the node's entry), then writes
/// the status.
fn batch_plan() -> (Snapshot, Plan) {
    let (snapshot, status_effect) = changed_status("1");
    let mut batch = NodeWrightStatus::default();
    batch.node_priority.insert(
        "n1".into(),
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
    );
    let plan = Plan {
        effects: vec![
            Effect::RecordBatch {
                nodewright: "nw".into(),
                status: Box::new(batch),
            },
            Effect::CreateJob {
                job: (job("j1")).into(),
                context: ctx("n1"),
                precondition: None,
                confirm: None,
            },
            state_patch(None, Some(entry(Stage::Apply, State::InProgress))),
            event("Apply"),
            status_effect,
        ],
        ..Plan::default()
    };
    (snapshot, plan)
}

#[tokio::test]
async fn inv16_7_a_batch_that_cannot_be_recorded_skips_every_write_acting_on_it() {
    let (snapshot, plan) = batch_plan();
    let (client, task) = fake(vec![expect(
        "PATCH",
        "/apis/nodewright.nvidia.com/v1alpha1/nodewrights/nw/status",
        409,
        status(409, "Conflict"),
    )]);
    let report = interpreter(client).apply(&snapshot, &plan).await;
    let labels: Vec<_> = report.outcomes.iter().map(|(_, o)| o.label()).collect();
    assert_eq!(
        labels,
        vec!["dropped", "skipped", "skipped", "skipped", "skipped"]
    );
    let seen = task.await.unwrap();
    assert_eq!(
        seen.len(),
        1,
        "no Job, node or status write after the batch"
    );
    assert_eq!(seen[0].body["metadata"], json!({"resourceVersion": "1"}));
    assert!(
        seen[0].body["status"]["nodePriority"]["n1"].is_string(),
        "{}",
        seen[0].body
    );
}

#[tokio::test]
async fn inv16_7_the_status_patch_after_a_recorded_batch_expects_its_version() {
    let (snapshot, plan) = batch_plan();
    let written = serde_json::to_value(nodewright("2", &[], None)).unwrap_or_default();
    let (client, task) = fake(vec![
        expect(
            "PATCH",
            "/apis/nodewright.nvidia.com/v1alpha1/nodewrights/nw/status",
            200,
            written.clone(),
        ),
        expect(
            "POST",
            "/apis/batch/v1/namespaces/nodewright/jobs",
            201,
            json!({"metadata": {"name": "j1", "namespace": "nodewright"}}),
        ),
        expect("GET", "/api/v1/nodes/n1", 200, node_json("5", json!({}))),
        expect("PATCH", "/api/v1/nodes/n1", 200, node_json("6", json!({}))),
        expect(
            "PATCH",
            "/apis/nodewright.nvidia.com/v1alpha1/nodewrights/nw/status",
            200,
            written,
        ),
        expect(
            "POST",
            "/apis/events.k8s.io/v1/namespaces/default/events",
            201,
            json!({}),
        ),
    ]);
    let interpreter = interpreter(client);
    let report = interpreter.apply(&snapshot, &plan).await;
    let applied: Vec<_> = report
        .outcomes
        .iter()
        .filter(|(kind, _)| *kind != "Event")
        .map(|(_, o)| o.label())
        .collect();
    assert_eq!(applied, vec!["applied"; 4]);
    let seen = task.await.unwrap();
    let status_writes: Vec<_> = seen
        .iter()
        .filter(|s| s.uri.contains("/nodewrights/nw/status"))
        .map(|s| s.body["metadata"].clone())
        .collect();
    assert_eq!(
        status_writes,
        vec![
            json!({"resourceVersion": "1"}),
            json!({"resourceVersion": "2"})
        ],
        "the plan's status patch expects the version its own batch record made"
    );
}

#[tokio::test]
async fn inv16_7_finalizer_then_batch_then_status_each_expect_the_last_version() {
    let (snapshot, plan) = batch_plan();
    let (record, status_effect) = (plan.effects[0].clone(), plan.effects[4].clone());
    let nw_at = |rv: &str| serde_json::to_value(nodewright(rv, &[keys::FINALIZER], None));
    let (client, task) = fake(vec![
        expect(
            "PATCH",
            "/apis/nodewright.nvidia.com/v1alpha1/nodewrights/nw",
            200,
            nw_at("2").unwrap_or_default(),
        ),
        expect(
            "PATCH",
            "/apis/nodewright.nvidia.com/v1alpha1/nodewrights/nw/status",
            200,
            nw_at("3").unwrap_or_default(),
        ),
        expect(
            "PATCH",
            "/apis/nodewright.nvidia.com/v1alpha1/nodewrights/nw/status",
            200,
            nw_at("4").unwrap_or_default(),
        ),
    ]);
    let add = Effect::AddFinalizer {
        nodewright: "nw".into(),
        uid: "nwu".into(),
    };
    let report = interpreter(client)
        .apply_effects(&snapshot, &[add, record, status_effect])
        .await;
    let labels: Vec<_> = report.outcomes.iter().map(|(_, o)| o.label()).collect();
    assert_eq!(labels, vec!["applied"; 3]);
    let versions: Vec<_> = task
        .await
        .unwrap()
        .iter()
        .map(|s| s.body["metadata"]["resourceVersion"].clone())
        .collect();
    assert_eq!(versions, vec![json!("1"), json!("2"), json!("3")]);
}

#[tokio::test]
async fn inv16_7_a_later_plan_on_the_old_snapshot_does_not_expect_the_batch_version() {
    let (snapshot, plan) = batch_plan();
    let port = super::MemoryPort::new(snapshot.clone(), jiff::Timestamp::UNIX_EPOCH);
    let interpreter =
        super::Interpreter::with_port(port, "nodewright", EventRecorder::new("test-pod"));
    let first = interpreter
        .apply_effects(&snapshot, &plan.effects[..1])
        .await;
    assert_eq!(first.outcomes[0].1.label(), "applied");
    // A later pass still planned on the snapshot from before the batch was recorded: its status
    // patch must not pass as if it had seen that batch.
    let (_, stale) = changed_status("1");
    let later = interpreter.apply_effects(&snapshot, &[stale]).await;
    assert_eq!(later.outcomes[0].1.label(), "dropped");
}

#[tokio::test]
async fn r13_7_unchanged_status_is_not_written() {
    let s = NodeWrightStatus {
        package_list: "a:1".into(),
        ..NodeWrightStatus::default()
    };
    let snapshot = Snapshot {
        nodewrights: vec![std::sync::Arc::new(nodewright("1", &[], Some(s.clone())))],
        ..Snapshot::default()
    };
    let (client, task) = fake(vec![]);
    let effect = Effect::PatchStatus {
        nodewright: "nw".into(),
        status: Box::new(s),
    };
    assert!(matches!(
        interpreter(client).apply_one(&snapshot, &effect).await,
        Outcome::Noop
    ));
    task.await.unwrap();
}

#[tokio::test]
async fn b5_add_finalizer_with_rv_lock_and_conflict_reread() {
    let snapshot = Snapshot {
        nodewrights: vec![std::sync::Arc::new(nodewright("1", &["other"], None))],
        ..Snapshot::default()
    };
    let fresh =
        serde_json::to_value(nodewright("2", &["other", "third"], None)).unwrap_or_default();
    let (client, task) = fake(vec![
        expect(
            "PATCH",
            "/apis/nodewright.nvidia.com/v1alpha1/nodewrights/nw",
            409,
            status(409, "Conflict"),
        ),
        expect(
            "GET",
            "/apis/nodewright.nvidia.com/v1alpha1/nodewrights/nw",
            200,
            fresh.clone(),
        ),
        expect(
            "PATCH",
            "/apis/nodewright.nvidia.com/v1alpha1/nodewrights/nw",
            200,
            fresh,
        ),
    ]);
    let effect = Effect::AddFinalizer {
        nodewright: "nw".into(),
        uid: "nwu".into(),
    };
    let out = interpreter(client).apply_one(&snapshot, &effect).await;
    assert!(matches!(out, Outcome::Applied), "{out:?}");
    let seen = task.await.unwrap();
    // M2: the operator version rides along with the finalizer.
    let version = json!({ keys::VERSION: keys::OPERATOR_VERSION });
    assert_eq!(
        seen[0].body["metadata"],
        json!({"finalizers": ["other", keys::FINALIZER], "resourceVersion": "1",
            "annotations": version})
    );
    assert_eq!(
        seen[2].body["metadata"],
        json!({"finalizers": ["other", "third", keys::FINALIZER], "resourceVersion": "2",
            "annotations": version})
    );
}

#[tokio::test]
async fn b5_remove_finalizer_uid_mismatch_dropped_and_absent_noop() {
    let snapshot = Snapshot {
        nodewrights: vec![std::sync::Arc::new(nodewright(
            "1",
            &[keys::FINALIZER],
            None,
        ))],
        ..Snapshot::default()
    };
    let (client, task) = fake(vec![]);
    let effect = Effect::RemoveFinalizer {
        nodewright: "nw".into(),
        uid: "other-uid".into(),
    };
    assert!(matches!(
        interpreter(client.clone())
            .apply_one(&snapshot, &effect)
            .await,
        Outcome::Dropped(_)
    ));
    let effect = Effect::RemoveFinalizer {
        nodewright: "nw".into(),
        uid: "nwu".into(),
    };
    let no_finalizer = Snapshot {
        nodewrights: vec![std::sync::Arc::new(nodewright("1", &[], None))],
        ..Snapshot::default()
    };
    assert!(matches!(
        interpreter(client).apply_one(&no_finalizer, &effect).await,
        Outcome::Noop
    ));
    task.await.unwrap();
}

#[tokio::test]
async fn b5_remove_finalizer_gone_object_is_noop() {
    let (client, task) = fake(vec![expect(
        "GET",
        "/apis/nodewright.nvidia.com/v1alpha1/nodewrights/nw",
        404,
        status(404, "NotFound"),
    )]);
    let effect = Effect::RemoveFinalizer {
        nodewright: "nw".into(),
        uid: "nwu".into(),
    };
    assert!(matches!(run(client, effect).await, Outcome::Noop));
    task.await.unwrap();
}

// ---- ConfigMaps ----

fn config_map() -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": "cm"}, "data": {"k": "v"}}))
        .unwrap_or_default()
}

#[tokio::test]
async fn configmap_create_update_and_races() {
    let create = Effect::UpsertConfigMap {
        config_map: Box::new(config_map()),
        expect_resource_version: None,
    };
    let update = Effect::UpsertConfigMap {
        config_map: Box::new(config_map()),
        expect_resource_version: Some("4".into()),
    };
    let (client, task) = fake(vec![
        expect(
            "POST",
            "/api/v1/namespaces/nodewright/configmaps",
            201,
            json!({"metadata": {"name": "cm"}}),
        ),
        expect(
            "POST",
            "/api/v1/namespaces/nodewright/configmaps",
            409,
            status(409, "AlreadyExists"),
        ),
        expect(
            "PUT",
            "/api/v1/namespaces/nodewright/configmaps/cm",
            200,
            json!({"metadata": {"name": "cm"}}),
        ),
        expect(
            "PUT",
            "/api/v1/namespaces/nodewright/configmaps/cm",
            409,
            status(409, "Conflict"),
        ),
    ]);
    let i = interpreter(client);
    let s = Snapshot::default();
    assert!(matches!(i.apply_one(&s, &create).await, Outcome::Applied));
    assert!(matches!(
        i.apply_one(&s, &create).await,
        Outcome::Dropped(_)
    ));
    assert!(matches!(i.apply_one(&s, &update).await, Outcome::Applied));
    assert!(matches!(
        i.apply_one(&s, &update).await,
        Outcome::Dropped(_)
    ));
    let seen = task.await.unwrap();
    assert_eq!(seen[2].body["metadata"]["resourceVersion"], "4");
}

#[tokio::test]
async fn configmap_delete_guarded() {
    let effect = Effect::DeleteConfigMap {
        name: "cm".into(),
        uid: "cu".into(),
        reason: DeletionReason::UninstallCleanup,
    };
    let (client, task) = fake(vec![
        expect(
            "DELETE",
            "/api/v1/namespaces/nodewright/configmaps/cm",
            200,
            json!({"metadata": {"name": "cm"}}),
        ),
        expect(
            "DELETE",
            "/api/v1/namespaces/nodewright/configmaps/cm",
            404,
            status(404, "NotFound"),
        ),
    ]);
    let i = interpreter(client);
    assert!(matches!(
        i.apply_one(&Snapshot::default(), &effect).await,
        Outcome::Applied
    ));
    assert!(matches!(
        i.apply_one(&Snapshot::default(), &effect).await,
        Outcome::Noop
    ));
    let seen = task.await.unwrap();
    assert_eq!(seen[0].body["preconditions"]["uid"], "cu");
}

// ---- Events and plan ordering ----

fn event(reason: &str) -> Effect {
    Effect::Event(Box::new(EventSpec {
        regarding: ObjectRef {
            kind: "NodeWright".into(),
            name: "nw".into(),
            namespace: None,
            uid: Some("nwu".into()),
        },
        warning: true,
        reason: reason.into(),
        action: String::new(),
        message: "m".into(),
    }))
}

#[tokio::test]
async fn event_for_cluster_scoped_object_goes_to_default_namespace() {
    let (client, task) = fake(vec![expect(
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        201,
        json!({"metadata": {"name": "e"}, "eventTime": "2026-01-01T00:00:00.000000Z"}),
    )]);
    let plan = Plan {
        effects: vec![event("State"), event("State")],
        ..Plan::default()
    };
    let report = interpreter(client).apply(&Snapshot::default(), &plan).await;
    assert_eq!(report.count("applied"), 1);
    assert_eq!(
        report.count("noop"),
        1,
        "duplicate within the window is suppressed"
    );
    let seen = task.await.unwrap();
    let body = &seen[0].body;
    assert_eq!(body["type"], "Warning");
    assert_eq!(body["action"], "State");
    assert_eq!(body["reportingController"], events::REPORTING_CONTROLLER);
    assert_eq!(
        body["regarding"]["apiVersion"],
        "nodewright.nvidia.com/v1alpha1"
    );
}

#[tokio::test]
async fn plan_failed_node_write_skips_later_effects_of_that_node_and_status() {
    let snapshot = Snapshot {
        nodewrights: vec![std::sync::Arc::new(nodewright("1", &[], None))],
        ..Snapshot::default()
    };
    let (client, task) = fake(vec![
        // the node write finds a changed entry: dropped
        expect("GET", "/api/v1/nodes/n1", 200, node_json("1", json!({}))),
        // the job on another node still goes
        expect(
            "POST",
            "/apis/batch/v1/namespaces/nodewright/jobs",
            201,
            json!({"metadata": {"name": "j2"}}),
        ),
    ]);
    let plan = Plan {
        effects: vec![
            state_patch(Some(entry(Stage::Apply, State::InProgress)), None),
            event("Apply"),
            Effect::CreateJob {
                job: (job("j1")).into(),
                context: ctx("n1"),
                precondition: None,
                confirm: None,
            },
            Effect::CreateJob {
                job: (job("j2")).into(),
                context: ctx("n2"),
                precondition: None,
                confirm: None,
            },
            Effect::PatchStatus {
                nodewright: "nw".into(),
                status: Box::new(NodeWrightStatus {
                    package_list: "x".into(),
                    ..NodeWrightStatus::default()
                }),
            },
        ],
        ..Plan::default()
    };
    let report = interpreter(client).apply(&snapshot, &plan).await;
    let labels: Vec<_> = report
        .outcomes
        .iter()
        .map(|(k, o)| (*k, o.label()))
        .collect();
    assert_eq!(
        labels,
        vec![
            ("PatchNode", "dropped"),
            ("Event", "skipped"),
            ("CreateJob", "skipped"),
            ("CreateJob", "applied"),
            ("PatchStatus", "skipped"),
        ]
    );
    assert!(report.wants_requeue());
    task.await.unwrap();
}

#[tokio::test]
async fn r8_2_blocked_eviction_does_not_block_other_evictions_on_the_node() {
    let (client, task) = fake(vec![
        expect(
            "POST",
            "/api/v1/namespaces/work/pods/w1/eviction",
            429,
            status(429, "TooManyRequests"),
        ),
        expect(
            "POST",
            "/api/v1/namespaces/work/pods/w2/eviction",
            201,
            json!({"kind": "Status", "status": "Success"}),
        ),
    ]);
    let second = Effect::Evict {
        namespace: "work".into(),
        name: "w2".into(),
        uid: "wu2".into(),
        delete_instead: false,
        grace_period_seconds: None,
        context: ctx("n1"),
    };
    let plan = Plan {
        effects: vec![evict(false), event("Drain"), second],
        ..Plan::default()
    };
    let report = interpreter(client).apply(&Snapshot::default(), &plan).await;
    let labels: Vec<_> = report.outcomes.iter().map(|(_, o)| o.label()).collect();
    assert_eq!(labels, ["waiting", "skipped", "applied"]);
    assert!(report.wants_requeue());
    assert!(report.errors().is_empty(), "a PDB wait is not an error");
    task.await.unwrap();
}

#[tokio::test]
async fn r13_1_first_read_may_come_from_the_cache() {
    let (reader, mut writer) =
        kube::runtime::reflector::store::<k8s_openapi::api::core::v1::Node>();
    let cached: k8s_openapi::api::core::v1::Node =
        serde_json::from_value(node_json("10", json!({}))).expect("node");
    writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(cached));
    // no GET: the first attempt uses the cache; the conflict forces an apiserver read
    let (client, task) = fake(vec![
        expect("PATCH", "/api/v1/nodes/n1", 409, status(409, "Conflict")),
        expect("GET", "/api/v1/nodes/n1", 200, node_json("11", json!({}))),
        expect("PATCH", "/api/v1/nodes/n1", 200, node_json("12", json!({}))),
    ]);
    let i = interpreter(client).with_node_cache(reader);
    let out = i
        .apply_one(
            &Snapshot::default(),
            &state_patch(None, Some(entry(Stage::Apply, State::InProgress))),
        )
        .await;
    assert!(matches!(out, Outcome::Applied), "{out:?}");
    let seen = task.await.unwrap();
    assert_eq!(seen[0].body["metadata"]["resourceVersion"], "10");
    assert_eq!(seen[2].body["metadata"]["resourceVersion"], "11");
}

/// A fake answering by (method, path) in any order; returns the paths in arrival order.
fn fake_any(answers: Vec<Expect>) -> (Client, JoinHandle<Vec<String>>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let task = tokio::spawn(async move {
        let mut answers = answers;
        let mut seen = Vec::new();
        while !answers.is_empty() {
            let (request, send) = handle.next_request().await.expect("expected a request");
            let path = request.uri().path().to_string();
            let bytes = request
                .into_body()
                .collect_bytes()
                .await
                .unwrap_or_default();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let name = body["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            seen.push(format!("{path} {name}").trim().to_string());
            let at = answers
                .iter()
                .position(|a| a.path == path)
                .expect("unexpected request");
            let step = answers.remove(at);
            send.send_response(
                Response::builder()
                    .status(step.status)
                    .body(Body::from(
                        serde_json::to_vec(&step.body).unwrap_or_default(),
                    ))
                    .expect("valid response"),
            );
        }
        seen
    });
    (Client::new(service, "default"), task)
}

#[tokio::test]
async fn plan_lanes_run_nodes_concurrently_but_barriers_and_order_hold() {
    let jobs = "/apis/batch/v1/namespaces/nodewright/jobs";
    let status_path = "/apis/nodewright.nvidia.com/v1alpha1/nodewrights/nw/status";
    let created = json!({"metadata": {"name": "j"}});
    let (client, task) = fake_any(vec![
        expect("POST", jobs, 201, created.clone()),
        expect("POST", jobs, 201, created.clone()),
        expect(
            "POST",
            "/apis/events.k8s.io/v1/namespaces/default/events",
            201,
            json!({"metadata": {"name": "e"}}),
        ),
        expect(
            "PATCH",
            status_path,
            200,
            serde_json::to_value(nodewright("2", &[], None)).unwrap_or_default(),
        ),
        expect("POST", jobs, 201, created),
    ]);
    let snapshot = Snapshot {
        nodewrights: vec![std::sync::Arc::new(nodewright("1", &[], None))],
        ..Snapshot::default()
    };
    let plan = Plan {
        effects: vec![
            Effect::CreateJob {
                job: (job("j1")).into(),
                context: ctx("n1"),
                precondition: None,
                confirm: None,
            },
            event("Apply"),
            Effect::CreateJob {
                job: (job("j2")).into(),
                context: ctx("n2"),
                precondition: None,
                confirm: None,
            },
            Effect::PatchStatus {
                nodewright: "nw".into(),
                status: Box::new(NodeWrightStatus {
                    package_list: "x".into(),
                    ..NodeWrightStatus::default()
                }),
            },
            Effect::CreateJob {
                job: (job("j3")).into(),
                context: ctx("n1"),
                precondition: None,
                confirm: None,
            },
        ],
        ..Plan::default()
    };
    let report = interpreter(client).apply(&snapshot, &plan).await;
    let kinds: Vec<_> = report
        .outcomes
        .iter()
        .map(|(k, o)| (*k, o.label()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("CreateJob", "applied"),
            ("Event", "applied"),
            ("CreateJob", "applied"),
            ("PatchStatus", "applied"),
            ("CreateJob", "applied")
        ]
    );
    let seen = task.await.unwrap();
    let pos = |needle: &str| {
        seen.iter()
            .position(|s| s.contains(needle))
            .unwrap_or(usize::MAX)
    };
    assert!(
        pos("j1") < pos("/status") && pos("j2") < pos("/status"),
        "{seen:?}"
    );
    assert!(
        pos("/status") < pos("j3"),
        "the status patch is a barrier: {seen:?}"
    );
    assert!(
        pos("j1") < pos("/events"),
        "an event follows its write: {seen:?}"
    );
}

#[tokio::test]
async fn d14_patch_job_uid_mismatch_as_the_real_apiserver_answers_it_is_dropped() {
    // kube-apiserver 1.35 answers a merge patch carrying a different metadata.uid with 422
    let invalid = json!({"kind": "Status", "status": "Failure", "code": 422, "reason": "Invalid",
        "message": "The Job \"j1\" is invalid: metadata.uid: Invalid value: \"u1\": field is immutable"});
    let (client, task) = fake(vec![expect(
        "PATCH",
        "/apis/batch/v1/namespaces/nodewright/jobs/j1",
        422,
        invalid,
    )]);
    assert!(matches!(
        run(client, patch_job()).await,
        Outcome::Dropped(_)
    ));
    task.await.unwrap();
}

#[tokio::test]
async fn a_fenced_write_is_dropped_without_reaching_the_apiserver() {
    use tower::Layer;
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let fence = crate::leader::Fence::closed();
    let guarded = crate::client::GuardLayer::new(Some(fence), None).layer(service);
    let i = interpreter(Client::new(guarded, "default"));
    let plan = Plan {
        effects: vec![Effect::DeleteConfigMap {
            name: "cm".into(),
            uid: "cu".into(),
            reason: DeletionReason::UninstallCleanup,
        }],
        ..Plan::default()
    };
    let report = i.apply(&Snapshot::default(), &plan).await;
    assert_eq!(report.count("dropped"), 1, "{report:?}");
    assert!(
        report.errors().is_empty(),
        "a fenced write is not a failure"
    );
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(50), handle.next_request())
            .await
            .is_err(),
        "nothing was sent"
    );
}

#[test]
fn m2_adding_the_finalizer_stamps_the_operator_version() {
    let mut nw = NodeWright::new("demo", NodeWrightSpec::default());
    nw.metadata.resource_version = Some("5".into());
    let patch = nodewright::finalizer_patch(&nw, true).expect("finalizer missing");
    assert_eq!(
        patch["metadata"]["annotations"][keys::VERSION],
        json!(keys::OPERATOR_VERSION)
    );
    nw.metadata.finalizers = Some(vec![keys::FINALIZER.into()]);
    let removal = nodewright::finalizer_patch(&nw, false).expect("finalizer present");
    assert!(removal["metadata"].get("annotations").is_none());
}

mod concurrency;
