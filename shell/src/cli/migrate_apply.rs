//! `migrate --apply`: the writes, new keys before legacy ones go. Node writes carry the node's
//! resourceVersion and are recomputed from a fresh read on a conflict.

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Map, Value, json};

use super::migrate::{Plan, our_resource};
use super::migrate_node::{NodePlan, plan_node};
use super::migrate_object::ObjectPlan;

/// The Go operator's finalizer on Skyhooks.
const LEGACY_FINALIZER: &str = "skyhook.nvidia.com/skyhook";

/// Attempts per node when its writes conflict with another writer.
const NODE_ATTEMPTS: usize = 5;

fn kv(list: &[super::migrate_node::Rename], to: bool) -> Value {
    let mut m = Map::new();
    for r in list {
        if to {
            m.insert(r.to.clone(), Value::String(r.value.clone()));
        } else {
            m.insert(r.from.clone(), Value::Null);
        }
    }
    Value::Object(m)
}

/// Step 1: new annotations and labels plus renamed taints, guarded by `rv`.
fn new_keys_patch(p: &NodePlan, rv: &str) -> Value {
    let mut patch = json!({"metadata": {
        "resourceVersion": rv,
        "annotations": kv(&p.annotations, true),
        "labels": kv(&p.labels, true),
    }});
    if let Some(taints) = &p.taints {
        patch["spec"] = json!({ "taints": taints });
    }
    patch
}

/// Step 3: the legacy annotations and labels removed.
fn legacy_keys_patch(p: &NodePlan) -> Value {
    json!({"metadata": {
        "annotations": kv(&p.annotations, false),
        "labels": kv(&p.labels, false),
    }})
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// Writes one node's plan; `Ok(false)` = a conflict, re-plan and try again.
async fn write_node_once(api: &Api<Node>, p: &NodePlan, rv: &str) -> Result<bool> {
    let pp = PatchParams::default();
    let name = &p.node;
    let written = match api
        .patch(name, &pp, &Patch::Merge(new_keys_patch(p, rv)))
        .await
    {
        Ok(n) => n,
        Err(e) if is_conflict(&e) => return Ok(false),
        Err(e) => return Err(e).with_context(|| format!("node {name}: writing the new keys")),
    };
    if let Some(conditions) = &p.conditions {
        let patch = json!({
            "metadata": {"resourceVersion": written.resource_version()},
            "status": {"conditions": conditions},
        });
        match api.patch_status(name, &pp, &Patch::Merge(patch)).await {
            Ok(_) => {}
            Err(e) if is_conflict(&e) => return Ok(false),
            Err(e) => return Err(e).with_context(|| format!("node {name}: renaming conditions")),
        }
    }
    api.patch(name, &pp, &Patch::Merge(legacy_keys_patch(p)))
        .await
        .with_context(|| format!("node {name}: removing the legacy keys"))?;
    Ok(true)
}

/// Writes a node's plan, re-planning from a fresh read on a conflict.
async fn write_node(
    api: &Api<Node>,
    first: &NodePlan,
    replan: &dyn Fn(&Node) -> NodePlan,
) -> Result<()> {
    let mut plan = first.clone();
    for _ in 0..NODE_ATTEMPTS {
        let node = api.get(&plan.node).await?;
        let fresh = replan(&node);
        if fresh.is_empty() {
            return Ok(());
        }
        plan = fresh;
        if write_node_once(api, &plan, &node.resource_version().unwrap_or_default()).await? {
            println!(
                "  node {}: {} change(s) written",
                plan.node,
                plan.lines.len()
            );
            return Ok(());
        }
    }
    bail!(
        "node {}: gave up after {NODE_ATTEMPTS} conflicting writes",
        plan.node
    )
}

async fn create_object(client: &Client, p: &ObjectPlan) -> Result<()> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &our_resource(p.kind));
    let object: DynamicObject = serde_json::from_value(p.object.clone())?;
    api.create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("creating {} {}", p.kind, p.name))?;
    if let Some(status) = &p.status {
        api.patch_status(
            &p.name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .with_context(|| format!("copying the status of {} {}", p.kind, p.name))?;
    }
    println!("  {} {} created", p.kind, p.name);
    Ok(())
}

async fn delete_legacy(client: &Client, p: &ObjectPlan) -> Result<()> {
    let (kind, plural) = match p.kind {
        "NodeWright" => ("Skyhook", "skyhooks"),
        _ => ("DeploymentPolicy", "deploymentpolicies"),
    };
    let gvk = kube::core::GroupVersionKind::gvk("skyhook.nvidia.com", "v1alpha1", kind);
    let ar = kube::core::ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let Some(legacy) = api.get_opt(&p.name).await? else {
        return Ok(());
    };
    let finalizers: Vec<String> = legacy
        .finalizers()
        .iter()
        .filter(|f| *f != LEGACY_FINALIZER)
        .cloned()
        .collect();
    if finalizers.len() != legacy.finalizers().len() {
        let patch = json!({"metadata": {
            "resourceVersion": legacy.resource_version(),
            "finalizers": finalizers,
        }});
        api.patch(&p.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .with_context(|| {
                format!(
                    "removing the Go operator's finalizer from {kind} {}",
                    p.name
                )
            })?;
    }
    api.delete(&p.name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting {kind} {}", p.name))?;
    println!("  legacy {kind} {} deleted", p.name);
    Ok(())
}

/// Applies a plan built after every legacy executor pod ended.
pub async fn apply(client: &Client, plan: &Plan) -> Result<()> {
    let ok = |list: &[(ObjectPlan, bool)]| -> Vec<(ObjectPlan, bool)> {
        list.iter()
            .filter(|(p, _)| p.problems.is_empty())
            .cloned()
            .collect()
    };
    let (policies, skyhooks) = (ok(&plan.policies), ok(&plan.skyhooks));
    println!("Writing:");
    for (p, exists) in &policies {
        if !exists {
            create_object(client, p).await?;
        }
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let migrated = plan.migrated();
    for first in plan.nodes.iter().filter(|n| !n.is_empty()) {
        // The node-state values were computed with the adopted outcomes; a re-plan keeps them.
        let values: Vec<(String, String)> = first
            .annotations
            .iter()
            .map(|r| (r.from.clone(), r.value.clone()))
            .collect();
        let replan = |n: &Node| {
            plan_node(n, &migrated, &|owner, legacy| {
                let key = format!("{}nodeState_{owner}", super::migrate_node::LEGACY_PREFIX);
                values
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map_or_else(|| legacy.to_string(), |(_, v)| v.clone())
            })
        };
        write_node(&nodes, first, &replan).await?;
    }
    for (p, exists) in &skyhooks {
        if !exists {
            create_object(client, p).await?;
        }
    }
    for pod in plan.pods.iter().filter(|p| !p.deleting) {
        let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
        match api.delete(&pod.name, &DeleteParams::default()).await {
            Ok(_) => println!(
                "  legacy executor pod {} deleted (reason: migrated, outcome recorded)",
                pod.describe()
            ),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e).context("deleting a legacy executor pod"),
        }
    }
    for (p, _) in skyhooks.iter().chain(policies.iter()) {
        delete_legacy(client, p).await?;
    }
    println!(
        "Done: {} NodeWright(s), {} DeploymentPolicy(ies), {} node(s) migrated. \
         A second run finds nothing to do.",
        skyhooks.len(),
        policies.len(),
        plan.nodes.iter().filter(|n| !n.is_empty()).count()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::migrate_node::Rename;
    use super::*;

    #[test]
    fn m1_migrate_writes_new_keys_before_removing_legacy_ones() {
        let p = NodePlan {
            node: "n1".into(),
            annotations: vec![Rename {
                from: "skyhook.nvidia.com/status_demo".into(),
                to: "nodewright.nvidia.com/status_demo".into(),
                value: "complete".into(),
                kept_existing: false,
            }],
            ..NodePlan::default()
        };
        let first = new_keys_patch(&p, "7");
        assert_eq!(first["metadata"]["resourceVersion"], "7");
        assert_eq!(
            first["metadata"]["annotations"]["nodewright.nvidia.com/status_demo"],
            "complete"
        );
        assert!(
            first["metadata"]["annotations"]
                .get("skyhook.nvidia.com/status_demo")
                .is_none()
        );
        let last = legacy_keys_patch(&p);
        assert_eq!(
            last["metadata"]["annotations"]["skyhook.nvidia.com/status_demo"],
            Value::Null
        );
    }
}
