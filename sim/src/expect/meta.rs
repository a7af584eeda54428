//! Expectations on a node's own metadata: taints, raw annotation and label values.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Taint};
use serde::{Deserialize, Serialize};

use super::Report;

/// What a node's metadata must show; unset fields are not checked.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeMetaExpect {
    /// Taints that must be present (matched by key and effect; the value too when given).
    #[serde(default)]
    pub taints: Vec<TaintExpect>,
    /// Taints that must be absent (by key, and effect when given).
    #[serde(default)]
    pub taints_absent: Vec<TaintExpect>,
    /// Annotations that must have exactly these values.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Annotations that must be absent.
    #[serde(default)]
    pub annotations_absent: Vec<String>,
    /// Labels that must have exactly these values.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Labels that must be absent.
    #[serde(default)]
    pub labels_absent: Vec<String>,
}

/// A taint by key, with optional effect and value.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaintExpect {
    /// Taint key.
    pub key: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`; any when unset.
    #[serde(default)]
    pub effect: Option<String>,
    /// Taint value; any when unset.
    #[serde(default)]
    pub value: Option<String>,
}

impl TaintExpect {
    fn matches(&self, t: &Taint) -> bool {
        t.key == self.key
            && self.effect.as_deref().is_none_or(|e| e == t.effect)
            && self
                .value
                .as_deref()
                .is_none_or(|v| Some(v) == t.value.as_deref())
    }
}

impl NodeMetaExpect {
    /// Checks `node` (named `name`).
    pub fn check(&self, name: &str, node: &Node, report: &mut Report) {
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        for want in &self.taints {
            if !taints.iter().any(|t| want.matches(t)) {
                report.fail(format!("node {name} lacks taint {want:?}"));
            }
        }
        for unwanted in &self.taints_absent {
            if taints.iter().any(|t| unwanted.matches(t)) {
                report.fail(format!("node {name} still has taint {unwanted:?}"));
            }
        }
        let empty = BTreeMap::new();
        let annotations = node.metadata.annotations.as_ref().unwrap_or(&empty);
        values(name, "annotation", annotations, &self.annotations, report);
        absent(
            name,
            "annotation",
            annotations,
            &self.annotations_absent,
            report,
        );
        let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
        values(name, "label", labels, &self.labels, report);
        absent(name, "label", labels, &self.labels_absent, report);
    }
}

fn values(
    node: &str,
    what: &str,
    have: &BTreeMap<String, String>,
    want: &BTreeMap<String, String>,
    report: &mut Report,
) {
    for (k, v) in want {
        if have.get(k) != Some(v) {
            report.fail(format!(
                "node {node} {what} {k} is {:?}, want {v:?}",
                have.get(k)
            ));
        }
    }
}

fn absent(
    node: &str,
    what: &str,
    have: &BTreeMap<String, String>,
    keys: &[String],
    report: &mut Report,
) {
    for k in keys {
        if let Some(v) = have.get(k) {
            report.fail(format!("node {node} still has {what} {k}={v:?}"));
        }
    }
}
