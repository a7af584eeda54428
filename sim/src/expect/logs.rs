//! Expectations on the operator's log lines over the run (what the shared interpreter logged,
//! collected by [`crate::logs`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Report;
use crate::logs::LogLine;

/// Log lines selected by these fields (unset = any), counted over the run so far. Without
/// `count`, `atLeast` or `atMost`, at least one must match.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogExpect {
    /// Level (`warn`, `INFO`, ...; any case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// Text the message contains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Fields with these exact values (the line's own or its spans': `node`, `package`,
    /// `stage`, `nodewright`, `reason`, `job`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, String>,
    /// Exactly this many match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    /// At least this many match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_least: Option<usize>,
    /// At most this many match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_most: Option<usize>,
}

impl LogExpect {
    fn matches(&self, line: &LogLine) -> bool {
        self.level
            .as_deref()
            .is_none_or(|l| l.eq_ignore_ascii_case(&line.level))
            && self
                .message
                .as_deref()
                .is_none_or(|m| line.message.contains(m))
            && self
                .fields
                .iter()
                .all(|(k, v)| line.fields.get(k) == Some(v))
    }

    /// Checks the count of matching `lines`.
    pub fn check(&self, lines: &[LogLine], report: &mut Report) {
        let n = lines.iter().filter(|l| self.matches(l)).count();
        if !super::counted(n, self.count, self.at_least, self.at_most) {
            let what = serde_json::to_string(self).unwrap_or_default();
            report.fail(format!("{n} log lines match {what}"));
        }
    }
}
