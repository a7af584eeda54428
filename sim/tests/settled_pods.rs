//! D28 in the simulator: the simulated operator's cache drops the executor pods a pass reports
//! settled, as the shell's pod cache does, so the next pass's snapshot no longer holds them.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use nodewright_core::{Options, Plan, Snapshot};
use nodewright_sim::operator::{ReconcileFn, real_core};
use nodewright_sim::scenario::{RunConfig, Scenario};
use nodewright_sim::time::{Dur, parse_duration};

#[derive(Default)]
struct Seen {
    /// (uid, resourceVersion) of every pod reported settled.
    reported: BTreeSet<(String, String)>,
    /// Settled pods found again, unchanged, in a later pass's snapshot.
    back: usize,
    /// Passes run after some pod was reported settled.
    passes_after: usize,
}

#[test]
fn d28_the_simulated_cache_drops_the_pods_a_pass_reports_settled() {
    let path = format!(
        "{}/scenarios/a01-single-package.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).expect("scenario");
    let mut scenario = Scenario::from_yaml(&text).expect("parses");
    // Passes go on after the rollout, so the cache's drops show in later snapshots.
    scenario.run_for = Some(Dur(parse_duration("10m").expect("duration")));
    scenario.expect.within = Some(Dur(parse_duration("15m").expect("duration")));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let inner = real_core();
    let watched = Arc::clone(&seen);
    let core: ReconcileFn = Arc::new(move |s: &Snapshot, o: &Options, now| -> Plan {
        let mut seen = watched.lock().expect("lock");
        {
            let back = s
                .executor_pods
                .iter()
                .filter(|p| {
                    let m = &p.metadata;
                    let key = (
                        m.uid.clone().unwrap_or_default(),
                        m.resource_version.clone().unwrap_or_default(),
                    );
                    seen.reported.contains(&key)
                })
                .count();
            seen.back += back;
            if !seen.reported.is_empty() {
                seen.passes_after += 1;
            }
        }
        let plan = inner(s, o, now);
        for p in &plan.settled_pods {
            seen.reported
                .insert((p.uid.clone(), p.resource_version.clone()));
        }
        plan
    });
    // One core call per pass: without the determinism check's second call.
    let config = RunConfig {
        trace: false,
        timeline: false,
        determinism: false,
    };
    let r = scenario.run_with(core, config).expect("runs");
    assert!(r.passed, "{:#?} {:#?}", r.failures, r.violations);
    let seen = seen.lock().expect("lock");
    assert!(
        seen.reported.len() >= 2,
        "{} pods reported settled",
        seen.reported.len()
    );
    assert!(
        seen.passes_after > 0,
        "no pass after a pod was reported settled"
    );
    assert_eq!(seen.back, 0, "a settled pod stayed in the cache");
}
