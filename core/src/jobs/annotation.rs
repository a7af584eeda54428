//! The package annotation JSON `<P>/package` on Jobs and their pod templates (03-executor.md §1.9).

use nodewright_crds::node_state::go_html_escape;
use nodewright_crds::{NodeWright, Package, Stage};
use serde::{Deserialize, Serialize};

/// What a Job executes: package, NodeWright and stage, plus the invalidation flag.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageAnnotation {
    /// Package name.
    pub name: String,
    /// Package version.
    pub version: String,
    /// NodeWright name (the JSON key kept its pre-rename spelling).
    pub skyhook: String,
    /// Stage the Job runs.
    pub stage: Stage,
    /// Package image repository without tag or digest.
    pub image: String,
    /// Image digest, omitted when empty.
    #[serde(
        default,
        rename = "containerSHA",
        skip_serializing_if = "String::is_empty"
    )]
    pub container_sha: String,
    /// Set once the operator invalidated the executor (it is then foreground-deleted).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub invalid: bool,
}

impl PackageAnnotation {
    /// The annotation for `pkg` at `stage` under NodeWright `nw`.
    pub fn new(nw: &NodeWright, pkg: &Package, stage: Stage) -> Self {
        Self {
            name: pkg.name.clone(),
            version: pkg.version.clone(),
            skyhook: nw.metadata.name.clone().unwrap_or_default(),
            stage,
            image: pkg.image.clone(),
            container_sha: pkg.container_sha.clone(),
            invalid: false,
        }
    }

    /// Compact JSON with Go's HTML-safe escaping, byte-identical to the Go operator.
    pub fn to_json(&self) -> String {
        // A struct of strings, a bool and a string enum always serializes.
        let json = serde_json::to_string(self).expect("package annotation serializes");
        go_html_escape(&json)
    }

    /// Parses an annotation value; anything unreadable means "no package" (04 rule 1.2.5).
    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }

    /// The package label value `<name>-<version>`.
    pub fn package_label(&self) -> String {
        super::naming::package_label(&self.name, &self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_annotation_golden_json() {
        let a = PackageAnnotation {
            name: "baz".into(),
            version: "1.1.0".into(),
            skyhook: "demo".into(),
            stage: Stage::Apply,
            image: "ghcr.io/nvidia/skyhook-packages/shellscript".into(),
            container_sha: String::new(),
            invalid: false,
        };
        assert_eq!(
            a.to_json(),
            r#"{"name":"baz","version":"1.1.0","skyhook":"demo","stage":"apply","image":"ghcr.io/nvidia/skyhook-packages/shellscript"}"#
        );
        let mut b = a.clone();
        b.invalid = true;
        b.container_sha = "sha256:00".into();
        assert_eq!(
            b.to_json(),
            r#"{"name":"baz","version":"1.1.0","skyhook":"demo","stage":"apply","image":"ghcr.io/nvidia/skyhook-packages/shellscript","containerSHA":"sha256:00","invalid":true}"#
        );
        assert_eq!(PackageAnnotation::parse(&b.to_json()), Some(b));
        assert_eq!(PackageAnnotation::parse("{not json"), None);
    }
}
