//! NodeWright status and the enumerations of the state machine (01-api.md §2.7, §3.4, §6.1).

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::node_state::NodeState;

/// Observed state of a NodeWright, written only by the operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeWrightStatus {
    /// Generation the last pass acted on (decision D7).
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    #[schemars(range(min = 0))]
    pub observed_generation: i64,
    /// Copy of each node's node-state document.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_state: BTreeMap<String, NodeState>,
    /// Node status per node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_status: BTreeMap<String, Status>,
    /// Overall rollout status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// Standard conditions, keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Last seen boot id per node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_boot_ids: BTreeMap<String, String>,
    /// Nodes picked into the current batch and when (sticky batch).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_priority: BTreeMap<String, Time>,
    /// Count of entries ever removed from `nodePriority`.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub node_order_offset: i32,
    /// Per package, the configMap keys of the propagating config update.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config_updates: BTreeMap<String, Vec<String>>,
    /// Per-compartment rollout view.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub compartment_statuses: BTreeMap<String, CompartmentStatus>,
    /// Selected nodes whose status is `in_progress` or `erroring`.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    #[schemars(extend("default" = 0))]
    pub nodes_in_progress: i32,
    /// `<complete>/<selected>` nodes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("default" = "0/0"))]
    pub complete_nodes: String,
    /// `<pkg>:<ver>` of every spec package, sorted, comma-joined.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("default" = ""))]
    pub package_list: String,
}

fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}

fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}

/// Rollout view of one compartment (01-api.md §3.4).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompartmentStatus {
    /// Nodes assigned to the compartment.
    pub matched: i32,
    /// Ceiling computed from the budget.
    pub ceiling: i32,
    /// Member nodes in progress (erroring not counted).
    pub in_progress: i32,
    /// Member nodes complete.
    pub completed: i32,
    /// `completed * 100 / matched`.
    pub progress_percent: i32,
    /// Batch state, present when the compartment has a strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_state: Option<BatchProcessingState>,
}

/// Batch progress of a compartment; zero fields are omitted in JSON (01-api.md §3.4).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchProcessingState {
    /// Batch number, starting at 1.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub current_batch: i32,
    /// Failed batches in a row.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub consecutive_failures: i32,
    /// Checkpoint: complete members at last evaluation.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub completed_nodes: i32,
    /// Checkpoint: erroring members at last evaluation.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub failed_nodes: i32,
    /// The compartment is stopped until reset.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub should_stop: bool,
    /// Size of the last evaluated batch.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub last_batch_size: i32,
    /// Whether the last evaluated batch failed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_batch_failed: bool,
}

impl BatchProcessingState {
    /// A fresh batch state: `{currentBatch: 1}`.
    pub fn fresh() -> Self {
        Self {
            current_batch: 1,
            ..Self::default()
        }
    }
}

macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire spelling.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// Parses the wire spelling.
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

string_enum! {
    /// Lifecycle stage of a package on a node (01-api.md §6.1).
    Stage {
        /// Run uninstall scripts.
        Uninstall = "uninstall",
        /// Run the package's interrupt after an uninstall.
        UninstallInterrupt = "uninstall-interrupt",
        /// Install a higher version over a lower one.
        Upgrade = "upgrade",
        /// First install of this version.
        Apply = "apply",
        /// Run the (merged) interrupt on the host.
        Interrupt = "interrupt",
        /// Verification after the interrupt.
        PostInterrupt = "post-interrupt",
        /// Apply configuration.
        Config = "config",
    }
}

impl Stage {
    /// True for stages that run the interrupt Job rather than script + check containers.
    pub fn is_interrupt(self) -> bool {
        matches!(self, Stage::Interrupt | Stage::UninstallInterrupt)
    }

    /// True for `uninstall` and `uninstall-interrupt` (the uninstall cycle).
    pub fn in_uninstall_cycle(self) -> bool {
        matches!(self, Stage::Uninstall | Stage::UninstallInterrupt)
    }
}

string_enum! {
    /// Execution state of an entry's stage (01-api.md §6.1).
    State {
        /// The stage succeeded.
        Complete = "complete",
        /// An executor is created or running.
        InProgress = "in_progress",
        /// Interrupt skipped; another package's interrupt won the node.
        Skipped = "skipped",
        /// Attempts are failing, or the stage timed out.
        Erroring = "erroring",
        /// Not written by the operator; treated as erroring.
        Unknown = "unknown",
    }
}

/// Node status and overall status (01-api.md §6.1); unrecognised strings read as `unknown`.
#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    JsonSchema,
)]
pub enum Status {
    /// All active packages complete.
    #[serde(rename = "complete")]
    Complete,
    /// Picked but ignored or with untolerated taints; or policy missing.
    #[serde(rename = "blocked")]
    Blocked,
    /// Waiting for a batch or a higher-priority NodeWright.
    #[serde(rename = "waiting")]
    Waiting,
    /// NodeWright disabled.
    #[serde(rename = "disabled")]
    Disabled,
    /// NodeWright paused.
    #[serde(rename = "paused")]
    Paused,
    /// Work started.
    #[serde(rename = "in_progress")]
    InProgress,
    /// A stage failed terminally.
    #[serde(rename = "erroring")]
    Erroring,
    /// Not yet determined.
    #[default]
    #[serde(rename = "unknown", other)]
    Unknown,
}

impl Status {
    /// Every value, in declaration order.
    pub const ALL: &'static [Status] = &[
        Status::Complete,
        Status::Blocked,
        Status::Waiting,
        Status::Disabled,
        Status::Paused,
        Status::InProgress,
        Status::Erroring,
        Status::Unknown,
    ];

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Complete => "complete",
            Status::Blocked => "blocked",
            Status::Waiting => "waiting",
            Status::Disabled => "disabled",
            Status::Paused => "paused",
            Status::InProgress => "in_progress",
            Status::Erroring => "erroring",
            Status::Unknown => "unknown",
        }
    }

    /// Parses the wire spelling; anything unrecognised is `Unknown`.
    pub fn parse_lenient(text: &str) -> Self {
        Status::ALL
            .iter()
            .copied()
            .find(|s| s.as_str() == text)
            .unwrap_or(Status::Unknown)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Status;

    /// The lifecycle reads back the node statuses it just wrote as their parsed spelling.
    #[test]
    fn every_status_parses_back_from_its_wire_spelling() {
        for s in Status::ALL {
            assert_eq!(Status::parse_lenient(s.as_str()), *s);
        }
        assert_eq!(Status::parse_lenient("no such status"), Status::Unknown);
    }
}
