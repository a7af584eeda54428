//! The Jobs execution model (03-executor.md, 04-jobs-rules.md): executor builders, the executor
//! index and classification, outcome recording and the finished-Job / staleness rules.
//!
//! Everything here is pure: functions read a [`Snapshot`](crate::Snapshot), the
//! [`Options`](crate::Options) and `now`, and return data or [`Effect`](crate::Effect)s.
//!
//! # The seam the lifecycle pass calls
//!
//! ```text
//! let index = jobs::ExecutorIndex::build(&snapshot, &options);        // once per pass
//! index.unfinished(nw, node, pkg, ver)   // "executor exists" gate (04 §2.1)
//! index.node_busy(node)                  // interrupt gate (04 §2.3, 02 §8.4)
//!
//! // 1. Outcomes of executors (the reference's Job controller + pod watch, 04 §3-§4, §8.10)
//! let outcomes = jobs::outcomes(&index, &snapshot, &options, now);
//! for o in &outcomes.items {
//!     // entry changes to put into the node's PatchNode, guarded (04 §3.3/§3.4/§4.4.2/§4.3.3):
//!     let changes = jobs::entry_changes(o, nw_or_none, &node_state);
//!     // ... lifecycle: node status erroring for OutcomeKind::TerminalFailed, events E13-E15 ...
//!     // then, AFTER that node's PatchNode, append o.after_state (marker + TTL, pruning, evidence)
//! }
//!
//! // 2. Per non-paused NodeWright, before scheduling (04 §6, 02 §7.11):
//! let sweep = jobs::sweep(&index, nw, &selected_nodes, &node_states, &options);
//! if sweep.changed { /* end the pass for this NW with a short requeue */ }
//!
//! // 3. Pause / resume (04 §7): resume only in a pass where the sweep was quiet.
//! jobs::suspend(&index, nw)  /  jobs::resume(&index, nw)   // resume refuses paused/disabled NWs
//!
//! // 4. Starting work (04 §2.4-§2.10, D21): build, then gate against the snapshot.
//! let job = jobs::build_package_job(&JobInputs { .. }) / jobs::build_interrupt_job(.., &interrupt);
//! match jobs::plan_create(&index, job, entry, &options) {
//!     CreateDecision::Create(effects) => /* ensure metadata ConfigMap first, then effects;
//!                                           entry := (stage, in_progress, 0) */,
//!     CreateDecision::Wait => /* nothing this pass */,
//!     CreateDecision::ClearFirst(effects) => /* DeleteJob{rerun|stale-spec}; requeue */,
//! }
//! jobs::node_metadata_config_map(nw, node, &options) + jobs::upsert_if_changed(..)
//!
//! // 5. Other sweeps returning Vec<Effect>, each deletion with a DeletionReason (D12):
//! jobs::reboot_reset(&index, nw, node)               // 04 §5.7, before the reset write (D15)
//! jobs::config_update_clear(&index, nw, node, pkg)   // 04 §5.8
//! jobs::invalidate_for_config_swap(&index, nw, pkg, except_nodes) // D24
//! ```
//!
//! Ordering obligations the lifecycle keeps: an outcome's `after_state` effects come after the
//! node's `PatchNode` in the plan, and the shell must not apply them if that patch failed (the
//! `state-recorded` marker is only written once the node state holds the outcome, 04 §3.6). When
//! [`entry_changes`] returns nothing, `after_state` may be emitted directly.

pub mod annotation;
pub mod classify;
pub mod index;
pub mod naming;
pub mod quantity;

pub use annotation::PackageAnnotation;
pub use classify::{JobState, PodFailureClass, job_state, pod_failed_genuinely};
pub use index::{ExecutorIndex, ExecutorJob};
