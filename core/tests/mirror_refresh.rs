//! D30 over whole passes: during a rollout a change of the `status.nodeState` mirror alone waits
//! for the next status write, at most `MIRROR_REFRESH` after the last one, and the pass comes
//! back for it; the rollout converges with the mirror equal to the nodes' documents.

mod fixtures;

use std::sync::Arc;
use std::time::Duration;

use fixtures::*;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};
use nodewright_core::{Effect, Options, Plan, Snapshot, reconcile};
use nodewright_crds::Status;

const REFRESH: Duration = Duration::from_secs(10);

/// Records a status write at `at` in the NodeWright's managedFields, in whole seconds as the
/// apiserver does.
fn stamp(s: &mut Snapshot, at: Timestamp) {
    let at = Timestamp::from_second(at.as_second()).expect("in range");
    let nw = Arc::make_mut(&mut s.nodewrights[0]);
    nw.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        subresource: Some("status".into()),
        time: Some(Time(at)),
        ..ManagedFieldsEntry::default()
    }]);
}

fn writes_status(plan: &Plan) -> bool {
    plan.effects
        .iter()
        .any(|e| matches!(e, Effect::PatchStatus { .. }))
}

/// True when the status mirror differs from a node's document.
fn mirror_behind(s: &Snapshot, nodes: &[String]) -> bool {
    let status = s.nodewrights[0].status.clone().unwrap_or_default();
    nodes
        .iter()
        .any(|n| status.node_state.get(n).cloned().unwrap_or_default() != doc(s, n, "nw"))
}

#[test]
fn d30_mirror_only_changes_wait_for_the_next_status_write_and_the_rollout_converges() {
    let names: Vec<String> = (0..4).map(|i| format!("node-{i}")).collect();
    let packages = ["alpha", "bravo", "charlie"];
    let mut nw = nw("nw");
    for p in packages {
        nw = with_pkg(nw, p, "1.0.0");
    }
    let mut s = snapshot(vec![nw], names.iter().map(|n| node(n)).collect());
    let options = Options::default();
    let mut t = now();
    let mut last_write: Option<Timestamp> = None;
    let mut held = 0;
    for i in 0..120 {
        let plan = reconcile(&s, &options, t);
        if writes_status(&plan) {
            if let Some(last) = last_write {
                assert!(t > last, "one status write per pass at most");
            }
            last_write = Some(t);
        }
        apply(&mut s, &plan);
        if writes_status(&plan) {
            stamp(&mut s, t);
        }
        if !writes_status(&plan) && mirror_behind(&s, &names) {
            // Held back: the pass comes back by the time the refresh is due.
            held += 1;
            let since = last_write.map(|w| t.duration_since(w)).unwrap_or_default();
            let due = SignedDuration::try_from(REFRESH).unwrap() - since;
            let requeue = plan.requeue_after.expect("a requeue");
            assert!(
                SignedDuration::try_from(requeue).unwrap() <= due,
                "requeue {requeue:?} after the refresh is due ({due:?} left)"
            );
        }
        // One package's Jobs finish per pass: the nodes stay in progress while their
        // documents (and so the mirror) change.
        let finishing = format!("{}-1.0.0", packages[i % packages.len()]);
        finish_jobs_where(&mut s, true, |j| job_package(j) == finishing);
        let idle = plan.effects.is_empty();
        let status = s.nodewrights[0].status.clone().unwrap_or_default();
        if idle && status.status == Some(Status::Complete) && !mirror_behind(&s, &names) {
            assert!(held > 0, "no mirror change was ever held back");
            assert_eq!(status.node_state.len(), names.len());
            return;
        }
        t += SignedDuration::from_secs(1);
    }
    panic!("no convergence in 120 passes (held {held})");
}
