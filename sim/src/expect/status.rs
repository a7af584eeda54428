//! Expectations on a NodeWright's status beyond its Status: conditions and any status field
//! (counters such as `completeNodes`, `compartmentStatuses` batch state) by JSON pointer.

use std::collections::BTreeMap;

use nodewright_crds::NodeWrightStatus;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Report;

/// What one condition of a NodeWright must be.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConditionExpect {
    /// `True`, `False` or `Unknown`; any when unset.
    #[serde(default)]
    pub status: Option<String>,
    /// Reason; any when unset.
    #[serde(default)]
    pub reason: Option<String>,
    /// The condition must not be present at all.
    #[serde(default)]
    pub absent: bool,
}

/// Checks `conditions` (type → expectation) of NodeWright `name`.
pub fn check_conditions(
    name: &str,
    status: Option<&NodeWrightStatus>,
    want: &BTreeMap<String, ConditionExpect>,
    report: &mut Report,
) {
    let empty = Vec::new();
    let have = status.map_or(&empty, |s| &s.conditions);
    for (ty, w) in want {
        let found = have.iter().find(|c| &c.type_ == ty);
        match found {
            Some(_) if w.absent => {
                report.fail(format!("NodeWright {name} still has condition {ty}"))
            }
            None if !w.absent => report.fail(format!("NodeWright {name} has no condition {ty}")),
            Some(c) => {
                let bad_status = w.status.as_deref().is_some_and(|s| s != c.status);
                let bad_reason = w.reason.as_deref().is_some_and(|r| r != c.reason);
                if bad_status || bad_reason {
                    report.fail(format!(
                        "NodeWright {name} condition {ty} is ({}, {}), want {w:?}",
                        c.status, c.reason
                    ));
                }
            }
            None => {}
        }
    }
}

/// Checks status fields by JSON pointer (`/completeNodes`,
/// `/compartmentStatuses/__default__/batchState/currentBatch`); `null` means absent.
pub fn check_fields(
    name: &str,
    status: Option<&NodeWrightStatus>,
    want: &BTreeMap<String, Value>,
    report: &mut Report,
) {
    let json = status
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or(Value::Null);
    for (pointer, w) in want {
        let have = json.pointer(pointer).cloned().unwrap_or(Value::Null);
        if !same(&have, w) {
            report.fail(format!(
                "NodeWright {name} status{pointer} is {have}, want {w}"
            ));
        }
    }
}

/// Equal, numbers compared by value (YAML `2` and JSON `2.0` agree).
fn same(have: &Value, want: &Value) -> bool {
    match (have.as_f64(), want.as_f64()) {
        (Some(a), Some(b)) => a == b,
        _ => have == want,
    }
}
