//! Issue 13 findings 1 and 2 through the webhook's axum router: hostile and large
//! AdmissionReview bodies are answered (denied or admitted) and never abort the process.

use std::collections::BTreeMap;

use axum::body::Body;
use http::{Request, StatusCode};
use nodewright_crds::status::NodeWrightStatus;
use nodewright_crds::status::Stage;
use nodewright_crds::{NodeState, NodeWright, NodeWrightSpec, Package, PackageStatus, State};
use nodewright_shell::server::webhook_router;
use nodewright_shell::webhook::admission::{self, Lookups};
use serde_json::{Value, json};
use tower::ServiceExt;

/// Lookups with no policies and no NodeWrights.
#[derive(Clone)]
struct NoLookups;

impl Lookups for NoLookups {
    async fn policy_exists(&self, _name: &str) -> Result<bool, String> {
        Ok(false)
    }
    async fn nodewrights(&self) -> Result<Vec<NodeWright>, String> {
        Ok(Vec::new())
    }
}

fn package(name: &str) -> Package {
    Package {
        name: name.into(),
        version: "1.0.0".into(),
        image: format!("registry.example/{name}"),
        ..Default::default()
    }
}

fn review(op: &str, object: &NodeWright, old: Option<&NodeWright>) -> Vec<u8> {
    let body = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "uid-1",
            "kind": {"group": "nodewright.nvidia.com", "version": "v1alpha1", "kind": "NodeWright"},
            "resource": {"group": "nodewright.nvidia.com", "version": "v1alpha1", "resource": "nodewrights"},
            "name": "big", "operation": op, "userInfo": {},
            "object": object, "oldObject": old, "dryRun": false
        }
    });
    serde_json::to_vec(&body).expect("serialize")
}

/// Posts `body` to the NodeWright validating path; (HTTP status, parsed answer if JSON).
async fn post(body: Vec<u8>) -> (StatusCode, Value) {
    let request = Request::post(admission::VALIDATE_NODEWRIGHT)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("request");
    let response = webhook_router(NoLookups)
        .oneshot(request)
        .await
        .expect("infallible");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// A NodeWright with `packages` packages and a status for `nodes` nodes, each with every package.
fn fleet(nodes: usize, packages: usize) -> NodeWright {
    let names: Vec<String> = (0..packages).map(|i| format!("pkg-{i}x")).collect();
    let spec = NodeWrightSpec {
        packages: names.iter().map(|n| (n.clone(), package(n))).collect(),
        ..Default::default()
    };
    let mut nw = NodeWright::new("big", spec);
    let doc = NodeState(
        names
            .iter()
            .map(|n| {
                let entry = PackageStatus {
                    name: n.clone(),
                    version: "1.0.0".into(),
                    image: format!("registry.example/{n}"),
                    container_sha: String::new(),
                    stage: Stage::Config,
                    state: Some(State::Complete),
                    restarts: 0,
                };
                (entry.unique_name(), entry)
            })
            .collect(),
    );
    let node = |i: usize| format!("node-{i:05}.cluster.example");
    let status = NodeWrightStatus {
        node_state: (0..nodes).map(|i| (node(i), doc.clone())).collect(),
        node_status: (0..nodes)
            .map(|i| (node(i), nodewright_crds::status::Status::Complete))
            .collect(),
        node_boot_ids: (0..nodes)
            .map(|i| (node(i), format!("{i:08}-0000-4000-8000-000000000000")))
            .collect(),
        ..Default::default()
    };
    nw.status = Some(status);
    nw
}

/// Finding 2: an UPDATE review of a NodeWright whose status covers 10,000 nodes × 5 packages
/// (both copies, about 14 MB) is admitted. With axum's default 2 MiB limit it got HTTP 413.
#[tokio::test]
async fn webhook_update_of_10000_nodes_by_5_packages_is_admitted() {
    let old = fleet(10_000, 5);
    let mut new = old.clone();
    new.metadata.annotations = Some(BTreeMap::from([(
        nodewright_crds::keys::PAUSE.to_string(),
        "true".to_string(),
    )]));
    let body = review("UPDATE", &new, Some(&old));
    assert!(body.len() > 4 * 1024 * 1024, "{} bytes", body.len());
    let (status, answer) = post(body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["response"]["uid"], "uid-1");
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
}

/// A body over the limit is refused by the server with 413, not read into memory.
#[tokio::test]
async fn webhook_body_over_the_limit_is_refused() {
    let body = vec![b' '; admission::MAX_REVIEW_BYTES + 1];
    let (status, _) = post(body).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
}

fn chain(count: usize) -> BTreeMap<String, Package> {
    let key = |i: usize| format!("p{i:06}x");
    (0..count)
        .map(|i| {
            let mut pkg = package(&key(i));
            if i + 1 < count {
                pkg.depends_on.insert(key(i + 1), "1.0.0".into());
            }
            (key(i), pkg)
        })
        .collect()
}

/// Finding 1: a CREATE review with a 100,000-link `dependsOn` chain is denied with a message.
/// The recursive cycle check this replaced overflowed the stack and aborted the test process.
#[tokio::test]
async fn webhook_100000_link_chain_is_denied_not_a_crash() {
    let nw = NodeWright::new(
        "big",
        NodeWrightSpec {
            packages: chain(100_000),
            ..Default::default()
        },
    );
    let (status, answer) = post(review("CREATE", &nw, None)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    assert_eq!(
        answer["response"]["status"]["message"],
        "validating NodeWright \"big\": spec.packages has 100000 entries; at most 1000 are allowed"
    );
}

/// Finding 1: a 50,000-package object is denied with the same clear message.
#[tokio::test]
async fn webhook_50000_package_object_is_denied() {
    let nw = NodeWright::new(
        "big",
        NodeWrightSpec {
            packages: (0..50_000)
                .map(|i| format!("p{i:06}x"))
                .map(|k| (k.clone(), package(&k)))
                .collect(),
            ..Default::default()
        },
    );
    let (status, answer) = post(review("CREATE", &nw, None)).await;
    assert_eq!(status, StatusCode::OK);
    let message = answer["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.ends_with("spec.packages has 50000 entries; at most 1000 are allowed"),
        "{answer}"
    );
}
