//! `status [NAME] [--watch]`: a rollout view per NodeWright from its status: a progress bar, one
//! bar per compartment (in progress against the ceiling, batch), node counts by status and the
//! erroring nodes with their failed packages. `--watch` redraws on every change of a NodeWright
//! or a node (a watch, not polling); on a terminal the screen is redrawn in place, otherwise each
//! new view is printed below the last one.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};

use anyhow::Result;
use clap::Args;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use nodewright_crds::node_state::NodeState;
use nodewright_crds::{NodeWright, State, Status, keys};

use super::Global;

/// Flags of `status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Only this NodeWright (all when omitted).
    pub name: Option<String>,
    /// Keep watching and redraw on every change.
    #[arg(short = 'w', long)]
    pub watch: bool,
}

/// Width of the progress bars.
const BAR: usize = 30;

/// A text progress bar: `[#########.........]  45%`.
pub fn bar(done: i64, total: i64) -> String {
    let pct = if total > 0 { done * 100 / total } else { 0 };
    let filled = if total > 0 {
        usize::try_from(done * BAR as i64 / total)
            .unwrap_or(0)
            .min(BAR)
    } else {
        0
    };
    format!(
        "[{}{}] {pct:>3}%",
        "#".repeat(filled),
        ".".repeat(BAR - filled)
    )
}

/// The view of the given NodeWrights and nodes.
pub fn render(nws: &[NodeWright], nodes: &[Node], only: Option<&str>) -> String {
    let mut nws: Vec<&NodeWright> = nws
        .iter()
        .filter(|n| only.is_none_or(|o| n.metadata.name.as_deref() == Some(o)))
        .collect();
    nws.sort_by_key(|n| (n.spec.priority, n.metadata.name.clone()));
    if nws.is_empty() {
        return match only {
            Some(o) => format!("NodeWright {o:?} not found\n"),
            None => "No NodeWrights.\n".into(),
        };
    }
    nws.iter()
        .map(|nw| one(nw, nodes))
        .collect::<Vec<_>>()
        .join("\n")
}

fn one(nw: &NodeWright, nodes: &[Node]) -> String {
    let name = nw.metadata.name.clone().unwrap_or_default();
    let status = nw.status.clone().unwrap_or_default();
    let total = status.node_status.len() as i64;
    let complete = status
        .node_status
        .values()
        .filter(|s| **s == Status::Complete)
        .count() as i64;
    let mut out = format!(
        "{name}  {}  {}  {complete}/{total} nodes complete  (priority {})\n",
        status.status.unwrap_or_default().as_str(),
        bar(complete, total),
        nw.spec.priority
    );
    for (c, cs) in &status.compartment_statuses {
        let batch = cs.batch_state.clone().unwrap_or_default();
        out.push_str(&format!(
            "  {c:<14} {}  {} in progress / ceiling {}, batch {}{}{}\n",
            bar(i64::from(cs.completed), i64::from(cs.matched)),
            cs.in_progress,
            cs.ceiling,
            batch.current_batch.max(1),
            if batch.consecutive_failures > 0 {
                format!(", {} failed batch(es)", batch.consecutive_failures)
            } else {
                String::new()
            },
            if batch.should_stop { ", STOPPED" } else { "" }
        ));
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for s in status.node_status.values() {
        *counts.entry(s.as_str()).or_default() += 1;
    }
    let counts: Vec<String> = counts.iter().map(|(s, n)| format!("{s} {n}")).collect();
    if !counts.is_empty() {
        out.push_str(&format!("  nodes: {}\n", counts.join(", ")));
    }
    for (node, s) in &status.node_status {
        if *s == Status::Erroring {
            out.push_str(&format!(
                "  erroring {node}: {}\n",
                failures(nodes, &name, node)
            ));
        }
    }
    out
}

/// One line per erroring entry of a node-state document: package, version, stage and restarts
/// (shared by `status` and `plan`).
pub(crate) fn failed_entries(doc: &NodeState) -> Vec<String> {
    doc.0
        .values()
        .filter(|e| e.state == Some(State::Erroring))
        .map(|e| {
            format!(
                "{}:{} failed in {} ({} restarts)",
                e.name,
                e.version,
                e.stage.as_str(),
                e.restarts
            )
        })
        .collect()
}

/// The failed packages of `node` for NodeWright `nw`, from its node-state document.
fn failures(nodes: &[Node], nw: &str, node: &str) -> String {
    let doc = nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(node))
        .and_then(|n| n.metadata.annotations.as_ref())
        .and_then(|a| a.get(&keys::node_state(nw)))
        .and_then(|t| NodeState::parse(t).ok())
        .unwrap_or_default();
    let failed = failed_entries(&doc);
    if failed.is_empty() {
        "no failed package recorded".into()
    } else {
        failed.join(", ")
    }
}

/// Runs `status`.
pub async fn run(g: &Global, args: StatusArgs) -> Result<()> {
    let only = args.name.as_deref();
    if !args.watch {
        let client = super::client(g).await?;
        let nws = Api::<NodeWright>::all(client.clone())
            .list(&ListParams::default())
            .await?
            .items;
        let nodes = Api::<Node>::all(client)
            .list(&ListParams::default())
            .await?
            .items;
        print!("{}", render(&nws, &nodes, only));
        return Ok(());
    }
    let client = super::watch_client(g).await?;
    let (nw_reader, nw_writer) = kube::runtime::reflector::store();
    let (node_reader, node_writer) = kube::runtime::reflector::store();
    let nw_events = watcher(
        Api::<NodeWright>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(nw_writer)
    .map(|e| (0usize, matches!(e, Ok(watcher::Event::InitDone))));
    let node_events = watcher(Api::<Node>::all(client), watcher::Config::default())
        .default_backoff()
        .reflect(node_writer)
        .map(|e| (1usize, matches!(e, Ok(watcher::Event::InitDone))));
    let mut events = std::pin::pin!(futures::stream::select(nw_events, node_events));
    let tty = std::io::stdout().is_terminal();
    let mut last = String::new();
    // Draw once both caches completed their first list, then on every change.
    let mut listed = [false, false];
    while let Some((source, init_done)) = events.next().await {
        listed[source] |= init_done;
        if !(listed[0] && listed[1]) {
            continue;
        }
        let nws: Vec<NodeWright> = nw_reader.state().iter().map(|n| (**n).clone()).collect();
        let nodes: Vec<Node> = node_reader.state().iter().map(|n| (**n).clone()).collect();
        let view = render(&nws, &nodes, only);
        if view != last {
            let mut out = std::io::stdout().lock();
            if tty {
                write!(out, "\x1b[2J\x1b[H")?;
            } else if !last.is_empty() {
                writeln!(out, "---")?;
            }
            write!(out, "{view}")?;
            out.flush()?;
            last = view;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_fill_in_proportion() {
        assert_eq!(bar(0, 0), format!("[{}]   0%", ".".repeat(BAR)));
        assert_eq!(
            bar(1, 2),
            format!("[{}{}]  50%", "#".repeat(15), ".".repeat(15))
        );
        assert_eq!(bar(3, 3), format!("[{}] 100%", "#".repeat(BAR)));
    }

    #[test]
    fn an_unknown_name_says_so() {
        assert_eq!(render(&[], &[], Some("x")), "NodeWright \"x\" not found\n");
        assert_eq!(render(&[], &[], None), "No NodeWrights.\n");
    }
}
