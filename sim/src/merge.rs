//! JSON merge patch (RFC 7386): the difference of two documents and its application.

use serde_json::{Map, Value};

/// The merge patch turning `from` into `to`; `None` when they are equal.
pub fn diff(from: &Value, to: &Value) -> Option<Value> {
    if from == to {
        return None;
    }
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            let mut out = Map::new();
            for (k, va) in a {
                match b.get(k) {
                    None => {
                        out.insert(k.clone(), Value::Null);
                    }
                    Some(vb) => {
                        if let Some(d) = diff(va, vb) {
                            out.insert(k.clone(), d);
                        }
                    }
                }
            }
            for (k, vb) in b {
                if !a.contains_key(k) {
                    out.insert(k.clone(), vb.clone());
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        _ => Some(to.clone()),
    }
}

/// Applies a merge patch to `target`.
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
    fn merge_round_trip() {
        let a = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1]});
        let b = json!({"a": 1, "b": {"c": 5}, "e": [2], "f": "x"});
        let patch = diff(&a, &b).unwrap();
        let mut t = a.clone();
        apply(&mut t, &patch);
        assert_eq!(t, b);
        assert_eq!(diff(&a, &a), None);
    }
}
