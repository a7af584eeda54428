//! The Lease objects one lease attempt writes, decided without I/O from what it read: the
//! operator's driver sends them with `kube::Api`, the simulator to its in-memory apiserver.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

use super::LeaderConfig;
use super::machine::{Action, LeaseView};

/// The write one attempt sends.
#[derive(Clone, Debug, PartialEq)]
pub enum LeaseWrite {
    /// Create the lease naming this candidate.
    Create(Lease),
    /// Replace the lease as read, guarded by the resourceVersion it carries.
    Replace(Lease),
}

/// The write for the machine's `action` on the lease as read (`None`: write nothing). `wall` is
/// this replica's wall clock, written into `renewTime`/`acquireTime` (never compared by readers).
pub fn write_for(
    action: Action,
    read: Option<Lease>,
    config: &LeaderConfig,
    wall: MicroTime,
) -> Option<LeaseWrite> {
    match (action, read) {
        (Action::Wait, _) => None,
        (Action::Create, _) => Some(LeaseWrite::Create(fresh_lease(config, wall))),
        (Action::Acquire { transitions }, Some(mut lease)) => {
            lease.spec = Some(held_spec(config, transitions, wall));
            Some(LeaseWrite::Replace(lease))
        }
        (Action::Renew, Some(mut lease)) => {
            let spec = lease.spec.take().unwrap_or_default();
            lease.spec = Some(LeaseSpec {
                renew_time: Some(wall),
                lease_duration_seconds: Some(secs(config.timings.lease_duration)),
                ..spec
            });
            Some(LeaseWrite::Replace(lease))
        }
        // The machine asks for an update only when it read a lease.
        (_, None) => None,
    }
}

/// The lease as released by this candidate (no holder, 1 s duration), or `None` when someone
/// else holds it now.
pub fn released(mut lease: Lease, config: &LeaderConfig, wall: MicroTime) -> Option<Lease> {
    let spec = lease.spec.take().unwrap_or_default();
    if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
        return None;
    }
    lease.spec = Some(LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        renew_time: Some(wall),
        ..spec
    });
    Some(lease)
}

/// The fields of a lease the machine reads.
pub fn view_of(lease: &Lease) -> LeaseView {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseView {
        holder: spec.holder_identity,
        renew_time: spec.renew_time.map(|t| t.0.to_string()),
        lease_duration: spec
            .lease_duration_seconds
            .map(|s| Duration::from_secs(s.max(0) as u64)),
        transitions: spec.lease_transitions.unwrap_or(0),
    }
}

fn secs(d: Duration) -> i32 {
    i32::try_from(d.as_secs()).unwrap_or(i32::MAX)
}

fn fresh_lease(config: &LeaderConfig, wall: MicroTime) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(config.name.clone()),
            namespace: Some(config.namespace.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(held_spec(config, 0, wall)),
    }
}

/// A spec naming this candidate as the fresh holder.
fn held_spec(config: &LeaderConfig, transitions: i32, wall: MicroTime) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(config.identity.clone()),
        lease_duration_seconds: Some(secs(config.timings.lease_duration)),
        acquire_time: Some(wall.clone()),
        renew_time: Some(wall),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    }
}
