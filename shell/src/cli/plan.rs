//! `plan [NAME]`: what the operator would do on its next pass, and why every other node waits.
//!
//! The snapshot is assembled by the operator's own code ([`crate::cache::start`] and
//! [`crate::cache::Caches::snapshot`]), the core runs on it with the operator Deployment's options
//! (defaults where it has none), and the plan is printed grouped per NodeWright and node. The
//! client is fenced shut: nothing is written.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use clap::Args;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};
use nodewright_core::effect::FinalizerChain;
use nodewright_core::{Effect, Options, Plan, Snapshot};
use nodewright_crds::{NodeWrightStatus, Status};
use serde::Serialize;

use super::plan_reasons::blocking_reason;
use super::{Global, Output};
use crate::cache::{self, Trigger};
use crate::client::Purpose;
use crate::interpret::{EventRecorder, Interpreter, MemoryPort};

/// Flags of `plan`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// Only this NodeWright (all when omitted).
    pub name: Option<String>,
    /// Also list the Events the pass would emit.
    #[arg(long)]
    pub events: bool,
}

/// One planned write, in words.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Action {
    /// Effect kind (`CreateJob`, `PatchNode`, ...).
    pub kind: String,
    /// What it does.
    pub description: String,
    /// The Job it creates or changes, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Package, version and stage it concerns, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// Package version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
}

/// One node of one NodeWright.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePlan {
    /// Node name.
    pub node: String,
    /// The node's status for this NodeWright after the pass.
    pub status: String,
    /// What the pass does on it.
    pub actions: Vec<Action>,
    /// Why nothing happens on it (set when `actions` is empty and the node is not complete).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked: Option<String>,
}

/// One NodeWright.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeWrightPlan {
    /// Name.
    pub name: String,
    /// Priority (smaller goes first).
    pub priority: i32,
    /// Overall status after the pass.
    pub status: String,
    /// `<complete>/<selected>` after the pass.
    pub complete_nodes: String,
    /// One line per compartment: members, in progress, ceiling, batch.
    pub compartments: Vec<String>,
    /// Writes to the NodeWright itself.
    pub actions: Vec<Action>,
    /// Per node.
    pub nodes: Vec<NodePlan>,
}

/// The whole plan.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanReport {
    /// When the snapshot was taken.
    pub at: String,
    /// Where the options came from.
    pub options_from: String,
    /// Per NodeWright, in priority order.
    pub nodewrights: Vec<NodeWrightPlan>,
    /// Writes that concern no NodeWright (Events, shared ConfigMaps).
    pub other: Vec<Action>,
    /// Errors the core reported.
    pub errors: Vec<String>,
    /// Record-only passes the operator runs before the one shown (see [`settle`]).
    pub record_passes_first: u32,
    /// Seconds until the operator would run the next pass without any change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeue_after_seconds: Option<u64>,
}

/// Runs `plan`.
pub async fn run(g: &Global, args: PlanArgs) -> Result<()> {
    let request = g.connect.read_only_client(Purpose::Request).await?;
    let watch = g.connect.read_only_client(Purpose::Watch).await?;
    let (options, options_from) = operator_options(&request, &g.namespace).await;
    let cluster = crate::version::check(&request).await;
    let (caches, tasks) = cache::start(&watch, &options.namespace, &Trigger::default());
    caches.wait_ready().await;
    let snapshot = caches.snapshot(&cluster);
    tasks.iter().for_each(|t| t.abort());
    let now = Timestamp::now();
    let (snapshot, plan, settled) = settle(snapshot, &options, now);
    let mut report = build(
        &snapshot,
        &plan,
        now,
        options_from,
        args.name.as_deref(),
        args.events,
    );
    report.record_passes_first = settled;
    match g.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Output::Yaml => print!("{}", serde_saphyr::to_string(&report)?),
        Output::Table | Output::Wide => print!("{}", render(&report)),
    }
    Ok(())
}

/// Passes that only record state (NodeWright status and finalizers, node labels, annotations,
/// conditions and node-state entries, ConfigMaps, Events) are followed through: the operator's
/// interpreter applies their writes to the snapshot (over [`MemoryPort`], as the apiserver would
/// store them and the watch deliver them) and the core runs again, at most
/// [`MAX_BOOKKEEPING_PASSES`] times. Returns the snapshot and plan of the first pass that touches
/// a Job or a pod (or writes nothing), and how many record-only passes precede it.
pub fn settle(mut snapshot: Snapshot, options: &Options, now: Timestamp) -> (Snapshot, Plan, u32) {
    let mut passes = 0;
    let chain: Arc<Mutex<FinalizerChain>> = Default::default();
    loop {
        let plan = nodewright_core::reconcile(&snapshot, options, now);
        let bookkeeping = !plan.effects.is_empty() && plan.effects.iter().all(records_only);
        if !bookkeeping || passes >= MAX_BOOKKEEPING_PASSES {
            return (snapshot, plan, passes);
        }
        let port = MemoryPort::new(snapshot.clone(), now);
        let interpreter =
            Interpreter::with_port(port, &options.namespace, EventRecorder::new("plan"))
                .with_finalizer_chain(chain.clone());
        futures::executor::block_on(interpreter.apply(&snapshot, &plan));
        snapshot = interpreter.into_port().into_snapshot();
        passes += 1;
    }
}

/// How many record-only passes [`settle`] follows.
pub const MAX_BOOKKEEPING_PASSES: u32 = 8;

fn records_only(effect: &Effect) -> bool {
    matches!(
        effect,
        Effect::PatchStatus { .. }
            | Effect::RecordBatch { .. }
            | Effect::AddFinalizer { .. }
            | Effect::Event(_)
            | Effect::PatchNode(_)
            | Effect::PatchNodeConditions { .. }
            | Effect::UpsertConfigMap { .. }
    )
}

/// The operator's options: the literal `env` values of the operator Deployment's first
/// container, `NAMESPACE` being the namespace asked for; defaults when there is no Deployment.
async fn operator_options(client: &kube::Client, namespace: &str) -> (Options, String) {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let found = api
        .list(&ListParams::default())
        .await
        .ok()
        .and_then(|l| l.items.into_iter().find(super::version::is_operator));
    let mut env = BTreeMap::new();
    let mut from = "defaults (no operator Deployment found)".to_string();
    if let Some(d) = found {
        let name = d.metadata.name.clone().unwrap_or_default();
        let container = d
            .spec
            .template
            .spec
            .and_then(|s| s.containers.into_iter().next());
        for var in container.and_then(|c| c.env).unwrap_or_default() {
            if let Some(value) = var.value {
                env.insert(var.name, value);
            }
        }
        from = format!("Deployment {namespace}/{name}");
    }
    env.insert("NAMESPACE".into(), namespace.to_string());
    match Options::from_env(&env) {
        Ok(o) => (o, from),
        Err(e) => {
            let mut defaults = BTreeMap::new();
            defaults.insert("NAMESPACE".to_string(), namespace.to_string());
            let o = Options::from_env(&defaults).unwrap_or_default();
            (
                o,
                format!("defaults ({from} has invalid settings: {})", e.0.join("; ")),
            )
        }
    }
}

/// A NodeWright's own actions and its actions per node.
type Grouped = (Vec<Action>, BTreeMap<String, Vec<Action>>);

/// Groups the plan per NodeWright and node and finds the blocking reasons.
pub fn build(
    snapshot: &Snapshot,
    plan: &Plan,
    now: Timestamp,
    options_from: String,
    only: Option<&str>,
    events: bool,
) -> PlanReport {
    let mut nws: Vec<_> = snapshot
        .nodewrights
        .iter()
        .map(|nw| &**nw)
        .filter(|nw| only.is_none_or(|o| nw.metadata.name.as_deref() == Some(o)))
        .collect();
    nws.sort_by_key(|nw| (nw.spec.priority, nw.metadata.name.clone()));
    let desired = desired_statuses(snapshot, plan);
    let mut other = Vec::new();
    let mut per_nw: BTreeMap<String, Grouped> = BTreeMap::new();
    for effect in &plan.effects {
        if matches!(effect, Effect::Event(_)) && !events {
            continue;
        }
        let action = describe(effect);
        let known = owner(effect)
            .or_else(|| owner_by_prefix(effect, &nws))
            .filter(|o| nws.iter().any(|n| n.metadata.name.as_ref() == Some(o)));
        match (known, effect.node()) {
            (Some(nw), Some(node)) => per_nw
                .entry(nw)
                .or_default()
                .1
                .entry(node.to_string())
                .or_default()
                .push(action),
            (Some(nw), None) => per_nw.entry(nw).or_default().0.push(action),
            (None, _) => other.push(action),
        }
    }
    let nodewrights = nws
        .into_iter()
        .map(|nw| {
            let name = nw.metadata.name.clone().unwrap_or_default();
            let status = desired.get(&name).cloned().unwrap_or_default();
            let (actions, mut by_node) = per_nw.remove(&name).unwrap_or_default();
            let nodes = status
                .node_status
                .iter()
                .map(|(node, st)| {
                    let actions = by_node.remove(node).unwrap_or_default();
                    // Why no executor starts here: a node whose status the pass also writes
                    // (R6.6 goes on to the work phase) still gets its reason.
                    let starts = actions.iter().any(|a| a.kind == "CreateJob");
                    let blocked = (!starts && *st != Status::Complete)
                        .then(|| blocking_reason(snapshot, &desired, nw, node, *st));
                    NodePlan {
                        node: node.clone(),
                        status: st.as_str().to_string(),
                        actions,
                        blocked,
                    }
                })
                .collect();
            NodeWrightPlan {
                name,
                priority: nw.spec.priority,
                status: status.status.unwrap_or_default().as_str().to_string(),
                complete_nodes: status.complete_nodes.clone(),
                compartments: compartment_lines(&status),
                actions,
                nodes,
            }
        })
        .collect();
    PlanReport {
        at: now.to_string(),
        options_from,
        nodewrights,
        other,
        errors: plan.error_messages(),
        record_passes_first: 0,
        requeue_after_seconds: plan.requeue_after.map(|d| d.as_secs()),
    }
}

/// Every NodeWright's status after the pass: the planned status patch, else the current status.
pub fn desired_statuses(snapshot: &Snapshot, plan: &Plan) -> BTreeMap<String, NodeWrightStatus> {
    let mut out: BTreeMap<String, NodeWrightStatus> = snapshot
        .nodewrights
        .iter()
        .map(|nw| {
            (
                nw.metadata.name.clone().unwrap_or_default(),
                nw.status.clone().unwrap_or_default(),
            )
        })
        .collect();
    for effect in &plan.effects {
        if let Effect::PatchStatus { nodewright, status } = effect {
            out.insert(nodewright.clone(), (**status).clone());
        }
    }
    out
}

fn compartment_lines(status: &NodeWrightStatus) -> Vec<String> {
    status
        .compartment_statuses
        .iter()
        .map(|(name, c)| {
            let batch = c.batch_state.as_ref().map_or(String::new(), |b| {
                let stop = if b.should_stop { ", STOPPED" } else { "" };
                format!(", batch {}{stop}", b.current_batch)
            });
            format!(
                "{name}: {} nodes, {} in progress, {} complete, ceiling {}{batch}",
                c.matched, c.in_progress, c.completed, c.ceiling
            )
        })
        .collect()
}

/// The NodeWright an effect belongs to.
fn owner(effect: &Effect) -> Option<String> {
    match effect {
        Effect::PatchStatus { nodewright, .. }
        | Effect::RecordBatch { nodewright, .. }
        | Effect::AddFinalizer { nodewright, .. }
        | Effect::RemoveFinalizer { nodewright, .. } => Some(nodewright.clone()),
        Effect::PatchNode(p) => p
            .context
            .nodewright
            .clone()
            .or_else(|| p.state.first().map(|e| e.nodewright.clone()))
            .or_else(|| p.remove_state_of.first().cloned())
            .or_else(|| {
                p.labels
                    .keys()
                    .chain(p.annotations.keys())
                    .find_map(|k| nodewright_in_key(k))
            }),
        Effect::PatchNodeConditions { set, remove, .. } => set
            .iter()
            .map(|c| &c.type_)
            .chain(remove)
            .find_map(|k| nodewright_in_key(k)),
        Effect::UpsertConfigMap { config_map, .. } => config_map
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(nodewright_crds::keys::LABEL_NAME).cloned()),
        other => other.context().nodewright.clone(),
    }
}

/// The NodeWright whose name prefixes a node-metadata ConfigMap's name (`<nw>-<node>-metadata-...`).
fn owner_by_prefix(effect: &Effect, nws: &[&nodewright_crds::NodeWright]) -> Option<String> {
    let Effect::UpsertConfigMap { config_map, .. } = effect else {
        return None;
    };
    let cm = config_map.metadata.name.as_deref()?;
    let node = effect.node()?;
    nws.iter()
        .filter_map(|nw| nw.metadata.name.clone())
        .find(|nw| cm.starts_with(&format!("{nw}-{node}-")))
}

/// The NodeWright named in a per-NodeWright key: `<prefix>/status_<name>` (labels, annotations)
/// or `<prefix>/<name>/<Type>` (node conditions).
fn nodewright_in_key(key: &str) -> Option<String> {
    let rest = key
        .strip_prefix(nodewright_crds::keys::PREFIX)?
        .strip_prefix('/')?;
    match rest.split_once('/') {
        Some((name, _)) => Some(name.to_string()),
        None => rest.split_once('_').map(|(_, name)| name.to_string()),
    }
}

/// One effect in words.
pub fn describe(effect: &Effect) -> Action {
    let ctx = effect.context();
    let mut action = Action {
        kind: effect.kind().to_string(),
        description: super::plan_words::sentence(effect),
        job: None,
        package: ctx.package.clone(),
        version: ctx.version.clone(),
        stage: ctx.stage.clone(),
    };
    action.job = match effect {
        Effect::CreateJob { job, .. } => Some(job.name()).filter(|n| !n.is_empty()),
        Effect::DeleteJob { name, .. }
        | Effect::PatchJob { name, .. }
        | Effect::EndInterruptJob { name, .. } => Some(name.clone()),
        _ => None,
    };
    action
}

/// The human-readable plan.
pub fn render(r: &PlanReport) -> String {
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    if r.nodewrights.is_empty() {
        line("No NodeWrights.".into());
    }
    if r.record_passes_first > 0 {
        line(format!(
            "(the operator first runs {} pass(es) that only record status; the pass after them:)",
            r.record_passes_first
        ));
    }
    for nw in &r.nodewrights {
        line(format!(
            "NodeWright {} (priority {}): {}, {} nodes complete",
            nw.name,
            nw.priority,
            nw.status,
            if nw.complete_nodes.is_empty() {
                "0/0"
            } else {
                &nw.complete_nodes
            }
        ));
        for c in &nw.compartments {
            line(format!("  compartment {c}"));
        }
        for a in &nw.actions {
            line(format!("  - {}", a.description));
        }
        for n in &nw.nodes {
            line(format!("  node {} ({})", n.node, n.status));
            for a in &n.actions {
                line(format!("    - {}", a.description));
            }
            match &n.blocked {
                Some(why) => line(format!("    waits: {why}")),
                None if n.actions.is_empty() => line("    nothing to do".into()),
                None => {}
            }
        }
    }
    if !r.other.is_empty() {
        line("Other writes:".into());
        for a in &r.other {
            line(format!("  - {}", a.description));
        }
    }
    for e in &r.errors {
        line(format!("error: {e}"));
    }
    let effects: usize = r
        .nodewrights
        .iter()
        .map(|n| n.actions.len() + n.nodes.iter().map(|x| x.actions.len()).sum::<usize>())
        .sum::<usize>()
        + r.other.len();
    line(format!(
        "{effects} write(s) planned; nothing was written (options: {}).",
        r.options_from
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_nodewright_keys_name_their_nodewright() {
        assert_eq!(
            nodewright_in_key("nodewright.nvidia.com/status_web-tuning").as_deref(),
            Some("web-tuning")
        );
        assert_eq!(
            nodewright_in_key("nodewright.nvidia.com/web/NotReady").as_deref(),
            Some("web")
        );
        assert_eq!(nodewright_in_key("example.com/status_x"), None);
    }

    #[test]
    fn an_empty_cluster_plans_nothing() {
        let snapshot = Snapshot::default();
        let (_, plan, passes) =
            settle(snapshot.clone(), &Options::default(), Timestamp::UNIX_EPOCH);
        assert_eq!(passes, 0);
        let report = build(
            &snapshot,
            &plan,
            Timestamp::UNIX_EPOCH,
            "defaults".into(),
            None,
            false,
        );
        let text = render(&report);
        assert!(text.starts_with("No NodeWrights."), "{text}");
        assert!(
            text.contains("0 write(s) planned; nothing was written"),
            "{text}"
        );
    }
}
