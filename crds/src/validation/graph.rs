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
pub fn find_cycle(packages: &BTreeMap<String, Package>) -> Option<Vec<String>> {
    let mut done = BTreeSet::new();
    for start in packages.keys() {
        let mut path = Vec::new();
        if let Some(cycle) = visit(packages, start, &mut path, &mut done) {
            return Some(cycle);
        }
    }
    None
}

fn visit<'a>(
    packages: &'a BTreeMap<String, Package>,
    node: &'a str,
    path: &mut Vec<&'a str>,
    done: &mut BTreeSet<&'a str>,
) -> Option<Vec<String>> {
    if done.contains(node) {
        return None;
    }
    if let Some(pos) = path.iter().position(|n| *n == node) {
        let mut cycle: Vec<String> = path[pos..].iter().map(|n| n.to_string()).collect();
        cycle.push(node.to_string());
        return Some(cycle);
    }
    path.push(node);
    let pkg = &packages[node];
    for (dep, version) in &pkg.depends_on {
        let Some((dep_key, dep_pkg)) = packages.get_key_value(dep.as_str()) else {
            continue;
        };
        if dep_pkg.version != *version {
            continue;
        }
        if let Some(cycle) = visit(packages, dep_key, path, done) {
            return Some(cycle);
        }
    }
    path.pop();
    done.insert(node);
    None
}
