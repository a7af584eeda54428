//! The node-state document `nodewright.nvidia.com/nodeState_<name>` (01-api.md §5.7).
//!
//! Serialization is byte-compatible with the Go operator's `encoding/json` output: fields in
//! declaration order, map keys sorted, no whitespace, and Go's HTML-safe escaping.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use thiserror::Error;

use crate::status::{Stage, State};

/// Per-node, per-NodeWright package state, keyed by unique name `<pkg>|<ver>`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(transparent)]
pub struct NodeState(pub BTreeMap<String, PackageStatus>);

/// One package entry of the node-state document.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct PackageStatus {
    /// Package name.
    pub name: String,
    /// Package version.
    pub version: String,
    /// Package image repository (no tag).
    pub image: String,
    /// Digest that was deployed, if any.
    #[serde(
        default,
        rename = "containerSHA",
        skip_serializing_if = "String::is_empty"
    )]
    pub container_sha: String,
    /// Stage currently or last run.
    pub stage: Stage,
    /// Execution state of that stage; omitted when empty.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "empty_string_as_none"
    )]
    pub state: Option<State>,
    /// Failed-attempt count of the stage's executor; omitted when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restarts: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

fn empty_string_as_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<State>, D::Error> {
    let raw: Option<String> = Option::deserialize(d)?;
    match raw.as_deref() {
        None | Some("") => Ok(None),
        Some(text) => State::parse(text)
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown state {text:?}"))),
    }
}

/// Why a node-state annotation could not be read.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum NodeStateError {
    /// The annotation is not valid JSON of the expected shape (includes unknown stages/states).
    #[error("nodeState annotation cannot be parsed: {0}")]
    Malformed(String),
    /// An entry's key is not `<name>|<version>` of the entry it holds.
    #[error("nodeState entry {key:?} does not match its name and version {name:?}|{version:?}")]
    KeyMismatch {
        /// The map key.
        key: String,
        /// The entry's name.
        name: String,
        /// The entry's version.
        version: String,
    },
}

impl NodeState {
    /// Parses an annotation value; never panics, and never drops entries silently.
    pub fn parse(annotation: &str) -> Result<Self, NodeStateError> {
        if annotation.trim() == "null" {
            // Go's encoding/json reads `null` into an empty map.
            return Ok(NodeState::default());
        }
        let state: NodeState = serde_json::from_str(annotation)
            .map_err(|e| NodeStateError::Malformed(e.to_string()))?;
        for (key, entry) in &state.0 {
            if *key != entry.unique_name() {
                return Err(NodeStateError::KeyMismatch {
                    key: key.clone(),
                    name: entry.name.clone(),
                    version: entry.version.clone(),
                });
            }
        }
        Ok(state)
    }

    /// Serializes exactly as the Go operator does.
    pub fn to_annotation(&self) -> String {
        // Serializing string-keyed maps of plain structs cannot fail.
        let json = serde_json::to_string(&self.0).expect("node state serializes");
        go_html_escape(&json)
    }

    /// The entry for `name|version`, if any.
    pub fn get(&self, name: &str, version: &str) -> Option<&PackageStatus> {
        crate::nodewright::with_unique_name(name, version, |key| self.0.get(key))
    }

    /// Inserts or replaces an entry under its unique name.
    pub fn upsert(&mut self, entry: PackageStatus) {
        self.0.insert(entry.unique_name(), entry);
    }

    /// Removes the entry for `name|version`, returning it.
    pub fn remove(&mut self, name: &str, version: &str) -> Option<PackageStatus> {
        crate::nodewright::with_unique_name(name, version, |key| self.0.remove(key))
    }

    /// Entries of package `name` at any version.
    pub fn entries_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a PackageStatus> + 'a {
        self.0.values().filter(move |e| e.name == name)
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl PackageStatus {
    /// The entry's unique name `<name>|<version>`.
    pub fn unique_name(&self) -> String {
        crate::nodewright::unique_name(&self.name, &self.version)
    }

    /// True when the stage's state is `complete`.
    pub fn is_complete(&self) -> bool {
        self.state == Some(State::Complete)
    }
}

/// Applies Go `encoding/json`'s default HTML-safe escaping to serde_json output.
///
/// These characters can only occur inside JSON strings, so a textual replacement is exact.
pub fn go_html_escape(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN: &str = r#"{"dexter|1.2.3":{"name":"dexter","version":"1.2.3","image":"ghcr.io/example/dexter","stage":"config","state":"complete"},"spencer|0.1.0":{"name":"spencer","version":"0.1.0","image":"ghcr.io/example/spencer","stage":"apply","state":"erroring","restarts":2}}"#;

    #[test]
    fn node_state_golden_round_trip_is_byte_identical() {
        let parsed = NodeState::parse(GOLDEN).expect("golden parses");
        assert_eq!(parsed.0.len(), 2);
        assert_eq!(parsed.to_annotation(), GOLDEN);
    }

    #[test]
    fn node_state_golden_fields_are_typed() {
        let parsed = NodeState::parse(GOLDEN).unwrap();
        let spencer = parsed.get("spencer", "0.1.0").unwrap();
        assert_eq!(spencer.stage, Stage::Apply);
        assert_eq!(spencer.state, Some(State::Erroring));
        assert_eq!(spencer.restarts, 2);
    }

    #[test]
    fn node_state_container_sha_and_empty_state_round_trip() {
        let doc = r#"{"a|1":{"name":"a","version":"1","image":"r/a","containerSHA":"sha256:00","stage":"interrupt"}}"#;
        let parsed = NodeState::parse(doc).unwrap();
        assert_eq!(parsed.get("a", "1").unwrap().state, None);
        assert_eq!(parsed.to_annotation(), doc);
    }

    #[test]
    fn node_state_empty_state_string_reads_as_absent() {
        let doc = r#"{"a|1":{"name":"a","version":"1","image":"r/a","stage":"apply","state":""}}"#;
        let parsed = NodeState::parse(doc).unwrap();
        assert_eq!(parsed.get("a", "1").unwrap().state, None);
    }

    #[test]
    fn node_state_go_html_escaping() {
        let mut state = NodeState::default();
        state.upsert(PackageStatus {
            name: "a".into(),
            version: "1".into(),
            image: "r/a<&>".into(),
            container_sha: String::new(),
            stage: Stage::Apply,
            state: Some(State::InProgress),
            restarts: 0,
        });
        assert_eq!(
            state.to_annotation(),
            r#"{"a|1":{"name":"a","version":"1","image":"r/a\u003c\u0026\u003e","stage":"apply","state":"in_progress"}}"#
        );
        assert_eq!(NodeState::parse(&state.to_annotation()).unwrap(), state);
    }

    #[test]
    fn node_state_malformed_json_is_typed_error() {
        for bad in ["", "{", "[]", r#"{"a|1":5}"#, r#"{"a|1":{"name":"a"}}"#] {
            assert!(
                matches!(NodeState::parse(bad), Err(NodeStateError::Malformed(_))),
                "{bad:?} should be malformed"
            );
        }
    }

    #[test]
    fn node_state_unknown_stage_is_typed_error() {
        let doc = r#"{"a|1":{"name":"a","version":"1","image":"r/a","stage":"bogus","state":"complete"}}"#;
        assert!(matches!(
            NodeState::parse(doc),
            Err(NodeStateError::Malformed(_))
        ));
    }

    #[test]
    fn node_state_key_mismatch_is_typed_error() {
        let doc = r#"{"a|2":{"name":"a","version":"1","image":"r/a","stage":"apply","state":"complete"}}"#;
        assert!(matches!(
            NodeState::parse(doc),
            Err(NodeStateError::KeyMismatch { .. })
        ));
    }

    #[test]
    fn node_state_empty_document_round_trips() {
        let parsed = NodeState::parse("{}").unwrap();
        assert!(parsed.is_empty());
        assert_eq!(parsed.to_annotation(), "{}");
    }
}
