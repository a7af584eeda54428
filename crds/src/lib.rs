//! The NodeWright API: custom resource types (`nodewright.nvidia.com/v1alpha1`), the per-node
//! state document, and admission validation and defaulting as pure functions.
//!
//! Everything here is shared by the operator's webhook, the core, the simulator and the CLI.

pub mod crdgen;
pub mod defaults;
pub mod duration;
pub mod keys;
pub mod limits;
pub mod names;
pub mod node_state;
pub mod nodewright;
pub mod policy;
pub mod quantity;
pub mod selector;
pub mod status;
pub mod validation;
pub mod version;

pub use node_state::{NodeState, NodeStateError, PackageStatus};
pub use nodewright::{
    DeploymentPolicyOptions, DrainConfig, Interrupt, InterruptType, InterruptionBudget, NodeWright,
    NodeWrightSpec, Package, ResourceRequirements, SequencingMode, Uninstall,
};
pub use policy::{
    Compartment, DeploymentBudget, DeploymentPolicy, DeploymentPolicySpec, DeploymentStrategy,
    ExponentialStrategy, FixedStrategy, LinearStrategy, PolicyDefault, StrategyType,
};
pub use status::{BatchProcessingState, CompartmentStatus, NodeWrightStatus, Stage, State, Status};
pub use validation::ValidationError;

/// API group of both custom resources.
pub const GROUP: &str = "nodewright.nvidia.com";
/// The only served and stored version.
pub const VERSION: &str = "v1alpha1";
