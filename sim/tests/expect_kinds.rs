//! Each expectation kind of docs/simulator.md can fail: a scenario that uses it passes, and the
//! same scenario with the expectation changed to a wrong value fails with a message naming it.

use nodewright_sim::operator::real_core;
use nodewright_sim::scenario::{RunResult, Scenario};
use nodewright_sim::time::{Dur, parse_duration};

fn load(name: &str) -> Scenario {
    let path = format!("{}/scenarios/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Scenario::from_yaml(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Runs `s` (stopping early: unmet expectations otherwise run to the 2 h default end).
fn run(mut s: Scenario, end: &str) -> RunResult {
    s.end = Some(Dur(parse_duration(end).expect("duration")));
    s.run(real_core(), false).expect("runs")
}

fn fails_with(r: &RunResult, text: &str) {
    assert!(!r.passed, "{} passed although it should not", r.name);
    assert!(
        r.failures.iter().any(|f| f.contains(text)),
        "no failure mentions {text:?}: {:#?}",
        r.failures
    );
}

#[test]
fn node_meta_taints_annotations_and_labels_can_fail() {
    let good = load("flow-runtime-required-taint");
    assert!(run(good.clone(), "5m").passed);
    let mut s = good.clone();
    let meta = s.expect.node_meta.get_mut("worker-1").expect("worker-1");
    meta.taints_absent.clear();
    meta.taints.push(nodewright_sim::expect::TaintExpect {
        key: "nodewright.nvidia.com".into(),
        effect: Some("NoSchedule".into()),
        value: Some("never-set".into()),
    });
    fails_with(&run(s, "3m"), "lacks taint");
    let mut s = good.clone();
    let meta = s.expect.node_meta.get_mut("worker-1").expect("worker-1");
    meta.annotations.insert(
        "nodewright.nvidia.com/status_demo".into(),
        "erroring".into(),
    );
    fails_with(
        &run(s, "3m"),
        "annotation nodewright.nvidia.com/status_demo is",
    );
    let mut s = good;
    let meta = s.expect.node_meta.get_mut("worker-1").expect("worker-1");
    meta.labels_absent
        .push("nodewright.nvidia.com/status_demo".into());
    fails_with(&run(s, "3m"), "still has label");
}

#[test]
fn nodewright_conditions_and_status_fields_can_fail() {
    let good = load("flow-policy-compartments");
    let mut s = good.clone();
    let nw = s.expect.nodewrights.get_mut("demo").expect("demo");
    nw.fields
        .insert("/completeNodes".into(), serde_json::json!("0/6"));
    fails_with(
        &run(s, "5m"),
        "status/completeNodes is \"6/6\", want \"0/6\"",
    );
    let mut s = good.clone();
    let nw = s.expect.nodewrights.get_mut("demo").expect("demo");
    nw.fields.insert(
        "/compartmentStatuses/canary/batchState/completedNodes".into(),
        serde_json::json!(7),
    );
    fails_with(&run(s, "5m"), "batchState/completedNodes is 2, want 7");
    let mut s = good;
    let nw = s.expect.nodewrights.get_mut("demo").expect("demo");
    nw.conditions.get_mut("Ready").expect("Ready").reason = Some("NotYet".into());
    fails_with(&run(s, "5m"), "condition Ready is (True, NodesConverged)");
}

#[test]
fn history_counts_recreated_jobs_and_attempts_and_can_fail() {
    let good = load("flow-reboot-reset-killed-job");
    assert!(
        run(good.clone(), "12m").passed,
        "the scenario itself passes"
    );
    let mut s = good.clone();
    s.expect.history[0].created = Some(1);
    fails_with(&run(s, "6m"), "2 Jobs created over the run");
    let mut s = good;
    s.expect.history[1].attempts = Some(1);
    fails_with(&run(s, "6m"), "2 attempts over the run");
}

#[test]
fn always_windows_apply_only_inside_them() {
    let good = load("a10-pause-disable");
    // Outside the pause/disable window the config Job does exist: the same condition over the
    // whole run fails, inside the window it holds.
    let mut s = good.clone();
    s.always.during[0].until = None;
    fails_with(&run(s, "10m"), "always [noJobs] broken");
    assert!(run(good, "10m").passed);
}

#[test]
fn seeds_randomise_durations_only_with_jitter() {
    let mut s = load("a01-single-package");
    let met = |s: &Scenario, seed: u64| {
        let mut s = s.clone();
        s.seed = seed;
        run(s, "10m").met_at
    };
    assert_eq!(
        met(&s, 1),
        met(&s, 2),
        "no jitter: the seed changes nothing"
    );
    s.world.jitter = Some(0.5);
    let times: std::collections::BTreeSet<_> = (1..5).map(|seed| met(&s, seed)).collect();
    assert!(
        times.len() > 1,
        "jitter: seeds give different timings {times:?}"
    );
    let sweep = s.sweep(real_core, 10, 3).expect("sweeps");
    assert_eq!(sweep.seeds, vec![10, 11, 12]);
    assert!(sweep.failing.is_empty(), "{:?}", sweep.failing.first());
}

#[test]
fn yaml_errors_name_line_and_column() {
    let syntax = "name: x\nspec: y\ncluster: {nodes: [\n";
    let e = Scenario::from_yaml(syntax).expect_err("syntax error");
    assert!(e.contains("line"), "{e}");
    let unknown = "name: x\nspec: y\nexpect:\n  nodez: {}\n";
    let e = Scenario::from_yaml(unknown).expect_err("unknown field");
    assert!(e.contains("nodez") && e.contains("line 4"), "{e}");
}

#[test]
fn events_are_counted_and_can_fail() {
    let mut s = load("flow-reboot-reset-killed-job");
    assert_eq!(s.expect.events[0].count, Some(1));
    s.expect.events[0].count = Some(2);
    fails_with(&run(s.clone(), "6m"), "1 Events match");
    s.expect.events[0].count = None;
    s.expect.events[0].reason = Some("NoSuchReason".into());
    fails_with(&run(s, "6m"), "0 Events match");
}

#[test]
fn crash_before_marker_crashes_once_per_job() {
    let with = load("fault-crash-before-markers");
    assert_eq!(with.faults.crash_before.as_deref(), Some("state-recorded"));
    let mut without = with.clone();
    without.faults.crash_before = None;
    let (a, b) = (run(with, "10m"), run(without, "10m"));
    assert!(a.passed && b.passed, "{:?} {:?}", a.failures, b.failures);
    // Eight marker writes, each preceded by a crash with 2 s downtime.
    let (ta, tb) = (a.met_at.unwrap_or_default(), b.met_at.unwrap_or_default());
    assert!(ta >= tb + 8_000, "crashes cost downtime: {ta} vs {tb}");
}

#[test]
fn log_lines_are_counted_by_level_message_and_fields_and_can_fail() {
    let mut s = load("log-reboot-reset");
    assert_eq!(s.expect.logs[0].count, Some(1));
    s.expect.logs[0].count = Some(2);
    fails_with(&run(s.clone(), "6m"), "1 log lines match");
    s.expect.logs[0].count = Some(1);
    s.expect.logs[0]
        .fields
        .insert("reason".into(), "stale-spec".into());
    fails_with(&run(s.clone(), "6m"), "0 log lines match");
    s.expect.logs[0]
        .fields
        .insert("reason".into(), "reboot-reset".into());
    s.expect.logs[0].level = Some("warn".into());
    fails_with(&run(s, "6m"), "0 log lines match");
}

#[test]
fn leaders_are_the_replicas_that_acquired_in_order_and_can_fail() {
    let mut s = load("leader-hung-renew");
    s.expect.leaders = Some(vec!["replica-0".into()]);
    fails_with(&run(s, "3m"), "leaders were [\"replica-0\", \"replica-1\"]");
}
