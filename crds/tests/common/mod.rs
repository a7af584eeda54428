//! Fixtures shared by the admission tests.
#![allow(dead_code)]

use nodewright_crds::{DeploymentPolicy, NodeWright, Package};

/// A valid NodeWright with two packages (`dexter` depends on `spencer`).
pub const BASE: &str = r#"
apiVersion: nodewright.nvidia.com/v1alpha1
kind: NodeWright
metadata:
  name: demo
spec:
  nodeSelectors:
    matchLabels:
      example.com/pool: gpu
  packages:
    spencer:
      version: 0.1.0
      image: ghcr.io/example/spencer
    dexter:
      version: 1.2.3
      image: ghcr.io/example/dexter
      dependsOn:
        spencer: 0.1.0
"#;

/// Parses a NodeWright from YAML.
pub fn nodewright(yaml: &str) -> NodeWright {
    serde_saphyr::from_str(yaml).expect("fixture parses")
}

/// The valid base NodeWright.
pub fn base() -> NodeWright {
    nodewright(BASE)
}

/// The base NodeWright with `edit` applied to it.
pub fn with(edit: impl FnOnce(&mut NodeWright)) -> NodeWright {
    let mut nw = base();
    edit(&mut nw);
    nw
}

/// A mutable handle on a package of the base object.
pub fn pkg<'a>(nw: &'a mut NodeWright, name: &str) -> &'a mut Package {
    nw.spec.packages.get_mut(name).expect("package exists")
}

/// Parses a DeploymentPolicy from YAML.
pub fn policy(yaml: &str) -> DeploymentPolicy {
    serde_saphyr::from_str(yaml).expect("fixture parses")
}
