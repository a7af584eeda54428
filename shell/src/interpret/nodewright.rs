//! NodeWright writes: the status subresource and the finalizer (02-lifecycle.md §13.7).

use nodewright_core::Snapshot;
use nodewright_crds::{NodeWright, NodeWrightStatus, keys};
use serde_json::{Value, json};

use super::port::ClusterPort;
use super::{Interpreter, Outcome};
use crate::error::ShellError;
use crate::merge;

impl<P: ClusterPort> Interpreter<P> {
    pub(super) async fn patch_status(
        &self,
        snapshot: &Snapshot,
        name: &str,
        status: &NodeWrightStatus,
    ) -> Outcome {
        let seen = snapshot
            .nodewrights
            .iter()
            .find(|nw| nw.metadata.name.as_deref() == Some(name));
        let current = seen.and_then(|nw| nw.status.as_ref());
        let mut body = match status_patch(current, status) {
            Ok(Some(body)) => body,
            Ok(None) => return Outcome::Noop,
            Err(e) => return Outcome::Failed(e.into()),
        };
        let expected = self.expected_status_version(snapshot, name);
        if let Some(rv) = &expected {
            body["metadata"] = json!({ "resourceVersion": rv });
        }
        match self.port.patch_nodewright_status(name, &body).await {
            Ok(_) => Outcome::Applied,
            Err(e) if e.is_not_found() => Outcome::Noop,
            Err(e) if e.is_conflict() => Outcome::Dropped(format!(
                "NodeWright {name} changed since the snapshot (resourceVersion {}); the next pass recomputes its status",
                expected.unwrap_or_default()
            )),
            Err(e) => Outcome::Failed(e.into()),
        }
    }

    /// I7: writes a newly selected batch (the rollout bookkeeping of `status`) before the plan's
    /// other writes, guarded like the status patch; the plan's status patch may then expect the
    /// version this write made.
    pub(super) async fn record_batch(
        &self,
        snapshot: &Snapshot,
        name: &str,
        status: &NodeWrightStatus,
    ) -> Outcome {
        let current = snapshot
            .nodewrights
            .iter()
            .find(|nw| nw.metadata.name.as_deref() == Some(name))
            .and_then(|nw| nw.status.as_ref())
            .map(nodewright_core::effect::rollout_bookkeeping);
        let mut body = match status_patch(current.as_ref(), status) {
            Ok(Some(body)) => body,
            Ok(None) => return Outcome::Noop,
            Err(e) => return Outcome::Failed(e.into()),
        };
        let from = snapshot_version(snapshot, name);
        let expected = self.expected_status_version(snapshot, name);
        if let Some(rv) = &expected {
            body["metadata"] = json!({ "resourceVersion": rv });
        }
        match self.port.patch_nodewright_status(name, &body).await {
            Ok(written) => {
                self.batches().record(name, from, written);
                Outcome::Applied
            }
            Err(e) if e.is_not_found() => Outcome::Noop,
            Err(e) if e.is_conflict() => Outcome::Dropped(format!(
                "NodeWright {name} changed since the snapshot (resourceVersion {}); the batch is not recorded and the plan's other writes are skipped",
                expected.unwrap_or_default()
            )),
            Err(e) => Outcome::Failed(e.into()),
        }
    }

    /// The resourceVersion a status write computed from the snapshot must expect: the one our
    /// own batch record of this plan made, or our own finalizer write, or the snapshot's.
    fn expected_status_version(&self, snapshot: &Snapshot, name: &str) -> Option<String> {
        let rv = snapshot_version(snapshot, name)?;
        let batched = self.batches().expected(name, rv.clone());
        if batched != rv {
            return Some(batched);
        }
        Some(self.chain().expected(name, rv))
    }

    fn batches(&self) -> std::sync::MutexGuard<'_, nodewright_core::effect::FinalizerChain> {
        // A poisoned lock only means a panicking thread held it; the chain stays consistent.
        self.batch_chain.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn chain(&self) -> std::sync::MutexGuard<'_, nodewright_core::effect::FinalizerChain> {
        // A poisoned lock only means a panicking thread held it; the chain stays consistent.
        self.finalizer_chain
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub(super) async fn set_finalizer(
        &self,
        snapshot: &Snapshot,
        name: &str,
        uid: &str,
        present: bool,
    ) -> Outcome {
        let mut seen = snapshot
            .nodewrights
            .iter()
            .find(|nw| nw.metadata.name.as_deref() == Some(name))
            .map(|nw| (**nw).clone());
        for attempt in 0..self.conflict_attempts {
            if seen.is_none() || attempt > 0 {
                seen = match self.port.get_nodewright(name).await {
                    Ok(nw) => nw,
                    Err(e) => return Outcome::Failed(e.into()),
                };
            }
            let Some(nw) = &seen else {
                return Outcome::Noop;
            };
            if nw.metadata.uid.as_deref() != Some(uid) {
                return Outcome::Dropped(format!("NodeWright {name} was recreated"));
            }
            let Some(body) = finalizer_patch(nw, present) else {
                return Outcome::Noop;
            };
            match self.port.patch_nodewright(name, &body).await {
                Ok(written) => {
                    // Only a first-attempt write starts from the snapshot's version.
                    let from = (attempt == 0)
                        .then(|| nw.metadata.resource_version.clone())
                        .flatten();
                    self.chain()
                        .record(name, from, written.metadata.resource_version);
                    return Outcome::Applied;
                }
                Err(e) if e.is_not_found() => return Outcome::Noop,
                Err(e) if e.is_conflict() => continue,
                Err(e) => return Outcome::Failed(e.into()),
            }
        }
        Outcome::Failed(ShellError::ConflictRetriesExhausted(self.conflict_attempts))
    }
}

/// The snapshot's resourceVersion of NodeWright `name`.
fn snapshot_version(snapshot: &Snapshot, name: &str) -> Option<String> {
    snapshot
        .nodewrights
        .iter()
        .find(|nw| nw.metadata.name.as_deref() == Some(name))
        .and_then(|nw| nw.metadata.resource_version.clone())
}

/// `{"status": <merge diff>}` between the snapshot's status and the desired one.
pub(crate) fn status_patch(
    current: Option<&NodeWrightStatus>,
    desired: &NodeWrightStatus,
) -> Result<Option<Value>, serde_json::Error> {
    let old = match current {
        Some(s) => serde_json::to_value(s)?,
        None => json!({}),
    };
    let new = serde_json::to_value(desired)?;
    Ok(merge::diff(&old, &new).map(|d| json!({ "status": d })))
}

/// The finalizer list with ours added or removed, guarded by resourceVersion; `None` if unchanged.
pub(crate) fn finalizer_patch(nw: &NodeWright, present: bool) -> Option<Value> {
    let current = nw.metadata.finalizers.clone().unwrap_or_default();
    let has = current.iter().any(|f| f == keys::FINALIZER);
    if has == present {
        return None;
    }
    let next: Vec<String> = if present {
        current
            .into_iter()
            .chain(std::iter::once(keys::FINALIZER.to_string()))
            .collect()
    } else {
        current
            .into_iter()
            .filter(|f| f != keys::FINALIZER)
            .collect()
    };
    let mut patch = json!({"metadata": {
        "finalizers": next,
        "resourceVersion": nw.metadata.resource_version.clone().unwrap_or_default(),
    }});
    // M2: taking a NodeWright over stamps it with the operator version, as the Go operator does.
    let version = nw
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::VERSION));
    if present && version.map(String::as_str) != Some(keys::OPERATOR_VERSION) {
        patch["metadata"]["annotations"] = json!({ keys::VERSION: keys::OPERATOR_VERSION });
    }
    Some(patch)
}
