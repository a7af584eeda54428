//! Interrupt grouping and merging (§8.5) and drain classification (§8.3).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use nodewright_crds::{DrainConfig, Interrupt, InterruptType, Package, keys};

use super::predicates::{ConfigUpdates, interrupts_of};

/// The node's merged interrupt and the package that owns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merged {
    /// Owner package name.
    pub owner: String,
    /// The merged interrupt (a copy; spec objects are never mutated, Q14).
    pub interrupt: Interrupt,
}

/// §8.5: walk packages in name order; a reboot wins at once, a strictly lower priority
/// replaces, equal-priority services merge (sorted, de-duplicated union).
pub fn merge<'p>(
    packages: impl IntoIterator<Item = &'p Package>,
    updates: &ConfigUpdates,
) -> Option<Merged> {
    let mut sorted: Vec<&Package> = packages.into_iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut best: Option<Merged> = None;
    for pkg in sorted {
        for interrupt in interrupts_of(pkg, updates) {
            match &mut best {
                None => {
                    best = Some(Merged {
                        owner: pkg.name.clone(),
                        interrupt: interrupt.clone(),
                    });
                }
                Some(current) => {
                    let (new, old) = (
                        interrupt.type_.merge_priority(),
                        current.interrupt.type_.merge_priority(),
                    );
                    if new < old {
                        *current = Merged {
                            owner: pkg.name.clone(),
                            interrupt: interrupt.clone(),
                        };
                    } else if new == old && interrupt.type_ == InterruptType::Service {
                        let union: BTreeSet<String> = current
                            .interrupt
                            .services
                            .iter()
                            .chain(&interrupt.services)
                            .cloned()
                            .collect();
                        current.interrupt.services = union.into_iter().collect();
                    }
                }
            }
            if best
                .as_ref()
                .is_some_and(|b| b.interrupt.type_ == InterruptType::Reboot)
            {
                return finish(best);
            }
        }
    }
    finish(best)
}

fn finish(best: Option<Merged>) -> Option<Merged> {
    best.map(|mut m| {
        if m.interrupt.type_ == InterruptType::Service {
            let set: BTreeSet<String> = m.interrupt.services.iter().cloned().collect();
            m.interrupt.services = set.into_iter().collect();
        }
        m
    })
}

/// What the drain does with one pod (§8.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainAction {
    /// Not in the way.
    Ignore,
    /// Wait for it (terminating).
    Wait,
    /// Wait for it: a drain blocker ([Ext] `UnmanagedPod`, `EmptyDirData`).
    Blocked(&'static str),
    /// Evict it (or delete it when eviction is disabled).
    Evict,
}

/// §8.3 classification, first matching row wins.
pub fn classify(pod: &Pod, operator_namespace: &str, drain: Option<&DrainConfig>) -> DrainAction {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if !matches!(phase, Some("Running") | Some("Pending")) {
        return DrainAction::Ignore;
    }
    let meta = &pod.metadata;
    let labels = meta.labels.as_ref();
    let has = |k: &str| labels.is_some_and(|l| l.contains_key(k));
    if meta.namespace.as_deref() == Some(operator_namespace)
        && has(keys::LABEL_NAME)
        && has(keys::PACKAGE)
    {
        return DrainAction::Ignore;
    }
    if tolerates_unschedulable(pod) {
        return DrainAction::Ignore;
    }
    let controller = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    let ignore_ds = drain.and_then(|d| d.ignore_daemon_sets).unwrap_or(true);
    if ignore_ds && controller.is_some_and(|o| o.kind == "DaemonSet") {
        return DrainAction::Ignore;
    }
    if meta.namespace.as_deref() == Some("kube-system") {
        return DrainAction::Ignore;
    }
    if meta
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"))
    {
        return DrainAction::Ignore;
    }
    if meta.deletion_timestamp.is_some() {
        return DrainAction::Wait;
    }
    if controller.is_none() && drain.and_then(|d| d.force) == Some(false) {
        return DrainAction::Blocked("UnmanagedPod");
    }
    let empty_dir = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|v| v.iter().any(|v| v.empty_dir.is_some()));
    if empty_dir && drain.and_then(|d| d.delete_empty_dir_data) == Some(false) {
        return DrainAction::Blocked("EmptyDirData");
    }
    DrainAction::Evict
}

/// Kubernetes toleration semantics against `node.kubernetes.io/unschedulable:NoSchedule`.
fn tolerates_unschedulable(pod: &Pod) -> bool {
    const KEY: &str = "node.kubernetes.io/unschedulable";
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_ref())
        .is_some_and(|ts| {
            ts.iter().any(|t| {
                let effect_ok = t
                    .effect
                    .as_deref()
                    .is_none_or(|e| e.is_empty() || e == "NoSchedule");
                let op = t.operator.as_deref().unwrap_or("Equal");
                let key_ok = match op {
                    "Exists" => t.key.as_deref().is_none_or(|k| k.is_empty() || k == KEY),
                    _ => {
                        t.key.as_deref() == Some(KEY) && t.value.as_deref().unwrap_or("").is_empty()
                    }
                };
                effect_ok && key_ok
            })
        })
}

/// [Ext] True when a PodDisruptionBudget selecting `pod` currently allows no disruption: the
/// eviction would be refused (429), so the pod is a `PodDisruptionBudget` blocker and no eviction
/// is attempted this pass (the throttle of §8.2.4 without a clock of its own).
pub fn pdb_blocks<B: std::borrow::Borrow<k8s_openapi::api::policy::v1::PodDisruptionBudget>>(
    pod: &Pod,
    pdbs: &[B],
) -> Option<String> {
    let empty = std::collections::BTreeMap::new();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    pdbs.iter()
        .map(|b| b.borrow())
        .filter(|b| b.metadata.namespace == pod.metadata.namespace)
        .filter(|b| {
            b.status
                .as_ref()
                .is_some_and(|s| s.disruptions_allowed.is_some_and(|d| d <= 0))
        })
        .find(|b| {
            b.spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .is_some_and(|sel| {
                    !nodewright_crds::selector::is_empty(sel)
                        && nodewright_crds::selector::matches(sel, labels)
                })
        })
        .map(|b| b.metadata.name.clone().unwrap_or_default())
}
