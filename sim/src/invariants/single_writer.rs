//! L1 single writer: the safety property of leader election and the write fence. At no instant
//! may two replicas both be allowed to act as leader (the lease machine's `leading`, or an open
//! write fence), and no write of a replica reaches the apiserver while another replica may act
//! as leader. (A replica's own writes pass its fence right before they are sent, in the
//! simulator's port as in the operator's client.)

use super::Checker;
use crate::time::SimTime;

/// What one replica may do at an instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaView {
    /// The replica's lease identity.
    pub identity: String,
    /// Its lease machine says it may act as leader now.
    pub machine_leads: bool,
    /// Its write fence lets writes through now.
    pub fence_open: bool,
    /// A write of it reached the apiserver at this instant.
    pub wrote: bool,
}

impl Checker {
    /// L1: at most one replica may lead at `at`, and none writes while another may lead.
    pub fn check_single_writer(&mut self, replicas: &[ReplicaView], at: SimTime) {
        let leaders: Vec<&str> = replicas
            .iter()
            .filter(|r| r.machine_leads || r.fence_open)
            .map(|r| r.identity.as_str())
            .collect();
        if leaders.len() > 1 {
            self.report(
                at,
                "L1 single-writer",
                format!("replicas {leaders:?} may act as leader at the same time"),
            );
        }
        for w in replicas.iter().filter(|r| r.wrote) {
            let others: Vec<&str> = replicas
                .iter()
                .filter(|r| r.identity != w.identity && (r.machine_leads || r.fence_open))
                .map(|r| r.identity.as_str())
                .collect();
            if !others.is_empty() {
                self.report(
                    at,
                    "L1 single-writer",
                    format!(
                        "replica {} wrote while {others:?} may act as leader",
                        w.identity
                    ),
                );
            }
        }
    }
}
