//! I13 merge safety, deletion half: a node patch that deletes a node-state document (a reboot
//! reset, a finalizer cleanup) must leave no document once resolved, whatever entry changes
//! the same pass bundled with it (02-lifecycle.md §13.1 step 3, §16 item 13).

use k8s_openapi::api::core::v1::Node;
use nodewright_core::NodePatch;
use nodewright_core::effect::resolve_node_patch;
use nodewright_crds::keys;

use super::Checker;
use crate::facts;
use crate::time::SimTime;

impl Checker {
    /// I13: resolving `patch` against `fresh` (the snapshot's node, a read that still holds the
    /// document) must not write back a document the patch deletes.
    pub(super) fn deletion_sent_as_is(&mut self, patch: &NodePatch, fresh: &Node, at: SimTime) {
        let deleted = patch.deleted_documents();
        if deleted.is_empty() {
            return;
        }
        let Ok(Some(delta)) = resolve_node_patch(fresh, patch) else {
            return;
        };
        let after = delta.apply_to(fresh.clone());
        for nw in deleted {
            if let Some(doc) = facts::annotation(&after, &keys::node_state(nw)) {
                self.report(
                    at,
                    "I13 merge-safety",
                    format!(
                        "node {} patch deletes nodeState_{nw} but resolves to writing {doc}",
                        patch.node
                    ),
                );
            }
        }
    }
}
