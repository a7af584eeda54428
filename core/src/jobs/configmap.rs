//! ConfigMaps the executors mount: the per-node metadata ConfigMap and the package ConfigMap
//! (03-executor.md §0.7, 01-api.md §5.9).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodewright_crds::node_state::go_html_escape;
use nodewright_crds::{NodeWright, Package, keys};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::builder::owner_reference;
use super::naming;
use super::nw_name;
use crate::{Effect, Options, Snapshot};

/// Per-package entry of `packages.json` (field order as the agent contract, 03 §5.2).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PackageMetadata<'a> {
    name: &'a str,
    version: &'a str,
    image: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    agent_image_override: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    interrupt: Option<&'a nodewright_crds::Interrupt>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    config_interrupts: &'a BTreeMap<String, nodewright_crds::Interrupt>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Metadata<'a> {
    agent_version: &'a str,
    packages: BTreeMap<&'a str, PackageMetadata<'a>>,
}

fn go_json<T: Serialize>(value: &T) -> String {
    // Maps of strings and plain structs always serialize.
    go_html_escape(&serde_json::to_string(value).expect("metadata serializes"))
}

/// `packages.json` of the node-metadata ConfigMap.
pub fn packages_json(nw: &NodeWright, options: &Options) -> String {
    let packages = nw
        .spec
        .packages
        .iter()
        .map(|(key, p)| {
            (
                key.as_str(),
                PackageMetadata {
                    name: if p.name.is_empty() { key } else { &p.name },
                    version: &p.version,
                    image: &p.image,
                    agent_image_override: &p.agent_image_override,
                    interrupt: p.interrupt.as_ref(),
                    config_interrupts: &p.config_interrupts,
                },
            )
        })
        .collect();
    go_json(&Metadata {
        agent_version: options.agent_version(),
        packages,
    })
}

/// The node-metadata ConfigMap `safeName(253, NW, node, "metadata")` with the node's annotations,
/// labels and the agent's `packages.json`.
pub fn node_metadata_config_map(nw: &NodeWright, node: &Node, options: &Options) -> ConfigMap {
    let name = nw_name(nw).to_string();
    let node_name = node.metadata.name.clone().unwrap_or_default();
    let empty = BTreeMap::new();
    let data = BTreeMap::from([
        (
            "annotations.json".to_string(),
            go_json(node.metadata.annotations.as_ref().unwrap_or(&empty)),
        ),
        (
            "labels.json".to_string(),
            go_json(node.metadata.labels.as_ref().unwrap_or(&empty)),
        ),
        ("packages.json".to_string(), packages_json(nw, options)),
    ]);
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(naming::node_metadata_config_map_name(&name, &node_name)),
            namespace: Some(options.namespace.clone()),
            labels: Some(BTreeMap::from([(
                keys::NODE_META.to_string(),
                name.clone(),
            )])),
            annotations: Some(BTreeMap::from([
                (keys::LABEL_NAME.to_string(), name),
                (format!("{}/Node.name", keys::PREFIX), node_name),
            ])),
            owner_references: Some(vec![owner_reference(nw)]),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    }
}

/// The package ConfigMap lowercase `<NW>-<pkg>-<ver>` holding exactly `pkg.configMap`.
pub fn package_config_map(nw: &NodeWright, pkg: &Package, options: &Options) -> ConfigMap {
    let name = nw_name(nw).to_string();
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(naming::package_config_map_name(
                &name,
                &pkg.name,
                &pkg.version,
            )),
            namespace: Some(options.namespace.clone()),
            labels: Some(BTreeMap::from([(
                keys::LABEL_NAME.to_string(),
                name.clone(),
            )])),
            annotations: Some(BTreeMap::from([
                (keys::LABEL_NAME.to_string(), name),
                (format!("{}/Package.Name", keys::PREFIX), pkg.name.clone()),
                (
                    format!("{}/Package.Version", keys::PREFIX),
                    pkg.version.clone(),
                ),
            ])),
            owner_references: Some(vec![owner_reference(nw)]),
            ..ObjectMeta::default()
        },
        data: Some(pkg.config_map.clone()),
        ..ConfigMap::default()
    }
}

/// D29: annotation on a held node-metadata ConfigMap whose data values are digests
/// ([`data_digest`]) of the values in the cluster; the operator's cache sets it.
pub const DATA_DIGESTS: &str = "nodewright.nvidia.com/data-digests";

/// D29: the digest form of a ConfigMap data value, `sha256:<hex>`.
pub fn data_digest(value: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in Sha256::digest(value.as_bytes()) {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// D29: keeps a node-metadata ConfigMap (labelled `<P>/skyhook-node-meta`) as the core reads it:
/// each data value replaced by its digest and [`DATA_DIGESTS`] set. The core only compares that
/// data with what it would write, and the node's annotations and labels it copies are most of a
/// node's size. Any other ConfigMap, and one already digested (a snapshot recorded in a trace
/// and replayed), is left as it is.
pub fn digest_node_metadata(cm: &mut ConfigMap) {
    if is_digested(cm) {
        return;
    }
    let meta = &mut cm.metadata;
    if !meta
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(keys::NODE_META))
    {
        return;
    }
    meta.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(DATA_DIGESTS.to_string(), "sha256".to_string());
    for value in cm.data.iter_mut().flat_map(|d| d.values_mut()) {
        *value = data_digest(value);
    }
}

/// Whether `held` keeps its data as digests (D29): a node-metadata ConfigMap marked by the cache.
fn is_digested(held: &ConfigMap) -> bool {
    let meta = &held.metadata;
    meta.labels
        .as_ref()
        .is_some_and(|l| l.contains_key(keys::NODE_META))
        && meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.get(DATA_DIGESTS).is_some_and(|v| v == "sha256"))
}

/// A value the core would write, compared with many held ConfigMaps' values (D29): its digest
/// is computed once, the first time a digested ConfigMap asks.
pub struct DesiredValue<'a> {
    text: &'a str,
    digest: std::cell::OnceCell<String>,
}

impl<'a> DesiredValue<'a> {
    /// The value `text`.
    pub fn new(text: &'a str) -> Self {
        DesiredValue {
            text,
            digest: std::cell::OnceCell::new(),
        }
    }

    /// Whether the value `held` of the held ConfigMap `cm` is this value.
    pub fn matches(&self, cm: &ConfigMap, held: &str) -> bool {
        if is_digested(cm) {
            held == self.digest.get_or_init(|| data_digest(self.text))
        } else {
            held == self.text
        }
    }
}

/// Whether the held ConfigMap `cm` has exactly the data `desired` (same keys, each value
/// matching by [`DesiredValue::matches`]).
pub fn data_matches(cm: &ConfigMap, desired: &BTreeMap<String, String>) -> bool {
    let empty = BTreeMap::new();
    let held = cm.data.as_ref().unwrap_or(&empty);
    held.len() == desired.len()
        && held
            .iter()
            .zip(desired)
            .all(|((hk, hv), (dk, dv))| hk == dk && DesiredValue::new(dv).matches(cm, hv))
}

/// `UpsertConfigMap` when the snapshot has no ConfigMap of that name or its data differs;
/// `None` when it is already up to date (only written when data differs, 02 §13.10).
pub fn upsert_if_changed(snapshot: &Snapshot, desired: ConfigMap) -> Option<Effect> {
    let existing = snapshot
        .config_maps
        .iter()
        .find(|cm| cm.metadata.name == desired.metadata.name);
    let empty = BTreeMap::new();
    match existing {
        Some(cm) if data_matches(cm, desired.data.as_ref().unwrap_or(&empty)) => None,
        Some(cm) => Some(Effect::UpsertConfigMap {
            expect_resource_version: cm.metadata.resource_version.clone(),
            config_map: Box::new(desired),
        }),
        None => Some(Effect::UpsertConfigMap {
            config_map: Box::new(desired),
            expect_resource_version: None,
        }),
    }
}
