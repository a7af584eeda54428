//! Fuzzing on stable Rust (issue 13): the parsers and validators that read cluster data or a
//! webhook body never panic and finish each input in bounded time. Inputs are proptest-driven:
//! structured-but-hostile objects, strings in each syntax, and byte mutations of valid
//! documents. `NODEWRIGHT_FUZZ_CASES=<n>` runs longer (docs/testing.md "Fuzzing").

mod fuzzgen;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use nodewright_crds::duration::parse_go_duration;
use nodewright_crds::quantity::parse_quantity;
use nodewright_crds::validation::{
    glob_matches, validate_nodewright, validate_nodewright_update, validate_policy,
};
use nodewright_crds::{DeploymentPolicy, NodeState, NodeWright, selector};
use proptest::prelude::*;

use fuzzgen::{config, edits, mutate, timed};

const VALID_STATE: &str = r#"{"aa|1.0.0":{"name":"aa","version":"1.0.0","image":"r/aa","stage":"config","state":"complete"},"bb|2.0.0":{"name":"bb","version":"2.0.0","image":"r/bb","containerSHA":"sha256:00","stage":"interrupt","state":"in_progress","restarts":2}}"#;

fn any_json_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(serde_json::Value::from),
        ".{0,12}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
            proptest::collection::btree_map(".{0,12}", inner, 0..6)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
    .prop_map(|v| v.to_string())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_node_state_parse(
        input in prop_oneof![
            any::<String>(),
            any_json_text(),
            edits(12).prop_map(|e| String::from_utf8_lossy(&mutate(VALID_STATE.as_bytes().to_vec(), &e)).into_owned()),
            (1usize..200_000).prop_map(|n| "[".repeat(n)),
        ]
    ) {
        let parsed = timed("NodeState::parse", || NodeState::parse(&input))?;
        if let Ok(state) = parsed {
            // What parses serializes and parses back to the same document.
            let again = NodeState::parse(&state.to_annotation());
            prop_assert_eq!(again.as_ref().ok(), Some(&state));
        }
    }

    #[test]
    fn fuzz_quantity(a in fuzzgen::quantity(), b in fuzzgen::quantity()) {
        timed("quantity", || {
            let (qa, qb) = (parse_quantity(&a), parse_quantity(&b));
            for q in [&qa, &qb].into_iter().flatten() {
                let _ = (q.canonical(), q.value_key(), q.signum(), q.is_zero());
            }
            if let (Ok(x), Ok(y)) = (&qa, &qb) {
                let _ = x.cmp(y);
            }
        })?;
    }

    #[test]
    fn fuzz_duration(input in fuzzgen::duration()) {
        let parsed = timed("duration", || parse_go_duration(&input))?;
        if let Ok(n) = parsed {
            let d = nodewright_crds::duration::GoDuration::new(input.clone());
            prop_assert_eq!(d.nanos(), Ok(n));
            let _ = (d.ceil_seconds(), d.trunc_seconds());
        }
    }

    #[test]
    fn fuzz_label_selector(
        sel in fuzzgen::selector(),
        labels in proptest::collection::btree_map(fuzzgen::label_text(), fuzzgen::label_text(), 0..6),
    ) {
        if let Ok(sel) = serde_json::from_value::<LabelSelector>(fuzzgen::strip_nulls(sel)) {
            timed("selector", || {
                let _ = selector::validate(&sel);
                let _ = selector::matches(&sel, &labels);
                let _ = selector::matches(&sel, &BTreeMap::new());
            })?;
        }
    }

    #[test]
    fn fuzz_glob(pattern in fuzzgen::glob(), key in "[a-c./]{0,253}") {
        let _ = timed("glob", || glob_matches(&pattern, &key))?;
    }

    #[test]
    fn fuzz_nodewright_validation(new in fuzzgen::nodewright(), old in fuzzgen::nodewright()) {
        let decoded = (
            serde_json::from_value::<NodeWright>(new),
            serde_json::from_value::<NodeWright>(old),
        );
        if let (Ok(new), Ok(old)) = decoded {
            timed("validate", || {
                let _ = validate_nodewright(&new);
                let _ = validate_nodewright_update(&old, &new);
            })?;
        }
    }

    #[test]
    fn fuzz_policy_validation(policy in fuzzgen::policy()) {
        if let Ok(policy) = serde_json::from_value::<DeploymentPolicy>(policy) {
            let _ = timed("validate policy", || validate_policy(&policy))?;
        }
    }
}
