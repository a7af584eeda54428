//! Input generators for the fuzz harnesses (crds/tests/fuzz.rs, shell/tests/fuzz_admission.rs):
//! structured-but-hostile NodeWright and DeploymentPolicy JSON, strings in the syntaxes the
//! operator parses, and byte mutations of valid documents.
//!
//! Case count: `NODEWRIGHT_FUZZ_CASES` (default [`DEFAULT_CASES`] per target, which CI runs);
//! set it higher for a longer run by hand (docs/testing.md "Fuzzing").

#![allow(dead_code)]

use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use serde_json::{Map, Value, json};

/// Cases per fuzz target when `NODEWRIGHT_FUZZ_CASES` is unset.
pub const DEFAULT_CASES: u32 = 300;

/// Longest any single input may take (debug build, loaded machine): a hang detector, far above
/// the normal time, not a speed claim.
pub const PER_INPUT: Duration = Duration::from_secs(10);

/// Seed of the CI runs.
pub const DEFAULT_SEED: u64 = 20261203;

/// The proptest configuration of every fuzz target.
pub fn config() -> Config {
    let cases = std::env::var("NODEWRIGHT_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    // A fixed seed by default, so a CI run is repeatable; NODEWRIGHT_FUZZ_SEED=<n> picks another
    // and NODEWRIGHT_FUZZ_SEED=random draws one (longer runs by hand).
    let rng_seed = match std::env::var("NODEWRIGHT_FUZZ_SEED").ok().as_deref() {
        Some("random") => RngSeed::Random,
        Some(v) => RngSeed::Fixed(v.parse().unwrap_or(DEFAULT_SEED)),
        None => RngSeed::Fixed(DEFAULT_SEED),
    };
    Config {
        cases,
        failure_persistence: None,
        rng_seed,
        ..Config::default()
    }
}

/// Runs `f`, failing the case when it takes longer than [`PER_INPUT`].
pub fn timed<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, TestCaseError> {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    prop_assert!(took < PER_INPUT, "{what} took {took:?}");
    Ok(out)
}

/// Any string, or one drawn from `pattern`, or one of `picks`.
pub fn text(pattern: &'static str, picks: &'static [&'static str]) -> BoxedStrategy<String> {
    prop_oneof![
        2 => proptest::string::string_regex(pattern).expect("regex"),
        2 => proptest::sample::select(picks).prop_map(str::to_string),
        1 => any::<String>(),
    ]
    .boxed()
}

/// Kubernetes quantity-like strings (with overflowing exponents and long digit runs).
pub fn quantity() -> BoxedStrategy<String> {
    text(
        r"[+-]?[0-9]{0,40}(\.[0-9]{0,40})?([numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]{1,22})?",
        &[
            "1",
            "100m",
            "1Gi",
            "0",
            "-1",
            "1e9223372036854775807",
            "10e9223372036854775807",
            "1.0e-9223372036854775807",
            "1e-9223372036854775808",
            "9.99999999999999999999Ei",
        ],
    )
}

/// Go duration-like strings (with overflowing values).
pub fn duration() -> BoxedStrategy<String> {
    text(
        r"[+-]?([0-9]{0,22}(\.[0-9]{0,20})?(ns|us|µs|μs|ms|s|m|h|x)?){1,4}",
        &[
            "0",
            "90s",
            "1h30m",
            "-1s",
            "9223372036854775807ns",
            "9223372036854775808ns",
            "99999999999999999999.999999999999999999h",
            "2562047h47m16.854775807s",
        ],
    )
}

/// Label keys and values: valid, invalid, long.
pub fn label_text() -> BoxedStrategy<String> {
    text(
        r"([a-z0-9.-]{0,20}/)?[A-Za-z0-9_.-]{0,70}",
        &["app", "", "a/b/c", "-x", "example.com/role", "x/"],
    )
}

/// A label selector as JSON.
pub fn selector() -> BoxedStrategy<Value> {
    let expr = (
        label_text(),
        text(
            r"[A-Za-z]{0,12}",
            &["In", "NotIn", "Exists", "DoesNotExist", "Gt"],
        ),
        proptest::option::of(proptest::collection::vec(label_text(), 0..4)),
    )
        .prop_map(
            |(key, operator, values)| json!({"key": key, "operator": operator, "values": values}),
        );
    (
        proptest::option::of(proptest::collection::btree_map(
            label_text(),
            label_text(),
            0..4,
        )),
        proptest::option::of(proptest::collection::vec(expr, 0..4)),
    )
        .prop_map(|(labels, exprs)| json!({"matchLabels": labels, "matchExpressions": exprs}))
        .boxed()
}

/// Package names: a few valid ones (so dependencies resolve and cycles form) and junk.
pub fn package_name() -> BoxedStrategy<String> {
    text(
        r"[a-z][-a-z0-9]{0,50}",
        &["aa", "bb", "cc", "dd", "ee", "A", "", "x|y"],
    )
}

fn version() -> BoxedStrategy<String> {
    text(
        r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(-[a-z0-9.]{1,5})?",
        &["1.0.0", "2.0.0", "", "x", "1.0", "0.1.0"],
    )
}

/// Config map keys and `configInterrupts` globs (many wildcards included).
pub fn glob() -> BoxedStrategy<String> {
    prop_oneof![
        text(
            r"[a-c*?.\[\]!-]{0,40}",
            &["*", "a*", "*.conf", "[", "**", "a/*"]
        ),
        (1usize..200).prop_map(|n| "a*".repeat(n)),
    ]
    .boxed()
}

fn interrupt() -> BoxedStrategy<Value> {
    (
        text(
            r"[a-zA-Z]{0,18}",
            &["reboot", "service", "noop", "restartAllServices"],
        ),
        proptest::collection::vec(label_text(), 0..3),
    )
        .prop_map(|(kind, services)| json!({"type": kind, "services": services}))
        .boxed()
}

fn resources() -> BoxedStrategy<Value> {
    (
        proptest::option::of(quantity()),
        proptest::option::of(quantity()),
        proptest::option::of(quantity()),
        proptest::option::of(quantity()),
    )
        .prop_map(|(a, b, c, d)| {
            json!({"cpuRequest": a, "cpuLimit": b, "memoryRequest": c, "memoryLimit": d})
        })
        .boxed()
}

/// One package as JSON (any field may be hostile).
pub fn package() -> BoxedStrategy<Value> {
    let deps = proptest::collection::btree_map(package_name(), version(), 0..4);
    let config = proptest::collection::btree_map(glob(), label_text(), 0..4);
    let interrupts = proptest::collection::btree_map(glob(), interrupt(), 0..3);
    (
        (version(), text(r"[a-z:/@. ]{0,30}", &["r/x", "r/x:1", "r/x@sha256:1", ""])),
        (deps, config, interrupts),
        (
            proptest::option::of(interrupt()),
            proptest::option::of(resources()),
            proptest::option::of(duration()),
            proptest::option::of(duration()),
            proptest::option::of((any::<bool>(), any::<bool>())),
        ),
    )
        .prop_map(
            |((version, image), (deps, config, interrupts), (intr, res, stage, grace, uninstall))| {
                json!({
                    "version": version, "image": image, "dependsOn": deps,
                    "configMap": config, "configInterrupts": interrupts, "interrupt": intr,
                    "resources": res, "stageTimeout": stage, "gracefulShutdown": grace,
                    "uninstall": uninstall.map(|(enabled, apply)| json!({"enabled": enabled, "apply": apply})),
                })
            },
        )
        .boxed()
}

/// A NodeWright spec as JSON.
pub fn nodewright_spec() -> BoxedStrategy<Value> {
    (
        proptest::collection::btree_map(package_name(), package(), 0..6),
        proptest::option::of((
            proptest::option::of(-5i64..200),
            proptest::option::of(-5i64..5),
        )),
        proptest::option::of(selector()),
        proptest::option::of(selector()),
        proptest::option::of((duration(), duration())),
        text(r"[a-z-]{0,10}", &["", "p1"]),
    )
        .prop_map(|(packages, budget, nodes, pods, drain, policy)| {
            json!({
                "packages": packages,
                "interruptionBudget": budget.map(|(p, c)| json!({"percent": p, "count": c})),
                "nodeSelectors": nodes, "podNonInterruptLabels": pods,
                "drainConfig": drain.map(|(t, g)| json!({"timeout": t, "gracePeriod": g})),
                "deploymentPolicy": policy,
            })
        })
        .boxed()
}

/// A NodeWright object as JSON.
pub fn nodewright() -> BoxedStrategy<Value> {
    nodewright_spec()
        .prop_map(|spec| {
            json!({"apiVersion": "nodewright.nvidia.com/v1alpha1", "kind": "NodeWright",
                   "metadata": {"name": "fuzz"}, "spec": strip_nulls(spec)})
        })
        .boxed()
}

/// A DeploymentPolicy object as JSON.
pub fn policy() -> BoxedStrategy<Value> {
    let budget = (
        proptest::option::of(-5i64..200),
        proptest::option::of(-5i64..5),
    )
        .prop_map(|(p, c)| json!({"percent": p, "count": c}));
    let strategy = prop_oneof![
        Just(Value::Null),
        Just(json!({"linear": {}})),
        (any::<i32>(), any::<i32>())
            .prop_map(|(a, b)| json!({"exponential": {"initialBatch": a, "growthFactor": b}})),
        (any::<i32>()).prop_map(|a| json!({"fixed": {"initialBatch": a, "safetyLimit": a}})),
        (any::<i32>()).prop_map(|a| json!({"linear": {"delta": a}})),
    ];
    let compartment = (label_text(), selector(), budget.clone())
        .prop_map(|(name, sel, b)| json!({"name": name, "selector": sel, "budget": b}));
    (
        budget,
        strategy,
        proptest::collection::vec(compartment, 0..3),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(|(b, s, comps, reset)| {
            strip_nulls(json!({
                "apiVersion": "nodewright.nvidia.com/v1alpha1", "kind": "DeploymentPolicy",
                "metadata": {"name": "fuzz"},
                "spec": {"default": {"budget": b, "strategy": s}, "compartments": comps,
                         "resetBatchStateOnCompletion": reset}
            }))
        })
        .boxed()
}

/// Drops `null` members (generated optional fields that came out absent).
pub fn strip_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect::<Map<String, Value>>(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(strip_nulls).collect()),
        other => other,
    }
}

/// One byte edit: (position as a fraction of the length, kind 0 = replace, 1 = insert,
/// 2 = delete, the byte).
pub type Edit = (f64, u8, u8);

/// Up to `n` byte edits.
pub fn edits(n: usize) -> BoxedStrategy<Vec<Edit>> {
    proptest::collection::vec((0.0f64..1.0, 0u8..3, any::<u8>()), 1..n).boxed()
}

/// Applies `edits` to `bytes`.
pub fn mutate(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for &(at, kind, byte) in edits {
        let pos = ((bytes.len() as f64) * at) as usize;
        match kind {
            0 if pos < bytes.len() => bytes[pos] = byte,
            1 => bytes.insert(pos.min(bytes.len()), byte),
            _ if pos < bytes.len() => {
                bytes.remove(pos);
            }
            _ => {}
        }
    }
    bytes
}
