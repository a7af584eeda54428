//! Node patterns (06-operations.md §1.3): an argument containing a regex metacharacter is an
//! anchored regular expression, anything else an exact node name; patterns are OR-ed.

use anyhow::{Result, anyhow};
use regex::Regex;

const META: &[char] = &[
    '.', '*', '+', '?', '^', '$', '{', '}', '[', ']', '|', '(', ')', '\\',
];

/// A set of node patterns.
#[derive(Debug)]
pub struct NodePatterns {
    exact: Vec<String>,
    regexes: Vec<Regex>,
}

impl NodePatterns {
    /// Compiles the patterns; a bad regex is an error naming it.
    pub fn new(patterns: &[String]) -> Result<Self> {
        let mut exact = Vec::new();
        let mut regexes = Vec::new();
        for p in patterns {
            if p.contains(META) {
                let re = Regex::new(&format!("^(?:{p})$"))
                    .map_err(|e| anyhow!("invalid regex pattern {p:?}: {e}"))?;
                regexes.push(re);
            } else {
                exact.push(p.clone());
            }
        }
        Ok(NodePatterns { exact, regexes })
    }

    /// True when there are no patterns.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.regexes.is_empty()
    }

    /// True when `name` matches any pattern.
    pub fn matches(&self, name: &str) -> bool {
        self.exact.iter().any(|e| e == name) || self.regexes.iter().any(|r| r.is_match(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r1_3_patterns_exact_or_anchored_regex() {
        let p = NodePatterns::new(&["node-1".into(), "gpu-.*".into()]).expect("valid");
        assert!(p.matches("node-1"));
        assert!(!p.matches("node-10"));
        assert!(p.matches("gpu-a"));
        assert!(!p.matches("x-gpu-a"), "anchored");
        let dotted = NodePatterns::new(&["a.b".into()]).expect("valid");
        assert!(dotted.matches("axb"), "a dotted name is a regex");
        let err = NodePatterns::new(&["(".into()])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.starts_with("invalid regex pattern \"(\""), "{err}");
    }
}
