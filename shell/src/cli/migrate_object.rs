//! `migrate`, object part: a `skyhook.nvidia.com/v1alpha1` Skyhook or DeploymentPolicy turned
//! into ours with the same spec. Anything our types cannot hold, or that our admission rejects,
//! is a problem that keeps the object (and its nodes) out of the migration; nothing is dropped.

use std::collections::BTreeMap;

use kube::api::DynamicObject;
use nodewright_crds::validation::{validate_policy, validate_spec};
use nodewright_crds::{DeploymentPolicy, DeploymentPolicySpec, NodeWrightSpec};
use serde_json::{Map, Value, json};

use super::migrate_node::renamed_key;

/// Annotation kubectl keeps of the last applied manifest; it names the legacy group.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// One legacy object and what it becomes.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectPlan {
    /// `NodeWright` or `DeploymentPolicy`.
    pub kind: &'static str,
    /// Object name (kept).
    pub name: String,
    /// The object to create.
    pub object: Value,
    /// Status to write after creation (NodeWright only).
    pub status: Option<Value>,
    /// Why the object cannot be migrated as it is; empty = it can.
    pub problems: Vec<String>,
    /// What changes besides the group (renamed keys, dropped kubectl bookkeeping).
    pub notes: Vec<String>,
}

/// Paths present in `original` that `typed` (its round trip through our types) lost. Empty
/// values (null, `{}`, `[]`, `""`, `false`, `0`) may vanish: they mean the default.
fn lost_paths(original: &Value, typed: &Value, path: &str, out: &mut Vec<String>) {
    let Value::Object(map) = original else {
        return;
    };
    for (key, value) in map {
        let child = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        match typed.get(key) {
            Some(t) => match (value, t) {
                (Value::Object(_), _) => lost_paths(value, t, &child, out),
                (Value::Array(a), Value::Array(b)) => {
                    for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
                        lost_paths(x, y, &format!("{child}[{i}]"), out);
                    }
                }
                _ => {}
            },
            None if is_empty_value(value) => {}
            None => out.push(child),
        }
    }
}

fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// Metadata keys renamed to ours; `kubectl.kubernetes.io/last-applied-configuration` dropped.
fn renamed_map(map: &BTreeMap<String, String>, what: &str, notes: &mut Vec<String>) -> Value {
    let mut out = Map::new();
    for (k, v) in map {
        if k == LAST_APPLIED {
            notes.push(format!("{what} {k} not copied (it names the legacy group)"));
            continue;
        }
        match renamed_key(k) {
            Some(to) => {
                notes.push(format!("{what} {k} -> {to}"));
                out.insert(to, Value::String(v.clone()));
            }
            None => {
                out.insert(k.clone(), Value::String(v.clone()));
            }
        }
    }
    Value::Object(out)
}

fn metadata(legacy: &DynamicObject, notes: &mut Vec<String>) -> Value {
    let empty = BTreeMap::new();
    let m = &legacy.metadata;
    json!({
        "name": m.name.clone().unwrap_or_default(),
        "labels": renamed_map(m.labels.as_ref().unwrap_or(&empty), "label", notes),
        "annotations": renamed_map(m.annotations.as_ref().unwrap_or(&empty), "annotation", notes),
    })
}

/// The spec typed as `T`, with every lost field and decode error as a problem.
fn typed_spec<T>(spec: &Value, problems: &mut Vec<String>) -> Option<T>
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    match serde_json::from_value::<T>(spec.clone()) {
        Ok(t) => {
            let round = serde_json::to_value(&t).unwrap_or(Value::Null);
            let mut lost = Vec::new();
            lost_paths(spec, &round, "spec", &mut lost);
            for p in lost {
                problems.push(format!(
                    "field {p} has no counterpart in nodewright.nvidia.com"
                ));
            }
            Some(t)
        }
        Err(e) => {
            problems.push(format!("spec cannot be read: {e}"));
            None
        }
    }
}

/// Legacy status with condition types renamed and `observedGeneration` moved to the new
/// object's first generation when the legacy status had caught up with its spec.
fn converted_status(legacy: &DynamicObject) -> Option<Value> {
    let mut status = legacy.data.get("status")?.clone();
    let Value::Object(map) = &mut status else {
        return None;
    };
    if let Some(Value::Array(conditions)) = map.get_mut("conditions") {
        for c in conditions {
            let renamed = c.get("type").and_then(Value::as_str).and_then(renamed_key);
            if let (Some(to), Some(obj)) = (renamed, c.as_object_mut()) {
                obj.insert("type".into(), Value::String(to));
            }
        }
    }
    let caught_up = map
        .get("observedGeneration")
        .and_then(Value::as_i64)
        .is_some_and(|g| Some(g) == legacy.metadata.generation);
    if caught_up {
        map.insert("observedGeneration".into(), json!(1));
    } else {
        map.remove("observedGeneration");
    }
    Some(status)
}

/// The NodeWright a legacy Skyhook becomes.
pub fn plan_skyhook(legacy: &DynamicObject) -> ObjectPlan {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    let spec = legacy.data.get("spec").cloned().unwrap_or(json!({}));
    if let Some(typed) = typed_spec::<NodeWrightSpec>(&spec, &mut problems)
        && let Err(e) = validate_spec(&typed)
    {
        problems.push(format!("our admission rejects it: {e}"));
    }
    let object = json!({
        "apiVersion": "nodewright.nvidia.com/v1alpha1",
        "kind": "NodeWright",
        "metadata": metadata(legacy, &mut notes),
        "spec": spec,
    });
    ObjectPlan {
        kind: "NodeWright",
        name: legacy.metadata.name.clone().unwrap_or_default(),
        object,
        status: converted_status(legacy),
        problems,
        notes,
    }
}

/// The DeploymentPolicy a legacy DeploymentPolicy becomes.
pub fn plan_policy(legacy: &DynamicObject) -> ObjectPlan {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    let name = legacy.metadata.name.clone().unwrap_or_default();
    let spec = legacy.data.get("spec").cloned().unwrap_or(json!({}));
    if let Some(typed) = typed_spec::<DeploymentPolicySpec>(&spec, &mut problems)
        && let Err(e) = validate_policy(&DeploymentPolicy::new(&name, typed))
    {
        problems.push(format!("our admission rejects it: {e}"));
    }
    let object = json!({
        "apiVersion": "nodewright.nvidia.com/v1alpha1",
        "kind": "DeploymentPolicy",
        "metadata": metadata(legacy, &mut notes),
        "spec": spec,
    });
    ObjectPlan {
        kind: "DeploymentPolicy",
        name,
        object,
        status: None,
        problems,
        notes,
    }
}

/// True when an existing object of ours already carries the legacy spec (a second run, or a
/// first run that stopped after creating it).
pub fn same_spec(plan: &ObjectPlan, existing: &Value) -> bool {
    let wanted = plan.object.get("spec");
    let have = existing.get("spec");
    match plan.kind {
        "NodeWright" => parse::<NodeWrightSpec>(wanted) == parse::<NodeWrightSpec>(have),
        _ => parse::<DeploymentPolicySpec>(wanted) == parse::<DeploymentPolicySpec>(have),
    }
}

fn parse<T: serde::de::DeserializeOwned>(v: Option<&Value>) -> Option<T> {
    serde_json::from_value(v?.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legacy(kind: &str, body: Value) -> DynamicObject {
        let mut v = json!({
            "apiVersion": "skyhook.nvidia.com/v1alpha1",
            "kind": kind,
            "metadata": {
                "name": "demo",
                "generation": 4,
                "annotations": {
                    "skyhook.nvidia.com/pause": "true",
                    "kubectl.kubernetes.io/last-applied-configuration": "{}",
                    "team": "x"
                },
                "finalizers": ["skyhook.nvidia.com/skyhook"]
            }
        });
        if let (Some(o), Value::Object(b)) = (v.as_object_mut(), body) {
            o.extend(b);
        }
        serde_json::from_value(v).expect("dynamic object")
    }

    #[test]
    fn m1_migrate_skyhook_keeps_spec_status_and_pause() {
        let sky = legacy(
            "Skyhook",
            json!({
                "spec": {"packages": {"pa": {"version": "1.0", "image": "ghcr.io/x/a"}}},
                "status": {
                    "observedGeneration": 4,
                    "configUpdates": {"pa": ["k"]},
                    "conditions": [{"type": "skyhook.nvidia.com/Transition", "status": "True"}]
                }
            }),
        );
        let plan = plan_skyhook(&sky);
        assert!(plan.problems.is_empty(), "{:?}", plan.problems);
        let ann = &plan.object["metadata"]["annotations"];
        assert_eq!(ann["nodewright.nvidia.com/pause"], "true");
        assert_eq!(ann["team"], "x");
        assert!(ann.get(LAST_APPLIED).is_none());
        assert!(plan.object["metadata"].get("finalizers").is_none());
        assert_eq!(plan.object["spec"], sky.data["spec"]);
        let status = plan.status.expect("status");
        assert_eq!(status["observedGeneration"], 1);
        assert_eq!(status["configUpdates"]["pa"][0], "k");
        assert_eq!(
            status["conditions"][0]["type"],
            "nodewright.nvidia.com/Transition"
        );
    }

    #[test]
    fn m1_migrate_reports_what_cannot_be_expressed() {
        let sky = legacy(
            "Skyhook",
            json!({"spec": {
                "unknownField": {"x": 1},
                "interruptionBudget": {"count": 0},
                "packages": {"pa": {"version": "1.0", "image": "ghcr.io/x/a"}}
            }}),
        );
        let plan = plan_skyhook(&sky);
        assert!(
            plan.problems
                .iter()
                .any(|p| p.contains("spec.unknownField")),
            "{:?}",
            plan.problems
        );
        assert!(
            plan.problems
                .iter()
                .any(|p| p.contains("count must be at least 1")),
            "{:?}",
            plan.problems
        );
    }

    #[test]
    fn m1_migrate_policy_and_second_run_detection() {
        let dp = legacy(
            "DeploymentPolicy",
            json!({"spec": {"default": {"budget": {"percent": 50}}}}),
        );
        let plan = plan_policy(&dp);
        assert!(plan.problems.is_empty(), "{:?}", plan.problems);
        assert!(same_spec(&plan, &plan.object.clone()));
        let other = json!({"spec": {"default": {"budget": {"percent": 10}}}});
        assert!(!same_spec(&plan, &other));
    }
}
