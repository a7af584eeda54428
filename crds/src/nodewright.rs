//! The `NodeWright` custom resource (01-api.md §2).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::duration::GoDuration;
use crate::status::NodeWrightStatus;

/// Desired state of a NodeWright: which nodes, which packages, how fast (01-api.md §2.2).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "nodewright.nvidia.com",
    version = "v1alpha1",
    kind = "NodeWright",
    plural = "nodewrights",
    singular = "nodewright",
    status = "NodeWrightStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "NodeWright is the Schema for the nodewrights API",
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.status"}"#,
    printcolumn = r#"{"name":"Priority","type":"integer","jsonPath":".spec.priority"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Nodes In-Progress","type":"integer","jsonPath":".status.nodesInProgress"}"#,
    printcolumn = r#"{"name":"Complete Nodes","type":"string","jsonPath":".status.completeNodes"}"#,
    printcolumn = r#"{"name":"Packages","type":"string","jsonPath":".status.packageList"}"#,
    printcolumn = r#"{"name":"Policy","type":"string","jsonPath":".spec.deploymentPolicy"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NodeWrightSpec {
    /// When true, at most one package starts per node per pass.
    #[serde(default)]
    pub serial: bool,
    /// Pods matching this selector block an interrupt on their node; empty means no pod blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub pod_non_interrupt_labels: Option<LabelSelector>,
    /// Selects target nodes by label; empty selects every node.
    #[serde(
        default,
        rename = "nodeSelectors",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub node_selector: Option<LabelSelector>,
    /// Name of a cluster-scoped DeploymentPolicy pacing this rollout.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub deployment_policy: String,
    /// Per-NodeWright overrides of DeploymentPolicy settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_policy_options: Option<DeploymentPolicyOptions>,
    /// Legacy concurrency budget used when no policy is referenced; absent means 100%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruption_budget: Option<InterruptionBudget>,
    /// The package graph, keyed by package name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = crate::limits::MAX_PACKAGES))]
    pub packages: BTreeMap<String, Package>,
    /// Tolerations added to every executor pod and to the node-eligibility check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_tolerations: Vec<Toleration>,
    /// Targeted nodes keep the runtime-required taint until this NodeWright completes on them.
    #[serde(default)]
    pub runtime_required: bool,
    /// With `runtimeRequired`, taint new matching nodes (no `nodewright.nvidia.com/` annotations).
    #[serde(default)]
    pub auto_taint_new_nodes: bool,
    /// With `runtimeRequired`, cordon a node when its runtime-required taint is removed.
    #[serde(default)]
    pub runtime_required_cordon_after: bool,
    /// Ordering across NodeWrights; lower runs first, ties broken by name.
    #[serde(default = "default_priority")]
    #[schemars(range(min = 1))]
    pub priority: i32,
    /// `node`: per-node ordering after higher-priority NodeWrights; `all`: wait for them everywhere.
    #[serde(default)]
    pub sequencing: SequencingMode,
    /// How nodes are drained before interrupts; unset keeps the default drain behaviour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_config: Option<DrainConfig>,
}

fn default_priority() -> i32 {
    200
}

/// Sequencing mode between NodeWrights (01-api.md §2.2).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SequencingMode {
    /// Each node moves on as soon as this NodeWright completes on it.
    #[default]
    Node,
    /// No node starts a later NodeWright until this one is complete on all nodes.
    All,
}

/// A package: an image of host steps plus its dependencies, config and interrupt (01-api.md §2.3).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Package {
    /// Package name; filled from the map key when absent. Users should omit it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(regex(pattern = r"^[a-z][-a-z0-9]{0,41}[a-z]$"), length(max = 43))]
    pub name: String,
    /// Package version (semver); supplies the image tag and drives upgrades.
    pub version: String,
    /// Image repository without tag.
    #[schemars(regex(pattern = r"^\S+$"))]
    pub image: String,
    /// Image digest `sha256:<hex>`; when set the image is pulled by digest.
    #[serde(
        default,
        rename = "containerSHA",
        skip_serializing_if = "String::is_empty"
    )]
    #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
    pub container_sha: String,
    /// Fully-qualified agent image with tag, replacing the operator's agent image for this package.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub agent_image_override: String,
    /// Interrupt to run after config; switches the package into the interrupt lifecycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupt: Option<Interrupt>,
    /// Dependency name to dependency version.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = crate::limits::MAX_DEPENDS_ON))]
    pub depends_on: BTreeMap<String, String>,
    /// ConfigMap key or `*`-glob to the interrupt to run when that key changes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = crate::limits::MAX_CONFIG_INTERRUPTS))]
    pub config_interrupts: BTreeMap<String, Interrupt>,
    /// Configuration data copied into the package ConfigMap.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config_map: BTreeMap<String, String>,
    /// Environment for the stage containers, before the operator's own variables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// CPU and memory for the stage init containers; all four or none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Pod termination grace period (whole seconds of the duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graceful_shutdown: Option<GoDuration>,
    /// Per-attempt deadline of a stage Job; `0` removes the bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_timeout: Option<GoDuration>,
    /// Explicit uninstall support.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uninstall: Option<Uninstall>,
}

impl Package {
    /// The package's unique name `<name>|<version>`, keying the node-state document.
    pub fn unique_name(&self) -> String {
        unique_name(&self.name, &self.version)
    }

    /// True when `key` is this package's unique name (compared without building it).
    pub fn is_unique_name(&self, key: &str) -> bool {
        key.strip_prefix(self.name.as_str())
            .and_then(|rest| rest.strip_prefix('|'))
            .is_some_and(|version| version == self.version)
    }

    /// True when the package ships uninstall scripts (`uninstall.enabled`).
    pub fn uninstall_enabled(&self) -> bool {
        self.uninstall.as_ref().is_some_and(|u| u.enabled)
    }

    /// True when uninstall is enabled and requested on all nodes (`uninstall.apply`).
    pub fn is_uninstalling(&self) -> bool {
        self.uninstall
            .as_ref()
            .is_some_and(|u| u.enabled && u.apply)
    }
}

/// Joins a package name and version into its unique name `<name>|<version>`.
pub fn unique_name(name: &str, version: &str) -> String {
    format!("{name}|{version}")
}

/// Calls `f` with `name|version`, built on the stack when it fits in 128 bytes (lookups by
/// unique name are made for every package of every node each pass).
pub fn with_unique_name<R>(name: &str, version: &str, f: impl FnOnce(&str) -> R) -> R {
    let len = name.len() + 1 + version.len();
    let mut buf = [0u8; 128];
    if len > buf.len() {
        return f(&unique_name(name, version));
    }
    buf[..name.len()].copy_from_slice(name.as_bytes());
    buf[name.len()] = b'|';
    buf[name.len() + 1..len].copy_from_slice(version.as_bytes());
    match std::str::from_utf8(&buf[..len]) {
        Ok(key) => f(key),
        // Unreachable: two UTF-8 texts joined by an ASCII byte are UTF-8.
        Err(_) => f(&unique_name(name, version)),
    }
}

/// An interrupt: what to do on the host after config (01-api.md §2.4.1).
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
pub struct Interrupt {
    /// Kind of interrupt.
    #[serde(rename = "type")]
    pub type_: InterruptType,
    /// systemd units to restart (for `service`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<String>,
}

/// Kind of interrupt, with its agent encoding and merge priority (01-api.md §6.1).
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
pub enum InterruptType {
    /// Restart the listed systemd services.
    #[serde(rename = "service")]
    Service,
    /// Reboot the node.
    #[serde(rename = "reboot")]
    Reboot,
    /// Nothing; the package's own scripts did the work.
    #[serde(rename = "noop")]
    Noop,
    /// Reload all services.
    #[serde(rename = "restartAllServices")]
    RestartAllServices,
}

impl InterruptType {
    /// The CRD spelling (`reboot`, `service`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Service => "service",
            Self::Reboot => "reboot",
            Self::Noop => "noop",
            Self::RestartAllServices => "restartAllServices",
        }
    }

    /// The agent's spelling (`node_restart`, `service_restart`, ...).
    pub fn agent_type(self) -> &'static str {
        match self {
            Self::Service => "service_restart",
            Self::Reboot => "node_restart",
            Self::Noop => "no_op",
            Self::RestartAllServices => "restart_all_services",
        }
    }

    /// Merge priority: lower wins (reboot 0, restartAllServices 1, service 2, noop 3).
    pub fn merge_priority(self) -> u8 {
        match self {
            Self::Reboot => 0,
            Self::RestartAllServices => 1,
            Self::Service => 2,
            Self::Noop => 3,
        }
    }
}

/// Explicit uninstall settings (01-api.md §2.4.2). Both fields are schema-required and defaulted,
/// so `uninstall: {}` is stored as `{enabled: false, apply: false}`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("required" = ["apply", "enabled"]))]
pub struct Uninstall {
    /// The package ships uninstall scripts.
    #[serde(default)]
    pub enabled: bool,
    /// Trigger uninstall on all target nodes; only valid with `enabled`.
    #[serde(default)]
    pub apply: bool,
}

/// The Kubernetes quantity grammar, as the upstream CRD declares it on resource fields.
const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// CPU and memory overrides for stage containers (01-api.md §2.4.3).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirements {
    /// CPU request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = QUANTITY_PATTERN))]
    pub cpu_request: Option<Quantity>,
    /// CPU limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = QUANTITY_PATTERN))]
    pub cpu_limit: Option<Quantity>,
    /// Memory request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = QUANTITY_PATTERN))]
    pub memory_request: Option<Quantity>,
    /// Memory limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = QUANTITY_PATTERN))]
    pub memory_limit: Option<Quantity>,
}

/// Legacy concurrency budget (01-api.md §2.4.5).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct InterruptionBudget {
    /// Percentage of selected nodes per batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub percent: Option<i32>,
    /// Absolute number of nodes per batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub count: Option<i32>,
}

/// Per-NodeWright overrides of DeploymentPolicy settings (01-api.md §2.4.6).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentPolicyOptions {
    /// Overrides the policy's `resetBatchStateOnCompletion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub reset_batch_state_on_completion: Option<bool>,
}

/// Drain tuning before interrupts (01-api.md §11 item 1).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainConfig {
    /// Delete pods instead of evicting them, bypassing PodDisruptionBudgets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub disable_eviction: Option<bool>,
    /// Allow draining pods that use emptyDir volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub delete_empty_dir_data: Option<bool>,
    /// Allow draining pods not managed by a controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub force: Option<bool>,
    /// Skip DaemonSet-managed pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub ignore_daemon_sets: Option<bool>,
    /// How long to wait for a node to drain; unset or zero waits forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<GoDuration>,
    /// Grace period override for eviction or delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period: Option<GoDuration>,
}

impl NodeWrightSpec {
    /// Fills each package's empty `name` from its map key (decode-time normalisation, 01-api.md §2.6).
    pub fn normalize(&mut self) {
        for (key, pkg) in self.packages.iter_mut() {
            if pkg.name.is_empty() {
                pkg.name = key.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Package;

    #[test]
    fn is_unique_name_agrees_with_the_built_unique_name() {
        let keys = ["a|1", "a|1|2", "a|b|1", "a|", "|1", "a", "ab|1", "a|12", ""];
        for (name, version) in [("a", "1"), ("a", "1|2"), ("a|b", "1"), ("a", ""), ("", "1")] {
            let p = Package {
                name: name.into(),
                version: version.into(),
                ..Package::default()
            };
            for key in keys {
                assert_eq!(
                    p.is_unique_name(key),
                    p.unique_name() == key,
                    "{name} {version} {key}"
                );
            }
        }
    }

    #[test]
    fn with_unique_name_builds_the_unique_name_on_and_off_the_stack() {
        let long = "v".repeat(200);
        for (name, version) in [("a", "1"), ("", ""), ("é", "ü"), ("p", &long), (&long, "1")] {
            let built = super::with_unique_name(name, version, str::to_string);
            assert_eq!(built, super::unique_name(name, version));
        }
        let edge = "x".repeat(126);
        assert_eq!(
            super::with_unique_name(&edge, "1", str::len),
            128,
            "exactly 128 bytes fit"
        );
    }
}
