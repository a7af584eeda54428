//! The dependency graph of a NodeWright's packages and its runnable set (02-lifecycle.md §7.3).

use std::collections::{BTreeMap, BTreeSet};

use nodewright_crds::Package;

/// Package keys (`name|version`) with their parent keys; built from the spec.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dag {
    parents: BTreeMap<String, BTreeSet<String>>,
    cyclic: BTreeSet<String>,
}

/// Why a graph is invalid (reported as a NodeWright error; its work phase does not run).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DagError {
    /// A `dependsOn` entry with an empty version (R2.3).
    EmptyVersion {
        /// The dependent package.
        package: String,
        /// The dependency name.
        dependency: String,
    },
    /// A parent key that is not a vertex (§7.3.2).
    MissingParent {
        /// The dependent package key.
        package: String,
        /// The parent key that is missing.
        parent: String,
    },
}

impl std::fmt::Display for DagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DagError::EmptyVersion {
                package,
                dependency,
            } => write!(
                f,
                "package {package} depends on {dependency} with an empty version"
            ),
            DagError::MissingParent { package, parent } => {
                write!(
                    f,
                    "package {package} depends on {parent}, which is not in the spec"
                )
            }
        }
    }
}

impl Dag {
    /// Builds the graph; every parent must be a vertex with the exact spec version.
    pub fn build(packages: &BTreeMap<String, Package>) -> Result<Self, DagError> {
        let mut parents = BTreeMap::new();
        for pkg in packages.values() {
            parents.insert(pkg.unique_name(), BTreeSet::new());
        }
        for pkg in packages.values() {
            let key = pkg.unique_name();
            for (dep, version) in &pkg.depends_on {
                if version.is_empty() {
                    return Err(DagError::EmptyVersion {
                        package: pkg.name.clone(),
                        dependency: dep.clone(),
                    });
                }
                let parent = nodewright_crds::nodewright::unique_name(dep, version);
                if !parents.contains_key(&parent) {
                    return Err(DagError::MissingParent {
                        package: key,
                        parent,
                    });
                }
                if let Some(set) = parents.get_mut(&key) {
                    set.insert(parent);
                }
            }
        }
        let cyclic = cyclic_vertices(&parents);
        Ok(Dag { parents, cyclic })
    }

    /// [Fix] Next(done): vertices not done whose parents are all done, sorted; members of a
    /// cycle are never offered (§7.3.4).
    pub fn next(&self, done: &BTreeSet<String>) -> Vec<String> {
        self.parents
            .iter()
            .filter(|(key, parents)| {
                !done.contains(*key)
                    && !self.cyclic.contains(*key)
                    && parents.iter().all(|p| done.contains(p))
            })
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Keys on or behind a dependency cycle.
    pub fn cyclic(&self) -> &BTreeSet<String> {
        &self.cyclic
    }

    /// The parent keys of `key`.
    pub fn parents_of(&self, key: &str) -> impl Iterator<Item = &String> {
        self.parents.get(key).into_iter().flatten()
    }
}

/// Vertices that can never become runnable: those on a cycle (Kahn's algorithm leftovers).
fn cyclic_vertices(parents: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    let mut remaining: BTreeMap<&String, usize> =
        parents.iter().map(|(k, p)| (k, p.len())).collect();
    let mut resolved: BTreeSet<&String> = BTreeSet::new();
    loop {
        let ready: Vec<&String> = remaining
            .iter()
            .filter(|(_, n)| **n == 0)
            .map(|(k, _)| *k)
            .collect();
        if ready.is_empty() {
            break;
        }
        for key in ready {
            remaining.remove(key);
            resolved.insert(key);
        }
        for (key, count) in remaining.iter_mut() {
            *count = parents[*key]
                .iter()
                .filter(|p| !resolved.contains(p))
                .count();
        }
    }
    remaining.into_keys().cloned().collect()
}
