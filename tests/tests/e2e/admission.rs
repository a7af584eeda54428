//! The CRDs and admission webhooks as the apiserver applies them.

use anyhow::{Context, Result, bail};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::harness::{client, nodewright_resource, policy_resource};

/// Parses every document of a YAML file into JSON values.
fn yaml_docs(path: &std::path::Path) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).with_context(|| path.display().to_string())?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// The API of `doc`'s kind (both kinds are cluster-scoped).
async fn api_for(doc: &Value) -> Api<DynamicObject> {
    let client = client().await.expect("client");
    match doc["kind"].as_str() {
        Some("DeploymentPolicy") => Api::all_with(client, &policy_resource()),
        _ => Api::all_with(client, &nodewright_resource()),
    }
}

/// Creates `doc` (NodeWright or DeploymentPolicy) through the apiserver, as a dry run or for real.
async fn create(doc: &Value, dry_run: bool) -> Result<(), kube::Error> {
    let obj: DynamicObject = serde_json::from_value(doc.clone()).expect("object");
    let pp = PostParams {
        dry_run,
        ..Default::default()
    };
    api_for(doc).await.create(&pp, &obj).await.map(|_| ())
}

/// Dry-run creates `doc`.
async fn dry_run_create(doc: &Value) -> Result<(), kube::Error> {
    create(doc, true).await
}

/// 01-api.md §2/§3: every example manifest in crds/examples is accepted by the apiserver
/// (structural schema, defaults, CEL rules and, when registered, the webhooks). DeploymentPolicies
/// are created for real first (the NodeWright webhook checks that a referenced policy exists) and
/// deleted at the end; NodeWrights are dry runs.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn crd_examples_accepted_by_apiserver() -> Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds/examples");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    paths.sort();
    let mut docs = Vec::new();
    for path in paths
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
    {
        docs.extend(yaml_docs(path)?.into_iter().map(|d| (path.clone(), d)));
    }
    if docs.len() < 6 {
        bail!(
            "only {} example objects found in {}",
            docs.len(),
            dir.display()
        );
    }
    let policies: Vec<_> = docs
        .iter()
        .filter(|(_, d)| d["kind"] == "DeploymentPolicy")
        .collect();
    let mut created = Vec::new();
    let mut outcome = Ok(());
    for (path, doc) in &policies {
        match create(doc, false).await {
            Ok(()) => created.push(doc.clone()),
            Err(e) => {
                outcome = Err(anyhow::Error::new(e).context(format!(
                    "{} ({})",
                    path.display(),
                    doc["metadata"]["name"]
                )));
                break;
            }
        }
    }
    if outcome.is_ok() {
        for (path, doc) in docs.iter().filter(|(_, d)| d["kind"] != "DeploymentPolicy") {
            if let Err(e) = dry_run_create(doc).await {
                outcome = Err(anyhow::Error::new(e).context(format!(
                    "{} ({})",
                    path.display(),
                    doc["metadata"]["name"]
                )));
                break;
            }
        }
    }
    for doc in &created {
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        let _ = api_for(doc).await.delete(name, &Default::default()).await;
    }
    outcome?;
    eprintln!("[e2e] {} example objects accepted", docs.len());
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
        "metadata": { "name": "webhook-probe" },
        "spec": { "default": { "budget": {}, "strategy": { "fixed": {} } } },
    });
    assert_denied(&doc, &["exactly one of percent or count"]).await
}
