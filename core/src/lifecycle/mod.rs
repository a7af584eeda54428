//! The reconcile pass R1–R9 (02-lifecycle.md §4).

use jiff::Timestamp;
use nodewright_crds::keys;

use crate::effect::Effect;
use crate::{Options, Plan, Snapshot};

/// Plans one pass over the whole snapshot. Pure and deterministic.
pub fn reconcile(snapshot: &Snapshot, _options: &Options, _now: Timestamp) -> Plan {
    let mut plan = Plan::default();
    let mut nodewrights: Vec<_> = snapshot.nodewrights.iter().collect();
    nodewrights.sort_by(|a, b| {
        (a.spec.priority, &a.metadata.name).cmp(&(b.spec.priority, &b.metadata.name))
    });
    for nw in nodewrights {
        let has_finalizer = nw
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|x| x == keys::FINALIZER));
        if nw.metadata.deletion_timestamp.is_none() && !has_finalizer {
            plan.effects.push(Effect::AddFinalizer {
                nodewright: nw.metadata.name.clone().unwrap_or_default(),
                uid: nw.metadata.uid.clone().unwrap_or_default(),
            });
        }
    }
    plan
}
