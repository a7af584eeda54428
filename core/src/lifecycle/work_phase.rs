//! R7 work phase for one NodeWright (02-lifecycle.md §7.4–§7.8, §8.2, §8.4): uninstall
//! requests, cancels, version changes, node selection, and per node the gate and apply steps.

use std::collections::{BTreeMap, BTreeSet};

use nodewright_crds::{NodeState, Package, Stage, State, Status, keys};

use super::ctx::Ctx;
use super::dag::Dag;
use super::done::Blocker;
use super::interrupts::{DrainAction, Merged, classify, merge};
use super::ordering::node_ready;
use super::predicates::{
    self as pr, complete_set, entry_for, in_cycle, next_stage, uninstall_requested,
};
use super::rollout_seam;
use super::start::{Start, start_executor};
use super::status::set_condition;
use super::view::NwView;
use super::work::{Slot, node_ref, nw_ref};
use crate::effect::{Context, Effect};
use crate::{PlanError, PlanErrorKind};

/// Runs the work phase of `views[vi]`.
pub fn run(ctx: &mut Ctx, views: &[NwView], vi: usize) {
    let v = &views[vi];
    if v.disabled || v.paused {
        return;
    }
    let dag = match (&v.graph, v.graph_error()) {
        (Ok(dag), None) => dag,
        (_, Some(err)) => {
            let kind = PlanErrorKind::InvalidGraph(err);
            ctx.work.errors.push(PlanError::new(&v.name, kind));
            return;
        }
        (Err(_), None) => return,
    };
    let uninstall_work = match has_uninstall_work(ctx, v) {
        Ok(w) => w,
        Err(e) => {
            ctx.work.errors.push(PlanError::new(&v.name, e));
            return;
        }
    };
    if ctx.nw_complete(v) && !uninstall_work {
        return;
    }
    let any_ready = v.nodes.iter().enumerate().any(|(i, n)| {
        (!ctx.node_complete_at(v, i) || uninstall_work) && node_ready(ctx, views, v, n)
    });
    if !any_ready {
        return;
    }
    let changed_nodes = pre_selection(ctx, v);
    let changed_nodes_set = &changed_nodes.nodes;
    let to_uninstall = uninstall_requests(ctx, v);
    let version_changed = changed_nodes.version_changed;
    let decision = rollout_seam::select(ctx, v, version_changed);
    // In-flight nodes of a stopped compartment only finish their running stage (D9): the
    // executor runs on, nothing new starts, so they are not visited here.
    // Marked by position: the selection is small, the fleet is not.
    let mut run_nodes = vec![false; v.nodes.len()];
    for node in &decision.selected_nodes {
        if let Some(&i) = v.pos.get(node.as_str()) {
            run_nodes[i] = true;
        }
    }
    for (i, node) in v.nodes.iter().enumerate() {
        if !run_nodes[i] || !node_ready(ctx, views, v, node) {
            continue;
        }
        if ctx.node_complete_at(v, i)
            && !changed_nodes_set.contains(node)
            && !to_uninstall.contains_key(node)
        {
            continue;
        }
        let pending = to_uninstall.get(node).cloned().unwrap_or_default();
        run_node(ctx, v, dag, node, &pending);
    }
    if !ctx.nw_complete(v) {
        ctx.requeue = true;
    }
}

/// D9 HasUninstallWork; unreadable state is an error.
pub fn has_uninstall_work(ctx: &Ctx, v: &NwView) -> Result<bool, PlanErrorKind> {
    if v.packages.values().any(Package::is_uninstalling) {
        return Ok(true);
    }
    let mut work = false;
    for (i, node) in v.nodes.iter().enumerate() {
        let doc = ctx
            .doc_at(v, i)
            .ok_or_else(|| PlanErrorKind::UnreadableState(node.clone()))?;
        if work {
            continue; // only readability still matters
        }
        work = pr::any_in_cycle(doc, &v.packages)
            || (v.deleting
                && v.packages.values().any(|p| {
                    p.uninstall_enabled()
                        && super::predicates::entry_of(doc, &p.name, &p.version).is_some()
                }));
    }
    Ok(work)
}

/// What §7.7/§7.8 changed.
struct PreSelection {
    /// Nodes whose entries changed.
    nodes: BTreeSet<String>,
    /// Some node had a version difference (§7.8.6: batch-state reset trigger).
    version_changed: bool,
}

/// §7.7 cancels and §7.8 version changes.
fn pre_selection(ctx: &mut Ctx, v: &NwView) -> PreSelection {
    let mut changed = BTreeSet::new();
    let mut version_changed = false;
    let mut clear_updates: BTreeSet<String> = BTreeSet::new();
    let tracked = ctx.status(v).config_updates.clone();
    let mut cursor =
        pr::PackageCursor::new(v.packages.iter().map(|(k, p)| (k.as_str(), p)).collect());
    for (i, node) in v.nodes.iter().enumerate() {
        // Cheap scan first: most nodes have nothing to cancel, upgrade or forget.
        let interesting = ctx.doc_at(v, i).is_some_and(|d| {
            d.0.values().any(|e| match cursor.get(&e.name) {
                None => tracked.contains_key(&e.name),
                Some(p) => e.version != p.version || e.stage == Stage::Uninstall,
            })
        });
        if !interesting {
            continue;
        }
        let Some(doc) = ctx.doc(v, node).cloned() else {
            continue;
        };
        let mut new_doc = doc.clone();
        for entry in doc.0.values() {
            if ctx.outcome_touched(v, node, &entry.name) {
                continue; // 16.11: the outcome's write lands first
            }
            let Some(pkg) = v.packages.get(&entry.name) else {
                if tracked.contains_key(&entry.name) {
                    clear_updates.insert(entry.name.clone()); // §7.8.3: entry kept (T19)
                }
                continue;
            };
            // §7.7 T15: cancel an uninstall that is no longer requested.
            if entry.stage == Stage::Uninstall
                && entry.version == pkg.version
                && !uninstall_requested(pkg, v.deleting)
                && matches!(entry.state, Some(State::InProgress) | Some(State::Erroring))
            {
                new_doc.upsert(entry_for(pkg, Stage::Apply, State::InProgress));
                continue;
            }
            if in_cycle(&doc, pkg) || entry.version == pkg.version {
                continue;
            }
            // §7.8.4 T16: upgrade marks the new key only (D3: no node status change).
            if pr::compare_versions(&pkg.version, &entry.version).is_gt() {
                let current = super::predicates::entry_of(&new_doc, &pkg.name, &pkg.version);
                if current.is_none_or(|e| e.stage != Stage::Upgrade) && current.is_none() {
                    new_doc.upsert(entry_for(pkg, Stage::Upgrade, State::InProgress));
                    version_changed = true;
                    clear_updates.insert(pkg.name.clone());
                }
            }
        }
        if new_doc != doc {
            if let Some(d) = ctx.doc_mut(v, node) {
                *d = new_doc;
            }
            changed.insert(node.clone());
        }
    }
    clear_updates.retain(|name| tracked.contains_key(name));
    if !clear_updates.is_empty() {
        ctx.forget_completeness(v);
        let status = ctx.status_mut(v);
        for name in clear_updates {
            status.config_updates.remove(&name);
        }
    }
    PreSelection {
        nodes: changed,
        version_changed,
    }
}

/// §7.6 uninstall requests: T13, T14; returns per node the packages to uninstall.
fn uninstall_requests(ctx: &mut Ctx, v: &NwView) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let any_requested = v
        .packages
        .values()
        .any(|p| uninstall_requested(p, v.deleting));
    for (i, node) in v.nodes.iter().enumerate() {
        let interesting = ctx
            .doc_at(v, i)
            .is_some_and(|d| any_requested || d.0.values().any(|e| e.stage.in_uninstall_cycle()));
        if !interesting {
            continue;
        }
        let Some(doc) = ctx.doc(v, node).cloned() else {
            continue;
        };
        let mut new_doc = doc.clone();
        let mut removed = false;
        for pkg in v.packages.values() {
            let Some(entry) = super::predicates::entry_of(&doc, &pkg.name, &pkg.version) else {
                continue;
            };
            if ctx.outcome_touched(v, node, &pkg.name) {
                continue; // 16.11: the outcome's write lands first
            }
            if !uninstall_requested(pkg, v.deleting) && !in_cycle(&doc, pkg) {
                continue;
            }
            match entry.stage {
                Stage::Uninstall => out.entry(node.clone()).or_default().push(pkg.name.clone()),
                Stage::UninstallInterrupt if entry.is_complete() => {
                    new_doc.remove(&pkg.name, &pkg.version); // T13
                    removed = true;
                    let key = (v.name.clone(), node.clone(), pkg.name.clone());
                    ctx.done.cycle_ended.insert(key);
                }
                Stage::UninstallInterrupt => {
                    out.entry(node.clone()).or_default().push(pkg.name.clone())
                }
                _ if entry.is_complete() => {
                    new_doc.upsert(entry_for(pkg, Stage::Uninstall, State::InProgress)); // T14
                    out.entry(node.clone()).or_default().push(pkg.name.clone());
                }
                _ => {}
            }
        }
        if new_doc != doc {
            if let Some(d) = ctx.doc_mut(v, node) {
                *d = new_doc;
            }
            if removed && let Some(n) = ctx.node(node) {
                ctx.work.set_node_status(n, &v.name, Status::InProgress);
            }
        }
    }
    out
}

/// §7.3 toRun(node): pending uninstalls, then the filtered RunNext, as package names.
pub fn to_run(
    v: &NwView,
    dag: &Dag,
    doc: &NodeState,
    updates: &pr::ConfigUpdates,
    pending: &[String],
) -> Vec<String> {
    let done: BTreeSet<String> = complete_set(doc, &v.packages, updates)
        .into_iter()
        .collect();
    let mut next: Vec<&Package> = dag
        .next(&done)
        .iter()
        .filter_map(|key| v.packages.values().find(|p| p.is_unique_name(key)))
        .filter(|p| {
            let uninstalled = super::predicates::entry_of(doc, &p.name, &p.version).is_none();
            !in_cycle(doc, p) && (!uninstall_requested(p, v.deleting) || !uninstalled)
        })
        .collect();
    next.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out: Vec<String> = pending
        .iter()
        .filter(|name| {
            v.packages.get(*name).is_some_and(|p| {
                super::predicates::entry_of(doc, &p.name, &p.version)
                    .is_some_and(|e| !(e.stage == Stage::UninstallInterrupt && e.is_complete()))
            })
        })
        .cloned()
        .collect();
    for p in next {
        if !out.contains(&p.name) {
            out.push(p.name.clone());
        }
    }
    out
}

/// One node of the work phase: gate and apply for each package of toRun (§7.4, §7.5).
fn run_node(ctx: &mut Ctx, v: &NwView, dag: &Dag, node: &str, pending: &[String]) {
    let updates = ctx.status(v).config_updates.clone();
    let Some(doc) = ctx.doc(v, node) else {
        return;
    };
    let names = to_run(v, dag, doc, &updates, pending);
    // Packages at (interrupt, skipped) as the pass found them (see `promoted_this_pass`).
    let skipped_at_start: Vec<String> = names
        .iter()
        .filter(|name| v.packages.get(*name).is_some_and(|pkg| skipped(doc, pkg)))
        .cloned()
        .collect();
    let merged = merge(names.iter().filter_map(|n| v.packages.get(n)), &updates);
    for name in names {
        let Some(pkg) = v.packages.get(&name) else {
            continue;
        };
        if cycle_ended(ctx, v, node, pkg) || ctx.rests_on_outcome(v, node, pkg) {
            ctx.requeue = true;
            continue;
        }
        let entry = ctx
            .doc(v, node)
            .and_then(|d| super::predicates::entry_of(d, &pkg.name, &pkg.version));
        let gated = pr::gated(pkg, entry, &updates);
        if gated && !gate(ctx, v, node, pkg, merged.as_ref(), &updates) {
            ctx.requeue = true;
            continue;
        }
        if skipped_at_start.contains(&name) && promoted_this_pass(ctx, v, node, pkg) {
            ctx.requeue = true;
            continue;
        }
        apply(ctx, v, node, pkg, &updates);
        if v.nw.spec.serial {
            ctx.requeue = true;
            break;
        }
    }
}

/// Gate G1–G8; true means PROCEED.
fn gate(
    ctx: &mut Ctx,
    v: &NwView,
    node: &str,
    pkg: &Package,
    merged: Option<&Merged>,
    updates: &pr::ConfigUpdates,
) -> bool {
    let entry = ctx
        .doc(v, node)
        .and_then(|d| super::predicates::entry_of(d, &pkg.name, &pkg.version))
        .cloned();
    let owner = merged.is_some_and(|m| m.owner == pkg.name);
    let stage = entry
        .as_ref()
        .and_then(|e| next_stage(e, pkg, updates))
        .unwrap_or(Stage::Apply);
    if let Some(e) = &entry {
        if e.state == Some(State::Skipped) {
            if owner {
                promote_skipped(ctx, v, node);
            }
            return false;
        }
        let open = matches!(e.state, Some(State::InProgress) | Some(State::Erroring));
        if e.stage.is_interrupt() && open {
            if ensure_ready(ctx, v, node, pkg) {
                fire(ctx, v, node, pkg, e.stage, merged);
            }
            return false;
        }
    }
    if matches!(stage, Stage::Apply | Stage::Uninstall) && !ensure_ready(ctx, v, node, pkg) {
        return false;
    }
    if stage == Stage::Interrupt {
        if owner {
            if ensure_ready(ctx, v, node, pkg) {
                fire(ctx, v, node, pkg, Stage::Interrupt, merged);
            }
        } else if let Some(d) = ctx.doc_mut(v, node) {
            d.upsert(entry_for(pkg, Stage::Interrupt, State::Skipped)); // T8
        }
        return false;
    }
    if let Some(e) = &entry
        && e.stage.is_interrupt()
        && !e.is_complete()
    {
        return false;
    }
    true
}

/// True when `pkg`'s entry in `doc` is skipped.
fn skipped(doc: &NodeState, pkg: &Package) -> bool {
    super::predicates::entry_of(doc, &pkg.name, &pkg.version)
        .is_some_and(|e| e.state == Some(State::Skipped))
}

/// For a `pkg` that entered the pass at (interrupt, skipped): true when the T9 backstop of a
/// sibling promoted it in this pass. It waits for the next pass, so each written change is a
/// single transition (invariant 11).
fn promoted_this_pass(ctx: &Ctx, v: &NwView, node: &str, pkg: &Package) -> bool {
    !ctx.doc(v, node).is_some_and(|d| skipped(d, pkg))
}

/// T13, inv 16.11: the pass removed `pkg`'s finished uninstall cycle on `node`; a reinstall
/// starts on a later pass, so the entry is written absent before it is written at `apply`.
fn cycle_ended(ctx: &Ctx, v: &NwView, node: &str, pkg: &Package) -> bool {
    let key = (v.name.clone(), node.to_string(), pkg.name.clone());
    ctx.done.cycle_ended.contains(&key)
}

/// T9 backstop: promote every (interrupt, skipped) entry of the node to complete.
fn promote_skipped(ctx: &mut Ctx, v: &NwView, node: &str) {
    if let Some(d) = ctx.doc_mut(v, node) {
        for e in d.0.values_mut() {
            if e.stage == Stage::Interrupt && e.state == Some(State::Skipped) {
                e.state = Some(State::Complete);
            }
        }
    }
}

/// §8.4: start the node's merged interrupt for `pkg` at `stage` (B6, invariant 16.2).
fn fire(
    ctx: &mut Ctx,
    v: &NwView,
    node: &str,
    pkg: &Package,
    stage: Stage,
    merged: Option<&Merged>,
) {
    let key = (v.name.clone(), node.to_string());
    if ctx.node_busy(node) || ctx.done.fired.contains(&key) {
        return;
    }
    let interrupt = match merged {
        Some(m) => m.interrupt.clone(),
        None => match &pkg.interrupt {
            Some(i) => i.clone(),
            None => return,
        },
    };
    let entry = ctx
        .doc(v, node)
        .and_then(|d| super::predicates::entry_of(d, &pkg.name, &pkg.version))
        .cloned();
    if start_executor(ctx, v, node, pkg, stage, Some(&interrupt), entry.as_ref()) == Start::Created
    {
        ctx.done.fired.insert(key);
        if let Some(d) = ctx.doc_mut(v, node) {
            d.upsert(entry_for(pkg, stage, State::InProgress));
        }
        ctx.work.node_event(
            node,
            nw_ref(&v.name, &v.uid),
            false,
            "Interrupt",
            "InterruptNode",
            format!(
                "Interrupting node [{node}] package [{}:{}] from [nodewright:{}]",
                pkg.name, pkg.version, v.name
            ),
        );
    }
}

/// Apply step A1–A7 (with D4: a lost or failed executor resumes at the entry's own stage).
fn apply(ctx: &mut Ctx, v: &NwView, node: &str, pkg: &Package, updates: &pr::ConfigUpdates) {
    let entry = ctx
        .doc(v, node)
        .and_then(|d| super::predicates::entry_of(d, &pkg.name, &pkg.version))
        .cloned();
    let mut stage = entry.as_ref().map_or(Stage::Apply, |e| e.stage);
    if let Some(next) = entry.as_ref().and_then(|e| next_stage(e, pkg, updates)) {
        stage = next;
    } else if entry.as_ref().is_some_and(|e| e.is_complete()) {
        return; // terminal
    }
    if stage == Stage::Interrupt {
        // The interrupt left the spec mid-cycle: continue with post-interrupt.
        stage = Stage::PostInterrupt;
    }
    if stage == Stage::UninstallInterrupt
        || entry
            .as_ref()
            .is_some_and(|e| e.state == Some(State::Skipped))
    {
        return;
    }
    if start_executor(ctx, v, node, pkg, stage, None, entry.as_ref()) != Start::Created {
        return;
    }
    if let Some(d) = ctx.doc_mut(v, node) {
        d.upsert(entry_for(pkg, stage, State::InProgress));
    }
    if let Some(n) = ctx.node(node) {
        ctx.work.set_node_status(n, &v.name, Status::InProgress);
    }
    let generation = v.generation;
    let now = ctx.now;
    let status = ctx.status_mut(v);
    let message = format!(
        "Applying package [{}:{}] to node [{node}]",
        pkg.name, pkg.version
    );
    for ty in [
        "ApplyPackage".to_string(),
        format!("{}/ApplyPackage", keys::PREFIX),
    ] {
        set_condition(
            &mut status.conditions,
            &ty,
            true,
            "ApplyPackage",
            &message,
            generation,
            now,
        );
    }
    let (n, ver, s) = (&pkg.name, &pkg.version, stage.as_str());
    ctx.work.event(
        node_ref(node),
        false,
        "Apply",
        "ApplyPackage",
        format!(
            "Applying package [{n}:{ver}] from [nodewright:{}] stage [{s}]",
            v.name
        ),
    );
    ctx.work.node_event(
        node,
        nw_ref(&v.name, &v.uid),
        false,
        "Apply",
        "ApplyPackage",
        format!("Applying package [{n}:{ver}] to node [{node}] stage [{s}]"),
    );
}

/// §8.2 EnsureReady: cordon (B1: answer not ready in the cordoning pass), wait for
/// non-interrupt pods, drain (evict, then wait until nothing is left).
pub fn ensure_ready(ctx: &mut Ctx, v: &NwView, node_name: &str, pkg: &Package) -> bool {
    let Some(node) = ctx.node(node_name) else {
        return false;
    };
    let cordon_key = keys::cordon(&v.name);
    // Durable: the snapshot shows the cordon and this pass did not release it (introspection
    // releases it on a node it found complete before a version change reopened it).
    let durable = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
        && super::view::annotation(node, &cordon_key) == Some("true")
        && ctx.work.annotation(node, &cordon_key) == Some("true");
    if !durable {
        ctx.work.set_unschedulable(node, true);
        ctx.work.set_annotation(node, &cordon_key, Some("true"));
        // Invariant 16.6: a cordoned node is not complete. A version change (T16) reopens a
        // complete node without a status write (D3), so the cordoning write carries one.
        if ctx.work.node_status(node, &v.name) == Status::Complete {
            ctx.work.set_node_status(node, &v.name, Status::InProgress);
        }
        // The snapshot may not show `complete` written by an earlier pass (a lagging cache):
        // the cordoning write carries the working status whatever the snapshot shows.
        ctx.work.status_on_write(&v.name, node);
        return false;
    }
    let pods = ctx.pods_on(node_name).to_vec();
    if let Some(selector) = v.nw.spec.pod_non_interrupt_labels.as_ref()
        && !nodewright_crds::selector::is_empty(selector)
    {
        let blocking = ctx.running_pods_selected(node_name, selector);
        if !blocking.is_empty() {
            if ctx
                .done
                .non_interrupt_blocked
                .insert((v.name.clone(), node_name.to_string()))
            {
                let pods: Vec<&str> = blocking.iter().take(10).map(String::as_str).collect();
                ctx.work.event(
                    node_ref(node_name),
                    true,
                    "Drain",
                    "NonInterruptPodsRunning",
                    format!(
                        "drain blocked by non-interrupt pods [{}] for package [{}:{}] from [nodewright:{}]",
                        pods.join(", "),
                        pkg.name,
                        pkg.version,
                        v.name
                    ),
                ); // E5
            }
            return false;
        }
    }
    let drain = v.nw.spec.drain_config.as_ref();
    let mut pending = false;
    let mut evict = Vec::new();
    let mut blockers: Vec<Blocker> = Vec::new();
    for pod in &pods {
        match classify(pod, &ctx.opts.namespace, drain) {
            DrainAction::Ignore => {}
            DrainAction::Wait => pending = true,
            DrainAction::Blocked(reason) => {
                pending = true;
                blockers.push(Blocker::new(pod, reason, String::new()));
            }
            DrainAction::Evict => {
                pending = true;
                let disabled = drain.and_then(|d| d.disable_eviction).unwrap_or(false);
                match super::interrupts::pdb_blocks(pod, &ctx.snap.pod_disruption_budgets) {
                    Some(pdb) if !disabled => blockers.push(Blocker::new(
                        pod,
                        "PodDisruptionBudget",
                        format!("PodDisruptionBudget {pdb} allows no disruption"),
                    )),
                    _ => evict.push(*pod),
                }
            }
        }
    }
    if !blockers.is_empty() {
        ctx.drain_blockers
            .insert((v.name.clone(), node_name.to_string()), blockers);
    }
    let drain_key = keys::drain_start(&v.name);
    if !pending {
        ctx.work.set_annotation(node, &drain_key, None);
        return true;
    }
    if ctx.work.annotation(node, &drain_key).is_none() {
        let now = ctx.now.to_string();
        ctx.work.set_annotation(node, &drain_key, Some(&now));
    }
    drain_timeout(ctx, v, node, pkg);
    let mut round = false;
    for pod in evict {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if !ctx.done.evicted.insert(uid.clone()) {
            continue;
        }
        round = true;
        ctx.work.push(
            Slot::Before,
            Effect::Evict {
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                uid,
                delete_instead: drain.and_then(|d| d.disable_eviction).unwrap_or(false),
                grace_period_seconds: drain
                    .and_then(|d| d.grace_period.as_ref())
                    .and_then(|g| nodewright_crds::duration::parse_go_duration(&g.0).ok())
                    .map(|nanos| (nanos.max(0) + 999_999_999) / 1_000_000_000),
                context: Context {
                    nodewright: Some(v.name.clone()),
                    node: Some(node_name.to_string()),
                    package: Some(pkg.name.clone()),
                    version: Some(pkg.version.clone()),
                    stage: None,
                },
            },
        );
    }
    if round {
        ctx.work.event(
            node_ref(node_name),
            false,
            "Drain",
            "DrainNode",
            format!(
                "draining node [{node_name}] package [{}:{}] from [nodewright:{}]",
                pkg.name, pkg.version, v.name
            ),
        );
    }
    false
}

/// [Ext] `drainConfig.timeout`: once `now ≥ drainStart + timeout`, warn (E7) and mark the node
/// erroring; the drain keeps waiting.
fn drain_timeout(
    ctx: &mut Ctx,
    v: &NwView,
    node: &k8s_openapi::api::core::v1::Node,
    pkg: &Package,
) {
    let Some(timeout) =
        v.nw.spec
            .drain_config
            .as_ref()
            .and_then(|d| d.timeout.as_ref())
            .and_then(|t| nodewright_crds::duration::parse_go_duration(&t.0).ok())
            .filter(|n| *n > 0)
    else {
        return;
    };
    let started = super::view::annotation(node, &keys::drain_start(&v.name))
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let Some(started) = started else { return };
    let deadline = started.checked_add(jiff::SignedDuration::from_nanos(timeout));
    if deadline.is_ok_and(|d| ctx.now >= d) {
        let name = super::view::node_name(node);
        ctx.work.set_node_status(node, &v.name, Status::Erroring);
        let message = format!(
            "drain timed out after [{}] for node [{name}] package [{}:{}]",
            std::time::Duration::from_nanos(timeout.unsigned_abs()).as_secs(),
            pkg.name,
            pkg.version
        );
        ctx.work.event(
            node_ref(&name),
            true,
            "Drain",
            "DrainTimeout",
            message.clone(),
        );
        ctx.work.node_event(
            &name,
            nw_ref(&v.name, &v.uid),
            true,
            "Drain",
            "DrainTimeout",
            message,
        );
    }
}
