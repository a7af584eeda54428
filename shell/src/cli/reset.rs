//! `reset <nodewright>` (06-operations.md §1.6, with the [later] target and cordon rules). Every
//! node write is one merge patch guarded by the node's resourceVersion, retried on conflict
//! from a fresh read (decision D14).

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use clap::Args;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams};
use nodewright_core::NodeKeys;
use nodewright_core::rollout::cli_reset_patch;
use nodewright_crds::{NodeState, NodeWright, keys, selector};
use serde_json::{Map, Value, json};

use super::{Global, client, confirm_destructive};
use crate::error::{is_conflict, is_not_found};

/// `reset` arguments.
#[derive(Args, Debug)]
pub struct ResetArgs {
    /// NodeWright name.
    pub nodewright: String,
    /// Skip the confirmation prompt.
    #[arg(short = 'y', long)]
    pub confirm: bool,
    /// Keep the DeploymentPolicy batch state.
    #[arg(long)]
    pub skip_batch_reset: bool,
    /// Reset only this package: `<name>` or `<name>:<version>`.
    #[arg(long)]
    pub package: Option<String>,
}

/// What a full reset changes on one node: annotation/label keys to delete.
#[derive(Debug, PartialEq)]
pub struct NodeReset {
    /// Annotations to delete.
    pub annotations: Vec<String>,
    /// Labels to delete.
    pub labels: Vec<String>,
    /// Package entries in the (parseable) document, for the summary.
    pub packages: usize,
}

/// The full-reset plan of one node, or `None` when the node is not a target. `keep_cordon` is true
/// while the NodeWright still selects the node (its re-run releases the cordon).
pub fn plan_full(node: &Node, nw: &str, keep_cordon: bool) -> Option<NodeReset> {
    let ann = node.metadata.annotations.clone().unwrap_or_default();
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let k = NodeKeys::of(nw);
    let present = |have: &BTreeMap<String, String>, keys: &[&str]| -> Vec<String> {
        keys.iter()
            .filter(|key| have.contains_key(**key))
            .map(|key| key.to_string())
            .collect()
    };
    let mut del_ann = present(&ann, &k.reset_annotations());
    let del_labels = present(&labels, &k.reset_labels());
    if del_ann.is_empty() && del_labels.is_empty() {
        return None;
    }
    if !keep_cordon && ann.contains_key(&k.cordon) {
        del_ann.push(k.cordon.clone());
    }
    let packages = ann
        .get(&k.state)
        .and_then(|t| NodeState::parse(t).ok())
        .map_or(0, |s| s.0.len());
    Some(NodeReset {
        annotations: del_ann,
        labels: del_labels,
        packages,
    })
}

/// The node-state document after removing `package` (any version, or only `version`); `Err`
/// names the versions present when only another version is there.
pub fn remove_package(
    doc: &NodeState,
    package: &str,
    version: Option<&str>,
) -> Result<Option<NodeState>, Vec<String>> {
    let present: Vec<String> = doc.entries_of(package).map(|e| e.version.clone()).collect();
    if present.is_empty() {
        return Ok(None);
    }
    let mut next = doc.clone();
    next.0
        .retain(|_, e| e.name != package || version.is_some_and(|v| e.version != v));
    if next.0.len() == doc.0.len() {
        return Err(present);
    }
    Ok(Some(next))
}

/// The status patch of a full reset (`nodePriority` removed, `nodeOrderOffset` zeroed) and,
/// with `reset_batches`, every compartment's batch state written out as fresh.
pub fn batch_reset_patch(nw: &NodeWright, reset_batches: bool) -> Value {
    let none = BTreeMap::new();
    let statuses = match &nw.status {
        Some(s) if reset_batches => &s.compartment_statuses,
        _ => &none,
    };
    cli_reset_patch(statuses, true)
}

/// Sends a guarded node patch computed by `build` from each fresh read.
pub(super) async fn guarded_node_write<F>(api: &Api<Node>, name: &str, mut build: F) -> Result<()>
where
    F: FnMut(&Node) -> Option<Value>,
{
    for _ in 0..5 {
        let node = match api.get(name).await {
            Ok(n) => n,
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let Some(mut body) = build(&node) else {
            return Ok(());
        };
        body["metadata"]["resourceVersion"] =
            json!(node.metadata.resource_version.clone().unwrap_or_default());
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if is_conflict(&e) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    bail!("node {name} kept changing")
}

pub(super) fn deletion_patch(r: &NodeReset) -> Value {
    let nulls = |keys: &[String]| -> Map<String, Value> {
        keys.iter().map(|k| (k.clone(), Value::Null)).collect()
    };
    json!({"metadata": {"annotations": nulls(&r.annotations), "labels": nulls(&r.labels)}})
}

/// Runs `reset`.
pub async fn run(g: &Global, a: ResetArgs) -> Result<()> {
    let client = client(g).await?;
    let nodes_api: Api<Node> = Api::all(client.clone());
    let nw_api: Api<NodeWright> = Api::all(client);
    let name = a.nodewright.clone();
    if let Some(spec) = &a.package {
        return run_package(g, &nodes_api, &nw_api, &name, spec, a.confirm).await;
    }
    let nw = nw_api.get_opt(&name).await;
    let nodes = nodes_api.list(&ListParams::default()).await?.items;
    let selects = |n: &Node| match &nw {
        Ok(Some(nw)) => {
            let labels = n.metadata.labels.clone().unwrap_or_default();
            nw.spec
                .node_selector
                .as_ref()
                .is_none_or(|s| selector::matches(s, &labels))
        }
        Ok(None) => false,
        Err(_) => true, // cannot read it: keep cordons (warned below)
    };
    if nw.is_err() {
        eprintln!("Warning: cannot read NodeWright {name:?}; cordon annotations are kept");
    }
    let mut targets: Vec<(String, NodeReset)> = nodes
        .iter()
        .filter_map(|n| {
            plan_full(n, &name, selects(n))
                .map(|r| (n.metadata.name.clone().unwrap_or_default(), r))
        })
        .collect();
    targets.sort_by(|x, y| x.0.cmp(&y.0));
    if targets.is_empty() {
        println!("No nodes have state for NodeWright {name:?}");
        return Ok(());
    }
    println!("NodeWright: {name}\nNodes to reset ({}):", targets.len());
    for (n, r) in &targets {
        println!("  - {n} ({} packages)", r.packages);
    }
    if !a.skip_batch_reset {
        println!("Batch state will also be reset (use --skip-batch-reset to preserve)");
    }
    if g.dry_run {
        println!("\n[dry-run] No changes applied");
        return Ok(());
    }
    if !a.confirm {
        let mut q = format!(
            "This will remove ALL package state for NodeWright {name:?} on {} node(s).\nAll packages will re-run from the beginning.",
            targets.len()
        );
        if !a.skip_batch_reset {
            q.push_str("\nBatch state will be reset to start from batch 1.");
        }
        q.push_str("\nContinue?");
        if !confirm_destructive(&q, &mut std::io::stdin().lock())? {
            println!("Aborted");
            return Ok(());
        }
    }
    let mut errors = Vec::new();
    for (node, _) in &targets {
        let result = guarded_node_write(&nodes_api, node, |fresh| {
            plan_full(fresh, &name, selects(fresh)).map(|r| deletion_patch(&r))
        })
        .await;
        if let Err(e) = result {
            errors.push(format!("{node}: {e}"));
        }
    }
    match &nw {
        Ok(Some(obj)) => {
            let body = batch_reset_patch(obj, !a.skip_batch_reset);
            match nw_api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
                .await
            {
                Ok(_) if body["status"].get("compartmentStatuses").is_some() => {
                    println!("Batch state reset for NodeWright {name:?}")
                }
                Ok(_) => {}
                Err(e) => eprintln!("Warning: resetting batch state: {e}"),
            }
        }
        _ => eprintln!("Warning: NodeWright {name:?} not readable; batch state not reset"),
    }
    if !errors.is_empty() {
        println!("Errors resetting some nodes:");
        for e in &errors {
            println!("  {e}");
        }
    }
    println!(
        "Successfully reset {} node(s) for NodeWright {name:?}",
        targets.len() - errors.len()
    );
    Ok(())
}

async fn run_package(
    g: &Global,
    nodes_api: &Api<Node>,
    nw_api: &Api<NodeWright>,
    name: &str,
    spec: &str,
    confirm: bool,
) -> Result<()> {
    nw_api.get(name).await?;
    let (package, version) = match spec.split_once(':') {
        Some((p, v)) => (p.to_string(), Some(v.to_string())),
        None => (spec.to_string(), None),
    };
    let key = keys::node_state(name);
    let mut targets = Vec::new();
    for n in nodes_api.list(&ListParams::default()).await?.items {
        let node = n.metadata.name.clone().unwrap_or_default();
        let doc = n
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(&key))
            .and_then(|t| NodeState::parse(t).ok());
        match doc.map(|d| remove_package(&d, &package, version.as_deref())) {
            Some(Ok(Some(_))) => targets.push(node),
            Some(Err(present)) => {
                println!("  {node}: holds {package} version(s) {present:?}; untouched")
            }
            _ => {}
        }
    }
    targets.sort();
    if targets.is_empty() {
        println!("No nodes have state for package {package:?} in NodeWright {name:?}");
        return Ok(());
    }
    println!(
        "NodeWright: {name}\nPackage: {spec}\nNodes to reset ({}):",
        targets.len()
    );
    for n in &targets {
        println!("  - {n}");
    }
    if g.dry_run {
        println!("\n[dry-run] No changes applied");
        return Ok(());
    }
    if !confirm {
        let q = format!(
            "This will remove package {spec:?} state for NodeWright {name:?} on {} node(s).\nContinue?",
            targets.len()
        );
        if !confirm_destructive(&q, &mut std::io::stdin().lock())? {
            println!("Aborted");
            return Ok(());
        }
    }
    let mut done = 0;
    for node in &targets {
        let result = guarded_node_write(nodes_api, node, |fresh| {
            let doc = NodeState::parse(fresh.metadata.annotations.as_ref()?.get(&key)?).ok()?;
            let next = remove_package(&doc, &package, version.as_deref()).ok()??;
            let value = if next.is_empty() {
                Value::Null
            } else {
                Value::String(next.to_annotation())
            };
            Some(json!({"metadata": {"annotations": BTreeMap::from([(key.clone(), value)])}}))
        })
        .await;
        match result {
            Ok(()) => done += 1,
            Err(e) => eprintln!("Error: {node}: {e}"),
        }
    }
    println!("Successfully reset package {spec:?} on {done} node(s) for NodeWright {name:?}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_crds::NodeWrightSpec;

    fn node(ann: Value, labels: Value) -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": "n1", "annotations": ann, "labels": labels}}),
        )
        .unwrap_or_default()
    }

    const DOC: &str = r#"{"a|1":{"name":"a","version":"1","image":"r/a","stage":"config","state":"complete"},"b|2":{"name":"b","version":"2","image":"r/b","stage":"apply","state":"erroring"}}"#;

    #[test]
    fn r1_6_targets_and_cordon_rule() {
        let n = node(
            json!({keys::node_state("nw"): DOC, keys::cordon("nw"): "true", "other": "x"}),
            json!({keys::node_status("nw"): "erroring"}),
        );
        let kept = plan_full(&n, "nw", true).expect("target");
        assert_eq!(kept.annotations, vec![keys::node_state("nw")]);
        assert_eq!(kept.labels, vec![keys::node_status("nw")]);
        assert_eq!(kept.packages, 2);
        let dropped = plan_full(&n, "nw", false).expect("target");
        assert!(dropped.annotations.contains(&keys::cordon("nw")));
        let only_cordon = node(json!({keys::cordon("nw"): "true"}), json!({}));
        assert_eq!(
            plan_full(&only_cordon, "nw", true),
            None,
            "a kept cordon alone is no target"
        );
        let malformed = node(json!({keys::node_state("nw"): "{"}), json!({}));
        assert_eq!(
            plan_full(&malformed, "nw", true).map(|r| r.packages),
            Some(0)
        );
    }

    #[test]
    fn r1_6_package_reset_by_version() {
        let doc = NodeState::parse(DOC).unwrap_or_default();
        let next = remove_package(&doc, "a", None)
            .ok()
            .flatten()
            .expect("removed");
        assert_eq!(next.0.len(), 1);
        assert_eq!(
            remove_package(&doc, "a", Some("9")),
            Err(vec!["1".to_string()])
        );
        assert_eq!(remove_package(&doc, "zzz", None), Ok(None));
    }

    #[test]
    fn r1_6_batch_reset_sends_explicit_zeros() {
        let mut nw = NodeWright::new("nw", NodeWrightSpec::default());
        let mut status = nodewright_crds::NodeWrightStatus::default();
        status
            .compartment_statuses
            .insert("__default__".into(), Default::default());
        nw.status = Some(status);
        let p = batch_reset_patch(&nw, true);
        assert_eq!(p["status"]["nodePriority"], Value::Null);
        assert_eq!(p["status"]["nodeOrderOffset"], 0);
        let b = &p["status"]["compartmentStatuses"]["__default__"]["batchState"];
        assert_eq!(b["currentBatch"], 1);
        assert_eq!(b["shouldStop"], false);
        assert_eq!(b["consecutiveFailures"], 0);
        assert!(
            batch_reset_patch(&nw, false)["status"]
                .get("compartmentStatuses")
                .is_none()
        );
    }
}
