//! Property tests over the real core driven by the simulator (02-lifecycle.md §16): random
//! clusters, NodeWright specs, package behaviour, user actions and fault schedules.
//!
//! * Every invariant holds after every simulated step (always checked).
//! * Every rollout converges once faults stop (every NodeWright `complete` within 30 virtual
//!   minutes); `NODEWRIGHT_REQUIRE_CONVERGENCE=0` turns this off while bisecting a core change.
//! * The simulation is deterministic: the same seed gives the same trace (I21).

use nodewright_sim::explore::random_scenario;
use nodewright_sim::operator::real_core;
use nodewright_sim::scenario::RunConfig;
use nodewright_sim::trace::write_jsonl;
use proptest::prelude::*;

fn convergence_required() -> bool {
    std::env::var("NODEWRIGHT_REQUIRE_CONVERGENCE").map_or(true, |v| v != "0")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn prop_i1_to_i21_invariants_hold_at_every_step(seed in any::<u64>()) {
        let converge = convergence_required();
        let scenario = random_scenario(seed, converge);
        let config = RunConfig { trace: false, timeline: false, determinism: true };
        let result = scenario.run_with(real_core(), config).unwrap();
        prop_assert!(
            result.violations.is_empty(),
            "seed {seed}: first violation {:?}",
            result.violations.first()
        );
        if converge {
            prop_assert!(result.passed, "seed {seed} did not converge: {:?}", result.failures);
        }
    }

    #[test]
    fn prop_i21_same_seed_same_trace(seed in any::<u64>()) {
        let scenario = random_scenario(seed, false);
        let config = RunConfig { trace: true, timeline: false, determinism: false };
        let render = |r: &nodewright_sim::scenario::RunResult| {
            let mut bytes = Vec::new();
            write_jsonl(&r.trace, &mut bytes).unwrap();
            bytes
        };
        let a = scenario.run_with(real_core(), config).unwrap();
        let b = scenario.run_with(real_core(), config).unwrap();
        prop_assert_eq!(render(&a), render(&b));
    }
}
