//! The Jobs execution model (03-executor.md, 04-jobs-rules.md): executor builders, the executor
//! index and classification, outcome recording and the finished-Job / staleness rules.
//!
//! Everything here is pure: functions read a [`Snapshot`](crate::Snapshot), the
//! [`Options`](crate::Options) and `now`, and return data or [`Effect`](crate::Effect)s.
//!
//! # The seam the lifecycle pass calls
//!
//! ```text
//! let index = jobs::ExecutorIndex::build(&snapshot, &options);      // once per pass
//! index.unfinished(nw, node, pkg, ver) -> bool   // "executor exists" (04 §2.1, 02 §0.2)
//! index.node_busy(node) -> bool                  // "node has running executors" (04 §2.3)
//! index.on_node(nw, node) / index.of(nw) / index.by_name(name) -> &ExecutorJob
//!
//! // 1. Executor outcomes (the reference's Job controller and pod watch, 04 §3, §4, §8.10):
//! let outs: Outcomes = jobs::outcomes(&index, &snapshot, &options, now);
//! for o in &outs.items {                       // sorted by Job name
//!     let changes: Vec<EntryChange> = jobs::entry_changes(o, nw_opt, &node_state_of(o.nodewright, o.node));
//!     // put `changes` into that node's PatchNode (guarded by `expect`); node status := erroring
//!     // when o.kind is TerminalFailed and changes is non-empty; then
//!     // jobs::record_events(o, &changes) (E13-E15) and o.after_state, AFTER the PatchNode.
//! }
//! plan.requeue_at_most(outs.requeue_after)
//!
//! // 2. Per non-paused NodeWright, before scheduling (04 §6, 02 §7.11):
//! let sw: Sweep = jobs::sweep(&index, nw, &selected_nodes, &readable_node_states, &options);
//! // or jobs::sweep_with(&index, nw, &selected_nodes, |node| doc_of(node), &options)
//! if sw.changed { /* emit sw.effects, end this NW's pass, requeue 2 s */ }
//!
//! // 3. Pause / resume (04 §7): suspend while paused; resume needs the quiet sweep.
//! jobs::suspend(&index, nw) -> Vec<Effect>
//! jobs::resume(&index, nw, &sw) -> Vec<Effect>      // nothing if paused, disabled or sw.changed
//!
//! // 4. Starting work (04 §2.4-§2.10, D21):
//! let job = jobs::build_package_job(&JobInputs { nodewright, package, stage, node, node_order, options });
//! let job = jobs::build_interrupt_job(&inputs, &merged_interrupt);       // winning package
//! match jobs::plan_create(&index, job, entry) {
//!     CreateDecision::Create(effects) => /* metadata ConfigMap upsert first, then effects;
//!                                          entry := (stage, in_progress, 0), E1/E2 or E3 */,
//!     CreateDecision::Wait(reason) => {}
//!     CreateDecision::ClearFirst(effects) => /* emit the DeleteJob(s); requeue; no in_progress */,
//! }
//! jobs::upsert_if_changed(&snapshot, jobs::node_metadata_config_map(nw, node, &options)) -> Option<Effect>
//! jobs::upsert_if_changed(&snapshot, jobs::package_config_map(nw, pkg, &options))
//!
//! // 5. Other Job sweeps (every deletion carries a DeletionReason, D12):
//! jobs::reboot_reset(&index, nw, node)                       // 04 §5.7; boot id after success (D15)
//! jobs::config_update_clear(&index, nw, node, pkg, ver)       // 04 §5.8
//! jobs::invalidate_for_config_swap(&index, nw, pkg, ver, &cleared_nodes)  // D24
//! ```
//!
//! Ordering obligation: an outcome's `after_state` (the `state-recorded` marker with its TTL,
//! archive pruning, evidence annotations) comes after the node's `PatchNode` in the plan, and the
//! shell must not apply it if that patch failed or was dropped: the marker is written only once
//! node state holds the outcome (04 §3.6). When [`entry_changes`] yields nothing (the guard says
//! the outcome already holds, or there is nothing to write) `after_state` is emitted alone.
//!
//! Shell contract for a `DeleteJob` carrying `confirm` (the sweep's re-run deletion of a
//! *finished, processed* Job, D21, K22): the shell re-reads that node uncached and drops the
//! deletion unless [`EntryCheck::holds`](crate::effect::EntryCheck::holds) — the entry still
//! present at the Job's stage and not complete — so a Job cache that is ahead of the Node cache
//! never re-runs a recorded stage. Other `Rerun` deletions (freeing a Job name before a start,
//! [`create`]) carry no `confirm`.

pub mod annotation;
pub mod builder;
pub mod classify;
pub mod configmap;
pub mod create;
pub mod evidence;
pub mod fingerprint;
pub mod index;
pub mod matching;
pub mod naming;
pub mod outcome;
pub mod quantity;
pub mod recipe;
pub mod record;
pub mod settled;
pub mod sweep;

pub use annotation::PackageAnnotation;
pub use builder::{JobInputs, build_interrupt_job, build_package_job};
pub use classify::{JobState, PodFailureClass, job_state, pod_failed_genuinely};
pub use configmap::{node_metadata_config_map, package_config_map, upsert_if_changed};
pub use create::{CreateDecision, WaitReason, plan_create};
pub use index::{ExecutorCache, ExecutorIndex, ExecutorJob};
pub use outcome::{
    Evidence, Outcome, OutcomeKind, Outcomes, entry_changes, node_state_of, outcomes,
    outcomes_with, record_events,
};
pub use recipe::{ExecutorBasis, JobManifest, JobRecipe};
pub use settled::{SettledPod, settled_pods};
/// A NodeWright's name (empty when unnamed, which the apiserver never allows).
pub(crate) fn nw_name(nw: &nodewright_crds::NodeWright) -> &str {
    nw.metadata.name.as_deref().unwrap_or_default()
}

pub use sweep::{
    Sweep, config_update_clear, invalidate_for_config_swap, reboot_reset, resume, suspend, sweep,
    sweep_split, sweep_with,
};
