//! `package status` and `package rerun` (06-operations.md §1.9).

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use clap::Args;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use nodewright_crds::{
    NodeState, NodeWright, PackageStatus, Stage, State, keys, nodewright::unique_name,
};
use serde::Serialize;
use serde_json::{Value, json};

use super::patterns::NodePatterns;
use super::reset::guarded_node_write;
use super::{Global, Output, client, confirm_destructive, table};

/// `package status` arguments.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Package name.
    pub package: String,
    /// NodeWright name.
    #[arg(long, alias = "skyhook")]
    pub nodewright: String,
    /// Node names or regular expressions (repeatable).
    #[arg(long = "node")]
    pub nodes: Vec<String>,
}

/// `package rerun` arguments.
#[derive(Args, Debug)]
pub struct RerunArgs {
    /// Package name.
    pub package: String,
    /// NodeWright name.
    #[arg(long, alias = "skyhook")]
    pub nodewright: String,
    /// Node names or regular expressions (repeatable, required).
    #[arg(long = "node", required = true)]
    pub nodes: Vec<String>,
    /// Re-run from this stage instead of from the beginning.
    #[arg(long)]
    pub stage: Option<String>,
    /// Skip the confirmation prompt.
    #[arg(short = 'y', long)]
    pub confirm: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    node_name: String,
    #[serde(flatten)]
    entry: PackageStatus,
}

fn docs_of(nodes: &[Node], nw: &str, patterns: &NodePatterns) -> Vec<(String, NodeState)> {
    let key = keys::node_state(nw);
    let mut out: Vec<(String, NodeState)> = nodes
        .iter()
        .filter(|n| {
            patterns.is_empty()
                || n.metadata
                    .name
                    .as_ref()
                    .is_some_and(|x| patterns.matches(x))
        })
        .filter_map(|n| {
            let doc = NodeState::parse(n.metadata.annotations.as_ref()?.get(&key)?).ok()?;
            Some((n.metadata.name.clone().unwrap_or_default(), doc))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Runs `package status`.
pub async fn status(g: &Global, a: StatusArgs) -> Result<()> {
    let c = client(g).await?;
    let nw = Api::<NodeWright>::all(c.clone()).get(&a.nodewright).await?;
    let nodes = Api::<Node>::all(c)
        .list(&ListParams::default())
        .await?
        .items;
    let patterns = NodePatterns::new(&a.nodes)?;
    let rows: Vec<Row> = docs_of(&nodes, &a.nodewright, &patterns)
        .into_iter()
        .flat_map(|(node, doc)| {
            doc.0
                .into_values()
                .filter(|e| e.name == a.package)
                .map(move |entry| Row {
                    node_name: node.clone(),
                    entry,
                })
        })
        .collect();
    if rows.is_empty() {
        println!("No package status found for NodeWright {:?}", a.nodewright);
        return Ok(());
    }
    match g.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
        Output::Yaml => print!("{}", serde_saphyr::to_string(&rows)?),
        Output::Table | Output::Wide => {
            let packages: Vec<String> = nw
                .spec
                .packages
                .iter()
                .map(|(k, p)| format!("{k}:{}", p.version))
                .collect();
            println!(
                "NodeWright: {}\nPackages: {}\n",
                a.nodewright,
                packages.join(", ")
            );
            let wide = g.output == Output::Wide;
            let mut headers = vec!["NODE", "PACKAGE", "VERSION", "STAGE", "STATE"];
            if wide {
                headers.extend(["RESTARTS", "IMAGE"]);
            }
            let body: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    let e = &r.entry;
                    let mut row = vec![
                        r.node_name.clone(),
                        e.name.clone(),
                        e.version.clone(),
                        e.stage.to_string(),
                        e.state.map(|s| s.to_string()).unwrap_or_default(),
                    ];
                    if wide {
                        row.extend([e.restarts.to_string(), e.image.clone()]);
                    }
                    row
                })
                .collect();
            print!("{}", table::render(&headers, &body));
        }
    }
    Ok(())
}

/// The rerun edit of one document: remove the entry, or restart it at `stage`.
pub fn rerun_edit(doc: &NodeState, key: &str, stage: Option<Stage>) -> Option<Value> {
    let mut next = doc.clone();
    match stage {
        None => {
            next.0.remove(key)?;
        }
        Some(s) => {
            let e = next.0.get_mut(key)?;
            e.stage = s;
            e.state = Some(State::InProgress);
        }
    }
    Some(if next.is_empty() {
        Value::Null
    } else {
        Value::String(next.to_annotation())
    })
}

/// Runs `package rerun`.
pub async fn rerun(g: &Global, a: RerunArgs) -> Result<()> {
    const STAGES: [Stage; 4] = [
        Stage::Apply,
        Stage::Config,
        Stage::Interrupt,
        Stage::PostInterrupt,
    ];
    let stage = match &a.stage {
        None => None,
        Some(s) => match Stage::parse(s).filter(|st| STAGES.contains(st)) {
            Some(st) => Some(st),
            None => bail!(
                "invalid stage {s:?}: must be one of apply, config, interrupt, post-interrupt"
            ),
        },
    };
    let c = client(g).await?;
    let nw = Api::<NodeWright>::all(c.clone()).get(&a.nodewright).await?;
    let Some(pkg) = nw.spec.packages.get(&a.package) else {
        bail!(
            "package {:?} not found in NodeWright {:?}",
            a.package,
            a.nodewright
        );
    };
    let key = unique_name(&a.package, &pkg.version);
    let api: Api<Node> = Api::all(c);
    let nodes = api.list(&ListParams::default()).await?.items;
    let patterns = NodePatterns::new(&a.nodes)?;
    let docs = docs_of(&nodes, &a.nodewright, &patterns);
    if docs.is_empty() {
        println!("No nodes matched the specified patterns");
        return Ok(());
    }
    let targets: Vec<(String, PackageStatus)> = docs
        .iter()
        .filter_map(|(n, d)| d.0.get(&key).map(|e| (n.clone(), e.clone())))
        .collect();
    if targets.is_empty() {
        println!(
            "Package {:?} (version {}) has no state on matched nodes",
            a.package, pkg.version
        );
        return Ok(());
    }
    println!(
        "Package: {} (version {})\nNodeWright: {}",
        a.package, pkg.version, a.nodewright
    );
    if let Some(s) = stage {
        println!("Re-run from stage: {s}");
    }
    println!("Nodes to reset ({}):", targets.len());
    for (n, e) in &targets {
        println!(
            "  - {n} (current state: {}, stage: {})",
            e.state.map(|s| s.to_string()).unwrap_or_default(),
            e.stage
        );
    }
    if g.dry_run {
        println!("\n[dry-run] No changes applied");
        return Ok(());
    }
    if !a.confirm {
        let q = match stage {
            Some(s) => format!(
                "This will re-run package {:?} on {} node(s) from the '{s}' stage.\nContinue?",
                a.package,
                targets.len()
            ),
            None => format!(
                "This will remove package {:?} state on {} node(s); it will re-run from the beginning.\nContinue?",
                a.package,
                targets.len()
            ),
        };
        if !confirm_destructive(&q, &mut std::io::stdin().lock())? {
            println!("Aborted");
            return Ok(());
        }
    }
    let ann_key = keys::node_state(&a.nodewright);
    let mut ok = 0;
    for (node, _) in &targets {
        let result = guarded_node_write(&api, node, |fresh| {
            let doc = NodeState::parse(fresh.metadata.annotations.as_ref()?.get(&ann_key)?).ok()?;
            let value = rerun_edit(&doc, &key, stage)?;
            Some(json!({"metadata": {"annotations": BTreeMap::from([(ann_key.clone(), value)])}}))
        })
        .await;
        match result {
            Ok(()) => ok += 1,
            Err(e) => eprintln!("Error: {node}: {e}"),
        }
    }
    println!("Successfully reset package {:?} on {ok} node(s)", a.package);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{"a|1":{"name":"a","version":"1","image":"r/a","stage":"config","state":"erroring","restarts":2}}"#;

    #[test]
    fn r1_9_rerun_removes_or_restarts_the_entry() {
        let doc = NodeState::parse(DOC).unwrap_or_default();
        assert_eq!(
            rerun_edit(&doc, "a|1", None),
            Some(Value::Null),
            "empty document is deleted"
        );
        let restarted = rerun_edit(&doc, "a|1", Some(Stage::Apply))
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        assert_eq!(
            restarted,
            r#"{"a|1":{"name":"a","version":"1","image":"r/a","stage":"apply","state":"in_progress","restarts":2}}"#
        );
        assert_eq!(rerun_edit(&doc, "b|1", None), None);
    }
}
