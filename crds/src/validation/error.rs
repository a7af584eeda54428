//! The admission rejection reasons; `Display` is the exact message the webhook returns.

use thiserror::Error;

/// Why a NodeWright or DeploymentPolicy is rejected at admission (01-api.md §4.3–§4.6).
///
/// Each variant names the rule it implements; its `Display` is the user-facing message.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ValidationError {
    /// Decode: a duration field is not Go duration syntax.
    #[error("{context}: time: invalid duration {value:?}")]
    InvalidDuration {
        /// Where the duration sits (`package "p": stageTimeout`, `drain config: drainConfig.timeout`).
        context: String,
        /// The offending text.
        value: String,
    },
    /// Decode: a resource quantity is not Kubernetes quantity syntax.
    #[error(
        "package {package:?}: resources.{field} {value:?}: {}",
        crate::quantity::QUANTITY_FORMAT_MESSAGE
    )]
    InvalidQuantity {
        /// Package key.
        package: String,
        /// `cpuRequest`, `cpuLimit`, `memoryRequest` or `memoryLimit`.
        field: &'static str,
        /// The offending text.
        value: String,
    },
    /// Check 1: `interruptionBudget` sets both percent and count.
    #[error(
        "interruption budget: error InterruptionBudget is not valid, both percent and count can not be set at the same time"
    )]
    BudgetBothSet,
    /// D9: `interruptionBudget.percent` outside 1..100 (zero budgets are rejected).
    #[error("interruption budget: percent must be between 1 and 100, got {0}")]
    BudgetPercentOutOfRange(i32),
    /// D9: `interruptionBudget.count` below 1 (zero budgets are rejected).
    #[error("interruption budget: count must be at least 1, got {0}")]
    BudgetCountTooSmall(i32),
    /// D1 (§11 item 1): a negative `drainConfig.timeout` or `drainConfig.gracePeriod`.
    #[error("drain config: drainConfig.{field} must be greater than or equal to 0")]
    DrainNegative {
        /// `timeout` or `gracePeriod`.
        field: &'static str,
    },
    /// Check 2: `deploymentPolicy` together with an `interruptionBudget` value.
    #[error("deploymentPolicy and interruptionBudget are mutually exclusive")]
    PolicyAndBudget,
    /// D1 (§11 item 4): `podNonInterruptLabels` is not a valid label selector.
    #[error("pod non-interrupt labels are not valid: {0}")]
    PodNonInterruptLabels(String),
    /// Check 3: `nodeSelectors` is not a valid label selector.
    #[error("node selectors are not valid: {0}")]
    NodeSelectors(String),
    /// Check 4a: a package's explicit `name` differs from its map key.
    #[error(
        "error package {key}'s name was set to {name}. Do not explicitly set the name in the package's definition"
    )]
    PackageNameMismatch {
        /// Map key.
        key: String,
        /// Explicit name.
        name: String,
    },
    /// Check 4c: the package key does not match the package-name pattern.
    #[error("package name [{0}] is not valid. must match [^[a-z][-a-z0-9]{{0,41}}[a-z]$]")]
    PackageNameInvalid(String),
    /// Check 4d: a `configInterrupts` glob that matches no `configMap` key.
    #[error("error config interrupt glob {0:?} does not match any configMap keys")]
    ConfigInterruptGlob(String),
    /// Check 4d: a literal `configInterrupts` key that is not a `configMap` key.
    #[error("error config interrupt for key that doesn't exist: {0} doesn't exist as a configmap")]
    ConfigInterruptKey(String),
    /// D1 (§11 item 3): `image` is empty or contains whitespace (CRD pattern `^\S+$`).
    #[error("package {0:?}: image must be non-empty and must not contain whitespace")]
    ImageBlank(String),
    /// Check 4e, stricter form (D1): `image` embeds a digest.
    #[error(
        "error package {key}'s image '{image}' contains an inline digest. Do not embed a digest in the image; pin the image bytes using the package's containerSHA field instead"
    )]
    ImageDigest {
        /// Package key.
        key: String,
        /// The image as written.
        image: String,
    },
    /// Check 4e, stricter form (D1): `image` embeds a tag (a `:` after the last `/`).
    #[error(
        "error package {key}'s image '{image}' contains an inline tag '{tag}'. Do not embed a tag in the image; the package version supplies the tag"
    )]
    ImageTag {
        /// Package key.
        key: String,
        /// The image as written.
        image: String,
        /// The embedded tag.
        tag: String,
    },
    /// D1 (§11 item 3): `containerSHA` does not match `^sha256:[0-9a-f]{64}$`.
    #[error("package {key:?}: containerSHA {sha:?} must match ^sha256:[0-9a-f]{{64}}$")]
    ContainerSha {
        /// Package key.
        key: String,
        /// The digest as written.
        sha: String,
    },
    /// Check 4f: `version` is not a valid semantic version.
    #[error("error version string for {name} is invalid: {version}")]
    VersionInvalid {
        /// Package name.
        name: String,
        /// The version as written.
        version: String,
    },
    /// Check 4g: some but not all four resource overrides are set.
    #[error(
        "package {0:?}: if any resource override is set, all of cpuRequest, cpuLimit, memoryRequest, memoryLimit must be set"
    )]
    ResourcesPartial(String),
    /// Check 4h: `cpuLimit < cpuRequest`.
    #[error("package {key:?}: cpuLimit ({limit}) must be >= cpuRequest ({request})")]
    CpuLimitBelowRequest {
        /// Package key.
        key: String,
        /// Limit as written.
        limit: String,
        /// Request as written.
        request: String,
    },
    /// Check 4i: `memoryLimit < memoryRequest`.
    #[error("package {key:?}: memoryLimit ({limit}) must be >= memoryRequest ({request})")]
    MemoryLimitBelowRequest {
        /// Package key.
        key: String,
        /// Limit as written.
        limit: String,
        /// Request as written.
        request: String,
    },
    /// Check 4j: a resource value is not positive.
    #[error("package {0:?}: all resource values must be positive")]
    ResourcesNotPositive(String),
    /// Check 4k: `uninstall.apply` without `uninstall.enabled`.
    #[error("package {0:?}: uninstall.apply requires uninstall.enabled to be true")]
    UninstallApplyWithoutEnabled(String),
    /// Check 4l: negative `stageTimeout`.
    #[error("package {0:?}: stageTimeout must be greater than or equal to 0")]
    StageTimeoutNegative(String),
    /// Size bound (docs/operations.md "Webhook limits"): too many packages.
    #[error("spec.packages has {count} entries; at most {max} are allowed")]
    TooManyPackages {
        /// Entries in `spec.packages`.
        count: usize,
        /// [`crate::limits::MAX_PACKAGES`].
        max: usize,
    },
    /// Size bound: a package's map field (`dependsOn`, `configInterrupts`) has too many entries.
    #[error("package {key:?}: {field} has {count} entries; at most {max} are allowed")]
    TooManyEntries {
        /// Package key (clipped).
        key: String,
        /// `dependsOn` or `configInterrupts`.
        field: &'static str,
        /// Entries in the field.
        count: usize,
        /// The bound in [`crate::limits`].
        max: usize,
    },
    /// Size bound: matching every `configInterrupts` glob against every `configMap` key would
    /// take too many glob checks.
    #[error(
        "package {key:?}: {globs} configInterrupts globs × {keys} configMap keys = {checks} glob checks; at most {max} are allowed"
    )]
    TooManyGlobChecks {
        /// Package key (clipped).
        key: String,
        /// `configInterrupts` entries that are globs.
        globs: usize,
        /// `configMap` entries.
        keys: usize,
        /// `globs × keys`.
        checks: usize,
        /// [`crate::limits::MAX_GLOB_CHECKS`].
        max: usize,
    },
    /// Size bound: a `configInterrupts` glob with too many `*` wildcards.
    #[error(
        "error config interrupt glob {pattern:?} has {wildcards} '*' wildcards; at most {max} are allowed"
    )]
    ConfigInterruptGlobTooComplex {
        /// The glob (clipped).
        pattern: String,
        /// Its `*` count.
        wildcards: usize,
        /// [`crate::limits::MAX_GLOB_WILDCARDS`].
        max: usize,
    },
    /// Check 5: a `dependsOn` value is empty.
    #[error(
        "error trying to validate nodewright spec building graph: DependsOn version is empty for [{0}]"
    )]
    DependsOnEmpty(String),
    /// Check 6: `dependsOn` targets with no spec package of that name and version.
    #[error(
        "error trying to validate nodewright spec graph is invalid: error graph is not valid, missing: [{}]",
        .0.join(" ")
    )]
    DependsOnMissing(Vec<String>),
    /// D9: the dependency graph has a cycle (a self-dependency is a cycle of one).
    #[error(
        "error trying to validate nodewright spec graph is invalid: dependency cycle: {}",
        .0.join(" -> ")
    )]
    DependencyCycle(Vec<String>),
    /// Check 7: the referenced DeploymentPolicy does not exist.
    #[error("deploymentPolicy {0:?} not found")]
    PolicyNotFound(String),
    /// Check 7: looking the DeploymentPolicy up failed.
    #[error("error checking if deploymentPolicy {policy:?} exists: {error}")]
    PolicyLookupFailed {
        /// Policy name.
        policy: String,
        /// The lookup error.
        error: String,
    },
    /// U1: an uninstall-enabled package removed from spec before it is uninstalled everywhere.
    #[error(
        "package {0:?} has uninstall.enabled=true; set uninstall.apply=true and wait for completion before removing from spec"
    )]
    RemovedBeforeUninstall(String),
    /// U2: downgrade of an uninstall-enabled package without `uninstall.apply` first.
    #[error(
        "package {0:?}: downgrade not allowed — set uninstall.apply=true first, wait for uninstall to complete, then change version"
    )]
    DowngradeWithoutUninstall(String),
    /// U3: downgrade while the uninstall has not finished on every node.
    #[error(
        "package {0:?}: downgrade not allowed — uninstall has not yet completed on all nodes. Wait for the uninstall to finish, then change version"
    )]
    DowngradeBeforeUninstallDone(String),
    /// P1/P6: a budget with neither percent nor count.
    #[error("{0}budget: exactly one of percent or count must be set")]
    PolicyBudgetUnset(String),
    /// P2/P6: a budget with both percent and count.
    #[error("{0}budget: percent and count are mutually exclusive")]
    PolicyBudgetBoth(String),
    /// P3/P7: a strategy with zero or several variants.
    #[error("{0}strategy: exactly one of fixed, linear, or exponential must be set")]
    PolicyStrategy(String),
    /// P4: a compartment named `__default__`.
    #[error("compartment name \"__default__\" is reserved and cannot be used")]
    CompartmentReserved,
    /// P5: two compartments with one name.
    #[error("compartment name {0:?} is not unique")]
    CompartmentDuplicate(String),
    /// P8: a compartment selector that is not a valid label selector.
    #[error("compartment {name:?} has invalid selector: {detail}")]
    CompartmentSelector {
        /// Compartment name.
        name: String,
        /// Selector detail message.
        detail: String,
    },
    /// P9: a compartment selector structurally equal to an earlier one.
    #[error("compartment {name:?} has identical selector to compartment {other:?}")]
    CompartmentIdenticalSelector {
        /// The later compartment.
        name: String,
        /// The earlier compartment with the same selector.
        other: String,
    },
    /// DELETE: NodeWrights still reference the policy.
    #[error(
        "cannot delete DeploymentPolicy {policy:?}: still referenced by {} NodeWright(s): [{}]",
        .names.len(),
        .names.join(" ")
    )]
    PolicyInUse {
        /// Policy name.
        policy: String,
        /// Referencing NodeWright names, in list order.
        names: Vec<String>,
    },
}

impl ValidationError {
    /// The message wrapped the way newer Go builds report object checks:
    /// `validating NodeWright "<name>": <message>`.
    pub fn wrapped(&self, nodewright: &str) -> String {
        format!("validating NodeWright {nodewright:?}: {self}")
    }
}
