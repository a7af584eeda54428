//! Fuzzing the admission webhooks (issue 13): AdmissionReview bodies for both kinds, structured
//! (hostile objects in a well-formed review) and byte-mutated, through every handler. Each is
//! answered with a JSON review carrying the request's uid when it has one, without a panic and
//! in bounded time. `NODEWRIGHT_FUZZ_CASES=<n>` runs longer (docs/testing.md "Fuzzing").

#[path = "../../crds/tests/fuzzgen/mod.rs"]
mod fuzzgen;

use nodewright_crds::NodeWright;
use nodewright_shell::webhook::admission::{Hook, Lookups, review};
use proptest::prelude::*;
use serde_json::{Value, json};

use fuzzgen::{config, edits, mutate, timed};

struct Fixed;

impl Lookups for Fixed {
    async fn policy_exists(&self, name: &str) -> Result<bool, String> {
        Ok(name == "p1")
    }
    async fn nodewrights(&self) -> Result<Vec<NodeWright>, String> {
        Ok(Vec::new())
    }
}

const HOOKS: [Hook; 4] = [
    Hook::MutateNodeWright,
    Hook::ValidateNodeWright,
    Hook::MutatePolicy,
    Hook::ValidatePolicy,
];

fn envelope(kind: &str, op: &str, object: Value, old: Value) -> Vec<u8> {
    let resource = if kind == "NodeWright" {
        "nodewrights"
    } else {
        "deploymentpolicies"
    };
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "fuzz-uid",
            "kind": {"group": "nodewright.nvidia.com", "version": "v1alpha1", "kind": kind},
            "resource": {"group": "nodewright.nvidia.com", "version": "v1alpha1", "resource": resource},
            "name": "fuzz", "operation": op, "userInfo": {},
            "object": object, "oldObject": old, "dryRun": false
        }
    }))
    .expect("serialize")
}

/// Answers `body` on every hook; each answer is a review, with our uid when `uid_expected`.
fn answer_all(body: &[u8], uid_expected: bool) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    for hook in HOOKS {
        let out = timed("review", || runtime.block_on(review(hook, body, &Fixed)))?;
        prop_assert_eq!(&out["kind"], "AdmissionReview", "{:?}: {}", hook, out);
        prop_assert!(
            out["response"]["allowed"].is_boolean(),
            "{:?}: {}",
            hook,
            out
        );
        if uid_expected {
            prop_assert_eq!(&out["response"]["uid"], "fuzz-uid", "{:?}: {}", hook, out);
        }
    }
    Ok(())
}

fn operation() -> impl Strategy<Value = &'static str> {
    proptest::sample::select(&["CREATE", "UPDATE", "DELETE", "CONNECT"][..])
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_review_nodewright_structured(
        op in operation(),
        new in fuzzgen::nodewright(),
        old in fuzzgen::nodewright(),
    ) {
        answer_all(&envelope("NodeWright", op, new, old), true)?;
    }

    #[test]
    fn fuzz_review_policy_structured(
        op in operation(),
        new in fuzzgen::policy(),
        old in fuzzgen::policy(),
    ) {
        answer_all(&envelope("DeploymentPolicy", op, new, old), true)?;
    }

    #[test]
    fn fuzz_review_bytes_mutated(
        nodewright in any::<bool>(),
        op in operation(),
        nw in fuzzgen::nodewright(),
        policy in fuzzgen::policy(),
        edits in edits(16),
    ) {
        let (kind, object) = if nodewright { ("NodeWright", nw) } else { ("DeploymentPolicy", policy) };
        let body = mutate(envelope(kind, op, object.clone(), object), &edits);
        answer_all(&body, false)?;
    }

    #[test]
    fn fuzz_review_arbitrary_bytes(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        answer_all(&body, false)?;
    }
}
