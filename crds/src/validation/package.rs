//! Per-package checks 4a–4l (01-api.md §4.3) with the stricter image rules of D1 (§11 item 3).

use glob::{MatchOptions, Pattern};

use crate::limits;
use crate::nodewright::{Package, ResourceRequirements};
use crate::quantity::{Q, parse_quantity};
use crate::version;

use super::ValidationError;
use super::nodewright::parse_duration;

/// Checks one package (`key` is its map key) in rule order 4a, 4c, 4d, image, 4f, 4g–4j, 4k, 4l.
pub(super) fn check_package(key: &str, pkg: &Package) -> Result<(), ValidationError> {
    let name = if pkg.name.is_empty() { key } else { &pkg.name };
    if name != key {
        return Err(ValidationError::PackageNameMismatch {
            key: key.to_string(),
            name: name.to_string(),
        });
    }
    if !is_valid_package_name(key) {
        return Err(ValidationError::PackageNameInvalid(key.to_string()));
    }
    check_config_interrupts(pkg)?;
    check_image(key, pkg)?;
    if !version::is_valid(&pkg.version) {
        return Err(ValidationError::VersionInvalid {
            name: name.to_string(),
            version: pkg.version.clone(),
        });
    }
    check_resources(key, pkg.resources.as_ref())?;
    if pkg
        .uninstall
        .as_ref()
        .is_some_and(|u| u.apply && !u.enabled)
    {
        return Err(ValidationError::UninstallApplyWithoutEnabled(
            key.to_string(),
        ));
    }
    let context = format!("package {key:?}: stageTimeout");
    if parse_duration(&context, pkg.stage_timeout.as_ref())?.is_some_and(|n| n < 0) {
        return Err(ValidationError::StageTimeoutNegative(key.to_string()));
    }
    Ok(())
}

/// Check 4c: `^[a-z][-a-z0-9]{0,41}[a-z]$` on the whole key.
pub fn is_valid_package_name(key: &str) -> bool {
    let bytes = key.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    (2..=43).contains(&bytes.len())
        && first.is_ascii_lowercase()
        && last.is_ascii_lowercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// Check 4d: every `configInterrupts` key is a `configMap` key or a `*`-glob matching one.
fn check_config_interrupts(pkg: &Package) -> Result<(), ValidationError> {
    for pattern in pkg.config_interrupts.keys() {
        if pkg.config_map.contains_key(pattern) {
            continue;
        }
        if !pattern.contains('*') {
            return Err(ValidationError::ConfigInterruptKey(pattern.clone()));
        }
        let wildcards = wildcard_count(pattern);
        if wildcards > limits::MAX_GLOB_WILDCARDS {
            return Err(ValidationError::ConfigInterruptGlobTooComplex {
                pattern: limits::clip(pattern, 64),
                wildcards,
                max: limits::MAX_GLOB_WILDCARDS,
            });
        }
        if !pkg.config_map.keys().any(|k| glob_matches(pattern, k)) {
            return Err(ValidationError::ConfigInterruptGlob(pattern.clone()));
        }
    }
    Ok(())
}

/// The number of `*` in a glob.
fn wildcard_count(pattern: &str) -> usize {
    pattern.bytes().filter(|b| *b == b'*').count()
}

/// Shell-filename matching: `*` matches any run of characters except `/`; a malformed pattern,
/// or one with more than [`limits::MAX_GLOB_WILDCARDS`] wildcards, matches nothing (the matcher
/// recurses once per wildcard).
pub fn glob_matches(pattern: &str, key: &str) -> bool {
    if wildcard_count(pattern) > limits::MAX_GLOB_WILDCARDS {
        return false;
    }
    let options = MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: false,
    };
    Pattern::new(pattern).is_ok_and(|p| p.matches_with(key, options))
}

/// Check 4e in its stricter D1 form: a bare repository, no digest, no tag (a registry port is
/// allowed); `containerSHA`, when set, is a sha256 digest.
fn check_image(key: &str, pkg: &Package) -> Result<(), ValidationError> {
    let image = &pkg.image;
    if image.is_empty() || image.chars().any(char::is_whitespace) {
        return Err(ValidationError::ImageBlank(key.to_string()));
    }
    match split_image_reference(image) {
        ImageSuffix::Digest => {
            return Err(ValidationError::ImageDigest {
                key: key.to_string(),
                image: image.clone(),
            });
        }
        ImageSuffix::Tag(tag) => {
            return Err(ValidationError::ImageTag {
                key: key.to_string(),
                image: image.clone(),
                tag: tag.to_string(),
            });
        }
        ImageSuffix::None => {}
    }
    if !pkg.container_sha.is_empty() && !is_sha256_digest(&pkg.container_sha) {
        return Err(ValidationError::ContainerSha {
            key: key.to_string(),
            sha: pkg.container_sha.clone(),
        });
    }
    Ok(())
}

/// What follows the repository in an image reference.
#[derive(Debug, PartialEq, Eq)]
pub enum ImageSuffix<'a> {
    /// A bare repository.
    None,
    /// `@...` (even when empty).
    Digest,
    /// `:<tag>` after the last `/` (even when empty).
    Tag(&'a str),
}

/// Splits an image reference: `@` starts a digest; a `:` after the last `/` starts a tag, while a
/// `:` before it is a registry port (`localhost:5000/org/pkg`).
pub fn split_image_reference(image: &str) -> ImageSuffix<'_> {
    if image.contains('@') {
        return ImageSuffix::Digest;
    }
    let last_segment = image.rsplit('/').next().unwrap_or(image);
    match last_segment.split_once(':') {
        Some((_, tag)) => ImageSuffix::Tag(tag),
        None => ImageSuffix::None,
    }
}

/// `^sha256:[0-9a-f]{64}$`.
pub fn is_sha256_digest(text: &str) -> bool {
    text.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The four resource quantities, parsed; `None` where absent.
pub(super) struct ParsedResources {
    cpu_request: Option<Q>,
    cpu_limit: Option<Q>,
    memory_request: Option<Q>,
    memory_limit: Option<Q>,
}

/// Parses the four quantities, reporting the first unparsable one.
pub(super) fn parse_resources(
    key: &str,
    res: Option<&ResourceRequirements>,
) -> Result<ParsedResources, ValidationError> {
    let parse =
        |field: &'static str,
         q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
            q.map(|q| {
                parse_quantity(&q.0).map_err(|_| ValidationError::InvalidQuantity {
                    package: key.to_string(),
                    field,
                    value: q.0.clone(),
                })
            })
            .transpose()
        };
    let res = res.cloned().unwrap_or_default();
    Ok(ParsedResources {
        cpu_request: parse("cpuRequest", res.cpu_request.as_ref())?,
        cpu_limit: parse("cpuLimit", res.cpu_limit.as_ref())?,
        memory_request: parse("memoryRequest", res.memory_request.as_ref())?,
        memory_limit: parse("memoryLimit", res.memory_limit.as_ref())?,
    })
}

/// Checks 4g–4j. A zero quantity counts as "not set", as in the Go operator.
fn check_resources(key: &str, res: Option<&ResourceRequirements>) -> Result<(), ValidationError> {
    let parsed = parse_resources(key, res)?;
    let set = |q: &Option<Q>| q.as_ref().filter(|q| !q.is_zero()).cloned();
    let values = [
        set(&parsed.cpu_request),
        set(&parsed.cpu_limit),
        set(&parsed.memory_request),
        set(&parsed.memory_limit),
    ];
    let [Some(cpu_req), Some(cpu_lim), Some(mem_req), Some(mem_lim)] = values else {
        if values.iter().any(Option::is_some) {
            return Err(ValidationError::ResourcesPartial(key.to_string()));
        }
        return Ok(());
    };
    if cpu_lim < cpu_req {
        return Err(ValidationError::CpuLimitBelowRequest {
            key: key.to_string(),
            limit: cpu_lim.canonical(),
            request: cpu_req.canonical(),
        });
    }
    if mem_lim < mem_req {
        return Err(ValidationError::MemoryLimitBelowRequest {
            key: key.to_string(),
            limit: mem_lim.canonical(),
            request: mem_req.canonical(),
        });
    }
    if [&cpu_req, &cpu_lim, &mem_req, &mem_lim]
        .iter()
        .any(|q| q.signum() <= 0)
    {
        return Err(ValidationError::ResourcesNotPositive(key.to_string()));
    }
    Ok(())
}
