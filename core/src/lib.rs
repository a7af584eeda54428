//! NodeWright's lifecycle core: a pure, deterministic function from a [`Snapshot`] of the
//! cluster, the operator [`Options`] and `now` to a [`Plan`] of [`Effect`]s.
//!
//! No I/O, no clock, no randomness: the shell reads the cluster and applies the plan.

pub mod effect;
pub mod error;
pub mod node_keys;
pub mod options;
pub mod parse_cache;
pub mod plan;
pub mod slim;
pub mod snapshot;

pub use effect::{Context, DeletionReason, Effect, EntryChange, EventSpec, NodePatch, ObjectRef};
pub use error::{PlanError, PlanErrorKind, ViewError};
pub use node_keys::NodeKeys;
pub use options::{Options, OptionsError};
pub use parse_cache::NodeStateCache;
pub use plan::{MetricSample, Plan};
pub use slim::{
    Identity, Interner, SlimContainerStatus, SlimJob, SlimJobCondition, SlimJobStatus, SlimMeta,
    SlimPod, SlimPodStatus, Tagged, Tags,
};
pub use snapshot::{ClusterInfo, Snapshot, shared};

pub mod jobs;
pub mod lifecycle;
pub mod rollout;

pub use lifecycle::{reconcile, reconcile_with};
