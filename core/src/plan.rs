//! The core's output: ordered effects, a requeue hint and the metric values of this pass.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::effect::Effect;
use crate::error::PlanError;

/// What one pass decided.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Writes, in the order they must be applied.
    pub effects: Vec<Effect>,
    /// When to run the next pass even if nothing changes; `None` means no requeue.
    pub requeue_after: Option<Duration>,
    /// Gauge values: the complete set for this pass; the shell replaces what it exports.
    pub metrics: Vec<MetricSample>,
    /// Errors that should make the shell back off (the pass still emitted what it could).
    pub errors: Vec<PlanError>,
    /// D28: cached executor pods no pass reads any more (their Job is `Complete` and recorded);
    /// the shell drops them from its pod cache while they are unchanged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settled_pods: Vec<crate::jobs::SettledPod>,
}

/// One gauge value with its labels, name without the `nodewright_` prefix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricSample {
    /// Metric name without prefix, e.g. `status` or `rollout_current_batch`.
    pub name: String,
    /// Label pairs in a fixed order.
    pub labels: Vec<(String, String)>,
    /// Value.
    pub value: f64,
}

impl Plan {
    /// The errors as the messages users see (`nodewright <name>: <what>`).
    pub fn error_messages(&self) -> Vec<String> {
        self.errors.iter().map(ToString::to_string).collect()
    }

    /// Keeps the smaller of the current and the given requeue (02-lifecycle.md §3 [Fix]).
    pub fn requeue_at_most(&mut self, after: Duration) {
        self.requeue_after = Some(match self.requeue_after {
            Some(current) => current.min(after),
            None => after,
        });
    }
}
