//! The chart's values contract (issue 12 part 3), without a cluster: every value is commented in
//! values.yaml, described by values.schema.json, and the README's values table is current; the
//! golden renders (tests/helm/golden, written by tests/helm/render.sh) give the operator valid options.

use std::collections::BTreeMap;
use std::time::Duration;

use nodewright_core::options::Options;
use nodewright_tests::chart_values::{chart_dir, readme_pair};
use serde_json::Value;

#[test]
fn chart_values_are_commented_schemad_and_tabled() {
    let (current, fresh) = readme_pair(&chart_dir()).unwrap_or_else(|problems| {
        panic!("chart values contract broken:\n  {}", problems.join("\n  "))
    });
    assert!(
        current == fresh,
        "chart/README.md values table is stale: run `cargo run -p nodewright-tests --bin chart-readme`"
    );
}

/// The operator container of one golden render.
fn golden_container(name: &str) -> Value {
    let path = chart_dir().join(format!("../tests/helm/golden/{name}.yaml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("golden render parses");
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .unwrap_or_else(|| panic!("golden {name} renders no Deployment"));
    let container = deployment["spec"]["template"]["spec"]["containers"][0].clone();
    assert_eq!(container["name"], "manager", "golden {name}");
    container
}

/// The operator container's literal env of one golden render (`valueFrom` entries are skipped).
fn golden_env(name: &str) -> BTreeMap<String, String> {
    golden_container(name)["env"]
        .as_array()
        .expect("env list")
        .iter()
        .filter_map(|e| {
            Some((
                e["name"].as_str()?.to_string(),
                e["value"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// Every golden render's Deployment env is accepted by the operator's option parser and carries
/// the values its values file set (a misspelt variable or a bad format fails here).
#[test]
fn chart_env_parses_as_operator_options() {
    let default = Options::from_env(&golden_env("default")).expect("default env");
    assert_eq!(default.namespace, "nodewright");
    assert!(default.leader_election && default.enable_webhooks);
    assert_eq!(
        default.agent_image,
        "ghcr.io/nvidia/nodewright/agent:v7.0.0"
    );
    assert_eq!(default.agent_version(), "v7.0.0");
    assert_eq!(
        (default.metrics_addr.as_str(), default.probe_addr.as_str()),
        (":8443", ":8081")
    );
    assert_eq!(default.webhook_service_name, "nodewright-webhook-service");
    assert_eq!(default.image_pull_secret, None);

    let custom = Options::from_env(&golden_env("custom")).expect("custom env");
    assert_eq!(
        (custom.log_encoder.as_str(), custom.log_level.as_str()),
        ("console", "debug")
    );
    assert_eq!(
        (custom.metrics_addr.as_str(), custom.probe_addr.as_str()),
        (":9090", ":9091")
    );
    assert_eq!(custom.default_interval, Duration::from_secs(300));
    assert_eq!(custom.job_ttl_succeeded, Duration::from_secs(1800));
    assert_eq!(custom.job_backoff_limit, 5);
    assert_eq!(custom.job_image_pull_grace, Duration::ZERO);
    assert!(custom.reapply_on_reboot && !custom.publish_legacy_metrics);
    assert_eq!(custom.webhook_service_name, "nw-admission");
    assert_eq!(custom.webhook_secret_name, "nw-webhook-cert");
    assert_eq!(custom.image_pull_secret.as_deref(), Some("regcred"));
    assert_eq!(
        custom.package_priority_class_name.as_deref(),
        Some("nodewright-packages")
    );
    assert_eq!(
        custom.agent_image,
        "registry.example.com/nodewright/agent:v7.0.0"
    );
    assert_eq!(
        golden_env("custom").get("WEBHOOK_PORT").map(String::as_str),
        Some("10443")
    );

    let minimal = Options::from_env(&golden_env("minimal")).expect("minimal env");
    assert!(!minimal.leader_election && !minimal.enable_webhooks);
}

/// Computed resources follow 06-operations §2.4 (float math, truncated): limits cpu
/// max(1000, 1.6·N·k) m, memory max(512, 0.8·N·k) Mi; requests cpu max(500, 0.8·N·k) m, memory
/// max(256, 0.4·N) Mi; k = max(1, 0.4·P).
#[test]
fn chart_sizes_the_operator_from_node_and_package_estimates() {
    for (golden, n, p, expected) in [
        ("default", 1, 1, ["1000m", "512Mi", "500m", "256Mi"]),
        // The spec's vector for N = 400, P = 5 (k = 2).
        ("minimal", 400, 5, ["1280m", "640Mi", "640m", "256Mi"]),
        // N = 700, P = 3: k = 1.2 is not an integer (1.6·700·1.2 = 1344).
        ("fleet", 700, 3, ["1344m", "672Mi", "672m", "280Mi"]),
    ] {
        let r = &golden_container(golden)["resources"];
        let got = [
            &r["limits"]["cpu"],
            &r["limits"]["memory"],
            &r["requests"]["cpu"],
            &r["requests"]["memory"],
        ]
        .map(|v| v.as_str().unwrap_or_default().to_string());
        assert_eq!(got, expected, "golden {golden}: N = {n}, P = {p}");
    }
}
