//! The generated CRDs: committed copies are current, schemas are structural, printer columns
//! and schema facts match 01-api.md §1–§3.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use nodewright_crds::crdgen;
use serde_json::{Value, json};

fn chart_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../chart/files/crds")
}

fn schema(crd: &CustomResourceDefinition) -> Value {
    let version = &crd.spec.versions[0];
    let schema = version.schema.as_ref().expect("schema");
    serde_json::to_value(schema.open_api_v3_schema.as_ref().expect("openAPIV3Schema"))
        .expect("schema to JSON")
}

fn at<'a>(schema: &'a Value, path: &str) -> &'a Value {
    let pointer: String = path
        .split('.')
        .map(|p| match p {
            "*" => "/additionalProperties".to_string(),
            "[]" => "/items".to_string(),
            name => format!("/properties/{name}"),
        })
        .collect();
    schema
        .pointer(&pointer)
        .unwrap_or_else(|| panic!("no schema at {path}"))
}

#[test]
fn crd_chart_files_are_current() {
    for (file, crd) in crdgen::all() {
        let committed = std::fs::read_to_string(chart_dir().join(file))
            .unwrap_or_else(|e| panic!("chart/files/crds/{file}: {e}"));
        assert!(
            committed == crdgen::to_yaml(&crd),
            "chart/files/crds/{file} is stale: run `cargo run -p nodewright-crds --bin crdgen`"
        );
    }
}

#[test]
fn crd_yaml_round_trips() {
    for (file, crd) in crdgen::all() {
        let back: CustomResourceDefinition =
            serde_saphyr::from_str(&crdgen::to_yaml(&crd)).expect("CRD YAML parses");
        assert_eq!(back, crd, "{file}");
    }
}

// ---- structural schema checker (07-rust-stack.md §2 intro) ----

const FORBIDDEN: &[&str] = &["$ref", "const", "uniqueItems", "patternProperties"];
const FORBIDDEN_IN_JUNCTOR: &[&str] = &[
    "type",
    "default",
    "nullable",
    "description",
    "additionalProperties",
];
const JUNCTORS: &[&str] = &["anyOf", "oneOf", "allOf", "not"];

fn structural_errors(node: &Value, path: &str, in_junctor: bool, errors: &mut Vec<String>) {
    let Some(object) = node.as_object() else {
        errors.push(format!("{path}: schema is not an object"));
        return;
    };
    for key in FORBIDDEN {
        if object.contains_key(*key) {
            errors.push(format!("{path}: forbidden keyword {key}"));
        }
    }
    let int_or_string = object.get("x-kubernetes-int-or-string") == Some(&json!(true));
    let preserve = object.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    if in_junctor {
        for key in FORBIDDEN_IN_JUNCTOR {
            if object.contains_key(*key) {
                errors.push(format!("{path}: {key} inside a junctor"));
            }
        }
    } else if !int_or_string
        && !preserve
        && object
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        errors.push(format!("{path}: missing type"));
    }
    if object.contains_key("properties") && object.contains_key("additionalProperties") {
        errors.push(format!("{path}: both properties and additionalProperties"));
    }
    if let Some(Value::Object(props)) = object.get("properties") {
        for (name, child) in props {
            structural_errors(child, &format!("{path}.{name}"), in_junctor, errors);
        }
    }
    for key in ["items", "additionalProperties"] {
        match object.get(key) {
            Some(Value::Object(_)) => {
                structural_errors(&object[key], &format!("{path}.{key}"), in_junctor, errors)
            }
            Some(Value::Bool(_)) | None => {}
            Some(_) => errors.push(format!("{path}: {key} must be a single schema")),
        }
    }
    check_junctors(object, path, int_or_string, errors);
}

/// Junctor members may only restate fields declared outside the junctor.
fn check_junctors(
    object: &serde_json::Map<String, Value>,
    path: &str,
    int_or_string: bool,
    errors: &mut Vec<String>,
) {
    let declared = object.get("properties").and_then(Value::as_object);
    for junctor in JUNCTORS {
        let members: Vec<&Value> = match object.get(*junctor) {
            Some(Value::Array(list)) => list.iter().collect(),
            Some(single @ Value::Object(_)) => vec![single],
            _ => continue,
        };
        for (i, member) in members.into_iter().enumerate() {
            let member_path = format!("{path}.{junctor}[{i}]");
            let is_int_or_string_branch = int_or_string
                && member.as_object().is_some_and(|m| {
                    m.len() == 1
                        && matches!(m.get("type"), Some(t) if t == "integer" || t == "string")
                });
            if is_int_or_string_branch {
                continue;
            }
            let used = member
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().collect::<Vec<_>>())
                .unwrap_or_default()
                .into_iter()
                .chain(
                    member
                        .get("required")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str().map(str::to_string)),
                );
            for field in used {
                if !declared.is_some_and(|d| d.contains_key(&field)) {
                    errors.push(format!(
                        "{member_path}: {field} not declared outside the junctor"
                    ));
                }
            }
            structural_errors(member, &member_path, true, errors);
        }
    }
}

#[test]
fn crd_schemas_are_structural() {
    for (file, crd) in crdgen::all() {
        let mut errors = Vec::new();
        structural_errors(&schema(&crd), "", false, &mut errors);
        assert!(errors.is_empty(), "{file}: {errors:#?}");
    }
}

#[test]
fn crd_structural_checker_catches_violations() {
    let bad = json!({
        "type": "object",
        "properties": {
            "a": {"description": "no type"},
            "b": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
            "c": {"type": "string", "const": "x"},
            "d": {"type": "object", "oneOf": [{"type": "object", "properties": {"e": {}}}]},
            "f": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}
        }
    });
    let mut errors = Vec::new();
    structural_errors(&bad, "", false, &mut errors);
    let joined = errors.join("\n");
    for expected in [
        ".a: missing type",
        ".b: both properties and additionalProperties",
        ".c: forbidden keyword const",
        ".d.oneOf[0]: type inside a junctor",
        ".d.oneOf[0]: e not declared outside the junctor",
    ] {
        assert!(
            joined.contains(expected),
            "missing {expected:?} in {joined}"
        );
    }
    assert!(
        !joined.contains(".f"),
        "int-or-string anyOf is allowed: {joined}"
    );
}

// ---- resource definitions (01-api.md §1) ----

#[test]
fn crd_names_scope_and_versions() {
    let nw = crdgen::nodewright_crd();
    assert_eq!(
        nw.metadata.name.as_deref(),
        Some("nodewrights.nodewright.nvidia.com")
    );
    assert_eq!(nw.spec.group, "nodewright.nvidia.com");
    assert_eq!(nw.spec.scope, "Cluster");
    assert_eq!(nw.spec.names.kind, "NodeWright");
    assert_eq!(nw.spec.names.plural, "nodewrights");
    assert_eq!(nw.spec.names.singular.as_deref(), Some("nodewright"));
    assert!(nw.spec.names.short_names.as_ref().is_none_or(Vec::is_empty));
    let dp = crdgen::deployment_policy_crd();
    assert_eq!(
        dp.metadata.name.as_deref(),
        Some("deploymentpolicies.nodewright.nvidia.com")
    );
    assert_eq!(dp.spec.scope, "Cluster");
    assert_eq!(dp.spec.names.kind, "DeploymentPolicy");
    assert_eq!(dp.spec.names.plural, "deploymentpolicies");
    for crd in [&nw, &dp] {
        assert_eq!(crd.spec.versions.len(), 1);
        let v = &crd.spec.versions[0];
        assert_eq!(
            (v.name.as_str(), v.served, v.storage),
            ("v1alpha1", true, true)
        );
    }
    let status = |crd: &CustomResourceDefinition| {
        crd.spec.versions[0]
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some()
    };
    assert!(status(&nw), "NodeWright has a status subresource");
    assert!(!status(&dp), "DeploymentPolicy has no status subresource");
    assert!(dp.spec.versions[0].additional_printer_columns.is_none());
}

// ---- printer columns (01-api.md §2.1) ----

fn printer_column(index: usize, name: &str, type_: &str, json_path: &str) {
    let crd = crdgen::nodewright_crd();
    let columns = crd.spec.versions[0]
        .additional_printer_columns
        .clone()
        .expect("printer columns");
    assert_eq!(columns.len(), 7, "exactly seven columns");
    let column = &columns[index];
    assert_eq!(column.name, name, "column {index}");
    assert_eq!(column.type_, type_, "{name} type");
    assert_eq!(column.json_path, json_path, "{name} jsonPath");
}

#[test]
fn printer_column_status() {
    printer_column(0, "Status", "string", ".status.status");
}

#[test]
fn printer_column_priority() {
    printer_column(1, "Priority", "integer", ".spec.priority");
}

#[test]
fn printer_column_age() {
    printer_column(2, "Age", "date", ".metadata.creationTimestamp");
}

#[test]
fn printer_column_nodes_in_progress() {
    printer_column(3, "Nodes In-Progress", "integer", ".status.nodesInProgress");
}

#[test]
fn printer_column_complete_nodes() {
    printer_column(4, "Complete Nodes", "string", ".status.completeNodes");
}

#[test]
fn printer_column_packages() {
    printer_column(5, "Packages", "string", ".status.packageList");
}

#[test]
fn printer_column_policy() {
    printer_column(6, "Policy", "string", ".spec.deploymentPolicy");
}

// ---- schema facts (01-api.md §2.2–§3.2) ----

#[test]
fn crd_nodewright_spec_defaults_and_enums() {
    let s = schema(&crdgen::nodewright_crd());
    assert_eq!(at(&s, "spec.priority")["default"], json!(200));
    assert_eq!(at(&s, "spec.priority")["minimum"].as_f64(), Some(1.0));
    assert_eq!(at(&s, "spec.sequencing")["default"], json!("node"));
    let mut modes: Vec<&str> = at(&s, "spec.sequencing")["enum"]
        .as_array()
        .expect("enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    modes.sort();
    assert_eq!(modes, ["all", "node"]);
    for flag in [
        "serial",
        "runtimeRequired",
        "autoTaintNewNodes",
        "runtimeRequiredCordonAfter",
    ] {
        assert_eq!(
            at(&s, &format!("spec.{flag}"))["default"],
            json!(false),
            "{flag}"
        );
    }
    for selector in ["nodeSelectors", "podNonInterruptLabels"] {
        let sel = at(&s, &format!("spec.{selector}"));
        assert_eq!(sel["x-kubernetes-map-type"], json!("atomic"), "{selector}");
        assert!(
            sel.get("default").is_none(),
            "{selector} has no schema default"
        );
        assert_eq!(
            at(&s, &format!("spec.{selector}.matchExpressions"))["x-kubernetes-list-type"],
            json!("atomic")
        );
    }
    for absent in [
        "deploymentPolicy",
        "interruptionBudget",
        "packages",
        "additionalTolerations",
    ] {
        assert!(
            at(&s, &format!("spec.{absent}")).get("default").is_none(),
            "{absent}"
        );
    }
    let budget = at(&s, "spec.interruptionBudget");
    assert_eq!(budget["properties"]["percent"]["nullable"], json!(true));
    assert_eq!(
        budget["properties"]["percent"]["maximum"].as_f64(),
        Some(100.0)
    );
    assert_eq!(
        budget["properties"]["percent"]["minimum"].as_f64(),
        Some(0.0)
    );
    assert_eq!(budget["properties"]["count"]["minimum"].as_f64(), Some(0.0));
    assert_eq!(
        at(
            &s,
            "spec.deploymentPolicyOptions.resetBatchStateOnCompletion"
        )["default"],
        json!(true)
    );
}

#[test]
fn crd_nodewright_package_schema() {
    let s = schema(&crdgen::nodewright_crd());
    let pkg = at(&s, "spec.packages.*");
    assert_eq!(pkg["required"], json!(["image", "version"]));
    assert_eq!(
        pkg["properties"]["name"]["pattern"],
        json!("^[a-z][-a-z0-9]{0,41}[a-z]$")
    );
    assert_eq!(pkg["properties"]["name"]["maxLength"], json!(43));
    assert_eq!(pkg["properties"]["image"]["pattern"], json!(r"^\S+$"));
    assert_eq!(
        pkg["properties"]["containerSHA"]["pattern"],
        json!("^sha256:[0-9a-f]{64}$")
    );
    for duration in ["gracefulShutdown", "stageTimeout"] {
        assert_eq!(
            pkg["properties"][duration]["type"],
            json!("string"),
            "{duration}"
        );
    }
    let uninstall = at(&s, "spec.packages.*.uninstall");
    assert_eq!(uninstall["required"], json!(["apply", "enabled"]));
    assert_eq!(uninstall["properties"]["enabled"]["default"], json!(false));
    assert_eq!(uninstall["properties"]["apply"]["default"], json!(false));
    let mut types: Vec<&str> = at(&s, "spec.packages.*.interrupt.type")["enum"]
        .as_array()
        .expect("enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    types.sort();
    assert_eq!(types, ["noop", "reboot", "restartAllServices", "service"]);
    assert_eq!(
        at(&s, "spec.packages.*.interrupt")["required"],
        json!(["type"])
    );
    for q in ["cpuRequest", "cpuLimit", "memoryRequest", "memoryLimit"] {
        let field = at(&s, &format!("spec.packages.*.resources.{q}"));
        assert_eq!(field["x-kubernetes-int-or-string"], json!(true), "{q}");
        assert!(
            field["pattern"]
                .as_str()
                .is_some_and(|p| p.contains("[KMGTPE]i")),
            "{q}"
        );
    }
    let key_ref = at(&s, "spec.packages.*.env.[].valueFrom.configMapKeyRef");
    assert_eq!(key_ref["required"], json!(["key"]));
}

#[test]
fn crd_nodewright_status_schema() {
    let s = schema(&crdgen::nodewright_crd());
    assert_eq!(at(&s, "status.nodesInProgress")["default"], json!(0));
    assert_eq!(at(&s, "status.completeNodes")["default"], json!("0/0"));
    assert_eq!(at(&s, "status.packageList")["default"], json!(""));
    assert_eq!(
        at(&s, "status.conditions")["x-kubernetes-list-type"],
        json!("map")
    );
    assert_eq!(
        at(&s, "status.conditions")["x-kubernetes-list-map-keys"],
        json!(["type"])
    );
    let mut statuses: Vec<&str> = at(&s, "status.status")["enum"]
        .as_array()
        .expect("enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    statuses.sort();
    assert_eq!(
        statuses,
        [
            "blocked",
            "complete",
            "disabled",
            "erroring",
            "in_progress",
            "paused",
            "unknown",
            "waiting"
        ]
    );
    let entry = at(&s, "status.nodeState.*.*");
    assert_eq!(
        entry["required"],
        json!(["image", "name", "stage", "version"])
    );
    let compartment = at(&s, "status.compartmentStatuses.*");
    assert_eq!(
        compartment["required"],
        json!([
            "ceiling",
            "completed",
            "inProgress",
            "matched",
            "progressPercent"
        ])
    );
}

#[test]
fn crd_deployment_policy_schema() {
    let s = schema(&crdgen::deployment_policy_crd());
    assert_eq!(at(&s, "spec")["required"], json!(["default"]));
    let default = at(&s, "spec.default");
    assert_eq!(default["required"], json!(["strategy"]));
    assert!(at(&s, "spec.default.budget").get("default").is_none());
    assert_eq!(
        at(&s, "spec.resetBatchStateOnCompletion")["default"],
        json!(true)
    );
    let compartment = at(&s, "spec.compartments.[]");
    assert_eq!(
        compartment["required"],
        json!(["budget", "name", "selector"])
    );
    assert_eq!(compartment["properties"]["name"]["minLength"], json!(1));
    assert_eq!(
        compartment["properties"]["selector"]["x-kubernetes-map-type"],
        json!("atomic")
    );
    let ranges = [
        ("budget.percent", Some(1.0), Some(100.0)),
        ("budget.count", Some(1.0), None),
        ("strategy.fixed.initialBatch", Some(1.0), None),
        ("strategy.linear.delta", Some(1.0), None),
        ("strategy.exponential.growthFactor", Some(2.0), None),
        ("strategy.fixed.batchThreshold", Some(1.0), Some(100.0)),
        ("strategy.linear.failureThreshold", Some(1.0), None),
        ("strategy.exponential.safetyLimit", Some(1.0), Some(100.0)),
    ];
    for (path, min, max) in ranges {
        let field = at(&s, &format!("spec.compartments.[].{path}"));
        assert_eq!(field["type"], json!("integer"), "{path}");
        assert_eq!(field["minimum"].as_f64(), min, "{path} minimum");
        assert_eq!(field["maximum"].as_f64(), max, "{path} maximum");
        assert!(
            field.get("default").is_none(),
            "{path}: defaults come from the webhook"
        );
    }
}

/// Issue 16: the upstream limits that cannot reject an object the Go operator stored are back:
/// `metav1.Condition` length and status limits, atomic env `valueFrom` references, and
/// `fileKeyRef.optional` defaulting to false.
#[test]
fn crd_restores_upstream_condition_limits_and_atomic_env_refs() {
    let s = schema(&crdgen::nodewright_crd());
    let cond = at(&s, "status.conditions.[]");
    assert_eq!(cond["properties"]["type"]["maxLength"], json!(316));
    assert_eq!(cond["properties"]["reason"]["maxLength"], json!(1024));
    assert_eq!(
        cond["properties"]["status"]["enum"],
        json!(["True", "False", "Unknown"])
    );
    assert_eq!(
        cond["properties"]["observedGeneration"]["minimum"].as_f64(),
        Some(0.0)
    );
    let refs = at(&s, "spec.packages.*.env.[].valueFrom");
    for r in [
        "configMapKeyRef",
        "secretKeyRef",
        "fieldRef",
        "resourceFieldRef",
        "fileKeyRef",
    ] {
        assert_eq!(
            refs["properties"][r]["x-kubernetes-map-type"],
            json!("atomic"),
            "{r}"
        );
    }
    assert_eq!(
        refs["properties"]["fileKeyRef"]["properties"]["optional"]["default"],
        json!(false)
    );
}
