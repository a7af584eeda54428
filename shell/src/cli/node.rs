//! `node list` and `node status` (06-operations.md §1.8), read-only.

use std::collections::BTreeMap;

use anyhow::Result;
use clap::{Args, Subcommand};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use nodewright_crds::{NodeState, State, keys};
use serde::Serialize;

use super::{Global, Output, client, table};

/// `node` subcommands.
#[derive(Subcommand, Debug)]
pub enum NodeCommand {
    /// Per-node summary of one NodeWright.
    List(ListArgs),
    /// NodeWright activity on nodes (all nodes when none are named).
    Status(StatusArgs),
    /// Remove one NodeWright's state from matched nodes.
    Reset(NodeResetArgs),
    /// Exclude matched nodes from every NodeWright.
    Ignore(PatternArgs),
    /// Include matched nodes again.
    Unignore(PatternArgs),
}

/// `node reset` arguments.
#[derive(Args, Debug)]
pub struct NodeResetArgs {
    /// Node names or regular expressions.
    #[arg(required = true)]
    pub nodes: Vec<String>,
    /// NodeWright name.
    #[arg(long, alias = "skyhook")]
    pub nodewright: String,
    /// Skip the confirmation prompt.
    #[arg(short = 'y', long)]
    pub confirm: bool,
}

/// Node patterns only.
#[derive(Args, Debug)]
pub struct PatternArgs {
    /// Node names or regular expressions.
    #[arg(required = true)]
    pub nodes: Vec<String>,
}

/// `node list` arguments.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// NodeWright name.
    #[arg(long, alias = "skyhook")]
    pub nodewright: String,
}

/// `node status` arguments.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Node names or regular expressions.
    pub nodes: Vec<String>,
    /// Only this NodeWright.
    #[arg(long, alias = "skyhook")]
    pub nodewright: Option<String>,
}

/// One package entry as printed.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PackageRow {
    name: String,
    version: String,
    stage: String,
    state: String,
    restarts: i32,
    image: String,
}

/// One node's summary for one NodeWright.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeSummary {
    node_name: String,
    nodewright_name: String,
    status: String,
    packages_complete: usize,
    packages_total: usize,
    restarts: i32,
    cordoned: bool,
    runtime_required_cordon: bool,
    packages: Vec<PackageRow>,
}

/// Summarises a node-state document (§1.8 status rule).
pub fn summarize(node: &Node, nodewright: &str, state: &NodeState) -> NodeSummary {
    let entries: Vec<_> = state.0.values().collect();
    let complete = entries.iter().filter(|e| e.is_complete()).count();
    let any = |s: State| entries.iter().any(|e| e.state == Some(s));
    let status = if any(State::Erroring) {
        "erroring"
    } else if !entries.is_empty() && complete == entries.len() {
        "complete"
    } else if any(State::InProgress) || complete > 0 {
        "in_progress"
    } else {
        "unknown"
    };
    NodeSummary {
        node_name: node.metadata.name.clone().unwrap_or_default(),
        nodewright_name: nodewright.to_string(),
        status: status.to_string(),
        packages_complete: complete,
        packages_total: entries.len(),
        restarts: entries.iter().map(|e| e.restarts).sum(),
        cordoned: node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true),
        runtime_required_cordon: node
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(keys::RUNTIME_REQUIRED_CORDON)),
        packages: entries
            .iter()
            .map(|e| PackageRow {
                name: e.name.clone(),
                version: e.version.clone(),
                stage: e.stage.to_string(),
                state: e.state.map(|s| s.to_string()).unwrap_or_default(),
                restarts: e.restarts,
                image: e.image.clone(),
            })
            .collect(),
    }
}

/// Every parseable node-state document on `node`, by NodeWright name.
pub fn states_of(node: &Node, verbose: bool) -> BTreeMap<String, NodeState> {
    let prefix = format!("{}/nodeState_", keys::PREFIX);
    let mut out = BTreeMap::new();
    for (k, v) in node.metadata.annotations.iter().flatten() {
        if let Some(nw) = k.strip_prefix(&prefix) {
            match NodeState::parse(v) {
                Ok(state) => {
                    out.insert(nw.to_string(), state);
                }
                Err(e) if verbose => eprintln!(
                    "Warning: node {}: {e}",
                    node.metadata.name.clone().unwrap_or_default()
                ),
                Err(_) => {}
            }
        }
    }
    out
}

/// Runs a `node` subcommand.
pub async fn run(g: &Global, cmd: NodeCommand) -> Result<()> {
    let api: Api<Node> = Api::all(client(g).await?);
    let mut nodes = api.list(&ListParams::default()).await?.items;
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    match cmd {
        NodeCommand::List(a) => {
            let rows: Vec<NodeSummary> = nodes
                .iter()
                .filter_map(|n| {
                    states_of(n, g.verbose)
                        .remove(&a.nodewright)
                        .map(|s| summarize(n, &a.nodewright, &s))
                })
                .collect();
            print_list(g.output, &a.nodewright, &rows)
        }
        NodeCommand::Status(a) => {
            let patterns = super::patterns::NodePatterns::new(&a.nodes)?;
            if !patterns.is_empty() {
                nodes.retain(|n| {
                    n.metadata
                        .name
                        .as_ref()
                        .is_some_and(|x| patterns.matches(x))
                });
                if nodes.is_empty() {
                    println!("No nodes matched the specified patterns");
                    return Ok(());
                }
            }
            let rows: Vec<NodeSummary> = nodes
                .iter()
                .flat_map(|n| {
                    states_of(n, g.verbose)
                        .into_iter()
                        .filter(|(nw, _)| a.nodewright.as_ref().is_none_or(|f| f == nw))
                        .map(|(nw, s)| summarize(n, &nw, &s))
                        .collect::<Vec<_>>()
                })
                .collect();
            print_status(g.output, &rows)
        }
        NodeCommand::Reset(_) | NodeCommand::Ignore(_) | NodeCommand::Unignore(_) => Ok(()),
    }
}

fn print_list(output: Output, nodewright: &str, rows: &[NodeSummary]) -> Result<()> {
    if rows.is_empty() {
        println!("No nodes found for NodeWright {nodewright:?}");
        return Ok(());
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Doc<'a> {
        nodewright_name: &'a str,
        nodes: Vec<serde_json::Value>,
    }
    let slim = |r: &NodeSummary| {
        serde_json::json!({"nodeName": r.node_name, "status": r.status,
            "packagesComplete": r.packages_complete, "packagesTotal": r.packages_total, "restarts": r.restarts})
    };
    match output {
        Output::Json | Output::Yaml => {
            let doc = Doc {
                nodewright_name: nodewright,
                nodes: rows.iter().map(slim).collect(),
            };
            print_doc(output, &doc)
        }
        Output::Table | Output::Wide => {
            let complete = rows.iter().filter(|r| r.status == "complete").count();
            let erroring = rows.iter().filter(|r| r.status == "erroring").count();
            println!("NodeWright: {nodewright}\n");
            println!(
                "Summary: {} nodes ({complete} complete, {erroring} erroring, {} in progress)\n",
                rows.len(),
                rows.len() - complete - erroring
            );
            let wide = output == Output::Wide;
            let mut headers = vec!["NODE", "STATUS", "PACKAGES"];
            if wide {
                headers.push("RESTARTS");
            }
            let body: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    let status = if r.status == "erroring" {
                        "ERRORING".to_string()
                    } else {
                        r.status.clone()
                    };
                    let mut row = vec![
                        r.node_name.clone(),
                        status,
                        format!("{}/{}", r.packages_complete, r.packages_total),
                    ];
                    if wide {
                        row.push(r.restarts.to_string());
                    }
                    row
                })
                .collect();
            print!("{}", table::render(&headers, &body));
            Ok(())
        }
    }
}

fn print_status(output: Output, rows: &[NodeSummary]) -> Result<()> {
    if rows.is_empty() {
        println!("No NodeWright activity found on specified nodes");
        return Ok(());
    }
    match output {
        Output::Json | Output::Yaml => print_doc(output, &rows),
        Output::Table => {
            let headers = [
                "NODE",
                "NODEWRIGHT",
                "STATUS",
                "PACKAGES",
                "CORDONED",
                "RUNTIME-REQUIRED-CORDON",
            ];
            let body: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    vec![
                        r.node_name.clone(),
                        r.nodewright_name.clone(),
                        r.status.clone(),
                        format!("{}/{}", r.packages_complete, r.packages_total),
                        r.cordoned.to_string(),
                        r.runtime_required_cordon.to_string(),
                    ]
                })
                .collect();
            print!("{}", table::render(&headers, &body));
            Ok(())
        }
        Output::Wide => {
            let headers = [
                "NODE",
                "NODEWRIGHT",
                "PACKAGE",
                "VERSION",
                "STAGE",
                "STATE",
                "RESTARTS",
                "IMAGE",
                "CORDONED",
                "RUNTIME-REQUIRED-CORDON",
            ];
            let body: Vec<Vec<String>> = rows
                .iter()
                .flat_map(|r| {
                    r.packages.iter().map(move |p| {
                        vec![
                            r.node_name.clone(),
                            r.nodewright_name.clone(),
                            p.name.clone(),
                            p.version.clone(),
                            p.stage.clone(),
                            p.state.clone(),
                            p.restarts.to_string(),
                            p.image.clone(),
                            r.cordoned.to_string(),
                            r.runtime_required_cordon.to_string(),
                        ]
                    })
                })
                .collect();
            print!("{}", table::render(&headers, &body));
            Ok(())
        }
    }
}

fn print_doc<T: Serialize>(output: Output, doc: &T) -> Result<()> {
    if output == Output::Json {
        println!("{}", serde_json::to_string_pretty(doc)?);
    } else {
        print!("{}", serde_saphyr::to_string(doc)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(doc: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n1", "annotations": {
            "nodewright.nvidia.com/nodeState_nw": doc, "nodewright.nvidia.com/nodeState_bad": "{"}},
            "spec": {"unschedulable": true}}))
        .unwrap_or_default()
    }

    #[test]
    fn node_summary_status_rule() {
        let n = node(
            r#"{"a|1":{"name":"a","version":"1","image":"r/a","stage":"config","state":"complete"},"b|1":{"name":"b","version":"1","image":"r/b","stage":"apply","state":"erroring","restarts":2}}"#,
        );
        let states = states_of(&n, false);
        assert_eq!(states.len(), 1, "unparseable documents are skipped");
        let s = summarize(&n, "nw", &states["nw"]);
        assert_eq!(
            (
                s.status.as_str(),
                s.packages_complete,
                s.packages_total,
                s.restarts
            ),
            ("erroring", 1, 2, 2)
        );
        assert!(s.cordoned);
        let n = node(
            r#"{"a|1":{"name":"a","version":"1","image":"r/a","stage":"config","state":"complete"}}"#,
        );
        assert_eq!(
            summarize(&n, "nw", &states_of(&n, false)["nw"]).status,
            "complete"
        );
        assert_eq!(summarize(&n, "nw", &NodeState::default()).status, "unknown");
    }
}
