//! The core's errors: why a pass could not do everything it meant to for one NodeWright (the
//! shell backs off and logs them), and why a NodeWright's view could not be built.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// One error of a pass, for one NodeWright; it displays as `nodewright <name>: <what>`.
#[derive(Clone, Debug, Error, PartialEq, Eq, Serialize, Deserialize)]
#[error("nodewright {nodewright}: {kind}")]
pub struct PlanError {
    /// The NodeWright concerned.
    pub nodewright: String,
    /// What went wrong.
    pub kind: PlanErrorKind,
}

/// What went wrong in a pass for one NodeWright.
#[derive(Clone, Debug, Error, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "detail", rename_all = "camelCase")]
pub enum PlanErrorKind {
    /// The view could not be built (an invalid selector slipped past admission).
    #[error("{0}")]
    InvalidView(#[from] ViewError),
    /// The package dependency graph is invalid (cycle, unknown dependency).
    #[error("{0}")]
    InvalidGraph(String),
    /// A selected node's node-state annotation cannot be parsed.
    #[error("nodeState on node {0} cannot be parsed")]
    UnreadableState(String),
    /// A config update cannot be decided while some node state is unreadable.
    #[error("config sync needs every node state readable")]
    ConfigSyncUnreadable,
    /// Deletion is blocked; the message is the DeletionBlocked condition's.
    #[error("{0}")]
    DeletionBlocked(String),
}

impl PlanError {
    /// An error of `kind` for NodeWright `nodewright`.
    pub fn new(nodewright: &str, kind: impl Into<PlanErrorKind>) -> Self {
        PlanError {
            nodewright: nodewright.to_string(),
            kind: kind.into(),
        }
    }
}

/// Why a NodeWright's view of the cluster could not be built.
#[derive(Clone, Debug, Error, PartialEq, Eq, Serialize, Deserialize)]
pub enum ViewError {
    /// `spec.nodeSelectors` is not a valid label selector.
    #[error("invalid nodeSelectors: {0}")]
    InvalidSelector(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r2_1_messages_users_see_are_kept() {
        let e = PlanError::new("demo", ViewError::InvalidSelector("bad key".into()));
        assert_eq!(
            e.to_string(),
            "nodewright demo: invalid nodeSelectors: bad key"
        );
        let e = PlanError::new("demo", PlanErrorKind::UnreadableState("n1".into()));
        assert_eq!(
            e.to_string(),
            "nodewright demo: nodeState on node n1 cannot be parsed"
        );
        let e = PlanError::new("demo", PlanErrorKind::ConfigSyncUnreadable);
        assert_eq!(
            e.to_string(),
            "nodewright demo: config sync needs every node state readable"
        );
    }
}
