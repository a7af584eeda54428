//! Package versions: Go-module semantic versions (01-api.md §4.8).
//!
//! A version is valid iff, after prefixing `v` when it does not already start with `v`, it is a
//! Go-module semver: `vMAJOR[.MINOR[.PATCH[-PRERELEASE][+BUILD]]]`. The shorthands `1` and `1.2`
//! mean `1.0.0` and `1.2.0` and take no prerelease or build. Comparison follows SemVer 2.0
//! precedence (build metadata ignored). The grammar is checked here; the `semver` crate does the
//! ordering after the shorthand is expanded.

use std::cmp::Ordering;

use thiserror::Error;

/// Why a version string is not a valid package version.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("invalid semantic version {0:?}")]
pub struct VersionError(pub String);

/// True when `version` is a valid package version (`1`, `1.2`, `v1.2.3-rc.1+b5`, ...).
pub fn is_valid(version: &str) -> bool {
    parse(version).is_ok()
}

/// Parses a package version into a full `semver::Version` (shorthands expanded with zeros).
pub fn parse(version: &str) -> Result<semver::Version, VersionError> {
    let err = || VersionError(version.to_string());
    let body = version.strip_prefix('v').unwrap_or(version);
    if version.is_empty() || body.is_empty() {
        return Err(err());
    }
    let (core, build) = match body.split_once('+') {
        Some((core, build)) => (core, Some(build)),
        None => (body, None),
    };
    let (numbers, pre) = match core.split_once('-') {
        Some((numbers, pre)) => (numbers, Some(pre)),
        None => (core, None),
    };
    let parts: Vec<&str> = numbers.split('.').collect();
    if parts.len() > 3 || !parts.iter().all(|p| is_numeric_identifier(p)) {
        return Err(err());
    }
    if parts.len() < 3 && (pre.is_some() || build.is_some()) {
        return Err(err());
    }
    if pre.is_some_and(|p| !p.split('.').all(is_prerelease_identifier)) {
        return Err(err());
    }
    if build.is_some_and(|b| !b.split('.').all(is_build_identifier)) {
        return Err(err());
    }
    let mut full = [parts[0], "0", "0"];
    full[..parts.len()].copy_from_slice(&parts);
    let mut text = full.join(".");
    if let Some(pre) = pre {
        text = format!("{text}-{pre}");
    }
    if let Some(build) = build {
        text = format!("{text}+{build}");
    }
    // Components beyond u64 pass the grammar but not the crate: reported as invalid.
    semver::Version::parse(&text).map_err(|_| err())
}

/// Compares two versions by SemVer precedence, or `None` when either is invalid.
pub fn compare(a: &str, b: &str) -> Option<Ordering> {
    Some(parse(a).ok()?.cmp_precedence(&parse(b).ok()?))
}

/// Compares like Go's `semver.Compare`: an invalid version sorts below every valid one and all
/// invalid versions are equal.
pub fn compare_go(a: &str, b: &str) -> Ordering {
    match (parse(a), parse(b)) {
        (Ok(a), Ok(b)) => a.cmp_precedence(&b),
        (Ok(_), Err(_)) => Ordering::Greater,
        (Err(_), Ok(_)) => Ordering::Less,
        (Err(_), Err(_)) => Ordering::Equal,
    }
}

fn is_numeric_identifier(text: &str) -> bool {
    !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'))
}

fn is_alphanumeric_identifier(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn is_prerelease_identifier(text: &str) -> bool {
    if text.bytes().all(|b| b.is_ascii_digit()) {
        is_numeric_identifier(text)
    } else {
        is_alphanumeric_identifier(text)
    }
}

fn is_build_identifier(text: &str) -> bool {
    is_alphanumeric_identifier(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r4_8_valid_versions() {
        for v in [
            "1",
            "1.2",
            "1.2.3",
            "v1.2.3-rc.1+b5",
            "v1",
            "0.0.0",
            "1.0.0-alpha-1.0",
            "1.0.0+001",
            "2.0.0-0.3.7",
            "10.20.30",
        ] {
            assert!(is_valid(v), "{v} should be valid");
        }
    }

    #[test]
    fn r4_8_invalid_versions() {
        for v in [
            "",
            "v",
            "01.2.3",
            "1.02.3",
            "1.2-rc1",
            "1+b",
            "latest",
            "V1.0.0",
            "1.2.3.4",
            "1.2.3-",
            "1.2.3-01",
            "1.2.3+",
            "1.2.3-a..b",
            "1.2.3-a_b",
            " 1.2.3",
            "vv1.2.3",
            "1.2.",
            "99999999999999999999999.0.0",
        ] {
            assert!(!is_valid(v), "{v} should be invalid");
        }
    }

    #[test]
    fn r4_8_shorthand_equals_full() {
        assert_eq!(compare("1", "1.0.0"), Some(Ordering::Equal));
        assert_eq!(compare("v1.2", "1.2.0"), Some(Ordering::Equal));
    }

    #[test]
    fn r4_8_build_metadata_ignored() {
        assert_eq!(compare("1.0.0+a", "1.0.0+b"), Some(Ordering::Equal));
        assert_eq!(compare("1.0.0+a", "1.0.0"), Some(Ordering::Equal));
    }

    #[test]
    fn r4_8_prerelease_precedence() {
        let ordered = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "1.0.1",
            "1.1",
            "2",
        ];
        for pair in ordered.windows(2) {
            assert_eq!(compare(pair[0], pair[1]), Some(Ordering::Less), "{pair:?}");
        }
    }

    #[test]
    fn r4_8_invalid_compares_like_go() {
        assert_eq!(compare("latest", "1.0.0"), None);
        assert_eq!(compare_go("latest", "1.0.0"), Ordering::Less);
        assert_eq!(compare_go("1.0.0", "bad"), Ordering::Greater);
        assert_eq!(compare_go("bad", "worse"), Ordering::Equal);
        assert_eq!(compare_go("1.10.0", "1.9.0"), Ordering::Greater);
    }
}
