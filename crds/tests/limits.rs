//! Issue 13 finding 1: hostile object sizes. Every graph walk over `dependsOn` is iterative, and
//! the size bounds of `nodewright_crds::limits` are checked with a clear message. The walks run
//! on a thread with a 256 KiB stack: the recursive walk this replaced overflowed it (and
//! aborted the process) at a few thousand links.

use std::collections::BTreeMap;

use nodewright_crds::limits::{MAX_GLOB_CHECKS, MAX_GLOB_WILDCARDS, MAX_PACKAGES};
use nodewright_crds::validation::{ValidationError, find_cycle, glob_matches, validate_spec};
use nodewright_crds::{Interrupt, InterruptType, NodeWrightSpec, Package};

const SMALL_STACK: usize = 256 * 1024;

/// Runs `f` on a thread with a small stack, as deep recursion would exhaust it.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no panic")
}

fn key(i: usize) -> String {
    format!("p{i:06}x")
}

/// `count` packages; package i depends on package i+1 (and the last on the first if `cycle`).
fn chain(count: usize, cycle: bool) -> BTreeMap<String, Package> {
    (0..count)
        .map(|i| {
            let mut pkg = Package {
                name: key(i),
                version: "1.0.0".into(),
                image: "registry.example/pkg".into(),
                ..Default::default()
            };
            let next = if i + 1 < count {
                Some(i + 1)
            } else {
                cycle.then_some(0)
            };
            if let Some(next) = next {
                pkg.depends_on.insert(key(next), "1.0.0".into());
            }
            (key(i), pkg)
        })
        .collect()
}

#[test]
fn limits_find_cycle_walks_a_100000_link_chain_iteratively() {
    let found = on_small_stack(|| {
        let open = find_cycle(&chain(100_000, false));
        let closed = find_cycle(&chain(100_000, true));
        (
            open,
            closed.map(|c| (c.len(), c.first().cloned(), c.last().cloned())),
        )
    });
    assert_eq!(found.0, None);
    assert_eq!(
        found.1,
        Some((100_001, Some(key(0)), Some(key(0)))),
        "the whole ring is the cycle, first name repeated"
    );
}

#[test]
fn limits_100000_link_chain_is_denied_with_a_message() {
    let result = on_small_stack(|| {
        let spec = NodeWrightSpec {
            packages: chain(100_000, false),
            ..Default::default()
        };
        validate_spec(&spec)
    });
    assert_eq!(
        result,
        Err(ValidationError::TooManyPackages {
            count: 100_000,
            max: MAX_PACKAGES
        })
    );
    assert_eq!(
        result.unwrap_err().to_string(),
        "spec.packages has 100000 entries; at most 1000 are allowed"
    );
}

#[test]
fn limits_50000_package_object_is_denied_with_a_message() {
    let spec = NodeWrightSpec {
        packages: chain(50_000, false)
            .into_iter()
            .map(|(k, mut p)| {
                p.depends_on.clear();
                (k, p)
            })
            .collect(),
        ..Default::default()
    };
    let message = validate_spec(&spec).unwrap_err().to_string();
    assert_eq!(
        message,
        "spec.packages has 50000 entries; at most 1000 are allowed"
    );
}

#[test]
fn limits_max_package_chain_is_accepted_and_its_cycle_reported() {
    let spec = NodeWrightSpec {
        packages: chain(MAX_PACKAGES, false),
        ..Default::default()
    };
    on_small_stack(move || validate_spec(&spec)).expect("a chain of MAX_PACKAGES is valid");
    let ring = NodeWrightSpec {
        packages: chain(MAX_PACKAGES, true),
        ..Default::default()
    };
    let err = on_small_stack(move || validate_spec(&ring)).unwrap_err();
    assert!(
        matches!(&err, ValidationError::DependencyCycle(c) if c.len() == MAX_PACKAGES + 1),
        "{err}"
    );
}

#[test]
fn limits_too_many_depends_on_entries_are_denied() {
    let mut packages = chain(2, false);
    let first = packages.get_mut(&key(0)).expect("p0");
    for i in 0..=MAX_PACKAGES {
        first
            .depends_on
            .insert(format!("missing{i}"), "1.0.0".into());
    }
    let spec = NodeWrightSpec {
        packages,
        ..Default::default()
    };
    assert_eq!(
        validate_spec(&spec).unwrap_err().to_string(),
        "package \"p000000x\": dependsOn has 1002 entries; at most 1000 are allowed"
    );
}

fn reboot() -> Interrupt {
    Interrupt {
        type_: InterruptType::Reboot,
        services: Vec::new(),
    }
}

#[test]
fn limits_glob_with_too_many_wildcards_is_denied_and_never_matched() {
    let pattern = "a*".repeat(100_000);
    let text = "a".repeat(10);
    let (matched, result) = on_small_stack(move || {
        let mut pkg = Package {
            name: "pkg".into(),
            version: "1.0.0".into(),
            image: "registry.example/pkg".into(),
            ..Default::default()
        };
        pkg.config_map.insert(text.clone(), "v".into());
        pkg.config_interrupts.insert(pattern.clone(), reboot());
        let spec = NodeWrightSpec {
            packages: BTreeMap::from([("pkg".to_string(), pkg)]),
            ..Default::default()
        };
        (glob_matches(&pattern, &text), validate_spec(&spec))
    });
    assert!(!matched);
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains("has 100000 '*' wildcards; at most 64 are allowed"),
        "{message}"
    );
    let at_bound = format!("{}a", "a*".repeat(MAX_GLOB_WILDCARDS));
    assert!(glob_matches(&at_bound, &"a".repeat(200)));
}

/// A package whose every `configInterrupts` glob matches only its last `configMap` key, so each
/// glob is tried against every key (1000 globs × 1001 keys kept validation busy for tens of seconds
/// before the bound on glob checks; docs/performance.md).
fn glob_heavy_package(globs: usize) -> Package {
    let mut pkg = Package {
        name: "pkg".into(),
        version: "1.0.0".into(),
        image: "registry.example/pkg".into(),
        ..Default::default()
    };
    for i in 0..1000 {
        pkg.config_map
            .insert(format!("{}{i:04}", "a".repeat(240)), "v".into());
    }
    pkg.config_map
        .insert(format!("{}b", "a".repeat(250)), "v".into());
    for n in 0..globs {
        let (r, q) = (1 + n / 50, n % 50);
        pkg.config_interrupts.insert(
            format!("{}{}*b", "a*?".repeat(r * 3), "?".repeat(q)),
            reboot(),
        );
    }
    pkg
}

#[test]
fn limits_glob_checks_are_bounded() {
    let spec = |globs| NodeWrightSpec {
        packages: BTreeMap::from([("pkg".to_string(), glob_heavy_package(globs))]),
        ..Default::default()
    };
    assert_eq!(
        validate_spec(&spec(1000)).unwrap_err().to_string(),
        "package \"pkg\": 1000 configInterrupts globs × 1001 configMap keys = 1001000 glob checks; at most 100000 are allowed"
    );
    // At the bound the object is valid (every glob matches the last key).
    validate_spec(&spec(MAX_GLOB_CHECKS / 1001)).expect("99 globs × 1001 keys");
}
