//! Identity values and deterministic names of executors and their ConfigMaps (03-executor.md
//! §0.4, §0.6, §0.7).

use nodewright_crds::names::safe_name;
use nodewright_crds::{InterruptType, NodeWright, Package, Stage};

use crate::Options;

/// Resource id `<NW.name>-<NW.uid>-<NW.generation>` (03 §0.4), the Job's provenance annotation.
pub fn resource_id(nw: &NodeWright) -> String {
    format!(
        "{}-{}-{}",
        nw.metadata.name.as_deref().unwrap_or_default(),
        nw.metadata.uid.as_deref().unwrap_or_default(),
        nw.metadata.generation.unwrap_or_default()
    )
}

/// Agent resource id `<resource id>_<pkg.name>_<pkg.version>` (`SKYHOOK_RESOURCE_ID`).
pub fn agent_resource_id(nw: &NodeWright, pkg: &Package) -> String {
    format!("{}_{}_{}", resource_id(nw), pkg.name, pkg.version)
}

/// Host copy directory `<COPY_DIR_ROOT>/<NW>/<pkg>-<ver>-<uid>-<generation>` (03 §0.4).
pub fn copy_dir(nw: &NodeWright, pkg: &Package, options: &Options) -> String {
    format!(
        "{}/{}/{}-{}-{}-{}",
        options.copy_dir_root,
        nw.metadata.name.as_deref().unwrap_or_default(),
        pkg.name,
        pkg.version,
        nw.metadata.uid.as_deref().unwrap_or_default(),
        nw.metadata.generation.unwrap_or_default()
    )
}

/// Value of the `<P>/node` label: the node name when at most 63 characters, else
/// `safeName(63, node)` (04 rule 1.2.2).
pub fn node_label_value(node: &str) -> String {
    if node.len() <= 63 {
        node.to_string()
    } else {
        safe_name(63, &[node])
    }
}

/// Value of the `<P>/package` label: `<pkg.name>-<pkg.version>`.
pub fn package_label(name: &str, version: &str) -> String {
    format!("{name}-{version}")
}

/// Package-stage Job name `safeName(63, NW, pkg, ver, stage, node)` (04 rule 1.1.2).
pub fn package_job_name(nw: &str, pkg: &str, version: &str, stage: Stage, node: &str) -> String {
    safe_name(63, &[nw, pkg, version, stage.as_str(), node])
}

/// Interrupt Job name `safeName(63, NW, stage, type, node)` with the merged interrupt's CRD type
/// (04 rule 1.1.3).
pub fn interrupt_job_name(nw: &str, stage: Stage, kind: InterruptType, node: &str) -> String {
    safe_name(63, &[nw, stage.as_str(), kind.as_str(), node])
}

/// Node-metadata ConfigMap name `safeName(253, NW, node, "metadata")` (03 §0.7); also the name of
/// the (unmounted) metadata volume of interrupt pods, which caps at 63 instead.
pub fn node_metadata_config_map_name(nw: &str, node: &str) -> String {
    safe_name(253, &[nw, node, "metadata"])
}

/// Name of the node-metadata volume in package pods: `safeName(63, "metadata", node)`.
pub fn package_metadata_volume_name(node: &str) -> String {
    safe_name(63, &["metadata", node])
}

/// Name of the node-metadata volume in interrupt pods: `safeName(63, NW, node, "metadata")`.
pub fn interrupt_metadata_volume_name(nw: &str, node: &str) -> String {
    safe_name(63, &[nw, node, "metadata"])
}

/// Package ConfigMap name: lowercase `<NW>-<pkg>-<ver>` (dots kept).
pub fn package_config_map_name(nw: &str, pkg: &str, version: &str) -> String {
    format!("{nw}-{pkg}-{version}").to_lowercase()
}

/// Node order of `node` (03 §0.4): its index in `status.nodePriority` sorted by timestamp then
/// name, plus `status.nodeOrderOffset`; `0` when the node is absent.
pub fn node_order(nw: &NodeWright, node: &str) -> i64 {
    let Some(status) = nw.status.as_ref() else {
        return 0;
    };
    let mut entries: Vec<_> = status.node_priority.iter().collect();
    entries.sort_by(|a, b| a.1.0.cmp(&b.1.0).then_with(|| a.0.cmp(b.0)));
    entries
        .iter()
        .position(|(name, _)| name.as_str() == node)
        .map_or(0, |index| {
            index as i64 + i64::from(status.node_order_offset)
        })
}
