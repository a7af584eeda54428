//! The executor fingerprint `<P>/executor-fingerprint` (decision D19, 04-jobs-rules.md §6.6): a
//! SHA-256 over the inputs that define what an executor does, and nothing else.
//!
//! Recipe (stable; pinned by `d19_fingerprint_is_stable_across_releases`): a JSON object with
//! `scheme` = `nodewright-executor-fingerprint/v1`, `kind` (`package` | `interrupt`) and the
//! inputs below, serialized compactly with object keys sorted at every level (UTF-8, serde_json
//! string escaping), hashed with SHA-256 and written as 64 lowercase hex characters.
//! Package kind: `image` (03 §0.5 reference), `agentImage`, `version`, `env` (as written),
//! `resources` (`cpuRequest`/`cpuLimit`/`memoryRequest`/`memoryLimit` as canonical exact values, or
//! `null`), `configMap`. Interrupt kind: `agentImage`, `version`, `interrupt`, `configInterrupts`.

use std::collections::BTreeMap;

use nodewright_crds::Package;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::quantity::canonical;
use crate::Options;

/// Version tag of the serialization; bump only with a compatibility plan (it must stay stable
/// across releases or every running Job reads stale after an upgrade).
const SCHEME: &str = "nodewright-executor-fingerprint/v1";

/// Package image reference (03 §0.5): `<image>@<sha>` with a digest, else `<image>:<version>`.
pub fn package_image(pkg: &Package) -> String {
    if pkg.container_sha.is_empty() {
        format!("{}:{}", pkg.image, pkg.version)
    } else {
        format!("{}@{}", pkg.image, pkg.container_sha)
    }
}

/// Agent image (03 §0.5): the package's override, else `AGENT_IMAGE`.
pub fn agent_image(pkg: &Package, options: &Options) -> String {
    if pkg.agent_image_override.is_empty() {
        options.agent_image.clone()
    } else {
        pkg.agent_image_override.clone()
    }
}

fn resources(pkg: &Package) -> Value {
    let Some(r) = pkg.resources.as_ref() else {
        return Value::Null;
    };
    let q = |v: &Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
        v.as_ref().map(|q| canonical(&q.0))
    };
    json!({
        "cpuRequest": q(&r.cpu_request),
        "cpuLimit": q(&r.cpu_limit),
        "memoryRequest": q(&r.memory_request),
        "memoryLimit": q(&r.memory_limit),
    })
}

fn digest(value: &Value) -> String {
    let mut text = String::new();
    write_sorted(value, &mut text);
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Compact JSON with object keys sorted, independent of serde_json's map feature flags.
fn write_sorted(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_sorted(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_sorted(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Fingerprint of a package-stage executor: package image, agent image, version, env as written,
/// resources by exact value, configMap data (keys sorted).
pub fn package_fingerprint(pkg: &Package, options: &Options) -> String {
    let config: BTreeMap<&String, &String> = pkg.config_map.iter().collect();
    digest(&json!({
        "scheme": SCHEME,
        "kind": "package",
        "image": package_image(pkg),
        "agentImage": agent_image(pkg, options),
        "version": pkg.version,
        "env": serde_json::to_value(&pkg.env).unwrap_or(Value::Null),
        "resources": resources(pkg),
        "configMap": config,
    }))
}

/// Fingerprint of an interrupt executor: agent image, version, and the winning package's
/// `interrupt` and `configInterrupts` as written.
pub fn interrupt_fingerprint(pkg: &Package, options: &Options) -> String {
    digest(&json!({
        "scheme": SCHEME,
        "kind": "interrupt",
        "agentImage": agent_image(pkg, options),
        "version": pkg.version,
        "interrupt": serde_json::to_value(&pkg.interrupt).unwrap_or(Value::Null),
        "configInterrupts": serde_json::to_value(&pkg.config_interrupts).unwrap_or(Value::Null),
    }))
}
