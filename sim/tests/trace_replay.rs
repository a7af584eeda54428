//! A recorded simulated run replays without differences; a changed rule shows up as divergence.

use std::collections::BTreeMap;
use std::sync::Arc;

use nodewright_core::{Effect, Options};
use nodewright_sim::operator::real_core;
use nodewright_sim::scenario::Scenario;
use nodewright_sim::trace::{Record, read_jsonl, replay, replay_reader, write_jsonl};

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

#[test]
fn streamed_replay_matches_the_in_memory_replay_and_logs_every_pass() {
    let records = recorded("fault-stale-cache-conflicts");
    let mut bytes = Vec::new();
    write_jsonl(&records, &mut bytes).unwrap();
    let core = real_core();
    let whole = replay(&records, None, &*core).unwrap();
    let streamed = replay_reader(bytes.as_slice(), None, &*core).unwrap();
    assert_eq!(streamed, whole);
    assert!(!streamed.truncated);
    assert_eq!(streamed.pass_log.len() as u64, streamed.passes);
    assert_eq!(
        streamed.pass_log.iter().map(|p| p.effects).sum::<u64>(),
        streamed.effects
    );
}

#[test]
fn a_last_line_cut_short_is_reported_and_a_broken_middle_line_is_an_error() {
    let records = recorded("a01-single-package");
    let mut bytes = Vec::new();
    write_jsonl(&records, &mut bytes).unwrap();
    let core = real_core();
    // The recorder was killed in the middle of its last line.
    let mut cut = bytes.clone();
    cut.extend_from_slice(br#"{"type":"pass","at":"2026-"#);
    let report = replay_reader(cut.as_slice(), None, &*core).unwrap();
    assert!(report.truncated);
    assert!(report.divergences.is_empty());
    // The same garbage followed by more records is corruption, named by its line.
    let lines = bytes.iter().filter(|b| **b == b'\n').count();
    cut.extend_from_slice(b"\n");
    cut.extend_from_slice(&bytes);
    let err = replay_reader(cut.as_slice(), None, &*core).unwrap_err();
    assert!(err.contains(&format!("line {}", lines + 1)), "{err}");
}
