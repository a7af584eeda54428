//! `nodewright-operator cleanup`: what `helm uninstall` runs (the chart's post-delete hook) so
//! nothing is left stuck once the operator is gone: our finalizers come off every NodeWright (the
//! objects stay; the CRDs are kept), labelled webhook configurations that would reject every
//! NodeWright write are deleted, and the operator-minted webhook certificate Secret is deleted.
//! Node annotations, labels and taints are left as they are (docs/operations.md).

use std::process::ExitCode;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use nodewright_crds::NodeWright;
use nodewright_crds::keys;
use serde_json::json;
use tracing::{error, info};

use crate::error::{ShellError, is_conflict, is_not_found};
use crate::webhook::bootstrap::CONFIG_LABEL;

/// Upper bound on every apiserver call of the cleanup.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// Attempts per NodeWright when its finalizer write conflicts.
const ATTEMPTS: u32 = 5;

/// What the cleanup changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// NodeWrights whose finalizers were removed.
    pub finalizers_removed: Vec<String>,
    /// Webhook configurations deleted (`kind/name`).
    pub webhook_configurations_deleted: Vec<String>,
    /// Whether the certificate Secret was deleted.
    pub secret_deleted: bool,
}

/// Entry point of the subcommand: exit 0 when everything was cleaned, 1 otherwise.
pub fn main() -> ExitCode {
    crate::logging::init(
        &std::env::var("LOG_ENCODER").unwrap_or_else(|_| "console".into()),
        &std::env::var("LOG_LEVEL").unwrap_or_else(|_| "info".into()),
    );
    let namespace = std::env::var("NAMESPACE").unwrap_or_else(|_| "nodewright".into());
    let secret = std::env::var("WEBHOOK_SECRET_NAME").unwrap_or_else(|_| "webhook-cert".into());
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("nodewright-operator cleanup: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let agent = format!(
            "nodewright-operator/{} (cleanup)",
            env!("CARGO_PKG_VERSION")
        );
        let client = crate::client::build(crate::client::Purpose::Request, &agent, None)
            .await
            .map_err(|e| ShellError::Other(e.to_string()))?;
        run(&client, &namespace, &secret).await
    });
    match result {
        Ok(report) => {
            info!(
                finalizers_removed = report.finalizers_removed.len(),
                webhook_configurations_deleted = report.webhook_configurations_deleted.len(),
                secret_deleted = report.secret_deleted,
                "cleanup done"
            );
            println!(
                "cleanup: finalizers removed from {} NodeWright(s) {:?}; webhook configurations deleted {:?}; secret {namespace}/{secret} deleted: {}",
                report.finalizers_removed.len(),
                report.finalizers_removed,
                report.webhook_configurations_deleted,
                report.secret_deleted
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            error!(error = %e, "cleanup failed");
            eprintln!("nodewright-operator cleanup: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the three cleanup steps; the first failure stops it (the hook is retried by re-running).
pub async fn run(
    client: &Client,
    namespace: &str,
    secret_name: &str,
) -> Result<Report, ShellError> {
    let mut report = Report {
        webhook_configurations_deleted: delete_webhook_configurations(client).await?,
        ..Report::default()
    };
    let api: Api<NodeWright> = Api::all(client.clone());
    for nw in timed(api.list(&ListParams::default())).await?.items {
        let name = nw.metadata.name.clone().unwrap_or_default();
        if remove_finalizers(&api, &name).await? {
            info!(nodewright = %name, "removed the NodeWright finalizer");
            report.finalizers_removed.push(name);
        }
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    report.secret_deleted = match timed(secrets.delete(secret_name, &DeleteParams::default())).await
    {
        Ok(_) => true,
        Err(ShellError::Kube(e)) if is_not_found(&e) => false,
        Err(e) => return Err(e),
    };
    Ok(report)
}

/// True for finalizers NodeWright (or the Go operator it replaces) puts on objects.
pub fn is_ours(finalizer: &str) -> bool {
    finalizer == keys::FINALIZER
        || finalizer.starts_with(&format!("{}/", keys::PREFIX))
        || finalizer.starts_with(&format!("{}/", keys::LEGACY_PREFIX))
}

/// Removes our finalizers from one NodeWright under a resourceVersion precondition; true if
/// something was removed.
async fn remove_finalizers(api: &Api<NodeWright>, name: &str) -> Result<bool, ShellError> {
    for _ in 0..ATTEMPTS {
        let Some(nw) = timed(api.get_opt(name)).await? else {
            return Ok(false);
        };
        let current = nw.metadata.finalizers.clone().unwrap_or_default();
        let keep: Vec<&String> = current.iter().filter(|f| !is_ours(f)).collect();
        if keep.len() == current.len() {
            return Ok(false);
        }
        let body = json!({"metadata": {
            "finalizers": keep,
            "resourceVersion": nw.metadata.resource_version,
        }});
        match timed(api.patch(name, &PatchParams::default(), &Patch::Merge(&body))).await {
            Ok(_) => return Ok(true),
            Err(ShellError::Kube(e)) if is_not_found(&e) => return Ok(false),
            Err(ShellError::Kube(e)) if is_conflict(&e) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ShellError::ConflictRetriesExhausted(ATTEMPTS))
}

async fn delete_webhook_configurations(client: &Client) -> Result<Vec<String>, ShellError> {
    let lp = ListParams::default().labels(&format!("{CONFIG_LABEL}=true"));
    let mut deleted = Vec::new();
    let vapi: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    for cfg in timed(vapi.list(&lp)).await?.items {
        let name = cfg.metadata.name.unwrap_or_default();
        if delete_one(&vapi, &name).await? {
            deleted.push(format!("validatingwebhookconfiguration/{name}"));
        }
    }
    let mapi: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    for cfg in timed(mapi.list(&lp)).await?.items {
        let name = cfg.metadata.name.unwrap_or_default();
        if delete_one(&mapi, &name).await? {
            deleted.push(format!("mutatingwebhookconfiguration/{name}"));
        }
    }
    for d in &deleted {
        info!(configuration = %d, "deleted the webhook configuration");
    }
    Ok(deleted)
}

async fn delete_one<K>(api: &Api<K>, name: &str) -> Result<bool, ShellError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match timed(api.delete(name, &DeleteParams::default())).await {
        Ok(_) => Ok(true),
        Err(ShellError::Kube(e)) if is_not_found(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

async fn timed<T>(
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, ShellError> {
    tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .map_err(|_| ShellError::Other(format!("apiserver call timed out after {CALL_TIMEOUT:?}")))?
        .map_err(ShellError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_nodewright_and_legacy_finalizers_are_removed() {
        assert!(is_ours(keys::FINALIZER));
        assert!(is_ours("skyhook.nvidia.com/skyhook"));
        assert!(!is_ours("kubernetes.io/pvc-protection"));
        assert!(!is_ours("nodewright.nvidia.com.evil/x"));
    }
}
