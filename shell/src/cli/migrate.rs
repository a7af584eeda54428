//! `kubectl nodewright migrate` (M1): takes a cluster over from the Go operator (`skyhook.nvidia.com`
//! group, bare executor pods) without re-running work. Dry run by default: it prints every
//! change; `--apply` writes them. Order of writes: DeploymentPolicies, node keys (legacy
//! executor pods waited for and their outcomes recorded first), NodeWrights and their status,
//! then the legacy pods, Skyhooks and DeploymentPolicies are removed. A second run finds nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use clap::Args;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use nodewright_crds::{NodeState, NodeWright};

use super::migrate_node::{NodePlan, plan_node};
use super::migrate_object::{ObjectPlan, plan_policy, plan_skyhook, same_spec};
use super::migrate_pods::{LEGACY_NAME_LABEL, LegacyPod, adopt, classify, must_wait};
use super::{Global, client};

/// `migrate` flags.
#[derive(Args, Debug, Clone)]
pub struct MigrateArgs {
    /// Write the changes (without it, only print them).
    #[arg(long)]
    pub apply: bool,
    /// Longest wait for running Go-operator executor pods, in seconds.
    #[arg(long, default_value_t = 3600)]
    pub wait_timeout: u64,
    /// Seconds the Go operator's objects must stay unchanged to count it as stopped.
    #[arg(long, default_value_t = 10)]
    pub quiet_period: u64,
}

/// The legacy kinds as dynamic resources.
fn legacy_resource(kind: &str, plural: &str) -> ApiResource {
    let gvk = GroupVersionKind::gvk("skyhook.nvidia.com", "v1alpha1", kind);
    ApiResource::from_gvk_with_plural(&gvk, plural)
}

/// Our kinds as dynamic resources.
pub fn our_resource(kind: &str) -> ApiResource {
    let plural = if kind == "NodeWright" {
        "nodewrights"
    } else {
        "deploymentpolicies"
    };
    let gvk = GroupVersionKind::gvk("nodewright.nvidia.com", "v1alpha1", kind);
    ApiResource::from_gvk_with_plural(&gvk, plural)
}

/// Lists a dynamic resource; an absent CRD (404) is an empty list.
pub async fn list_or_empty(api: &Api<DynamicObject>) -> Result<Vec<DynamicObject>> {
    match api.list(&ListParams::default()).await {
        Ok(l) => Ok(l.items),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// Everything one run would do.
pub struct Plan {
    /// Legacy DeploymentPolicies and what they become; `existing` = ours is already there.
    pub policies: Vec<(ObjectPlan, bool)>,
    /// Legacy Skyhooks and the NodeWrights they become.
    pub skyhooks: Vec<(ObjectPlan, bool)>,
    /// Executor pods of the migrated Skyhooks.
    pub pods: Vec<LegacyPod>,
    /// Node changes (non-empty ones).
    pub nodes: Vec<NodePlan>,
}

impl Plan {
    /// Names of the Skyhooks that migrate in this run.
    pub fn migrated(&self) -> BTreeSet<String> {
        self.skyhooks
            .iter()
            .filter(|(p, _)| p.problems.is_empty())
            .map(|(p, _)| p.name.clone())
            .collect()
    }

    /// True when there is nothing at all to do.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
            && self.skyhooks.is_empty()
            && self.pods.is_empty()
            && self.nodes.is_empty()
    }
}

async fn object_plans(
    client: &Client,
    legacy: &[DynamicObject],
    kind: &'static str,
) -> Result<Vec<(ObjectPlan, bool)>> {
    let ours: Api<DynamicObject> = Api::all_with(client.clone(), &our_resource(kind));
    let mut out = Vec::new();
    for l in legacy {
        let mut plan = if kind == "NodeWright" {
            plan_skyhook(l)
        } else {
            plan_policy(l)
        };
        let existing = ours.get_opt(&plan.name).await?;
        let exists = match existing {
            Some(e) if same_spec(&plan, &serde_json::to_value(&e)?) => true,
            Some(_) => {
                plan.problems.push(format!(
                    "a {kind} named {:?} already exists with another spec",
                    plan.name
                ));
                false
            }
            None => false,
        };
        out.push((plan, exists));
    }
    Ok(out)
}

/// A Skyhook whose DeploymentPolicy does not migrate cannot migrate either.
fn block_on_policies(plan: &mut Plan) {
    let blocked: BTreeSet<String> = plan
        .policies
        .iter()
        .filter(|(p, _)| !p.problems.is_empty())
        .map(|(p, _)| p.name.clone())
        .collect();
    for (s, _) in &mut plan.skyhooks {
        let policy = s.object["spec"]["deploymentPolicy"].as_str().unwrap_or("");
        if blocked.contains(policy) {
            s.problems
                .push(format!("its DeploymentPolicy {policy:?} does not migrate"));
        }
    }
}

/// Legacy executor pods of the migrated Skyhooks.
pub async fn legacy_pods(client: &Client, migrated: &BTreeSet<String>) -> Result<Vec<LegacyPod>> {
    let pods: Api<Pod> = Api::all(client.clone());
    let list = pods
        .list(&ListParams::default().labels(LEGACY_NAME_LABEL))
        .await?;
    let mut out: Vec<LegacyPod> = list
        .items
        .iter()
        .filter_map(classify)
        .filter(|p| migrated.contains(&p.skyhook))
        .collect();
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(out)
}

/// The node-state value to write for `owner` on `node`: the legacy document with the outcomes
/// of its finished legacy pods recorded (unchanged text when it cannot be read).
fn adopted_state(
    node: &str,
    owner: &str,
    legacy: &str,
    pods: &[LegacyPod],
    nws: &BTreeMap<String, NodeWright>,
) -> String {
    let (Ok(mut doc), Some(nw)) = (NodeState::parse(legacy), nws.get(owner)) else {
        return legacy.to_string();
    };
    let mut changed = false;
    for p in pods.iter().filter(|p| p.node == node && p.skyhook == owner) {
        changed |= !adopt(&mut doc, p, nw).is_empty();
    }
    if changed {
        doc.to_annotation()
    } else {
        legacy.to_string()
    }
}

/// What recording the finished legacy pods on `node` changes, for the printed plan.
fn adoption_lines(
    node: &Node,
    pods: &[LegacyPod],
    nws: &BTreeMap<String, NodeWright>,
) -> Vec<String> {
    let mut lines = Vec::new();
    for pod in pods.iter().filter(|p| p.node == node.name_any()) {
        let key = format!(
            "{}nodeState_{}",
            super::migrate_node::LEGACY_PREFIX,
            pod.skyhook
        );
        let doc = node.annotations().get(&key).map(|t| NodeState::parse(t));
        if let (Some(nw), Some(Ok(mut doc))) = (nws.get(&pod.skyhook), doc) {
            lines.extend(
                adopt(&mut doc, pod, nw)
                    .into_iter()
                    .map(|l| format!("nodeState {l}")),
            );
        }
    }
    lines
}

/// Builds the plan from the cluster as it is now.
pub async fn build_plan(client: &Client) -> Result<Plan> {
    let sky_api: Api<DynamicObject> =
        Api::all_with(client.clone(), &legacy_resource("Skyhook", "skyhooks"));
    let dp_api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &legacy_resource("DeploymentPolicy", "deploymentpolicies"),
    );
    let mut plan = Plan {
        policies: object_plans(client, &list_or_empty(&dp_api).await?, "DeploymentPolicy").await?,
        skyhooks: object_plans(client, &list_or_empty(&sky_api).await?, "NodeWright").await?,
        pods: Vec::new(),
        nodes: Vec::new(),
    };
    block_on_policies(&mut plan);
    let migrated = plan.migrated();
    plan.pods = legacy_pods(client, &migrated).await?;
    let nws: BTreeMap<String, NodeWright> = plan
        .skyhooks
        .iter()
        .filter_map(|(p, _)| {
            Some((
                p.name.clone(),
                serde_json::from_value(p.object.clone()).ok()?,
            ))
        })
        .collect();
    let nodes: Api<Node> = Api::all(client.clone());
    for n in nodes.list(&ListParams::default()).await? {
        let name = n.name_any();
        let pods = &plan.pods;
        let p = plan_node(&n, &migrated, &|owner, legacy| {
            adopted_state(&name, owner, legacy, pods, &nws)
        });
        let mut p = p;
        p.lines.extend(adoption_lines(&n, pods, &nws));
        if !p.is_empty() || !p.skipped.is_empty() {
            plan.nodes.push(p);
        }
    }
    Ok(plan)
}

fn print_object(label: &str, legacy_kind: &str, p: &ObjectPlan, exists: bool) {
    let action = if !p.problems.is_empty() {
        "NOT MIGRATED"
    } else if exists {
        "already exists with this spec; legacy object removed"
    } else {
        "create"
    };
    let (kind, name) = (p.kind, &p.name);
    println!("{label} {kind} {name} (from {legacy_kind} {name}): {action}");
    for problem in &p.problems {
        println!("  problem: {problem}");
    }
    for note in &p.notes {
        println!("  {note}");
    }
    if p.status.is_some() && p.problems.is_empty() && !exists {
        println!("  status copied (node order, boot ids, pending config updates, batch state)");
    }
}

fn print_plan(plan: &Plan, dry: bool) {
    for (p, exists) in &plan.policies {
        print_object("-", "DeploymentPolicy", p, *exists);
    }
    for (p, exists) in &plan.skyhooks {
        print_object("-", "Skyhook", p, *exists);
    }
    for pod in &plan.pods {
        let what = if must_wait(pod) {
            if dry {
                "running: --apply waits for it to end, records its outcome, then deletes it"
            } else {
                "running: waiting for it to end"
            }
        } else {
            "finished: its outcome is recorded, then it is deleted"
        };
        println!("- legacy executor pod {}: {what}", pod.describe());
    }
    for n in &plan.nodes {
        println!("- Node {}:", n.node);
        for line in &n.lines {
            println!("  {line}");
        }
    }
}

/// Waits until no legacy executor pod of the migrated Skyhooks is running.
async fn wait_for_pods(client: &Client, plan: &Plan, timeout: Duration) -> Result<()> {
    let migrated = plan.migrated();
    let start = Instant::now();
    loop {
        let running: Vec<LegacyPod> = legacy_pods(client, &migrated)
            .await?
            .into_iter()
            .filter(must_wait)
            .collect();
        if running.is_empty() {
            return Ok(());
        }
        if start.elapsed() >= timeout {
            let names: Vec<String> = running.iter().map(LegacyPod::describe).collect();
            bail!(
                "legacy executor pods still running after {}s; nothing was written:\n  {}",
                timeout.as_secs(),
                names.join("\n  ")
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Runs `migrate`.
pub async fn run(g: &Global, args: MigrateArgs) -> Result<()> {
    let client = client(g).await?;
    let dry = !args.apply || g.dry_run;
    let sky_api: Api<DynamicObject> =
        Api::all_with(client.clone(), &legacy_resource("Skyhook", "skyhooks"));
    let plan = build_plan(&client).await?;
    if plan.is_empty() {
        println!("Nothing to migrate: no skyhook.nvidia.com objects, executor pods or node keys.");
        return Ok(());
    }
    let quiet = Duration::from_secs(args.quiet_period);
    match super::migrate_guard::check_stopped(&client, &sky_api, quiet).await {
        Ok(lines) => println!("Go operator stopped: {}", lines.join("; ")),
        Err(e) if dry => println!("WARNING: --apply would refuse: {e:#}"),
        Err(e) => return Err(e.context("refusing to migrate")),
    }
    print_plan(&plan, dry);
    if dry {
        println!("\n[dry-run] nothing written; run again with --apply to write these changes");
        return finish(&plan);
    }
    let waited = plan.pods.iter().any(must_wait);
    if waited {
        wait_for_pods(&client, &plan, Duration::from_secs(args.wait_timeout)).await?;
        println!("Legacy executor pods ended; the plan with their outcomes:");
    }
    let plan = build_plan(&client)
        .await
        .context("re-reading the cluster")?;
    if plan.pods.iter().any(must_wait) {
        bail!("a legacy executor pod started while migrating: is the Go operator stopped?");
    }
    if waited {
        print_plan(&plan, false);
    }
    super::migrate_apply::apply(&client, &plan).await?;
    finish(&plan)
}

/// Ends with an error when an object could not be migrated, so scripts notice.
fn finish(plan: &Plan) -> Result<()> {
    let blocked: Vec<String> = plan
        .policies
        .iter()
        .chain(plan.skyhooks.iter())
        .filter(|(p, _)| !p.problems.is_empty())
        .map(|(p, _)| format!("{} {}", p.kind, p.name))
        .collect();
    if blocked.is_empty() {
        return Ok(());
    }
    bail!(
        "{} object(s) not migrated (see the problems above; fix the legacy object and run again): {}",
        blocked.len(),
        blocked.join(", ")
    )
}
