//! The CRDs and admission webhooks as the apiserver applies them.

use anyhow::{Context, Result, bail};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::harness::{client, namespace, nodewright_resource, policy_resource};

/// Parses every document of a YAML file into JSON values.
fn yaml_docs(path: &std::path::Path) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).with_context(|| path.display().to_string())?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Dry-run creates `doc` (NodeWright or DeploymentPolicy) through the apiserver.
async fn dry_run_create(doc: &Value) -> Result<(), kube::Error> {
    let client = client().await.expect("client");
    let obj: DynamicObject = serde_json::from_value(doc.clone()).expect("object");
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let api: Api<DynamicObject> = match doc["kind"].as_str() {
        Some("DeploymentPolicy") => Api::namespaced_with(client, &namespace(), &policy_resource()),
        _ => Api::all_with(client, &nodewright_resource()),
    };
    api.create(&pp, &obj).await.map(|_| ())
}

/// 01-api.md §2/§3: every example manifest in crds/examples is accepted by the apiserver
/// (structural schema, defaults, CEL rules and, when registered, the webhooks) — dry run.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn crd_examples_accepted_by_apiserver() -> Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds/examples");
    let mut count = 0;
    let mut paths: Vec<_> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    paths.sort();
    for path in paths
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
    {
        for doc in yaml_docs(path)? {
            dry_run_create(&doc)
                .await
                .with_context(|| format!("{} ({})", path.display(), doc["metadata"]["name"]))?;
            count += 1;
        }
    }
    if count < 6 {
        bail!("only {count} example objects found in {}", dir.display());
    }
    eprintln!("[e2e] {count} example objects accepted");
    Ok(())
}

/// A minimal valid NodeWright with one package carrying `resources`.
fn nodewright_with_resources(resources: Value) -> Value {
    json!({
        "apiVersion": "nodewright.nvidia.com/v1alpha1",
        "kind": "NodeWright",
        "metadata": { "name": "webhook-probe" },
        "spec": { "packages": { "probe": {
            "version": "1.0.0", "image": "example.invalid/probe", "resources": resources,
        } } },
    })
}

/// Asserts the dry-run create of `doc` is denied with a message containing every `needle`.
async fn assert_denied(doc: &Value, needles: &[&str]) -> Result<()> {
    match dry_run_create(doc).await {
        Ok(()) => bail!("admitted, expected a denial containing {needles:?}"),
        Err(kube::Error::Api(e)) => {
            for n in needles {
                if !e.message.contains(n) {
                    bail!("denial {:?} does not contain {n:?}", e.message);
                }
            }
            eprintln!("[e2e] denied ({}): {}", e.code, e.message);
            Ok(())
        }
        Err(e) => bail!("unexpected error {e}"),
    }
}

/// 01-api.md §4.3 rule 4h through the URL-mode validating webhook: cpuLimit below cpuRequest.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh (webhooks registered)"]
async fn webhook_4h_cpu_limit_below_request_denied() -> Result<()> {
    let res =
        json!({ "cpuRequest": "2", "cpuLimit": "1", "memoryRequest": "1Gi", "memoryLimit": "1Gi" });
    assert_denied(
        &nodewright_with_resources(res),
        &["package \"probe\"", "cpuLimit", "must be >= cpuRequest"],
    )
    .await?;
    let ok =
        json!({ "cpuRequest": "1", "cpuLimit": "2", "memoryRequest": "1Gi", "memoryLimit": "1Gi" });
    dry_run_create(&nodewright_with_resources(ok))
        .await
        .context("valid resources denied")?;
    Ok(())
}

/// 01-api.md §4.3 rule 4g: some but not all resource overrides set.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh (webhooks registered)"]
async fn webhook_4g_partial_resources_denied() -> Result<()> {
    let res = json!({ "cpuRequest": "1" });
    assert_denied(
        &nodewright_with_resources(res),
        &["if any resource override is set"],
    )
    .await
}

/// 01-api.md §4.6 rule P1: a DeploymentPolicy default budget with neither percent nor count.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh (webhooks registered)"]
async fn webhook_p1_policy_budget_denied() -> Result<()> {
    let doc = json!({
        "apiVersion": "nodewright.nvidia.com/v1alpha1",
        "kind": "DeploymentPolicy",
        "metadata": { "name": "webhook-probe", "namespace": namespace() },
        "spec": { "default": { "budget": {}, "strategy": { "fixed": {} } } },
    });
    assert_denied(&doc, &["exactly one of percent or count"]).await
}
