//! Label selectors: Kubernetes-compatible validation (with the apiserver's detail messages) and
//! matching against a label map (01-api.md §4.3 check 3, §4.6 P8).
//!
//! Validation mirrors `metav1.LabelSelectorAsSelector`: `matchLabels` first (in key order), then
//! each `matchExpressions` entry in list order; the first invalid requirement is reported.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use thiserror::Error;

/// A label selector that Kubernetes would refuse to convert, with its detail message.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{0}")]
pub struct SelectorError(pub String);

const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_MAX: usize = 63;
const SUBDOMAIN_MAX: usize = 253;
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const SUBDOMAIN_FMT: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// Checks that `selector` is a valid label selector (operators, values, key and value syntax).
pub fn validate(selector: &LabelSelector) -> Result<(), SelectorError> {
    for (key, value) in selector.match_labels.iter().flatten() {
        requirement_errors(key, "=", std::slice::from_ref(value))?;
    }
    for expr in selector.match_expressions.iter().flatten() {
        validate_expression(expr)?;
    }
    Ok(())
}

fn validate_expression(expr: &LabelSelectorRequirement) -> Result<(), SelectorError> {
    if !matches!(
        expr.operator.as_str(),
        "In" | "NotIn" | "Exists" | "DoesNotExist"
    ) {
        return Err(SelectorError(format!(
            "{:?} is not a valid label selector operator",
            expr.operator
        )));
    }
    requirement_errors(
        &expr.key,
        &expr.operator,
        expr.values.as_deref().unwrap_or_default(),
    )
}

/// Collects every error of one requirement, joined like a Kubernetes error aggregate.
fn requirement_errors(key: &str, operator: &str, values: &[String]) -> Result<(), SelectorError> {
    let mut errors = Vec::new();
    let key_errors = qualified_name_errors(key);
    if !key_errors.is_empty() {
        errors.push(format!(
            "key: Invalid value: {key:?}: {}",
            key_errors.join("; ")
        ));
    }
    match operator {
        "In" | "NotIn" if values.is_empty() => errors.push(format!(
            "values: Invalid value: {}: for 'in', 'notin' operators, values set can't be empty",
            go_string_slice(values)
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(format!(
            "values: Invalid value: {}: values set must be empty for exists and does not exist",
            go_string_slice(values)
        )),
        _ => {}
    }
    for (i, value) in values.iter().enumerate() {
        let value_errors = label_value_errors(value);
        if !value_errors.is_empty() {
            errors.push(format!(
                "values[{i}][{key}]: Invalid value: {value:?}: {}",
                value_errors.join("; ")
            ));
        }
    }
    aggregate(errors)
}

fn aggregate(mut errors: Vec<String>) -> Result<(), SelectorError> {
    let mut seen = std::collections::BTreeSet::new();
    errors.retain(|e| seen.insert(e.clone()));
    match errors.len() {
        0 => Ok(()),
        1 => Err(SelectorError(errors.remove(0))),
        _ => Err(SelectorError(format!("[{}]", errors.join(", ")))),
    }
}

/// Go's `%#v` of a string slice (`[]string(nil)`, `[]string{"a", "b"}`).
fn go_string_slice(values: &[String]) -> String {
    if values.is_empty() {
        return "[]string(nil)".to_string();
    }
    let items: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[]string{{{}}}", items.join(", "))
}

fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let examples: String = examples
        .iter()
        .enumerate()
        .map(|(i, e)| format!("{}'{e}', ", if i > 0 { " or " } else { "" }))
        .collect();
    format!("{msg} (e.g. {examples}regex used for validation is '{fmt}')")
}

/// Kubernetes `IsQualifiedName`: an optional DNS-subdomain prefix and `/`, then a name part of at
/// most 63 characters. Returns the detail messages (empty when valid).
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let name_regex_error = || {
        regex_error(
            QUALIFIED_NAME_MSG,
            QUALIFIED_NAME_FMT,
            &["MyName", "my.name", "123-abc"],
        )
    };
    let parts: Vec<&str> = value.split('/').collect();
    let mut errors = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                errors.extend(
                    subdomain_errors(prefix)
                        .into_iter()
                        .map(|e| format!("prefix part {e}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                name_regex_error()
            )];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errors.push(format!(
            "name part must be no more than {QUALIFIED_NAME_MAX} characters"
        ));
    }
    if !is_qualified_name_part(name) {
        errors.push(format!("name part {}", name_regex_error()));
    }
    errors
}

/// Kubernetes `IsValidLabelValue`: empty, or at most 63 characters of the qualified-name alphabet.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        errors.push(format!("must be no more than {LABEL_VALUE_MAX} characters"));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errors.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errors
}

/// Kubernetes `IsDNS1123Subdomain`: lowercase labels joined by dots, at most 253 characters.
pub fn subdomain_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > SUBDOMAIN_MAX {
        errors.push(format!("must be no more than {SUBDOMAIN_MAX} characters"));
    }
    if !value.split('.').all(is_dns_label) {
        errors.push(regex_error(SUBDOMAIN_MSG, SUBDOMAIN_FMT, &["example.com"]));
    }
    errors
}

fn is_qualified_name_part(text: &str) -> bool {
    let bytes = text.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

fn is_dns_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
        }
        _ => false,
    }
}

/// True when `labels` satisfy every `matchLabels` pair and every `matchExpressions` requirement.
/// An empty selector matches everything; an unknown operator matches nothing.
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    labels_ok
        && selector
            .match_expressions
            .iter()
            .flatten()
            .all(|req| requirement_matches(req, labels))
}

/// True when the selector has no `matchLabels` and no `matchExpressions`.
pub fn is_empty(selector: &LabelSelector) -> bool {
    selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty)
}

fn requirement_matches(req: &LabelSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let value = labels.get(&req.key);
    let values = req.values.as_deref().unwrap_or_default();
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelector {
        LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.into(),
                operator: op.into(),
                values: Some(values.iter().map(|v| v.to_string()).collect()),
            }]),
            ..Default::default()
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn err(selector: &LabelSelector) -> String {
        validate(selector).unwrap_err().0
    }

    #[test]
    fn selector_valid_forms_accepted() {
        assert!(validate(&LabelSelector::default()).is_ok());
        assert!(validate(&expr("example.com/gpu", "In", &["a100", "h100"])).is_ok());
        assert!(validate(&expr("zone", "NotIn", &["a"])).is_ok());
        assert!(validate(&expr("zone", "Exists", &[])).is_ok());
        assert!(validate(&expr("zone", "DoesNotExist", &[])).is_ok());
        let ml = LabelSelector {
            match_labels: Some(labels(&[("a.b/c_d", ""), ("Z", "v.1-x_y")])),
            ..Default::default()
        };
        assert!(validate(&ml).is_ok());
    }

    #[test]
    fn selector_bad_operator_message() {
        assert_eq!(
            err(&expr("zone", "Equals", &["a"])),
            r#""Equals" is not a valid label selector operator"#
        );
    }

    #[test]
    fn selector_in_without_values_message() {
        assert_eq!(
            err(&expr("zone", "In", &[])),
            "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"
        );
    }

    #[test]
    fn selector_exists_with_values_message() {
        assert_eq!(
            err(&expr("zone", "Exists", &["a", "b"])),
            r#"values: Invalid value: []string{"a", "b"}: values set must be empty for exists and does not exist"#
        );
    }

    #[test]
    fn selector_bad_key_message() {
        assert_eq!(
            err(&expr("bad key", "Exists", &[])),
            "key: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        );
        let long = "a".repeat(64);
        assert!(
            err(&expr(&long, "Exists", &[]))
                .contains("name part must be no more than 63 characters")
        );
        assert!(
            err(&expr("Example.com/x", "Exists", &[]))
                .contains("prefix part a lowercase RFC 1123 subdomain")
        );
        assert!(err(&expr("/x", "Exists", &[])).contains("prefix part must be non-empty"));
        assert!(err(&expr("a/b/c", "Exists", &[])).contains("a qualified name must consist"));
    }

    #[test]
    fn selector_bad_value_message() {
        let sel = LabelSelector {
            match_labels: Some(labels(&[("zone", "-bad")])),
            ..Default::default()
        };
        assert_eq!(
            err(&sel),
            "values[0][zone]: Invalid value: \"-bad\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
    }

    #[test]
    fn selector_multiple_errors_aggregate() {
        let message = err(&expr("bad key", "In", &[]));
        assert!(message.starts_with("[key: Invalid value"), "{message}");
        assert!(message.contains(", values: Invalid value: []string(nil)"));
        assert!(message.ends_with(']'));
    }

    #[test]
    fn selector_matches_semantics() {
        let node = labels(&[("zone", "a"), ("gpu", "h100")]);
        assert!(matches(&LabelSelector::default(), &node));
        assert!(matches(&LabelSelector::default(), &BTreeMap::new()));
        assert!(matches(&expr("zone", "In", &["a", "b"]), &node));
        assert!(!matches(&expr("zone", "In", &["b"]), &node));
        assert!(matches(&expr("zone", "NotIn", &["b"]), &node));
        assert!(matches(&expr("rack", "NotIn", &["b"]), &node));
        assert!(matches(&expr("gpu", "Exists", &[]), &node));
        assert!(!matches(&expr("gpu", "DoesNotExist", &[]), &node));
        assert!(!matches(&expr("gpu", "Bogus", &[]), &node));
        let ml = LabelSelector {
            match_labels: Some(labels(&[("zone", "a")])),
            match_expressions: Some(vec![]),
        };
        assert!(matches(&ml, &node));
        assert!(!matches(&ml, &labels(&[("zone", "b")])));
        assert!(is_empty(&LabelSelector {
            match_labels: Some(BTreeMap::new()),
            match_expressions: None
        }));
    }
}
