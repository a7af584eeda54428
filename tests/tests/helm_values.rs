//! The chart's values contract (issue 12 part 3), without a cluster: every value is commented in
//! values.yaml, described by values.schema.json, and the README's values table is current.

use nodewright_tests::chart_values::{chart_dir, readme_pair};

#[test]
fn chart_values_are_commented_schemad_and_tabled() {
    let (current, fresh) = readme_pair(&chart_dir()).unwrap_or_else(|problems| {
        panic!("chart values contract broken:\n  {}", problems.join("\n  "))
    });
    assert!(
        current == fresh,
        "chart/README.md values table is stale: run `cargo run -p nodewright-tests --bin chart-readme`"
    );
}
