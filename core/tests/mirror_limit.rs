//! D26 over whole passes: a fleet whose `status.nodeState` mirror is over the limit gets its
//! statuses written without the mirror (and a mirror it had is cleared), one under the limit
//! gets it whole; both converge.

mod fixtures;

use fixtures::*;
use nodewright_core::{Effect, Plan, Snapshot};
use nodewright_crds::{NodeWright, PackageStatus, Stage, State};

const PACKAGES: [&str; 5] = ["alpha", "bravo", "charlie", "delta", "echo"];

/// `nodes` nodes with every package complete, and a NodeWright whose status mirrors one node.
fn fleet(nodes: usize) -> Snapshot {
    let mut nw: NodeWright = nw("nw");
    for p in PACKAGES {
        nw = with_pkg(nw, p, "1.0.0");
    }
    let entries: Vec<PackageStatus> = PACKAGES
        .iter()
        .map(|p| entry(p, "1.0.0", Stage::Config, State::Complete))
        .collect();
    let mut status = nodewright_crds::NodeWrightStatus::default();
    let mut doc = nodewright_crds::NodeState::default();
    for e in &entries {
        doc.upsert(e.clone());
    }
    status.node_state.insert("node-00000".into(), doc);
    nw.status = Some(status);
    let nodes = (0..nodes)
        .map(|i| with_state(node(&format!("node-{i:05}")), "nw", &entries))
        .collect();
    snapshot(vec![nw], nodes)
}

fn mirrors_written(plan: &Plan) -> Vec<usize> {
    plan.effects
        .iter()
        .filter_map(|e| match e {
            Effect::PatchStatus { status, .. } => Some(status.node_state.len()),
            _ => None,
        })
        .collect()
}

/// Passes (Jobs succeeding in between) until idle; every mirror size the passes wrote.
fn run(s: &mut Snapshot) -> Vec<usize> {
    let mut written = Vec::new();
    for _ in 0..10 {
        let plan = pass(s);
        if plan.effects.is_empty() {
            return written;
        }
        written.extend(mirrors_written(&plan));
        apply(s, &plan);
        finish_jobs(s, true);
    }
    panic!("no convergence in 10 passes; mirrors written: {written:?}");
}

#[test]
fn d26_a_fleet_over_the_limit_writes_its_statuses_without_the_mirror() {
    // 2,500 nodes × 5 entries of about 130 bytes of JSON: about 1.6 MB of mirror.
    let mut s = fleet(2_500);
    let written = run(&mut s);
    assert!(
        written.contains(&0),
        "the old mirror is cleared: {written:?}"
    );
    assert!(
        written.iter().all(|&n| n <= 1),
        "never written whole: {written:?}"
    );
    let status = s.nodewrights[0].status.clone().unwrap_or_default();
    assert!(status.node_state.is_empty());
    assert_eq!(status.node_status.len(), 2_500);
}

#[test]
fn d26_a_fleet_under_the_limit_writes_its_mirror_whole() {
    let mut s = fleet(200);
    let written = run(&mut s);
    assert!(written.contains(&200), "{written:?}");
    let status = s.nodewrights[0].status.clone().unwrap_or_default();
    assert_eq!(status.node_state.len(), 200);
    assert_eq!(status.node_status.len(), 200);
}
