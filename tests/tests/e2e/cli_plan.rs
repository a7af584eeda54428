//! `kubectl nodewright plan` against the real operator: with the operator stopped, the case's
//! nodes become selected, the plugin plans, the operator starts, and the Jobs the operator then
//! creates are exactly the planned ones (packages `e2e-hold-*` never finish, so no later stage
//! adds Jobs). Three situations: a fresh rollout, a budget-limited one, one blocked by a
//! higher-priority NodeWright.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use kube::api::{ListParams, Patch, PatchParams};
use nodewright_crds::keys;
use serde_json::{Value, json};

use crate::cli_connect::{lines_until, plugin, spawn_plugin};
use crate::harness::{Case, hold_for, wait_for};
use crate::support::{operator_ctl, pkg};

/// Label that makes a case's nodes selected once the operator is stopped.
const PLAN_LABEL: &str = "e2e.nodewright.test/plan";

/// Creates the NodeWrights (selecting nothing yet), stops the operator, labels the nodes, runs
/// `plan -o json`, starts the operator again and returns the plan.
async fn plan_with_operator_stopped(c: &Case, nws: &[Value]) -> Result<Value> {
    for nw in nws {
        let name = nw["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        c.create(nw.clone()).await?;
        c.wait_status(&name, "complete", Duration::from_secs(30))
            .await?;
    }
    operator_ctl("stop").await?;
    let planned = label_and_plan(c).await;
    let started = operator_ctl("start").await;
    let planned = planned?;
    started?;
    Ok(planned)
}

async fn label_and_plan(c: &Case) -> Result<Value> {
    let patch = json!({ "metadata": { "labels": { PLAN_LABEL: c.id } } });
    for node in &c.nodes {
        c.node_api()
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    let run = plugin(&["plan", "-n", &c.ns, "-o", "json"]).await?;
    ensure!(run.ok, "plan failed: {}", run.stderr);
    let human = plugin(&["plan", "-n", &c.ns]).await?;
    eprintln!("[e2e] plan:\n{}", human.stdout);
    serde_json::from_str(&run.stdout).with_context(|| format!("plan -o json: {}", run.stdout))
}

fn nodewright<'a>(plan: &'a Value, name: &str) -> Result<&'a Value> {
    plan["nodewrights"]
        .as_array()
        .and_then(|a| a.iter().find(|n| n["name"] == name))
        .with_context(|| format!("NodeWright {name} not in the plan: {plan}"))
}

/// Planned Job names of one NodeWright.
fn planned_jobs(plan: &Value, name: &str) -> Result<BTreeSet<String>> {
    let nw = nodewright(plan, name)?;
    Ok(nw["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|n| n["actions"].as_array().into_iter().flatten())
        .filter(|a| a["kind"] == "CreateJob")
        .filter_map(|a| a["job"].as_str().map(str::to_string))
        .collect())
}

/// Blocking reasons of one NodeWright's nodes, by node.
fn blocked(plan: &Value, name: &str) -> Result<BTreeMap<String, String>> {
    let nw = nodewright(plan, name)?;
    Ok(nw["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| {
            Some((
                n["node"].as_str()?.to_string(),
                n["blocked"].as_str()?.to_string(),
            ))
        })
        .collect())
}

async fn job_names(c: &Case, nw: &str) -> Result<BTreeSet<String>> {
    let lp = ListParams::default().labels(&format!("{}={nw}", keys::LABEL_NAME));
    Ok(c.job_api()
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter_map(|j| j.metadata.name)
        .collect())
}

/// The operator creates exactly `planned` Jobs for `nw`: all of them appear, and nothing else
/// appears for a few seconds.
async fn operator_creates_exactly(c: &Case, nw: &str, planned: &BTreeSet<String>) -> Result<()> {
    if !planned.is_empty() {
        wait_for(
            &format!("planned Jobs of {nw}"),
            Duration::from_secs(60),
            || async {
                let have = job_names(c, nw).await?;
                Ok(planned.is_subset(&have).then_some(()))
            },
        )
        .await?;
    }
    hold_for(
        &format!("no unplanned Jobs of {nw}"),
        Duration::from_secs(4),
        || async {
            let have = job_names(c, nw).await?;
            if &have != planned {
                eprintln!("[e2e] operator Jobs of {nw}: {have:?}, planned: {planned:?}");
            }
            Ok(&have == planned)
        },
    )
    .await
}

fn hold_package(name: &str) -> Value {
    json!({ name: pkg("1.0.0", json!({})) })
}

fn spec(budget: i64, package: &str, priority: i64, id: &str) -> Value {
    json!({
        "nodeSelectors": { "matchLabels": { PLAN_LABEL: id } },
        "interruptionBudget": { "count": budget },
        "priority": priority,
        "packages": hold_package(package),
    })
}

/// Fresh rollout: two nodes, budget two: both nodes get their apply Job, as planned.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn cli_plan_fresh_rollout_matches_the_operator() -> Result<()> {
    let c = Case::new("plf", 2).await?;
    let r = async {
        let nw = c.nodewright("plf", spec(2, "e2e-hold-plf", 200, "plf"));
        let plan = plan_with_operator_stopped(&c, &[nw]).await?;
        let jobs = planned_jobs(&plan, "plf")?;
        ensure!(jobs.len() == 2, "two Jobs planned: {plan}");
        operator_creates_exactly(&c, "plf", &jobs).await
    }
    .await;
    c.finish(r).await
}

/// Budget-limited: three nodes, budget one: one Job, the two other nodes wait on the budget.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn cli_plan_budget_limited_rollout_matches_the_operator() -> Result<()> {
    let c = Case::new("plb", 3).await?;
    let r = async {
        let nw = c.nodewright("plb", spec(1, "e2e-hold-plb", 200, "plb"));
        let plan = plan_with_operator_stopped(&c, &[nw]).await?;
        let jobs = planned_jobs(&plan, "plb")?;
        ensure!(jobs.len() == 1, "one Job planned: {plan}");
        let waits = blocked(&plan, "plb")?;
        ensure!(
            waits.len() == 2 && waits.values().all(|w| w.contains("budget full")),
            "two nodes wait on the budget: {waits:?}"
        );
        operator_creates_exactly(&c, "plb", &jobs).await
    }
    .await;
    c.finish(r).await
}

/// Blocked by a dependency: NodeWright `pld-b` (priority 2) waits on `pld-a` (priority 1) on
/// every node: only `pld-a` gets Jobs, and `pld-b` none.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn cli_plan_dependency_blocked_rollout_matches_the_operator() -> Result<()> {
    let c = Case::new("pld", 2).await?;
    let r = async {
        let a = c.nodewright("pld-a", spec(2, "e2e-hold-pla", 1, "pld"));
        let b = c.nodewright("pld-b", spec(2, "e2e-hold-plb", 2, "pld"));
        let plan = plan_with_operator_stopped(&c, &[a, b]).await?;
        let jobs_a = planned_jobs(&plan, "pld-a")?;
        let jobs_b = planned_jobs(&plan, "pld-b")?;
        ensure!(jobs_a.len() == 2 && jobs_b.is_empty(), "{plan}");
        let waits = blocked(&plan, "pld-b")?;
        ensure!(
            waits.len() == 2
                && waits
                    .values()
                    .all(|w| w.contains("waiting for NodeWright pld-a")),
            "pld-b waits on pld-a: {waits:?}"
        );
        operator_creates_exactly(&c, "pld-a", &jobs_a).await?;
        operator_creates_exactly(&c, "pld-b", &jobs_b).await
    }
    .await;
    c.finish(r).await
}

/// `status` prints the rollout (bar, compartment, counts) and `status --watch` (plain output when
/// not a terminal) prints a new view when the NodeWright changes: here, when it is paused.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn cli_status_shows_the_rollout_and_watch_redraws_on_change() -> Result<()> {
    let c = Case::new("pls", 2).await?;
    let r = async {
        let spec = json!({
            "interruptionBudget": { "count": 1 },
            "packages": hold_package("e2e-hold-pls"),
        });
        c.create(c.nodewright("pls", spec)).await?;
        c.wait_status("pls", "in_progress", Duration::from_secs(60))
            .await?;
        let once = plugin(&["status", "pls"]).await?;
        ensure!(once.ok, "{}", once.stderr);
        eprintln!("[e2e] status:\n{}", once.stdout);
        ensure!(
            once.stdout.starts_with("pls  in_progress  [")
                && once.stdout.contains("0/2 nodes complete")
                && once.stdout.contains("__default__")
                && once.stdout.contains("ceiling 1"),
            "{}",
            once.stdout
        );
        let (mut child, rx) = spawn_plugin(&["status", "pls", "--watch"])?;
        let seen = |want: &str, rx: &std::sync::mpsc::Receiver<String>| {
            lines_until(rx, &format!("{want:?}"), |l| {
                l.last().is_some_and(|x| x.contains(want))
            })
        };
        let first = seen("in_progress", &rx);
        c.annotate("pls", keys::PAUSE, Some("true")).await?;
        let second = seen("paused", &rx);
        let _ = child.kill();
        let _ = child.wait();
        let (first, second) = (first?, second?);
        eprintln!("[e2e] watch:\n{}\n{}", first.join("\n"), second.join("\n"));
        ensure!(
            second.iter().any(|l| l == "---"),
            "a new view is separated by ---: {second:?}"
        );
        Ok(())
    }
    .await;
    c.finish(r).await
}
