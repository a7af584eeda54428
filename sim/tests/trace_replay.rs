//! A recorded simulated run replays without differences; a changed rule shows up as divergence.

use std::collections::BTreeMap;
use std::sync::Arc;

use nodewright_core::{Effect, Options};
use nodewright_sim::operator::real_core;
use nodewright_sim::scenario::Scenario;
use nodewright_sim::trace::{Record, read_jsonl, replay, write_jsonl};

fn scenario(name: &str) -> Scenario {
    let path = format!("{}/scenarios/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    Scenario::from_yaml(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn recorded(name: &str) -> Vec<Record> {
    let result = scenario(name).run(real_core(), true).unwrap();
    // Round-trip through the JSONL text, exactly as a file would.
    let mut bytes = Vec::new();
    write_jsonl(&result.trace, &mut bytes).unwrap();
    read_jsonl(bytes.as_slice()).unwrap()
}

#[test]
fn trace_round_trip_single_package_has_no_divergence() {
    let records = recorded("a01-single-package");
    assert!(matches!(records[0], Record::Header { .. }));
    let core = real_core();
    let report = replay(&records, None, &*core).unwrap();
    assert!(report.passes > 5, "{report:?}");
    assert!(report.effects > 5);
    assert!(
        report.divergences.is_empty(),
        "{:#?}",
        report.divergences.first()
    );
}

#[test]
fn trace_round_trip_under_faults_has_no_divergence() {
    // Stale cache, lost watch events, relists, write conflicts and reboots.
    let records = recorded("fault-stale-cache-conflicts");
    assert!(records.iter().any(|r| matches!(r, Record::Relist { .. })));
    let core = real_core();
    let report = replay(&records, None, &*core).unwrap();
    assert!(
        report.divergences.is_empty(),
        "{:#?}",
        report.divergences.first()
    );
}

#[test]
fn replay_reports_a_changed_option_as_divergence() {
    let records = recorded("a01-single-package");
    let env: BTreeMap<String, String> = [("JOB_BACKOFF_LIMIT".to_string(), "7".to_string())].into();
    let options = Options::from_env(&env).unwrap();
    let core = real_core();
    let report = replay(&records, Some(&options), &*core).unwrap();
    let changed: Vec<_> = report
        .divergences
        .iter()
        .filter(|d| {
            d.recorded
                .as_ref()
                .is_some_and(|e| e["effect"] == "createJob")
        })
        .collect();
    assert!(
        !changed.is_empty(),
        "a different backoffLimit must change the created Jobs"
    );
    let replayed = changed[0].replayed.as_ref().unwrap();
    assert_eq!(replayed["job"]["spec"]["backoffLimit"], 7);
}

#[test]
fn replay_reports_a_changed_rule_as_divergence() {
    let records = recorded("a01-single-package");
    // A "rule change": the core no longer adds the finalizer.
    let modified = Arc::new(
        |s: &nodewright_core::Snapshot, o: &Options, now: jiff::Timestamp| {
            let mut plan = nodewright_core::reconcile(s, o, now);
            plan.effects
                .retain(|e| !matches!(e, Effect::AddFinalizer { .. }));
            plan
        },
    );
    let report = replay(&records, None, &*modified).unwrap();
    assert_eq!(report.divergences.len(), 1, "{:#?}", report.divergences);
    let d = &report.divergences[0];
    assert_eq!(d.recorded.as_ref().unwrap()["effect"], "addFinalizer");
}
