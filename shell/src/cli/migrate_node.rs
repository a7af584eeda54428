//! `migrate`, node part: the Go operator's node metadata (`skyhook.nvidia.com/` annotations,
//! labels, condition types and taint keys) renamed to ours, as a pure plan per node.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use nodewright_crds::keys;

/// Prefix of every node key the Go operator (v0.15.0 and earlier) writes.
pub const LEGACY_PREFIX: &str = "skyhook.nvidia.com/";

/// Key of the Go operator's default runtime-required taint (`skyhook.nvidia.com=runtime-required`).
pub const LEGACY_TAINT_KEY: &str = "skyhook.nvidia.com";

/// Our key for a legacy annotation or label key; `None` when the key is not the Go operator's.
/// `autoTaint_<taint key>` also renames a legacy taint key in its suffix.
pub fn renamed_key(key: &str) -> Option<String> {
    let rest = key.strip_prefix(LEGACY_PREFIX)?;
    let rest = match rest.strip_prefix("autoTaint_") {
        Some(taint) => format!(
            "autoTaint_{}",
            renamed_taint_key(taint).unwrap_or(taint.into())
        ),
        None => rest.to_string(),
    };
    Some(format!("{}/{rest}", keys::PREFIX))
}

/// Our key for a legacy taint key (`skyhook.nvidia.com` or `skyhook.nvidia.com/<x>`).
pub fn renamed_taint_key(key: &str) -> Option<String> {
    if key == LEGACY_TAINT_KEY {
        return Some(keys::PREFIX.to_string());
    }
    key.strip_prefix(LEGACY_PREFIX)
        .map(|rest| format!("{}/{rest}", keys::PREFIX))
}

/// The Skyhook a legacy node key belongs to (`nodeState_<n>`, `status_<n>`, `version_<n>`,
/// `cordon_<n>`, `drainStart_<n>`, condition `<n>/NotReady|Erroring`); `None` for shared keys.
pub fn owner_of(key: &str) -> Option<&str> {
    let rest = key.strip_prefix(LEGACY_PREFIX)?;
    for p in [
        "nodeState_",
        "status_",
        "version_",
        "cordon_",
        "drainStart_",
    ] {
        if let Some(name) = rest.strip_prefix(p) {
            return Some(name);
        }
    }
    rest.strip_suffix("/NotReady")
        .or_else(|| rest.strip_suffix("/Erroring"))
}

/// One renamed key: where it came from, where it goes, and whether the new key already held a
/// different value (then the new value is kept and the legacy one reported).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rename {
    /// Legacy key.
    pub from: String,
    /// Our key.
    pub to: String,
    /// Value written under `to` (or kept there).
    pub value: String,
    /// The new key already existed with another value, which is kept.
    pub kept_existing: bool,
}

/// Everything `migrate` changes on one node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodePlan {
    /// Node name.
    pub node: String,
    /// Annotation renames.
    pub annotations: Vec<Rename>,
    /// Label renames.
    pub labels: Vec<Rename>,
    /// The full condition list with legacy types renamed, when any was.
    pub conditions: Option<Vec<NodeCondition>>,
    /// The full taint list with legacy keys renamed, when any was.
    pub taints: Option<Vec<Taint>>,
    /// Human-readable lines, one per change.
    pub lines: Vec<String>,
    /// Legacy keys left alone because their Skyhook is not migrated in this run.
    pub skipped: Vec<String>,
}

impl NodePlan {
    /// True when nothing is to change on the node.
    pub fn is_empty(&self) -> bool {
        self.annotations.is_empty()
            && self.labels.is_empty()
            && self.conditions.is_none()
            && self.taints.is_none()
    }
}

/// Renames of the legacy keys in `map` whose owner is migrated (`migrated`); a key whose
/// owner is not is added to `skipped`. `value_of` may replace a legacy value (adopted outcomes).
fn renames(
    map: &BTreeMap<String, String>,
    migrated: &BTreeSet<String>,
    value_of: &dyn Fn(&str, &str) -> String,
    skipped: &mut Vec<String>,
) -> Vec<Rename> {
    let mut out = Vec::new();
    for (key, legacy_value) in map {
        let Some(to) = renamed_key(key) else { continue };
        if owner_of(key).is_some_and(|o| !migrated.contains(o)) {
            skipped.push(key.clone());
            continue;
        }
        let wanted = value_of(key, legacy_value);
        let (value, kept_existing) = match map.get(&to) {
            Some(existing) => (existing.clone(), *existing != wanted),
            None => (wanted, false),
        };
        out.push(Rename {
            from: key.clone(),
            to,
            value,
            kept_existing,
        });
    }
    out
}

fn condition_renames(node: &Node, migrated: &BTreeSet<String>) -> Option<Vec<NodeCondition>> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    let ours: BTreeSet<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
    let mut changed = false;
    let mut out = Vec::with_capacity(conditions.len());
    for c in conditions {
        let renamed = renamed_key(&c.type_)
            .filter(|_| owner_of(&c.type_).is_none_or(|o| migrated.contains(o)));
        match renamed {
            Some(to) if ours.contains(to.as_str()) => changed = true, // ours is kept
            Some(to) => {
                changed = true;
                out.push(NodeCondition {
                    type_: to,
                    ..c.clone()
                });
            }
            None => out.push(c.clone()),
        }
    }
    changed.then_some(out)
}

fn taint_renames(node: &Node) -> Option<Vec<Taint>> {
    let taints = node.spec.as_ref()?.taints.as_ref()?;
    let mut changed = false;
    let mut out: Vec<Taint> = Vec::with_capacity(taints.len());
    for t in taints {
        let mut t = t.clone();
        if let Some(to) = renamed_taint_key(&t.key) {
            changed = true;
            t.key = to;
        }
        let duplicate = out.iter().any(|o| o.key == t.key && o.effect == t.effect);
        if !duplicate {
            out.push(t);
        }
    }
    changed.then_some(out)
}

/// The plan for one node: legacy keys of the Skyhooks in `migrated` (and the shared keys:
/// `ignore`, `autoTaint_*`, runtime-required taints) renamed. `node_state` supplies the
/// `nodeState_<name>` value to write (the legacy document with adopted executor outcomes).
pub fn plan_node(
    node: &Node,
    migrated: &BTreeSet<String>,
    node_state: &dyn Fn(&str, &str) -> String,
) -> NodePlan {
    let name = node.metadata.name.clone().unwrap_or_default();
    let mut skipped = Vec::new();
    let empty = BTreeMap::new();
    let annotations = node.metadata.annotations.as_ref().unwrap_or(&empty);
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let value_of = |key: &str, legacy: &str| match owner_of(key) {
        Some(owner) if key == format!("{LEGACY_PREFIX}nodeState_{owner}") => {
            node_state(owner, legacy)
        }
        _ => legacy.to_string(),
    };
    let mut plan = NodePlan {
        node: name.clone(),
        annotations: renames(annotations, migrated, &value_of, &mut skipped),
        labels: renames(labels, migrated, &|_, v| v.to_string(), &mut skipped),
        conditions: condition_renames(node, migrated),
        taints: taint_renames(node),
        lines: Vec::new(),
        skipped,
    };
    plan.lines = describe(&plan, node);
    plan
}

fn describe(plan: &NodePlan, node: &Node) -> Vec<String> {
    let mut lines = Vec::new();
    for (kind, list) in [("annotation", &plan.annotations), ("label", &plan.labels)] {
        for r in list {
            let note = if r.kept_existing {
                " (kept the existing value of the new key; the legacy value differs)"
            } else {
                ""
            };
            lines.push(format!("{kind} {} -> {}{note}", r.from, r.to));
        }
    }
    if plan.conditions.is_some() {
        let legacy = node
            .status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten());
        for c in legacy.filter(|c| c.type_.starts_with(LEGACY_PREFIX)) {
            if let Some(to) = renamed_key(&c.type_) {
                lines.push(format!("condition {} -> {to}", c.type_));
            }
        }
    }
    if plan.taints.is_some() {
        let legacy = node.spec.iter().flat_map(|s| s.taints.iter().flatten());
        for t in legacy {
            if let Some(to) = renamed_taint_key(&t.key) {
                lines.push(format!("taint {}:{} -> {to}:{}", t.key, t.effect, t.effect));
            }
        }
    }
    for key in &plan.skipped {
        lines.push(format!("left alone: {key} (its Skyhook is not migrated)"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus};
    use kube::api::ObjectMeta;

    fn node(annotations: &[(&str, &str)], labels: &[(&str, &str)]) -> Node {
        let map = |kv: &[(&str, &str)]| {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                annotations: Some(map(annotations)),
                labels: Some(map(labels)),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                taints: Some(vec![
                    Taint {
                        key: "skyhook.nvidia.com".into(),
                        value: Some("runtime-required".into()),
                        effect: "NoSchedule".into(),
                        ..Taint::default()
                    },
                    Taint {
                        key: "other".into(),
                        effect: "NoSchedule".into(),
                        ..Taint::default()
                    },
                ]),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![
                    NodeCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        ..NodeCondition::default()
                    },
                    NodeCondition {
                        type_: "skyhook.nvidia.com/demo/NotReady".into(),
                        status: "False".into(),
                        ..NodeCondition::default()
                    },
                ]),
                ..NodeStatus::default()
            }),
        }
    }

    fn all(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn m1_migrate_renames_every_go_operator_key() {
        assert_eq!(
            renamed_key("skyhook.nvidia.com/nodeState_demo").as_deref(),
            Some("nodewright.nvidia.com/nodeState_demo")
        );
        assert_eq!(
            renamed_key("skyhook.nvidia.com/autoTaint_skyhook.nvidia.com").as_deref(),
            Some("nodewright.nvidia.com/autoTaint_nodewright.nvidia.com")
        );
        assert_eq!(
            renamed_key("skyhook.nvidia.com/autoTaint_example.com/x").as_deref(),
            Some("nodewright.nvidia.com/autoTaint_example.com/x")
        );
        assert_eq!(renamed_key("nodewright.nvidia.com/ignore"), None);
        assert_eq!(
            renamed_taint_key("skyhook.nvidia.com").as_deref(),
            Some("nodewright.nvidia.com")
        );
        assert_eq!(owner_of("skyhook.nvidia.com/cordon_demo"), Some("demo"));
        assert_eq!(owner_of("skyhook.nvidia.com/demo/Erroring"), Some("demo"));
        assert_eq!(owner_of("skyhook.nvidia.com/ignore"), None);
    }

    #[test]
    fn m1_migrate_node_plan_renames_and_adopts() {
        let n = node(
            &[
                ("skyhook.nvidia.com/nodeState_demo", "{}"),
                ("skyhook.nvidia.com/status_demo", "in_progress"),
                ("skyhook.nvidia.com/cordon_demo", "true"),
                ("skyhook.nvidia.com/status_other", "complete"),
                ("unrelated", "x"),
            ],
            &[
                ("skyhook.nvidia.com/status_demo", "in_progress"),
                ("skyhook.nvidia.com/ignore", "true"),
            ],
        );
        let plan = plan_node(&n, &all(&["demo"]), &|owner, v| format!("{owner}:{v}"));
        let to: Vec<(&str, &str)> = plan
            .annotations
            .iter()
            .map(|r| (r.to.as_str(), r.value.as_str()))
            .collect();
        assert_eq!(
            to,
            vec![
                ("nodewright.nvidia.com/cordon_demo", "true"),
                ("nodewright.nvidia.com/nodeState_demo", "demo:{}"),
                ("nodewright.nvidia.com/status_demo", "in_progress"),
            ]
        );
        assert_eq!(plan.labels.len(), 2);
        assert_eq!(plan.skipped, vec!["skyhook.nvidia.com/status_other"]);
        let conditions = plan.conditions.clone().unwrap_or_default();
        assert_eq!(conditions[1].type_, "nodewright.nvidia.com/demo/NotReady");
        let taints = plan.taints.clone().unwrap_or_default();
        assert_eq!(taints[0].key, "nodewright.nvidia.com");
        assert_eq!(taints[1].key, "other");
        assert!(plan.lines.iter().any(|l| l.starts_with("taint skyhook")));
    }

    #[test]
    fn m1_migrate_keeps_an_existing_new_key() {
        let n = node(
            &[
                ("skyhook.nvidia.com/status_demo", "in_progress"),
                ("nodewright.nvidia.com/status_demo", "complete"),
            ],
            &[],
        );
        let plan = plan_node(&n, &all(&["demo"]), &|_, v| v.to_string());
        assert_eq!(plan.annotations[0].value, "complete");
        assert!(plan.annotations[0].kept_existing);
    }

    #[test]
    fn m1_migrate_second_run_changes_nothing() {
        let mut n = node(&[("nodewright.nvidia.com/status_demo", "complete")], &[]);
        n.spec = None;
        n.status = None;
        let plan = plan_node(&n, &all(&["demo"]), &|_, v| v.to_string());
        assert!(plan.is_empty(), "{plan:?}");
    }
}
