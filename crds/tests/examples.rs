//! Every manifest under `crds/examples/` parses into the API types and passes admission
//! (defaulting, object checks, and the policy reference against the policies in the examples).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use nodewright_crds::defaults::default_policy;
use nodewright_crds::validation::{
    validate_nodewright, validate_policy, validate_policy_reference,
};
use nodewright_crds::{DeploymentPolicy, NodeWright};
use serde_json::Value;

fn example_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("crds/examples exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

/// Every document of every example file, with its file name.
fn documents() -> Vec<(String, Value)> {
    example_files()
        .into_iter()
        .flat_map(|path| {
            let text = std::fs::read_to_string(&path).expect("readable example");
            let name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
                .unwrap_or_else(|e| panic!("{name} is not valid YAML: {e}"));
            docs.into_iter().map(move |d| (name.clone(), d))
        })
        .collect()
}

fn kind(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or_default()
}

#[test]
fn examples_cover_the_documented_shapes() {
    let names: BTreeSet<String> = example_files()
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().to_string()))
        .collect();
    for expected in [
        "simple",
        "interrupt",
        "depends-on",
        "uninstall",
        "deployment-policy",
        "interrupt-group",
    ] {
        assert!(names.contains(expected), "missing example {expected}.yaml");
    }
}

#[test]
fn examples_parse_and_pass_admission() {
    let docs = documents();
    let policies: BTreeSet<String> = docs
        .iter()
        .filter(|(_, d)| kind(d) == "DeploymentPolicy")
        .filter_map(|(_, d)| d["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    let mut checked = 0;
    for (file, doc) in docs {
        assert_eq!(
            doc["apiVersion"], "nodewright.nvidia.com/v1alpha1",
            "{file}"
        );
        match kind(&doc) {
            "NodeWright" => {
                let nw: NodeWright = serde_json::from_value(doc)
                    .unwrap_or_else(|e| panic!("{file}: not a NodeWright: {e}"));
                validate_nodewright(&nw).unwrap_or_else(|e| panic!("{file}: {e}"));
                validate_policy_reference(&nw, |p| Ok(policies.contains(p)))
                    .unwrap_or_else(|e| panic!("{file}: {e}"));
                assert!(!nw.spec.packages.is_empty(), "{file}: no packages");
            }
            "DeploymentPolicy" => {
                let mut policy: DeploymentPolicy = serde_json::from_value(doc)
                    .unwrap_or_else(|e| panic!("{file}: not a DeploymentPolicy: {e}"));
                validate_policy(&policy).unwrap_or_else(|e| panic!("{file}: {e}"));
                default_policy(&mut policy);
                validate_policy(&policy).unwrap_or_else(|e| panic!("{file} after defaults: {e}"));
            }
            other => panic!("{file}: unexpected kind {other:?}"),
        }
        checked += 1;
    }
    assert!(checked >= 7, "only {checked} documents checked");
}

#[test]
fn examples_round_trip_through_the_types() {
    for (file, doc) in documents() {
        let back = match kind(&doc) {
            "NodeWright" => {
                let nw: NodeWright = serde_json::from_value(doc.clone()).expect("typed");
                serde_json::to_value(&nw).expect("serializes")
            }
            _ => {
                let p: DeploymentPolicy = serde_json::from_value(doc.clone()).expect("typed");
                serde_json::to_value(&p).expect("serializes")
            }
        };
        assert_contained(&doc["spec"], &back["spec"], &format!("{file}: spec"));
    }
}

/// Every field written in `original` survives with the same value (the types may add defaults).
fn assert_contained(original: &Value, back: &Value, path: &str) {
    match original {
        Value::Object(fields) => {
            for (key, value) in fields {
                assert_contained(value, &back[key], &format!("{path}.{key}"));
            }
        }
        _ => assert_eq!(original, back, "{path} changes on a round trip"),
    }
}
