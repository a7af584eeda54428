//! Property tests: quantity ordering agrees with exact integer arithmetic, version comparison is a
//! total preorder, and validation never panics on arbitrary input.

use std::cmp::Ordering;

use nodewright_crds::quantity::parse_quantity;
use nodewright_crds::validation::validate_nodewright;
use nodewright_crds::version;
use nodewright_crds::{NodeWright, Package};
use proptest::prelude::*;

/// (suffix, value of one unit in nano-units).
const SUFFIXES: &[(&str, i128)] = &[
    ("n", 1),
    ("u", 1_000),
    ("m", 1_000_000),
    ("", 1_000_000_000),
    ("k", 1_000_000_000_000),
    ("M", 1_000_000_000_000_000),
    ("Ki", 1_024 * 1_000_000_000),
    ("Mi", 1_048_576 * 1_000_000_000),
    ("Gi", 1_073_741_824 * 1_000_000_000),
    ("e2", 100 * 1_000_000_000),
    ("e-3", 1_000_000),
];

fn quantity() -> impl Strategy<Value = (String, i128)> {
    (-100_000i64..100_000, 0..SUFFIXES.len()).prop_map(|(n, i)| {
        let (suffix, unit) = SUFFIXES[i];
        (format!("{n}{suffix}"), i128::from(n) * unit)
    })
}

proptest! {
    #[test]
    fn quantity_order_matches_exact_value((a, va) in quantity(), (b, vb) in quantity()) {
        let qa = parse_quantity(&a).expect("valid");
        let qb = parse_quantity(&b).expect("valid");
        prop_assert_eq!(qa.cmp(&qb), va.cmp(&vb), "{} vs {}", a, b);
        prop_assert_eq!(qa.value_key() == qb.value_key(), va == vb);
    }

    #[test]
    fn quantity_parse_never_panics(text in "\\PC{0,12}") {
        let _ = parse_quantity(&text);
    }

    #[test]
    fn version_compare_is_consistent(
        a in "v?[0-9]{1,2}(\\.[0-9]{1,2}){0,2}(-(rc|alpha)\\.[0-9])?",
        b in "v?[0-9]{1,2}(\\.[0-9]{1,2}){0,2}(-(rc|alpha)\\.[0-9])?",
    ) {
        let ab = version::compare_go(&a, &b);
        let ba = version::compare_go(&b, &a);
        prop_assert_eq!(ab, ba.reverse());
        prop_assert_eq!(version::compare_go(&a, &a), Ordering::Equal);
    }

    #[test]
    fn validation_never_panics(
        key in "\\PC{0,8}",
        ver in "\\PC{0,8}",
        image in "\\PC{0,12}",
        dep in "\\PC{0,4}",
        dep_ver in "\\PC{0,4}",
        cpu in "\\PC{0,5}",
    ) {
        let mut pkg = Package { version: ver, image, ..Default::default() };
        pkg.depends_on.insert(dep, dep_ver);
        pkg.resources = Some(nodewright_crds::ResourceRequirements {
            cpu_request: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(cpu)),
            ..Default::default()
        });
        let mut nw = NodeWright::new("p", Default::default());
        nw.spec.packages.insert(key, pkg);
        let _ = validate_nodewright(&nw);
    }
}
