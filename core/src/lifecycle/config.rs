//! Package and node-metadata ConfigMaps, and config updates (R6.4b–c, §9, T17, B3, D24).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ConfigMap;
use nodewright_crds::{Package, Stage, State, keys};

use super::ctx::Ctx;
use super::predicates::{entry_for, entry_of, in_cycle, is_package_complete};
use super::view::NwView;
use super::work::Slot;
use crate::effect::{DeletionReason, Effect};
use crate::jobs;

fn labelled<'a>(ctx: &Ctx<'a>, key: &str, value: &str) -> Vec<&'a ConfigMap> {
    let mut out: Vec<&ConfigMap> = ctx
        .snap
        .config_maps
        .iter()
        .map(|cm| &**cm)
        .filter(|cm| {
            cm.metadata
                .namespace
                .as_deref()
                .is_none_or(|ns| ns == ctx.opts.namespace)
                && cm
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(key))
                    .is_some_and(|v| v == value)
        })
        .collect();
    out.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    out
}

fn delete(cm: &ConfigMap, reason: DeletionReason) -> Effect {
    Effect::DeleteConfigMap {
        name: cm.metadata.name.clone().unwrap_or_default(),
        uid: cm.metadata.uid.clone().unwrap_or_default(),
        reason,
    }
}

/// R6.4b–c; true when the pass must end (a ConfigMap was deleted or a config update committed).
pub fn sync(ctx: &mut Ctx, v: &NwView) -> bool {
    let mut ended = prune(ctx, v);
    if !v.unreadable().is_empty() {
        let kind = crate::PlanErrorKind::ConfigSyncUnreadable;
        ctx.work.errors.push(crate::PlanError::new(&v.name, kind));
        return ended;
    }
    settle_updates(ctx, v);
    for pkg in v.packages.values().filter(|p| !p.config_map.is_empty()) {
        if v.nodes
            .iter()
            .any(|n| ctx.doc(v, n).is_some_and(|d| in_cycle(d, pkg)))
        {
            continue; // §9.2: config never interferes with an uninstall
        }
        let desired = jobs::package_config_map(v.nw, pkg, ctx.opts);
        let existing = ctx
            .snap
            .config_maps
            .iter()
            .find(|cm| cm.metadata.name == desired.metadata.name);
        let Some(existing) = existing else {
            if let Some(e) = jobs::upsert_if_changed(ctx.snap, desired) {
                ctx.work.push(Slot::Create, e); // first installs read it; no state change
            }
            continue;
        };
        let old = existing.data.clone().unwrap_or_default();
        if old == pkg.config_map {
            continue;
        }
        if commit(ctx, v, pkg, &old, desired) {
            ended = true;
        }
    }
    ended
}

/// R6.4b: delete package ConfigMaps of old versions or removed packages and metadata
/// ConfigMaps of nodes that left the selection; rewrite metadata whose packages.json is stale.
fn prune(ctx: &mut Ctx, v: &NwView) -> bool {
    let wanted: BTreeSet<String> = v
        .packages
        .values()
        .map(|p| jobs::naming::package_config_map_name(&v.name, &p.name, &p.version))
        .collect();
    let mut effects = Vec::new();
    for cm in labelled(ctx, keys::LABEL_NAME, &v.name) {
        if !wanted.contains(cm.metadata.name.as_deref().unwrap_or_default()) {
            effects.push(delete(cm, DeletionReason::StaleSpec));
        }
    }
    let node_key = format!("{}/Node.name", keys::PREFIX);
    let packages_json = jobs::configmap::packages_json(v.nw, ctx.opts);
    // Compared with every node's metadata ConfigMap: digested once (D29).
    let packages = jobs::configmap::DesiredValue::new(&packages_json);
    for cm in labelled(ctx, keys::NODE_META, &v.name) {
        let node = cm
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(&node_key));
        if node.is_some_and(|n| !v.selects(n)) {
            effects.push(delete(cm, DeletionReason::OrphanedNode));
            continue;
        }
        // R6.4b: rewrite where packages.json no longer matches the spec.
        let stale = cm
            .data
            .as_ref()
            .and_then(|d| d.get("packages.json"))
            .is_some_and(|current| !packages.matches(cm, current));
        if let (true, Some(node)) = (stale, node.and_then(|n| ctx.node(n))) {
            let desired = jobs::configmap::node_metadata_config_map(v.nw, node, ctx.opts);
            effects.push(Effect::UpsertConfigMap {
                expect_resource_version: cm.metadata.resource_version.clone(),
                config_map: Box::new(desired),
            });
        }
    }
    let any = !effects.is_empty();
    for e in effects {
        ctx.work.push(Slot::Before, e);
    }
    any
}

/// §9.3 config change: commit when every node is complete for the package (no executor) or
/// some node is erroring at config/interrupt/post-interrupt; otherwise defer (30 s requeue).
fn commit(
    ctx: &mut Ctx,
    v: &NwView,
    pkg: &Package,
    old: &BTreeMap<String, String>,
    desired: ConfigMap,
) -> bool {
    let updates = ctx.status(v).config_updates.clone();
    let mut completed = 0usize;
    let mut erroring = BTreeSet::new();
    for n in &v.nodes {
        let Some(doc) = ctx.doc(v, n) else { continue };
        let busy = ctx.index.unfinished(&v.name, n, &pkg.name, &pkg.version);
        if !busy && is_package_complete(doc, pkg, &updates) {
            completed += 1;
        }
        if entry_of(doc, &pkg.name, &pkg.version).is_some_and(|e| {
            matches!(
                e.stage,
                Stage::Config | Stage::Interrupt | Stage::PostInterrupt
            ) && e.state == Some(State::Erroring)
        }) {
            erroring.insert(n.clone());
        }
    }
    let all_complete = completed == v.nodes.len();
    if !all_complete && erroring.is_empty() {
        ctx.config_sync_pending = true;
        return false;
    }
    for n in &erroring {
        for e in jobs::config_update_clear(&ctx.index, v.nw, n, &pkg.name, &pkg.version) {
            ctx.work.push(Slot::Before, e);
        }
    }
    for e in jobs::invalidate_for_config_swap(&ctx.index, v.nw, &pkg.name, &pkg.version, &erroring)
    {
        ctx.work.push(Slot::Before, e);
    }
    // Changed keys: new or different values, and removed keys (Q12 / D9).
    let mut changed: Vec<String> = pkg
        .config_map
        .iter()
        .filter(|(k, val)| old.get(*k) != Some(*val))
        .map(|(k, _)| k.clone())
        .collect();
    changed.extend(
        old.keys()
            .filter(|k| !pkg.config_map.contains_key(*k))
            .cloned(),
    );
    changed.sort();
    ctx.forget_completeness(v);
    let status = ctx.status_mut(v);
    let list = status.config_updates.entry(pkg.name.clone()).or_default();
    if all_complete {
        list.clear();
    }
    for k in changed {
        if !list.contains(&k) {
            list.push(k);
        }
    }
    // T17 on every node that has the entry (Q11: absent entries are left to RunNext); no node
    // status change (D3: batch admission decides which nodes start).
    for n in &v.nodes {
        if let Some(doc) = ctx.doc_mut(v, n)
            && entry_of(doc, &pkg.name, &pkg.version).is_some()
        {
            doc.upsert(entry_for(pkg, Stage::Config, State::InProgress));
        }
    }
    if let Some(e) = jobs::upsert_if_changed(ctx.snap, desired) {
        ctx.work.push(Slot::After, e); // B3: after the node writes and the status
    }
    true
}

/// D9/Q13: clear `configUpdates[pkg]` once the update is complete everywhere — but only when
/// clearing it changes no node's completeness (a package whose own interrupt was skipped by a
/// non-matching key stays at `(config, complete)`, e2e `config-skyhook`, and keeps its list).
fn settle_updates(ctx: &mut Ctx, v: &NwView) {
    let updates = ctx.status(v).config_updates.clone();
    let mut without = updates.clone();
    let mut clear = Vec::new();
    for (name, keys) in &updates {
        let Some(pkg) = v.packages.get(name) else {
            continue;
        };
        if keys.is_empty() {
            continue;
        }
        without.remove(name);
        let settled = !v.nodes.is_empty()
            && v.nodes.iter().all(|n| {
                ctx.doc(v, n).is_some_and(|d| {
                    is_package_complete(d, pkg, &updates) && is_package_complete(d, pkg, &without)
                })
            });
        without.insert(name.clone(), keys.clone());
        if settled {
            clear.push(name.clone());
        }
    }
    if clear.is_empty() {
        return;
    }
    ctx.forget_completeness(v);
    let status = ctx.status_mut(v);
    for name in clear {
        status.config_updates.remove(&name);
    }
}
