//! UPDATE-only NodeWright checks U1–U4 (01-api.md §4.4).

use std::cmp::Ordering;

use crate::NodeWright;
use crate::nodewright::unique_name;
use crate::version;

use super::ValidationError;
use super::nodewright::validate_nodewright;

/// Validates an update: the object checks on `new` (§4.3 1–6, D1, D9), then U1–U3 (rejections)
/// and U4 (warnings), packages in key order. Returns the warnings.
///
/// Check 7 (policy exists, [`super::validate_policy_reference`]) runs after this (U5); the webhook
/// returns these warnings together with its error, if any.
pub fn validate_nodewright_update(
    old: &NodeWright,
    new: &NodeWright,
) -> Result<Vec<String>, ValidationError> {
    validate_nodewright(new)?;
    check_removals(old, new)?;
    check_downgrades(old, new)?;
    Ok(cancel_warnings(old, new))
}

/// "Fully uninstalled" on the old object: no node entry carries `<pkg>|<old version>`.
/// A NodeWright without node state counts as fully uninstalled.
pub fn is_fully_uninstalled(old: &NodeWright, package: &str) -> bool {
    let Some(pkg) = old.spec.packages.get(package) else {
        return false;
    };
    let unique = unique_name(package, &pkg.version);
    old.status.as_ref().is_none_or(|s| {
        s.node_state
            .values()
            .all(|state| !state.0.contains_key(&unique))
    })
}

/// U1: an uninstall-enabled package may leave the spec only once it is uninstalled everywhere.
fn check_removals(old: &NodeWright, new: &NodeWright) -> Result<(), ValidationError> {
    for (name, old_pkg) in &old.spec.packages {
        let removed = !new.spec.packages.contains_key(name);
        if removed && old_pkg.uninstall_enabled() && !is_fully_uninstalled(old, name) {
            return Err(ValidationError::RemovedBeforeUninstall(name.clone()));
        }
    }
    Ok(())
}

/// U2/U3: a downgrade of an uninstall-enabled package needs a completed explicit uninstall.
fn check_downgrades(old: &NodeWright, new: &NodeWright) -> Result<(), ValidationError> {
    for (name, old_pkg) in &old.spec.packages {
        let Some(new_pkg) = new.spec.packages.get(name) else {
            continue;
        };
        let downgrade = new_pkg.version != old_pkg.version
            && version::compare(&new_pkg.version, &old_pkg.version) == Some(Ordering::Less);
        if !downgrade || !old_pkg.uninstall_enabled() {
            continue;
        }
        if !old_pkg.is_uninstalling() {
            return Err(ValidationError::DowngradeWithoutUninstall(name.clone()));
        }
        if !is_fully_uninstalled(old, name) {
            return Err(ValidationError::DowngradeBeforeUninstallDone(name.clone()));
        }
    }
    Ok(())
}

/// U4: setting `uninstall.apply` back to false is allowed but warned about.
fn cancel_warnings(old: &NodeWright, new: &NodeWright) -> Vec<String> {
    old.spec
        .packages
        .iter()
        .filter(|(name, old_pkg)| {
            old_pkg.is_uninstalling()
                && new
                    .spec
                    .packages
                    .get(*name)
                    .is_some_and(|p| !p.is_uninstalling())
        })
        .map(|(name, _)| {
            format!(
                "package {name:?}: uninstall cancelled — nodes where uninstall completed will need to re-install"
            )
        })
        .collect()
}
