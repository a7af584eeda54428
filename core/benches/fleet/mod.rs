//! The fleet builders shared by the `plan` bench and the `plan_memory` example (an example
//! cannot import a bench, so both include this file as a module): one NodeWright with N
//! packages and N bare nodes, named `node-00000`, `node-00001`, …

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, NodeSystemInfo};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use nodewright_crds::{InterruptionBudget, NodeWright, NodeWrightSpec, Package, keys};

/// A NodeWright `name` (uid `uid`, generation 1, finalizer present) with `priority`, a budget of
/// `percent` % and `packages` packages `pkg00`, `pkg01`, … at version 1.0.0.
pub fn nodewright(name: &str, priority: i32, percent: i32, packages: usize) -> NodeWright {
    let mut nw = NodeWright::new(
        name,
        NodeWrightSpec {
            priority,
            interruption_budget: Some(InterruptionBudget {
                percent: Some(percent),
                count: None,
            }),
            ..NodeWrightSpec::default()
        },
    );
    nw.metadata.uid = Some("uid".into());
    nw.metadata.generation = Some(1);
    nw.metadata.finalizers = Some(vec![keys::FINALIZER.into()]);
    for p in 0..packages {
        let name = format!("pkg{p:02}");
        nw.spec.packages.insert(
            name.clone(),
            Package {
                name: name.clone(),
                version: "1.0.0".into(),
                image: format!("ghcr.io/example/{name}"),
                ..Package::default()
            },
        );
    }
    nw
}

/// The name of the `i`-th node: `node-00042`.
pub fn node_name(i: usize) -> String {
    format!("node-{i:05}")
}

/// The `i`-th node: created 2025-01-01, boot id `boot`, no labels or annotations.
pub fn node(i: usize) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(node_name(i)),
            creation_timestamp: Some(Time("2025-01-01T00:00:00Z".parse().unwrap())),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            node_info: Some(NodeSystemInfo {
                boot_id: "boot".into(),
                ..NodeSystemInfo::default()
            }),
            ..NodeStatus::default()
        }),
    }
}
