//! Expectations on the Kubernetes Events the operator emitted over the run (through the
//! interpreter, after the write each describes succeeded).

use nodewright_core::EventSpec;
use serde::{Deserialize, Serialize};

use super::Report;

/// Events selected by these fields (unset = any), counted over the run so far. Without
/// `count`, `atLeast` or `atMost`, at least one must match.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventExpect {
    /// Event reason (`ResetNodeState`, `MarkComplete`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Event action (`Reboot`, `State`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Kind of the object it is about (`Node`, `NodeWright`, `Job`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name of the object it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Warning (true) or Normal (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<bool>,
    /// Text the message contains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
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

impl EventExpect {
    fn matches(&self, e: &EventSpec) -> bool {
        let ok = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        ok(&self.reason, &e.reason)
            && ok(&self.action, &e.action)
            && ok(&self.kind, &e.regarding.kind)
            && ok(&self.name, &e.regarding.name)
            && self.warning.is_none_or(|w| w == e.warning)
            && self
                .message
                .as_deref()
                .is_none_or(|m| e.message.contains(m))
    }

    /// Checks the count of matching `events`.
    pub fn check(&self, events: &[EventSpec], report: &mut Report) {
        let n = events.iter().filter(|e| self.matches(e)).count();
        if !super::counted(n, self.count, self.at_least, self.at_most) {
            let what = serde_json::to_string(self).unwrap_or_default();
            report.fail(format!("{n} Events match {what}"));
        }
    }
}
