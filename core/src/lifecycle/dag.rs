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

/// Vertices that can never become runnable: those on or behind a cycle (Kahn's algorithm
/// leftovers). Linear in the graph size and iterative, so a long chain cannot exhaust the stack.
fn cyclic_vertices(parents: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut waiting: BTreeMap<&str, usize> = BTreeMap::new();
    for (key, ps) in parents {
        waiting.insert(key, ps.len());
        for p in ps {
            children.entry(p).or_default().push(key);
        }
    }
    let mut ready: Vec<&str> = waiting
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(k, _)| *k)
        .collect();
    while let Some(key) = ready.pop() {
        waiting.remove(key);
        for child in children.get(key).into_iter().flatten() {
            if let Some(n) = waiting.get_mut(child) {
                *n -= 1;
                if *n == 0 {
                    ready.push(child);
                }
            }
        }
    }
    waiting.into_keys().map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(count: usize, cycle: bool) -> BTreeMap<String, Package> {
        let key = |i: usize| format!("p{i:06}x");
        (0..count)
            .map(|i| {
                let mut pkg = Package {
                    name: key(i),
                    version: "1".into(),
                    ..Default::default()
                };
                let next = if i + 1 < count {
                    Some(i + 1)
                } else {
                    cycle.then_some(0)
                };
                if let Some(next) = next {
                    pkg.depends_on.insert(key(next), "1".into());
                }
                (key(i), pkg)
            })
            .collect()
    }

    /// Runs `f` on a 256 KiB stack and gives up after `secs` (a hang counts as a failure).
    fn bounded<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || tx.send(f()))
            .expect("spawn");
        rx.recv_timeout(std::time::Duration::from_secs(secs))
            .expect("finished in time without a crash")
    }

    /// Issue 13 finding 1: a 100,000-link chain is built, and its cycle found, in linear time
    /// on a small stack. The Kahn loop this replaced rescanned every vertex per round (quadratic:
    /// this test did not finish in its 120 s bound).
    #[test]
    fn dag_100000_link_chain_builds_without_recursion() {
        let (cyclic, runnable, ring) = bounded(120, || {
            let open = Dag::build(&chain(100_000, false)).expect("valid");
            let ring = Dag::build(&chain(100_000, true)).expect("valid");
            (
                open.cyclic().len(),
                open.next(&BTreeSet::new()),
                ring.cyclic().len(),
            )
        });
        assert_eq!(cyclic, 0);
        assert_eq!(runnable, vec!["p099999x|1".to_string()], "the chain's tail");
        assert_eq!(ring, 100_000, "every vertex of the ring is on the cycle");
    }
}
