//! Dependency-graph checks: 5 (empty dependency version), 6 (missing dependency) and the D9
//! cycle rejection (01-api.md §4.3, §12 item 1).

use std::collections::{BTreeMap, BTreeSet};

use crate::nodewright::{Package, unique_name};

use super::ValidationError;

/// Runs checks 5, 6 and the D9 cycle check over the package map.
pub(super) fn check_graph(packages: &BTreeMap<String, Package>) -> Result<(), ValidationError> {
    for pkg in packages.values() {
        if let Some((dep, _)) = pkg.depends_on.iter().find(|(_, v)| v.is_empty()) {
            return Err(ValidationError::DependsOnEmpty(dep.clone()));
        }
    }
    let present: BTreeSet<String> = packages
        .iter()
        .map(|(key, pkg)| unique_name(key, &pkg.version))
        .collect();
    let missing: BTreeSet<String> = packages
        .values()
        .flat_map(|pkg| pkg.depends_on.iter())
        .map(|(dep, version)| unique_name(dep, version))
        .filter(|u| !present.contains(u))
        .collect();
    if !missing.is_empty() {
        return Err(ValidationError::DependsOnMissing(
            missing.into_iter().collect(),
        ));
    }
    match find_cycle(packages) {
        Some(cycle) => Err(ValidationError::DependencyCycle(cycle)),
        None => Ok(()),
    }
}

/// The first dependency cycle found by a depth-first walk in key order, as package names with
/// the first name repeated at the end (`[a, b, a]`; a self-dependency is `[a, a]`).
///
/// Only edges that resolve to a spec package are followed (check 6 has rejected the others).
/// The walk keeps its own stack, so its depth is not bounded by the thread's stack: a chain of
/// any length is walked in time linear in its size (times a logarithm).
pub fn find_cycle(packages: &BTreeMap<String, Package>) -> Option<Vec<String>> {
    let mut done = BTreeSet::new();
    packages
        .keys()
        .find_map(|start| walk(packages, start, &mut done))
}

/// One frame of the explicit depth-first stack: a package and its dependencies not yet followed.
struct Frame<'a> {
    node: &'a str,
    deps: std::collections::btree_map::Iter<'a, String, String>,
}

/// Depth-first walk from `start`; packages fully explored (no cycle through them) go to `done`.
fn walk<'a>(
    packages: &'a BTreeMap<String, Package>,
    start: &'a str,
    done: &mut BTreeSet<&'a str>,
) -> Option<Vec<String>> {
    if done.contains(start) {
        return None;
    }
    let mut stack = vec![frame(packages, start)?];
    let mut on_path: BTreeMap<&'a str, usize> = BTreeMap::from([(start, 0)]);
    while let Some(top) = stack.last_mut() {
        let Some(dep) = next_edge(packages, &mut top.deps) else {
            let node = top.node;
            stack.pop();
            on_path.remove(node);
            done.insert(node);
            continue;
        };
        if done.contains(dep) {
            continue;
        }
        if let Some(&pos) = on_path.get(dep) {
            let mut cycle: Vec<String> = stack[pos..].iter().map(|f| f.node.to_string()).collect();
            cycle.push(dep.to_string());
            return Some(cycle);
        }
        on_path.insert(dep, stack.len());
        stack.push(frame(packages, dep)?);
    }
    None
}

fn frame<'a>(packages: &'a BTreeMap<String, Package>, node: &'a str) -> Option<Frame<'a>> {
    packages.get(node).map(|pkg| Frame {
        node,
        deps: pkg.depends_on.iter(),
    })
}

/// The next dependency key that resolves to a spec package with exactly that version.
fn next_edge<'a>(
    packages: &'a BTreeMap<String, Package>,
    deps: &mut std::collections::btree_map::Iter<'a, String, String>,
) -> Option<&'a str> {
    deps.find_map(|(dep, version)| {
        packages
            .get_key_value(dep.as_str())
            .filter(|(_, pkg)| pkg.version == *version)
            .map(|(key, _)| key.as_str())
    })
}
