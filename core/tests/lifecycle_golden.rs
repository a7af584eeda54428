//! Golden plans for small end-to-end clusters (core/tests/golden/plans/*.json). Each scenario
//! steps a toy world until its interesting pass and compares that plan byte for byte.
//! Regenerate with `UPDATE_GOLDEN=1 cargo test -p nodewright-core --test lifecycle_golden`.

mod fixtures;

use std::path::PathBuf;

use fixtures::*;
use nodewright_core::{Plan, Snapshot};
use nodewright_crds::{InterruptType, Stage, State};

fn golden(name: &str, plan: &Plan) {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/plans/{name}.json"));
    let text = serde_json::to_string_pretty(plan).unwrap() + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() || !path.exists() {
        std::fs::write(&path, &text).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text, expected,
        "golden plan {name} changed; rerun with UPDATE_GOLDEN=1 to accept"
    );
}

/// Steps until `pick` accepts a plan (at most 30 passes; Jobs succeed between passes).
fn run_until(s: &mut Snapshot, pick: impl Fn(&Plan) -> bool) -> Plan {
    for _ in 0..30 {
        let plan = pass(s);
        if pick(&plan) {
            return plan;
        }
        apply(s, &plan);
        finish_jobs(s, true);
    }
    panic!("scenario never reached its pass");
}

#[test]
fn golden_r7_one_node_one_package_first_apply() {
    let mut s = snapshot(
        vec![with_pkg(nw("demo"), "dexter", "1.2.3")],
        vec![node("n1")],
    );
    golden(
        "one_node_one_package",
        &run_until(&mut s, |p| !created(p).is_empty()),
    );
}

#[test]
fn golden_b1_interrupt_with_drain_eviction_pass() {
    let n = with_interrupt(
        with_pkg(nw("demo"), "dexter", "1.2.3"),
        "dexter",
        InterruptType::Reboot,
        &[],
    );
    let mut s = snapshot(vec![n], vec![node("n1")]);
    s.workload_pods.push(workload_pod("web", "n1").into());
    golden(
        "interrupt_with_drain",
        &run_until(&mut s, |p| count(p, "evict") > 0),
    );
}

#[test]
fn golden_inv16_9_depends_on_chain_second_package() {
    let n = with_dep(
        with_pkg(with_pkg(nw("demo"), "base", "1.0.0"), "top", "1.0.0"),
        "top",
        "base",
    );
    let mut s = snapshot(vec![n], vec![node("n1")]);
    let plan = run_until(&mut s, |p| {
        created(p).iter().any(|j| {
            j.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.contains("top"))
        })
    });
    golden("depends_on_chain", &plan);
}

#[test]
fn golden_t14_uninstall_start() {
    let n = with_uninstall(with_pkg(nw("demo"), "dexter", "1.2.3"), "dexter", true);
    let mut s = snapshot(
        vec![n],
        vec![with_state(
            node("n1"),
            "demo",
            &[entry("dexter", "1.2.3", Stage::Config, State::Complete)],
        )],
    );
    golden("uninstall", &run_until(&mut s, |p| !created(p).is_empty()));
}

#[test]
fn golden_inv16_8_two_nodewrights_by_priority() {
    let mut first = with_pkg(nw("first"), "a", "1.0.0");
    first.spec.priority = 1;
    let mut s = snapshot(
        vec![with_pkg(nw("second"), "b", "1.0.0"), first],
        vec![node("n1")],
    );
    golden(
        "two_nodewrights_by_priority",
        &run_until(&mut s, |p| !created(p).is_empty()),
    );
}
