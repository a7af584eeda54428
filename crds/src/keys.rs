//! Annotation, label, taint, condition and finalizer keys (01-api.md §5).

/// Metadata prefix of every key the operator owns.
pub const PREFIX: &str = "nodewright.nvidia.com";
/// Legacy prefix, read during the rename window only.
pub const LEGACY_PREFIX: &str = "skyhook.nvidia.com";
/// Finalizer on NodeWright objects.
pub const FINALIZER: &str = "nodewright.nvidia.com/nodewright";
/// NodeWright annotation: `"true"` pauses it.
pub const PAUSE: &str = "nodewright.nvidia.com/pause";
/// NodeWright annotation: `"true"` disables it.
pub const DISABLE: &str = "nodewright.nvidia.com/disable";
/// NodeWright annotation: operator version that last migrated the object.
pub const VERSION: &str = "nodewright.nvidia.com/version";
/// The version this operator writes into [`VERSION`] and `version_<name>` (M2): the crate
/// version, without the leading `v` the Go operator's release versions carry.
pub const OPERATOR_VERSION: &str = env!("CARGO_PKG_VERSION");
/// Node label: `"true"` excludes the node from all NodeWrights.
pub const IGNORE: &str = "nodewright.nvidia.com/ignore";
/// Node annotation: a runtime-required cordon (01-api.md §11 item 2).
pub const RUNTIME_REQUIRED_CORDON: &str = "nodewright.nvidia.com/runtimeRequiredCordon";
/// Job/pod label: owning NodeWright name.
pub const LABEL_NAME: &str = "nodewright.nvidia.com/name";
/// Job/pod label `<pkg>-<ver>`; Job/pod annotation: the package annotation JSON.
pub const PACKAGE: &str = "nodewright.nvidia.com/package";
/// Job/pod label: stage.
pub const LABEL_STAGE: &str = "nodewright.nvidia.com/stage";
/// Job/pod label: target node.
pub const LABEL_NODE: &str = "nodewright.nvidia.com/node";
/// Job/pod label: NodeWright generation that produced the Job.
pub const LABEL_GENERATION: &str = "nodewright.nvidia.com/generation";
/// Job/pod label on interrupt executors: `"True"`.
pub const LABEL_INTERRUPT: &str = "nodewright.nvidia.com/interrupt";
/// Job annotation: provenance `<name>-<uid>-<generation>`.
pub const RESOURCE_ID: &str = "nodewright.nvidia.com/resource-id";
/// Job annotation: completion already written to node state.
pub const STATE_RECORDED: &str = "nodewright.nvidia.com/state-recorded";
/// Job annotation: log tail or waiting reason of a deadline-killed stage.
pub const LAST_LOGS: &str = "nodewright.nvidia.com/last-logs";
/// Job annotation (this project, D19): executor fingerprint.
pub const EXECUTOR_FINGERPRINT: &str = "nodewright.nvidia.com/executor-fingerprint";
/// Job annotation (this project, D11): why a live attempt is stuck.
pub const LAST_FAILURE: &str = "nodewright.nvidia.com/last-failure";
/// Interrupt Job annotation (D18): restart allowance.
pub const RESTART_ALLOWANCE: &str = "nodewright.nvidia.com/restart-allowance";
/// Interrupt Job annotation (D18): allowance exhausted.
pub const RESTART_LIMIT_EXCEEDED: &str = "nodewright.nvidia.com/restart-limit-exceeded";
/// ConfigMap label on node-metadata ConfigMaps.
pub const NODE_META: &str = "nodewright.nvidia.com/skyhook-node-meta";
/// Reserved compartment name for nodes matching no compartment.
pub const DEFAULT_COMPARTMENT: &str = "__default__";

/// Node annotation and label holding the node-state document of NodeWright `name`.
pub fn node_state(name: &str) -> String {
    format!("{PREFIX}/nodeState_{name}")
}

/// Node annotation and label holding the node status for NodeWright `name`.
pub fn node_status(name: &str) -> String {
    format!("{PREFIX}/status_{name}")
}

/// Node annotation: schema version of this node's state for NodeWright `name`.
pub fn node_version(name: &str) -> String {
    format!("{PREFIX}/version_{name}")
}

/// Node annotation: NodeWright `name` cordoned this node.
pub fn cordon(name: &str) -> String {
    format!("{PREFIX}/cordon_{name}")
}

/// Node annotation: when NodeWright `name` started draining this node.
pub fn drain_start(name: &str) -> String {
    format!("{PREFIX}/drainStart_{name}")
}

/// Node annotation: the node was auto-tainted with the taint whose key is `taint_key`.
pub fn auto_taint(taint_key: &str) -> String {
    format!("{PREFIX}/autoTaint_{taint_key}")
}

/// Node condition type `<P>/<name>/NotReady`.
pub fn node_condition_not_ready(name: &str) -> String {
    format!("{PREFIX}/{name}/NotReady")
}

/// Node condition type `<P>/<name>/Erroring`.
pub fn node_condition_erroring(name: &str) -> String {
    format!("{PREFIX}/{name}/Erroring")
}
