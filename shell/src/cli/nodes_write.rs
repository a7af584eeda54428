//! `node reset`, `node ignore`, `node unignore` (06-operations.md §1.8), guarded writes.

use anyhow::Result;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use nodewright_crds::{NodeWright, keys, selector};
use serde_json::json;

use super::patterns::NodePatterns;
use super::reset::{deletion_patch, guarded_node_write, plan_full};
use super::{Global, client, confirm_destructive};

async fn matched(api: &Api<Node>, patterns: &NodePatterns) -> Result<Vec<Node>> {
    let mut nodes: Vec<Node> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|n| {
            n.metadata
                .name
                .as_ref()
                .is_some_and(|x| patterns.matches(x))
        })
        .collect();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Ok(nodes)
}

/// `node reset <pattern...> --nodewright <n>`: the NodeWright's node metadata on matched nodes.
pub async fn reset(g: &Global, patterns: &[String], nw: &str, confirm: bool) -> Result<()> {
    let patterns = NodePatterns::new(patterns)?;
    let client = client(g).await?;
    let api: Api<Node> = Api::all(client.clone());
    let object = Api::<NodeWright>::all(client).get_opt(nw).await;
    let selects =
        |n: &Node| match &object {
            Ok(Some(o)) => o.spec.node_selector.as_ref().is_none_or(|s| {
                selector::matches(s, &n.metadata.labels.clone().unwrap_or_default())
            }),
            Ok(None) => false,
            Err(_) => true,
        };
    let targets: Vec<(String, usize)> = matched(&api, &patterns)
        .await?
        .iter()
        .filter_map(|n| {
            plan_full(n, nw, selects(n))
                .map(|r| (n.metadata.name.clone().unwrap_or_default(), r.packages))
        })
        .collect();
    if targets.is_empty() {
        println!("No nodes have state for NodeWright {nw:?}");
        return Ok(());
    }
    println!("NodeWright: {nw}\nNodes to reset ({}):", targets.len());
    for (n, p) in &targets {
        println!("  - {n} ({p} packages)");
    }
    if g.dry_run {
        println!("\n[dry-run] No changes applied");
        return Ok(());
    }
    if !confirm {
        let q = format!(
            "This will remove package state for NodeWright {nw:?} on {} node(s).\nContinue?",
            targets.len()
        );
        if !confirm_destructive(&q, &mut std::io::stdin().lock())? {
            println!("Aborted");
            return Ok(());
        }
    }
    let mut ok = 0;
    for (node, _) in &targets {
        match guarded_node_write(&api, node, |fresh| {
            plan_full(fresh, nw, selects(fresh)).map(|r| deletion_patch(&r))
        })
        .await
        {
            Ok(()) => ok += 1,
            Err(e) => eprintln!("Error: {node}: {e}"),
        }
    }
    println!("Successfully reset {ok} node(s) for NodeWright {nw:?}");
    Ok(())
}

/// `node ignore` / `node unignore`: set or remove the ignore label.
pub async fn ignore(g: &Global, patterns: &[String], on: bool) -> Result<()> {
    let patterns = NodePatterns::new(patterns)?;
    let api: Api<Node> = Api::all(client(g).await?);
    let nodes = matched(&api, &patterns).await?;
    let (verb, done) = if on {
        ("Ignoring", "ignored")
    } else {
        ("Unignoring", "unignored")
    };
    println!("{verb} {} node(s):", nodes.len());
    for n in &nodes {
        println!("  {}", n.metadata.name.clone().unwrap_or_default());
    }
    if g.dry_run {
        return Ok(());
    }
    let mut count = 0;
    for n in &nodes {
        let name = n.metadata.name.clone().unwrap_or_default();
        let has = |node: &Node| {
            node.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.get(keys::IGNORE).map(String::as_str) == Some("true"))
        };
        if has(n) == on {
            println!(
                "  {name}: {}",
                if on { "already ignored" } else { "not ignored" }
            );
            continue;
        }
        let value = if on { json!("true") } else { json!(null) };
        let result = guarded_node_write(&api, &name, |fresh| {
            (has(fresh) != on)
                .then(|| json!({"metadata": {"labels": {keys::IGNORE: value.clone()}}}))
        })
        .await;
        match result {
            Ok(()) => count += 1,
            Err(e) => eprintln!("Error: {name}: {e}"),
        }
    }
    println!("Successfully {done} {count} node(s)");
    Ok(())
}
