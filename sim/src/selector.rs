//! Label selector matching (matchLabels and matchExpressions), as the apiserver does it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// True when `labels` match `selector`; an absent or empty selector matches everything.
pub fn matches(
    selector: Option<&LabelSelector>,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    let Some(selector) = selector else {
        return true;
    };
    let empty = BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    let plain = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    plain
        && selector.match_expressions.iter().flatten().all(|e| {
            let values = e.values.clone().unwrap_or_default();
            let have = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => have.is_some_and(|v| values.contains(v)),
                "NotIn" => have.is_none_or(|v| !values.contains(v)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn selector_matching() {
        let labels: BTreeMap<String, String> = [("a".to_string(), "1".to_string())].into();
        let mut s = LabelSelector {
            match_labels: Some([("a".to_string(), "1".to_string())].into()),
            ..Default::default()
        };
        assert!(matches(Some(&s), Some(&labels)));
        s.match_expressions = Some(vec![LabelSelectorRequirement {
            key: "b".into(),
            operator: "Exists".into(),
            values: None,
        }]);
        assert!(!matches(Some(&s), Some(&labels)));
        assert!(matches(None, None));
    }
}
