//! AdmissionReview handlers for NodeWright and DeploymentPolicy (01-api.md §4.1–§4.6). The
//! checks themselves are the pure functions of `nodewright_crds::validation`.

use std::future::Future;

use kube::Client;
use kube::api::{Api, ListParams};
use kube::core::admission::{AdmissionResponse, Operation};
use nodewright_crds::defaults::default_policy;
use nodewright_crds::validation::{
    validate_nodewright, validate_nodewright_update, validate_policy, validate_policy_delete,
    validate_policy_reference,
};
use nodewright_crds::{DeploymentPolicy, NodeWright};
use serde_json::Value;

use super::envelope::{self, HeadRequest};

/// The four webhook paths (01-api.md §4.1).
pub const MUTATE_NODEWRIGHT: &str = "/mutate-nodewright-nvidia-com-v1alpha1-nodewright";
/// NodeWright validating webhook path.
pub const VALIDATE_NODEWRIGHT: &str = "/validate-nodewright-nvidia-com-v1alpha1-nodewright";
/// DeploymentPolicy mutating webhook path.
pub const MUTATE_POLICY: &str = "/mutate-nodewright-nvidia-com-v1alpha1-deploymentpolicy";
/// DeploymentPolicy validating webhook path.
pub const VALIDATE_POLICY: &str = "/validate-nodewright-nvidia-com-v1alpha1-deploymentpolicy";

/// Which handler a request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    /// NodeWright mutating (no defaulting).
    MutateNodeWright,
    /// NodeWright validating.
    ValidateNodeWright,
    /// DeploymentPolicy mutating (strategy defaults).
    MutatePolicy,
    /// DeploymentPolicy validating (including DELETE).
    ValidatePolicy,
}

/// What the webhooks look up in the cluster.
pub trait Lookups: Send + Sync {
    /// Whether a DeploymentPolicy of this name exists (`Err` = lookup failed).
    fn policy_exists(&self, name: &str) -> impl Future<Output = Result<bool, String>> + Send;
    /// Every NodeWright (`Err` = list failed).
    fn nodewrights(&self) -> impl Future<Output = Result<Vec<NodeWright>, String>> + Send;
}

/// Lookups answered by the apiserver (never a cache: admission must see the latest policies).
#[derive(Clone)]
pub struct ApiLookups(pub Client);

impl Lookups for ApiLookups {
    async fn policy_exists(&self, name: &str) -> Result<bool, String> {
        let api: Api<DeploymentPolicy> = Api::all(self.0.clone());
        api.get_opt(name)
            .await
            .map(|p| p.is_some())
            .map_err(|e| e.to_string())
    }

    async fn nodewrights(&self) -> Result<Vec<NodeWright>, String> {
        let api: Api<NodeWright> = Api::all(self.0.clone());
        api.list(&ListParams::default())
            .await
            .map(|l| l.items)
            .map_err(|e| e.to_string())
    }
}

/// The largest AdmissionReview body the webhook server accepts: an UPDATE review carries the
/// object twice, and etcd's recommended largest request is 10 MiB (docs/operations.md
/// "Webhook limits").
pub const MAX_REVIEW_BYTES: usize = 32 * 1024 * 1024;

/// Answers one AdmissionReview (JSON bytes in, JSON out). The body is decoded straight into
/// the typed objects; a body that is not a review is answered, never dropped.
pub async fn review(hook: Hook, body: &[u8], lookups: &impl Lookups) -> Value {
    let (types, head) = match envelope::head(body) {
        Ok(h) => h,
        Err(e) => return into_json(AdmissionResponse::invalid(e)),
    };
    let allow = envelope::allow(types, &head.uid);
    let response = match hook {
        Hook::MutateNodeWright => allow,
        Hook::ValidateNodeWright => validate_nw(&head, body, allow, lookups).await,
        Hook::MutatePolicy => mutate_policy(body, allow),
        Hook::ValidatePolicy => validate_dp(&head, body, allow, lookups).await,
    };
    into_json(response)
}

async fn validate_nw(
    head: &HeadRequest,
    body: &[u8],
    allow: AdmissionResponse,
    lookups: &impl Lookups,
) -> AdmissionResponse {
    if !matches!(head.operation, Operation::Create | Operation::Update) {
        return allow;
    }
    let mut repair = None;
    let objects = match envelope::objects::<NodeWright>(body) {
        Ok(o) => o,
        // The stored object may not decode (written while the webhooks were off): an update that
        // repairs it is checked as a new object (docs/operations.md).
        Err(e) if head.operation == Operation::Update => match envelope::new_object(body) {
            Ok(object) => {
                repair = Some(e);
                envelope::ObjectsRequest {
                    object,
                    old_object: None,
                }
            }
            Err(_) => return allow.deny(e),
        },
        Err(e) => return allow.deny(e),
    };
    let Some(new) = objects.object else {
        return allow.deny("request carries no object");
    };
    let name = new
        .metadata
        .name
        .clone()
        .unwrap_or_else(|| head.name.clone());
    let mut warnings = Vec::new();
    let checked = if head.operation == Operation::Update {
        match (objects.old_object, repair) {
            (Some(old), _) => validate_nodewright_update(&old, &new).map(|w| warnings = w),
            (None, Some(e)) => {
                warnings.push(format!(
                    "stored object: {e}; the update is checked as a new object"
                ));
                validate_nodewright(&new)
            }
            (None, None) => return allow.deny("request carries no old object"),
        }
    } else {
        validate_nodewright(&new)
    };
    let mut response = match checked {
        Err(e) => allow.deny(e.wrapped(&name)),
        Ok(()) => {
            let exists = match new.spec.deployment_policy.as_str() {
                "" => Ok(true),
                policy => lookups.policy_exists(policy).await,
            };
            match validate_policy_reference(&new, |_| exists) {
                Ok(()) => allow,
                Err(e) => allow.deny(e.wrapped(&name)),
            }
        }
    };
    if !warnings.is_empty() {
        response.warnings = Some(warnings);
    }
    response
}

/// A policy's spec exactly as sent, so the defaulting patch is computed against what the
/// apiserver will apply it to.
#[derive(serde::Deserialize)]
struct RawSpec {
    #[serde(default)]
    spec: Value,
}

fn mutate_policy(body: &[u8], allow: AdmissionResponse) -> AdmissionResponse {
    let typed = match envelope::objects::<DeploymentPolicy>(body) {
        Ok(o) => o.object,
        Err(e) => return allow.deny(e),
    };
    let Some(mut policy) = typed else {
        return allow;
    };
    let original = match envelope::objects::<RawSpec>(body) {
        Ok(o) => o.object.map(|r| r.spec).unwrap_or_default(),
        Err(e) => return allow.deny(e),
    };
    default_policy(&mut policy);
    let Ok(defaulted) = serde_json::to_value(&policy.spec) else {
        return allow;
    };
    // Diff only the spec: round-tripping metadata through the typed object must not produce ops.
    let patch = json_patch::diff(&original, &defaulted);
    if patch.0.is_empty() {
        return allow;
    }
    let ops: Vec<json_patch::PatchOperation> = patch
        .0
        .into_iter()
        .map(|op| prefix_path(op, "/spec"))
        .collect();
    match allow.clone().with_patch(json_patch::Patch(ops)) {
        Ok(r) => r,
        Err(e) => allow.deny(e.to_string()),
    }
}

fn prefix_path(op: json_patch::PatchOperation, prefix: &str) -> json_patch::PatchOperation {
    let mut value = serde_json::to_value(&op).unwrap_or_default();
    if let Some(path) = value.get("path").and_then(Value::as_str) {
        value["path"] = Value::String(format!("{prefix}{path}"));
    }
    serde_json::from_value(value).unwrap_or(op)
}

async fn validate_dp(
    head: &HeadRequest,
    body: &[u8],
    allow: AdmissionResponse,
    lookups: &impl Lookups,
) -> AdmissionResponse {
    match head.operation {
        Operation::Create | Operation::Update => {
            match envelope::objects::<DeploymentPolicy>(body).map(|o| o.object) {
                Ok(Some(p)) => match validate_policy(&p) {
                    Ok(()) => allow,
                    Err(e) => allow.deny(e),
                },
                Ok(None) => allow.deny("request carries no object"),
                Err(e) => allow.deny(e),
            }
        }
        Operation::Delete => match lookups.nodewrights().await {
            Ok(list) => match validate_policy_delete(&head.name, &list) {
                Ok(()) => allow,
                Err(e) => allow.deny(e),
            },
            Err(e) => allow.deny(format!("cannot list NodeWrights: {e}")),
        },
        Operation::Connect => allow,
    }
}

/// Serializes the review answer, re-encoding `response.patch` as base64: kube-core writes it as
/// a number array (kube-rs issue #1781), which the apiserver rejects.
pub fn into_json(response: AdmissionResponse) -> Value {
    let patch = response.patch.clone();
    let mut value = serde_json::to_value(response.into_review()).unwrap_or_default();
    if let Some(bytes) = patch
        && let Ok(encoded) = serde_json::to_value(k8s_openapi::ByteString(bytes))
    {
        value["response"]["patch"] = encoded;
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use serde_json::json;

    struct Fake {
        policies: Vec<&'static str>,
        nodewrights: Result<Vec<NodeWright>, String>,
    }

    impl Lookups for Fake {
        async fn policy_exists(&self, name: &str) -> Result<bool, String> {
            Ok(self.policies.contains(&name))
        }
        async fn nodewrights(&self) -> Result<Vec<NodeWright>, String> {
            self.nodewrights.clone()
        }
    }

    async fn review_json(hook: Hook, body: Value, lookups: &Fake) -> Value {
        let bytes = serde_json::to_vec(&body).expect("serialize");
        review(hook, &bytes, lookups).await
    }

    fn fake() -> Fake {
        Fake {
            policies: vec!["p1"],
            nodewrights: Ok(vec![]),
        }
    }

    fn review_of(
        kind: &str,
        resource: &str,
        op: &str,
        name: &str,
        object: Value,
        old: Value,
    ) -> Value {
        json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "req-1",
                "kind": {"group": "nodewright.nvidia.com", "version": "v1alpha1", "kind": kind},
                "resource": {"group": "nodewright.nvidia.com", "version": "v1alpha1", "resource": resource},
                "name": name, "operation": op, "userInfo": {},
                "object": object, "oldObject": old, "dryRun": false
            }
        })
    }

    fn nw(spec: Value) -> Value {
        json!({"apiVersion": "nodewright.nvidia.com/v1alpha1", "kind": "NodeWright",
               "metadata": {"name": "nw"}, "spec": spec})
    }

    fn pkg() -> Value {
        json!({"version": "1.0.0", "image": "ghcr.io/x/pkg"})
    }

    #[tokio::test]
    async fn r4_3_valid_nodewright_is_allowed() {
        let body = review_of(
            "NodeWright",
            "nodewrights",
            "CREATE",
            "nw",
            nw(json!({"packages": {"pkg": pkg()}})),
            Value::Null,
        );
        let out = review_json(Hook::ValidateNodeWright, body, &fake()).await;
        assert_eq!(out["response"]["uid"], "req-1");
        assert_eq!(out["response"]["allowed"], true, "{out}");
    }

    #[tokio::test]
    async fn r4_3_invalid_nodewright_is_denied_with_wrapped_message() {
        let spec =
            json!({"packages": {"pkg": pkg()}, "interruptionBudget": {"percent": 10, "count": 1}});
        let body = review_of(
            "NodeWright",
            "nodewrights",
            "CREATE",
            "nw",
            nw(spec),
            Value::Null,
        );
        let out = review_json(Hook::ValidateNodeWright, body, &fake()).await;
        assert_eq!(out["response"]["allowed"], false);
        let msg = out["response"]["status"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(msg.starts_with("validating NodeWright \"nw\": "), "{msg}");
        assert!(msg.contains("both percent and count"), "{msg}");
    }

    #[tokio::test]
    async fn r4_3_7_missing_policy_is_denied() {
        let body = review_of(
            "NodeWright",
            "nodewrights",
            "CREATE",
            "nw",
            nw(json!({"deploymentPolicy": "nope"})),
            Value::Null,
        );
        let out = review_json(Hook::ValidateNodeWright, body, &fake()).await;
        assert_eq!(out["response"]["allowed"], false);
        assert!(
            out["response"]["status"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("\"nope\" not found"),
            "{out}"
        );
        let body = review_of(
            "NodeWright",
            "nodewrights",
            "CREATE",
            "nw",
            nw(json!({"deploymentPolicy": "p1"})),
            Value::Null,
        );
        assert_eq!(
            review_json(Hook::ValidateNodeWright, body, &fake()).await["response"]["allowed"],
            true
        );
    }

    #[tokio::test]
    async fn r4_3_undecodable_object_is_denied() {
        let body = review_of(
            "NodeWright",
            "nodewrights",
            "CREATE",
            "nw",
            nw(json!({"packages": "x"})),
            Value::Null,
        );
        let out = review_json(Hook::ValidateNodeWright, body, &fake()).await;
        assert_eq!(out["response"]["allowed"], false);
    }

    #[tokio::test]
    async fn r4_4_update_repairing_an_undecodable_stored_object_is_checked_as_new() {
        let old = nw(json!({"priority": 3_000_000_000u64, "packages": {}}));
        let good = nw(json!({"priority": 5, "packages": {}}));
        let body = review_of(
            "NodeWright",
            "nodewrights",
            "UPDATE",
            "nw",
            good,
            old.clone(),
        );
        let out = review_json(Hook::ValidateNodeWright, body, &fake()).await;
        assert_eq!(out["response"]["allowed"], true, "{out}");
        let still_bad = nw(json!({"priority": 3_000_000_001u64, "packages": {}}));
        let body = review_of("NodeWright", "nodewrights", "UPDATE", "nw", still_bad, old);
        let out = review_json(Hook::ValidateNodeWright, body, &fake()).await;
        assert_eq!(out["response"]["allowed"], false, "{out}");
    }

    #[tokio::test]
    async fn r4_4_update_checks_run_against_old_object() {
        let old = nw(
            json!({"packages": {"pkg": {"version": "2.0.0", "image": "ghcr.io/x/pkg",
                                               "uninstall": {"enabled": true, "apply": false}}}}),
        );
        let new = nw(
            json!({"packages": {"pkg": {"version": "1.0.0", "image": "ghcr.io/x/pkg",
                                               "uninstall": {"enabled": true, "apply": false}}}}),
        );
        let body = review_of("NodeWright", "nodewrights", "UPDATE", "nw", new, old);
        let out = review_json(Hook::ValidateNodeWright, body, &fake()).await;
        assert_eq!(out["response"]["allowed"], false, "{out}");
        assert!(
            out["response"]["status"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("downgrade"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn r4_2_nodewright_mutation_is_a_noop() {
        let body = review_of(
            "NodeWright",
            "nodewrights",
            "CREATE",
            "nw",
            nw(json!({})),
            Value::Null,
        );
        let out = review_json(Hook::MutateNodeWright, body, &fake()).await;
        assert_eq!(out["response"]["allowed"], true);
        assert!(out["response"].get("patch").is_none());
    }

    fn policy(strategy: Value) -> Value {
        json!({"apiVersion": "nodewright.nvidia.com/v1alpha1", "kind": "DeploymentPolicy",
               "metadata": {"name": "p1"},
               "spec": {"default": {"budget": {"count": 1}, "strategy": strategy}}})
    }

    #[tokio::test]
    async fn r4_5_policy_defaults_are_a_base64_json_patch() {
        let body = review_of(
            "DeploymentPolicy",
            "deploymentpolicies",
            "CREATE",
            "p1",
            policy(json!({"linear": {}})),
            Value::Null,
        );
        let out = review_json(Hook::MutatePolicy, body, &fake()).await;
        assert_eq!(out["response"]["allowed"], true, "{out}");
        assert_eq!(out["response"]["patchType"], "JSONPatch");
        let encoded = out["response"]["patch"]
            .as_str()
            .expect("patch is a base64 string");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("base64");
        let ops: Value = serde_json::from_slice(&bytes).expect("json patch");
        let text = ops.to_string();
        assert!(text.contains("/spec/default/strategy/linear"), "{text}");
        assert!(
            text.contains("\"delta\"") || text.contains("/delta"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn r4_6_policy_validation_and_delete_guard() {
        let bad = json!({"apiVersion": "nodewright.nvidia.com/v1alpha1", "kind": "DeploymentPolicy",
                         "metadata": {"name": "p1"}, "spec": {"default": {"budget": {}}}});
        let body = review_of(
            "DeploymentPolicy",
            "deploymentpolicies",
            "CREATE",
            "p1",
            bad,
            Value::Null,
        );
        let out = review_json(Hook::ValidatePolicy, body, &fake()).await;
        assert_eq!(out["response"]["allowed"], false, "{out}");

        let user: NodeWright =
            serde_json::from_value(nw(json!({"deploymentPolicy": "p1"}))).expect("nw");
        let lookups = Fake {
            policies: vec![],
            nodewrights: Ok(vec![user]),
        };
        let body = review_of(
            "DeploymentPolicy",
            "deploymentpolicies",
            "DELETE",
            "p1",
            Value::Null,
            policy(Value::Null),
        );
        let out = review_json(Hook::ValidatePolicy, body, &lookups).await;
        assert_eq!(out["response"]["allowed"], false, "{out}");
        assert!(
            out["response"]["status"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("[nw]"),
            "{out}"
        );

        let failing = Fake {
            policies: vec![],
            nodewrights: Err("boom".into()),
        };
        let body = review_of(
            "DeploymentPolicy",
            "deploymentpolicies",
            "DELETE",
            "p1",
            Value::Null,
            policy(Value::Null),
        );
        assert_eq!(
            review_json(Hook::ValidatePolicy, body, &failing).await["response"]["allowed"],
            false
        );
    }

    #[tokio::test]
    async fn malformed_review_is_answered_not_dropped() {
        let out = review_json(Hook::ValidatePolicy, json!({"nope": 1}), &fake()).await;
        assert_eq!(out["response"]["allowed"], false);
    }

    /// Found by fuzzing: a review whose kind was not `AdmissionReview` was answered with that
    /// kind echoed back.
    #[tokio::test]
    async fn review_of_another_kind_is_malformed() {
        let mut body = review_of(
            "NodeWright",
            "nodewrights",
            "CREATE",
            "nw",
            nw(json!({})),
            Value::Null,
        );
        body["kind"] = json!("Ad#issionReview");
        let out = review_json(Hook::MutateNodeWright, body, &fake()).await;
        assert_eq!(out["kind"], "AdmissionReview", "{out}");
        assert_eq!(out["response"]["allowed"], false, "{out}");
    }
}
