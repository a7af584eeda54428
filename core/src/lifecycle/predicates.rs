//! Derived predicates D1–D10 (02-lifecycle.md §2): pure functions of a package, its
//! `configUpdates` and a node-state document.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use nodewright_crds::{Interrupt, NodeState, Package, PackageStatus, Stage, State};

/// `status.configUpdates` of one NodeWright: package name → changed keys.
pub type ConfigUpdates = BTreeMap<String, Vec<String>>;

/// D1: the configInterrupts of `pkg` matching its tracked config keys, de-duplicated.
pub fn config_interrupts(pkg: &Package, updates: &ConfigUpdates) -> Vec<Interrupt> {
    let mut out: Vec<Interrupt> = Vec::new();
    let Some(keys) = updates.get(&pkg.name) else {
        return out;
    };
    for key in keys {
        for (pattern, interrupt) in &pkg.config_interrupts {
            if glob_match(pattern, key) && !out.iter().any(|i| same_interrupt(i, interrupt)) {
                out.push(interrupt.clone());
            }
        }
    }
    out
}

fn same_interrupt(a: &Interrupt, b: &Interrupt) -> bool {
    a.type_ == b.type_ && a.services.join(",") == b.services.join(",")
}

/// Shell-style glob: `*` any run of non-`/`, `?` one non-`/`, `[...]` a class; else literal.
/// A malformed pattern, or one with more `*` than
/// [`nodewright_crds::limits::MAX_GLOB_WILDCARDS`] (admission rejects those; the matcher
/// recurses once per wildcard), is compared literally.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let wildcards = pattern.bytes().filter(|b| *b == b'*').count();
    if wildcards > nodewright_crds::limits::MAX_GLOB_WILDCARDS {
        return pattern == text;
    }
    glob::Pattern::new(pattern)
        .map(|p| {
            p.matches_with(
                text,
                glob::MatchOptions {
                    case_sensitive: true,
                    require_literal_separator: true,
                    require_literal_leading_dot: false,
                },
            )
        })
        .unwrap_or(pattern == text)
}

/// True when `configUpdates[pkg]` is non-empty.
pub fn has_config_updates(pkg: &Package, updates: &ConfigUpdates) -> bool {
    updates.get(&pkg.name).is_some_and(|k| !k.is_empty())
}

/// D2: the package's interrupts this cycle: its D1 list while config updates are tracked,
/// else its own `interrupt`.
pub fn interrupts_of(pkg: &Package, updates: &ConfigUpdates) -> Vec<Interrupt> {
    if has_config_updates(pkg, updates) {
        config_interrupts(pkg, updates)
    } else {
        pkg.interrupt.iter().cloned().collect()
    }
}

/// D2 HasInterrupt(p), without allocating.
pub fn has_interrupt(pkg: &Package, updates: &ConfigUpdates) -> bool {
    match updates.get(&pkg.name) {
        Some(keys) if !keys.is_empty() => keys.iter().any(|k| {
            pkg.config_interrupts
                .keys()
                .any(|pattern| glob_match(pattern, k))
        }),
        _ => pkg.interrupt.is_some(),
    }
}

/// Whether the gate G runs for `pkg` (§7.5): D2 HasInterrupt, except in the uninstall cycle,
/// where the package's own `interrupt` decides, as it does when T11 enters uninstall-interrupt.
/// A tracked config update without a matching configInterrupt must not strand an
/// uninstall-interrupt that T11 started: its executor is fired only through the gate.
pub fn gated(pkg: &Package, entry: Option<&PackageStatus>, updates: &ConfigUpdates) -> bool {
    match entry {
        Some(e) if e.stage.in_uninstall_cycle() => pkg.interrupt.is_some(),
        _ => has_interrupt(pkg, updates),
    }
}

/// The entry for `name|version` without building the key (the parser guarantees that every
/// key equals its entry's `name|version`).
pub fn entry_of<'s>(state: &'s NodeState, name: &str, version: &str) -> Option<&'s PackageStatus> {
    state
        .0
        .values()
        .find(|e| e.name == name && e.version == version)
}

/// D3 IsPackageComplete [Fix]: complete at post-interrupt, or at config without interrupt.
pub fn is_package_complete(state: &NodeState, pkg: &Package, updates: &ConfigUpdates) -> bool {
    entry_of(state, &pkg.name, &pkg.version).is_some_and(|e| entry_complete(e, pkg, updates))
}

/// D3 on `pkg`'s entry.
fn entry_complete(e: &PackageStatus, pkg: &Package, updates: &ConfigUpdates) -> bool {
    e.version == pkg.version
        && e.is_complete()
        && (e.stage == Stage::PostInterrupt
            || (e.stage == Stage::Config && !has_interrupt(pkg, updates)))
}

/// D4 CompleteSet(node): keys of spec packages that are complete.
pub fn complete_set(
    state: &NodeState,
    packages: &BTreeMap<String, Package>,
    updates: &ConfigUpdates,
) -> Vec<String> {
    let mut done: Vec<String> = packages
        .values()
        .filter(|p| is_package_complete(state, p, updates))
        .map(Package::unique_name)
        .collect();
    done.sort();
    done
}

/// D5 IsNodeComplete(NW, node).
pub fn is_node_complete(
    state: &NodeState,
    packages: &BTreeMap<String, Package>,
    updates: &ConfigUpdates,
) -> bool {
    // Entries are keyed `name|version` and spec packages by name, so a document's entries
    // usually come in the packages' order: try the entry after the last one found first. There
    // is at most one entry per `name|version`, so the hint finds what the scan would.
    let mut rest = state.0.values();
    packages.values().all(|p| {
        let entry = match rest.clone().next() {
            Some(e) if e.name == p.name && e.version == p.version => rest.next(),
            _ => entry_of(state, &p.name, &p.version),
        };
        if p.is_uninstalling() && entry.is_none() {
            return true; // not active
        }
        entry.is_some_and(|e| !e.stage.in_uninstall_cycle() && entry_complete(e, p, updates))
    })
}

/// Finds values by key in a short sorted list (spec packages by key), trying the one after the
/// last hit first (document entries come in the packages' order), else a binary search.
pub struct PackageCursor<'p, T> {
    keys: Vec<(&'p str, T)>,
    next: usize,
}

impl<'p, T: Copy> PackageCursor<'p, T> {
    /// A cursor over `(key, value)` pairs sorted by key.
    pub fn new(keys: Vec<(&'p str, T)>) -> Self {
        PackageCursor { keys, next: 0 }
    }

    /// The value of `key`, if present.
    pub fn get(&mut self, key: &str) -> Option<T> {
        if let Some((k, value)) = self.keys.get(self.next)
            && *k == key
        {
            self.next += 1;
            return Some(*value);
        }
        let i = self.keys.binary_search_by(|(k, _)| (*k).cmp(key)).ok()?;
        self.next = i + 1;
        Some(self.keys[i].1)
    }
}

/// D7 NextStage(entry, p); defined only for a complete entry.
pub fn next_stage(entry: &PackageStatus, pkg: &Package, updates: &ConfigUpdates) -> Option<Stage> {
    if !entry.is_complete() {
        return None;
    }
    let interrupt = has_interrupt(pkg, updates);
    match entry.stage {
        Stage::Apply | Stage::Upgrade => Some(Stage::Config),
        Stage::Config if interrupt => Some(Stage::Interrupt),
        Stage::Interrupt => Some(Stage::PostInterrupt),
        Stage::Uninstall if !interrupt => Some(Stage::Apply),
        _ => None,
    }
}

/// D8 InCycle(node, p): the entry for p's key sits at uninstall or uninstall-interrupt.
pub fn in_cycle(state: &NodeState, pkg: &Package) -> bool {
    entry_of(state, &pkg.name, &pkg.version).is_some_and(|e| e.stage.in_uninstall_cycle())
}

/// True when some spec package's entry is in the uninstall cycle (D7 for any package).
/// Entries are keyed by `name|version`, so scanning the few cycling entries finds the same
/// (package, entry) pairs as looking up every package.
pub fn any_in_cycle(state: &NodeState, packages: &BTreeMap<String, Package>) -> bool {
    state.0.values().any(|e| {
        e.stage.in_uninstall_cycle()
            && packages
                .values()
                .any(|p| p.name == e.name && p.version == e.version)
    })
}

/// D8 Requested(NW, p).
pub fn uninstall_requested(pkg: &Package, deleting: bool) -> bool {
    pkg.is_uninstalling() || (deleting && pkg.uninstall_enabled())
}

/// D10 version order: semver (`v` optional, `1.2` shorthand); invalid strings sort below valid
/// ones and equal to each other (nodewright_crds::version).
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    nodewright_crds::version::compare_go(a, b)
}

/// The entry shape the pass writes: `(stage, state)` with the package's image fields.
pub fn entry_for(pkg: &Package, stage: Stage, state: State) -> PackageStatus {
    PackageStatus {
        name: pkg.name.clone(),
        version: pkg.version.clone(),
        image: pkg.image.clone(),
        container_sha: pkg.container_sha.clone(),
        stage,
        state: Some(state),
        restarts: 0,
    }
}
