//! JSON merge patches (RFC 7386): the two-way diff the shell sends so that only changed fields
//! reach the apiserver, and its application (the simulator's apiserver applies patches with it).

use serde_json::{Map, Value};

/// The merge patch that turns `old` into `new`; `None` when they are equal.
///
/// Objects are diffed recursively, removed keys become `null`, arrays and scalars are replaced.
pub fn diff(old: &Value, new: &Value) -> Option<Value> {
    if old == new {
        return None;
    }
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = Map::new();
            for (key, old_value) in o {
                match n.get(key) {
                    None => {
                        patch.insert(key.clone(), Value::Null);
                    }
                    Some(new_value) => {
                        if let Some(d) = diff(old_value, new_value) {
                            patch.insert(key.clone(), d);
                        }
                    }
                }
            }
            for (key, new_value) in n {
                if !o.contains_key(key) {
                    patch.insert(key.clone(), strip_nulls(new_value));
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        _ => Some(strip_nulls(new)),
    }
}

/// Drops `null` members of objects: in a merge patch they would mean "delete".
fn strip_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Applies a merge patch to `target`: `null` members delete, objects merge, the rest replaces.
pub fn apply(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(map) = target else {
        return;
    };
    for (k, v) in patch {
        if v.is_null() {
            map.remove(k);
        } else {
            apply(map.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_diff_equal_is_none() {
        assert_eq!(diff(&json!({"a": 1}), &json!({"a": 1})), None);
    }

    #[test]
    fn merge_diff_changed_removed_added() {
        let old = json!({"a": 1, "b": {"x": 1, "y": 2}, "c": [1, 2]});
        let new = json!({"a": 2, "b": {"x": 1}, "c": [1, 2], "d": {"n": null, "m": 1}});
        assert_eq!(
            diff(&old, &new),
            Some(json!({"a": 2, "b": {"y": null}, "d": {"m": 1}}))
        );
    }

    #[test]
    fn merge_diff_array_replaced_whole() {
        assert_eq!(
            diff(&json!({"c": [1, 2]}), &json!({"c": [2]})),
            Some(json!({"c": [2]}))
        );
    }

    #[test]
    fn merge_diff_then_apply_round_trips() {
        let a = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1], "g": null});
        let b = json!({"a": 1, "b": {"c": 5}, "e": [2], "f": "x"});
        let patch = diff(&a, &b).unwrap_or_default();
        let mut t = a.clone();
        apply(&mut t, &patch);
        assert_eq!(t, b);
    }

    #[test]
    fn merge_added_nulls_are_not_sent_as_deletions() {
        let patch = diff(&json!({}), &json!({"x": {"y": null, "z": 1}})).unwrap_or_default();
        let mut t = json!({"x": {"y": 7}});
        apply(&mut t, &patch);
        assert_eq!(t, json!({"x": {"y": 7, "z": 1}}));
    }
}
