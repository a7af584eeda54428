//! Every scenario in sim/scenarios runs; the non-pending ones must pass.

use nodewright_sim::operator::real_core;
use nodewright_sim::scenario::Scenario;

#[test]
fn scenarios_non_pending_pass_and_pending_are_reported() {
    let dir = format!("{}/scenarios", env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 30,
        "expected the scenario suite, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    let mut passing_pending = Vec::new();
    for file in files {
        let scenario = Scenario::from_yaml(&std::fs::read_to_string(&file).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(
            !scenario.spec.is_empty(),
            "{} names no spec scenario",
            scenario.name
        );
        let result = scenario.run(real_core(), false).unwrap();
        match (&scenario.pending, result.passed) {
            (None, false) => failures.push(format!(
                "{}: {:?} {:?}",
                result.name,
                result.failures.first(),
                result.violations.first()
            )),
            (Some(_), true) => passing_pending.push(result.name.clone()),
            _ => {}
        }
    }
    assert!(failures.is_empty(), "failing scenarios: {failures:#?}");
    if !passing_pending.is_empty() {
        eprintln!("pending scenarios that now pass (un-pend them): {passing_pending:?}");
    }
}
