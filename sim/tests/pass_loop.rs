//! The simulated replicas run the operator's pass loop (`nodewright_shell::runner::Cadence`):
//! every pass, also one a stop-the-world pause cut in two, ends by scheduling the next one.

use jiff::Timestamp;
use nodewright_shell::runner::RETRY_SOON;
use nodewright_sim::operator::real_core;
use nodewright_sim::scenario::Scenario;
use nodewright_sim::time::{Dur, parse_duration};
use nodewright_sim::trace::{Record, TraceOutcome};

fn load(name: &str) -> Scenario {
    let path = format!("{}/scenarios/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Scenario::from_yaml(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// R9 (the requeue delay of a pass): a pass stopped by a pause before its last write ends only
/// when the pause does; its write is fenced then, and the loop runs the next pass `RETRY_SOON`
/// later, although nothing else (no watch event, no leadership change) would wake it. Explore
/// seed 7261 stalled for good without this.
#[test]
fn r9_a_pass_cut_by_a_pause_schedules_the_next_one_when_it_ends() {
    let mut s = load("leader-pause-before-the-last-write");
    s.end = Some(Dur(parse_duration("5m").expect("duration")));
    let r = s.run(real_core(), true).expect("runs");
    assert!(r.passed, "{:#?} {:#?}", r.failures, r.violations);
    let fenced: Timestamp = r
        .trace
        .iter()
        .find_map(|rec| match rec {
            Record::Outcome {
                at,
                outcome: TraceOutcome::Dropped(why),
                ..
            } if why.contains("fenced") => Some(*at),
            _ => None,
        })
        .expect("the rest of the stopped pass meets the fence");
    let next = r
        .trace
        .iter()
        .find_map(|rec| match rec {
            Record::Pass { at, .. } if *at > fenced => Some(*at),
            _ => None,
        })
        .expect("a pass follows the stopped one");
    let waited = next.duration_since(fenced);
    assert_eq!(
        waited,
        jiff::SignedDuration::try_from(RETRY_SOON).expect("small"),
        "the next pass runs RETRY_SOON after the fenced write"
    );
}
