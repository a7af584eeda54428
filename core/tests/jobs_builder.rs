//! Golden manifests of 03-executor.md (§0.8, §3.11, §2) against the builders, and the builder
//! rules of 04-jobs-rules.md §1.

#[path = "jobs_support.rs"]
mod support;

use std::fs;

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, SecretKeySelector, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use nodewright_core::jobs::{self, naming};
use nodewright_crds::duration::GoDuration;
use nodewright_crds::{InterruptType, ResourceRequirements, Stage, keys};
use serde_json::Value;
use support::*;

const FINGERPRINT: &str = "nodewright.nvidia.com/executor-fingerprint";

fn golden(name: &str) -> Value {
    let path = format!("{}/tests/golden/jobs/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&fs::read_to_string(path).expect("golden file")).expect("golden json")
}

/// Compares a built Job with a golden file; the fingerprint (a digest, not derivable from the
/// spec text) must be 64 lowercase hex characters and is then masked.
fn assert_golden(job: &k8s_openapi::api::batch::v1::Job, name: &str) {
    let mut actual = serde_json::to_value(job).unwrap();
    let fp = actual["metadata"]["annotations"][FINGERPRINT]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(fp.len(), 64);
    assert!(
        fp.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    actual["metadata"]["annotations"][FINGERPRINT] = Value::String("<fingerprint>".into());
    let expected = golden(name);
    assert_eq!(
        actual,
        expected,
        "{name}: actual\n{}",
        serde_json::to_string_pretty(&actual).unwrap()
    );
}

#[test]
fn r1_1_2_golden_package_job_worked_example() {
    let mut pkg = package("baz", "1.1.0");
    pkg.config_map = [
        ("config.yaml".to_string(), "a: 1".to_string()),
        ("config_check.yaml".to_string(), "b: 2".to_string()),
    ]
    .into();
    let nw = demo_with(vec![pkg.clone()]);
    let o = options();
    let job = jobs::build_package_job(&inputs(&nw, &pkg, Stage::Apply, "worker-1", &o));
    assert_golden(&job, "package_apply_worked_example.json");
}

#[test]
fn r1_3_2_golden_plain_package_stage_without_config() {
    let nw = demo();
    let o = options();
    let pkg = nw.spec.packages["baz"].clone();
    let job = jobs::build_package_job(&inputs(&nw, &pkg, Stage::PostInterrupt, "worker-1", &o));
    assert_golden(&job, "package_post_interrupt_plain.json");
}

#[test]
fn r1_3_golden_package_job_with_every_option() {
    let sha = format!("sha256:{}", "ab".repeat(32));
    let mut pkg = package("baz", "1.1.0");
    pkg.container_sha = sha;
    pkg.agent_image_override = "example.com/agent:9.9.9".into();
    pkg.env = vec![
        EnvVar {
            name: "GREETING".into(),
            value: Some("hello".into()),
            value_from: None,
        },
        EnvVar {
            name: "TOKEN".into(),
            value: None,
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: "pkg-secret".into(),
                    key: "token".into(),
                    optional: None,
                }),
                ..EnvVarSource::default()
            }),
        },
    ];
    pkg.resources = Some(ResourceRequirements {
        cpu_request: Some(Quantity("250m".into())),
        cpu_limit: Some(Quantity("500m".into())),
        memory_request: Some(Quantity("256Mi".into())),
        memory_limit: Some(Quantity("512Mi".into())),
    });
    pkg.config_map = [
        ("b.conf".to_string(), "x".to_string()),
        ("a.conf".to_string(), "y".to_string()),
    ]
    .into();
    pkg.graceful_shutdown = Some(GoDuration::new("1.9s"));
    pkg.stage_timeout = Some(GoDuration::new("1500ms"));
    let mut nw = demo_with(vec![pkg.clone()]);
    nw.spec.additional_tolerations = vec![Toleration {
        key: Some("dedicated".into()),
        operator: Some("Equal".into()),
        value: Some("gpu".into()),
        effect: Some("NoSchedule".into()),
        toleration_seconds: None,
    }];
    let mut o = options();
    o.image_pull_secret = Some("regcred".into());
    o.package_priority_class_name = Some("system-node-critical".into());
    let mut i = inputs(&nw, &pkg, Stage::Config, "worker-1", &o);
    i.node_order = 2;
    assert_golden(&jobs::build_package_job(&i), "package_config_full.json");
}

#[test]
fn r1_1_3_golden_interrupt_job_merging_two_packages() {
    // Packages baz and qux both restart services; the lifecycle merged them into one service
    // interrupt (sorted) run by baz, the alphabetically first contributor (03 §2.1).
    let nw = demo_with(vec![package("baz", "1.1.0"), package("qux", "2.0.0")]);
    let merged = service_interrupt(&["containerd", "kubelet"]);
    let o = options();
    let pkg = nw.spec.packages["baz"].clone();
    let job = jobs::build_interrupt_job(
        &inputs(&nw, &pkg, Stage::Interrupt, "worker-1", &o),
        &merged,
    );
    assert_golden(&job, "interrupt_service_merged.json");
}

#[test]
fn r1_2_2_golden_long_node_name() {
    let node = "ip-10-0-0-1.us-west-2.compute.internal.very-long-node-name-example-abc";
    assert_eq!(node.len(), 70);
    let nw = demo();
    let o = options();
    let pkg = nw.spec.packages["baz"].clone();
    let job = jobs::build_package_job(&inputs(&nw, &pkg, Stage::Apply, node, &o));
    assert_golden(&job, "package_apply_long_node.json");
}

#[test]
fn r1_1_2_worked_names_of_03_0_8() {
    let cases = [
        (Stage::Apply, "demo-baz-1-1-0-apply-worker-1-64dabc20"),
        (
            Stage::PostInterrupt,
            "demo-baz-1-1-0-post-interrupt-worker-1-bdcb0403",
        ),
        (Stage::Config, "demo-baz-1-1-0-config-worker-1-0a9cbe02"),
        (Stage::Upgrade, "demo-baz-1-1-0-upgrade-worker-1-053bd02f"),
        (
            Stage::Uninstall,
            "demo-baz-1-1-0-uninstall-worker-1-94bb8b46",
        ),
    ];
    for (stage, name) in cases {
        assert_eq!(
            naming::package_job_name("demo", "baz", "1.1.0", stage, "worker-1"),
            name
        );
    }
}

#[test]
fn r1_1_3_worked_interrupt_names_of_03_0_8() {
    let cases = [
        (
            Stage::Interrupt,
            InterruptType::Reboot,
            "demo-interrupt-reboot-worker-1-f73c3214",
        ),
        (
            Stage::Interrupt,
            InterruptType::Service,
            "demo-interrupt-service-worker-1-58d80ec4",
        ),
        (
            Stage::Interrupt,
            InterruptType::RestartAllServices,
            "demo-interrupt-restartallservices-worker-1-4a109cb7",
        ),
        (
            Stage::Interrupt,
            InterruptType::Noop,
            "demo-interrupt-noop-worker-1-99c58586",
        ),
        (
            Stage::UninstallInterrupt,
            InterruptType::Reboot,
            "demo-uninstall-interrupt-reboot-worker-1-66cf5c04",
        ),
    ];
    for (stage, kind, name) in cases {
        assert_eq!(
            naming::interrupt_job_name("demo", stage, kind, "worker-1"),
            name
        );
    }
    assert_eq!(
        naming::package_metadata_volume_name("worker-1"),
        "metadata-worker-1-88f62dd4"
    );
    assert_eq!(
        naming::node_metadata_config_map_name("demo", "worker-1"),
        "demo-worker-1-metadata-76cd769f"
    );
}

#[test]
fn r1_1_4_names_are_deterministic_no_random_suffix() {
    let nw = demo();
    let a = package_job(&nw, "baz", Stage::Apply, "worker-1", "u1");
    let b = package_job(&nw, "baz", Stage::Apply, "worker-1", "u2");
    assert_eq!(a.metadata.name, b.metadata.name);
    assert!(a.metadata.generate_name.is_none());
}

#[test]
fn r1_1_5_owner_reference_is_the_controller_nodewright() {
    let job = package_job(&demo(), "baz", Stage::Apply, "worker-1", "u1");
    let owners = job.metadata.owner_references.unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].kind, "NodeWright");
    assert_eq!(owners[0].uid, UID);
    assert_eq!(owners[0].controller, Some(true));
    assert_eq!(job.metadata.namespace.as_deref(), Some("nodewright"));
}

#[test]
fn r1_2_1_labels_on_job_and_template_and_interrupt_capital_true() {
    let nw = demo();
    let job = package_job(&nw, "baz", Stage::Apply, "worker-1", "u1");
    let template = job
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap();
    assert_eq!(job.metadata.labels, template.labels);
    assert!(
        !job.metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key(keys::LABEL_INTERRUPT)
    );
    let int = interrupt_job(&nw, "baz", &service_interrupt(&["a"]), "worker-1", "u2");
    assert_eq!(
        int.metadata.labels.as_ref().unwrap()[keys::LABEL_INTERRUPT],
        "True"
    );
}

#[test]
fn r1_2_3_r1_2_4_resource_id_and_package_annotation_on_template() {
    let job = package_job(&demo(), "baz", Stage::Apply, "worker-1", "u1");
    let a = job.metadata.annotations.as_ref().unwrap();
    assert_eq!(a[keys::RESOURCE_ID], format!("demo-{UID}-4"));
    let template = job
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap();
    let t = template.annotations.as_ref().unwrap();
    assert_eq!(t.len(), 1, "exactly one template annotation");
    assert_eq!(t[keys::PACKAGE], a[keys::PACKAGE]);
}

#[test]
fn r1_3_7_deadline_rounds_up_clamps_and_zero_omits() {
    let mut pkg = package("baz", "1.1.0");
    let o = options();
    pkg.stage_timeout = Some(GoDuration::new("1ms"));
    assert_eq!(jobs::builder::deadline_seconds(&pkg, &o), Some(1));
    pkg.stage_timeout = Some(GoDuration::new("0"));
    assert_eq!(jobs::builder::deadline_seconds(&pkg, &o), None);
    pkg.stage_timeout = Some(GoDuration::new("1000000h"));
    assert_eq!(
        jobs::builder::deadline_seconds(&pkg, &o),
        Some(i64::from(i32::MAX))
    );
    let nw = demo_with(vec![pkg.clone()]);
    pkg.stage_timeout = Some(GoDuration::new("0"));
    let nw0 = demo_with(vec![pkg.clone()]);
    let job = package_job(&nw0, "baz", Stage::Apply, "n", "u");
    let spec = job.spec.unwrap();
    assert_eq!(spec.template.spec.unwrap().active_deadline_seconds, None);
    assert_eq!(
        spec.active_deadline_seconds, None,
        "no Job-level deadline on package Jobs"
    );
    let _ = nw;
}

#[test]
fn r1_3_8_effective_timeout_package_overrides_operator_default() {
    let mut o = options();
    o.job_stage_timeout = std::time::Duration::from_secs(90);
    let mut pkg = package("baz", "1.1.0");
    assert_eq!(jobs::builder::deadline_seconds(&pkg, &o), Some(90));
    pkg.stage_timeout = Some(GoDuration::new("20s"));
    assert_eq!(jobs::builder::deadline_seconds(&pkg, &o), Some(20));
    o.job_stage_timeout = std::time::Duration::ZERO;
    pkg.stage_timeout = None;
    assert_eq!(jobs::builder::deadline_seconds(&pkg, &o), None);
}

#[test]
fn r1_3_9_no_ttl_and_no_suspend_at_creation() {
    let spec = package_job(&demo(), "baz", Stage::Apply, "n", "u")
        .spec
        .unwrap();
    assert_eq!(spec.ttl_seconds_after_finished, None);
    assert_eq!(spec.suspend, None);
}

#[test]
fn r1_3_4_backoff_limit_follows_option() {
    let nw = demo();
    let mut o = options();
    o.job_backoff_limit = 0;
    let pkg = nw.spec.packages["baz"].clone();
    let job = jobs::build_package_job(&inputs(&nw, &pkg, Stage::Apply, "n", &o));
    assert_eq!(job.spec.unwrap().backoff_limit, Some(0));
}

#[test]
fn r1_4_1_r1_4_2_interrupt_job_shape_and_d18_allowance() {
    let nw = demo();
    let int = interrupt_job(&nw, "baz", &service_interrupt(&["kubelet"]), "n", "u");
    let spec = int.spec.as_ref().unwrap();
    assert_eq!(spec.backoff_limit, Some(i32::MAX));
    assert!(spec.pod_failure_policy.is_none());
    assert_eq!(spec.active_deadline_seconds, Some(3600));
    let pod = spec.template.spec.as_ref().unwrap();
    assert_eq!(pod.restart_policy.as_deref(), Some("OnFailure"));
    assert_eq!(pod.active_deadline_seconds, None);
    assert_eq!(pod.termination_grace_period_seconds, None);
    assert_eq!(
        int.metadata.annotations.as_ref().unwrap()[keys::RESTART_ALLOWANCE],
        "3"
    );
    let reboot = nodewright_crds::Interrupt {
        type_: InterruptType::Reboot,
        services: vec![],
    };
    let rb = interrupt_job(&nw, "baz", &reboot, "n", "u");
    assert!(
        !rb.metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key(keys::RESTART_ALLOWANCE)
    );
}

#[test]
fn r1_3_2_unbounded_not_ready_and_unreachable_tolerations() {
    let job = package_job(&demo(), "baz", Stage::Apply, "n", "u");
    let tol = job
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .tolerations
        .unwrap();
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let t = tol.iter().find(|t| t.key.as_deref() == Some(key)).unwrap();
        assert_eq!(t.effect.as_deref(), Some("NoExecute"));
        assert_eq!(t.toleration_seconds, None);
    }
}

#[test]
fn legacy_runtime_toleration_dropped_on_key_and_effect_match() {
    let mut o = options();
    o.runtime_required_taint =
        nodewright_core::options::parse_taint("skyhook.nvidia.com=other:NoSchedule").unwrap();
    let tol = jobs::builder::tolerations(&demo(), &o);
    assert_eq!(
        tol.iter()
            .filter(|t| t.key.as_deref() == Some("skyhook.nvidia.com"))
            .count(),
        1
    );
}

#[test]
fn encoded_interrupt_matches_03_2_3_example() {
    assert_eq!(
        jobs::builder::encode_interrupt(&service_interrupt(&["containerd", "kubelet"])),
        "eyJ0eXBlIjoic2VydmljZV9yZXN0YXJ0Iiwic2VydmljZXMiOlsiY29udGFpbmVyZCIsImt1YmVsZXQiXX0="
    );
}

#[test]
fn node_metadata_config_map_shape() {
    let nw = demo();
    let mut n = node("worker-1", None);
    n.metadata.annotations = Some([("a".to_string(), "<x>".to_string())].into());
    let cm = jobs::node_metadata_config_map(&nw, &n, &options());
    assert_eq!(
        cm.metadata.name.as_deref(),
        Some("demo-worker-1-metadata-76cd769f")
    );
    assert_eq!(
        cm.metadata.labels.as_ref().unwrap()[keys::NODE_META],
        "demo"
    );
    let data = cm.data.unwrap();
    assert_eq!(data["annotations.json"], r#"{"a":"\u003cx\u003e"}"#);
    assert_eq!(
        data["labels.json"],
        r#"{"kubernetes.io/hostname":"worker-1"}"#
    );
    assert_eq!(
        data["packages.json"],
        format!(
            r#"{{"agentVersion":"latest","packages":{{"baz":{{"name":"baz","version":"1.1.0","image":"{IMAGE}"}}}}}}"#
        )
    );
}

#[test]
fn package_config_map_shape() {
    let mut pkg = package("Baz", "1.1.0");
    pkg.config_map = [("k".to_string(), "v".to_string())].into();
    let cm = jobs::package_config_map(&demo(), &pkg, &options());
    assert_eq!(cm.metadata.name.as_deref(), Some("demo-baz-1.1.0"));
    let a = cm.metadata.annotations.unwrap();
    assert_eq!(a["nodewright.nvidia.com/Package.Name"], "Baz");
    assert_eq!(cm.data.unwrap()["k"], "v");
}

#[test]
fn r2_5_metadata_config_map_upserted_only_when_data_differs() {
    let nw = demo();
    let n = node("worker-1", None);
    let desired = jobs::node_metadata_config_map(&nw, &n, &options());
    let mut snap = snapshot(nw.clone(), vec![n.clone()], vec![], vec![]);
    assert!(jobs::upsert_if_changed(&snap, desired.clone()).is_some());
    let mut existing = desired.clone();
    existing.metadata.resource_version = Some("7".into());
    snap.config_maps.push(existing.into());
    assert!(jobs::upsert_if_changed(&snap, desired).is_none());
}

/// D29: a node-metadata ConfigMap held as digests is up to date exactly when the data the core
/// would write has those digests; any changed value is rewritten.
#[test]
fn d29_digested_metadata_config_map_is_rewritten_only_when_data_differs() {
    let nw = demo();
    let n = node("worker-1", None);
    let desired = jobs::node_metadata_config_map(&nw, &n, &options());
    let mut held = desired.clone();
    jobs::configmap::digest_node_metadata(&mut held);
    let digests = held.data.clone().unwrap_or_default();
    assert!(
        digests
            .values()
            .all(|v| v.starts_with("sha256:") && v.len() == 71)
    );
    // Idempotent: a recorded snapshot replayed through the cache's strip is not digested again.
    let mut again = held.clone();
    jobs::configmap::digest_node_metadata(&mut again);
    assert_eq!(again, held);
    assert_eq!(
        held.metadata.annotations.as_ref().unwrap()[jobs::configmap::DATA_DIGESTS],
        "sha256"
    );
    // One desired value against many held ones (the prune's packages.json): by digest where
    // the held ConfigMap is digested, by text where it is not.
    let packages = desired.data.as_ref().unwrap()["packages.json"].clone();
    let value = jobs::configmap::DesiredValue::new(&packages);
    assert!(value.matches(&held, &digests["packages.json"]));
    assert!(value.matches(&desired, &packages));
    assert!(
        !value.matches(&held, &packages),
        "a digested ConfigMap holds no text"
    );
    let mut snap = snapshot(nw.clone(), vec![n.clone()], vec![], vec![]);
    snap.config_maps.push(held.into());
    assert!(jobs::upsert_if_changed(&snap, desired.clone()).is_none());
    let mut changed = n.clone();
    changed.metadata.labels = Some([("gpu".to_string(), "a100".to_string())].into());
    let newer = jobs::node_metadata_config_map(&nw, &changed, &options());
    assert!(jobs::upsert_if_changed(&snap, newer).is_some());
}

/// D29: only node-metadata ConfigMaps are kept as digests; a package ConfigMap keeps its data,
/// and a digest mark on a ConfigMap without the node-metadata label is not trusted.
#[test]
fn d29_only_node_metadata_config_maps_are_digested() {
    let nw = demo();
    let pkg = nw.spec.packages.values().next().unwrap().clone();
    let mut package = jobs::package_config_map(&nw, &pkg, &options());
    package.data = Some([("k".to_string(), "v".to_string())].into());
    let before = package.clone();
    jobs::configmap::digest_node_metadata(&mut package);
    assert_eq!(package, before);
    package
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(jobs::configmap::DATA_DIGESTS.into(), "sha256".into());
    let marked = std::sync::Arc::new(package);
    assert!(jobs::configmap::DesiredValue::new("v").matches(&marked, "v"));
    let desired = [("k".to_string(), "v".to_string())].into();
    assert!(jobs::configmap::data_matches(&marked, &desired));
}
