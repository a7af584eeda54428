//! Job hygiene of the heavy pass: the validation sweep (04-jobs-rules.md §5–§6, 02 §7.11),
//! pause/resume (§7), reboot reset (§5.7), config-update clearing (§5.8, D24).

use std::collections::{BTreeMap, BTreeSet};

use nodewright_crds::{NodeState, NodeWright, PackageStatus, State, keys};

use super::classify::JobState;
use super::create::delete;
use super::index::{ExecutorIndex, ExecutorJob};
use super::matching::{SpecFingerprints, matches_spec_with, timed_out_still_matches_with};
use super::nw_name;
use crate::Options;
use crate::effect::{DeletionReason, Effect, EntryCheck};

/// Result of the validation sweep for one NodeWright.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sweep {
    /// Deletions and invalidations, in Job-name order.
    pub effects: Vec<Effect>,
    /// Something was invalidated or deleted: end this NodeWright's pass with a short requeue
    /// (02 §7.11 step 5) and do not resume suspended Jobs (04 §7.4).
    pub changed: bool,
}

fn annotation_true(nw: &NodeWright, key: &str) -> bool {
    nw.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .is_some_and(|v| v == "true")
}

fn entry_of<'s>(job: &ExecutorJob, state: &'s NodeState) -> Option<&'s PackageStatus> {
    // `state.get(&p.name, &p.version)` with the key computed once per annotation text.
    state.0.get(&**job.entry_key.as_ref()?)
}

/// `shouldDeleteFinishedJob` with the port's retention predicate (04 §5.2 steps 1–2, §5.2a).
pub fn should_delete_finished(
    job: &ExecutorJob,
    entry: Option<&PackageStatus>,
    nw: &NodeWright,
    options: &Options,
) -> bool {
    should_delete_finished_with(job, entry, nw, &SpecFingerprints::new(nw, options), options)
}

fn should_delete_finished_with(
    job: &ExecutorJob,
    entry: Option<&PackageStatus>,
    nw: &NodeWright,
    fps: &SpecFingerprints,
    options: &Options,
) -> bool {
    if !job.processed {
        return false;
    }
    let at_stage = entry.filter(|e| Some(e.stage) == job.stage);
    if matches!(job.state, JobState::Failed { .. })
        && at_stage.is_some_and(|e| e.state == Some(State::Erroring))
        && timed_out_still_matches_with(job, nw, fps, options)
    {
        return false;
    }
    at_stage.is_some_and(|e| e.state != Some(State::Complete))
}

/// Stale unfinished Job (04 §6.2): no spec package matches, or its entry is absent or at
/// another stage.
pub fn is_stale(
    job: &ExecutorJob,
    entry: Option<&PackageStatus>,
    nw: &NodeWright,
    options: &Options,
) -> bool {
    is_stale_with(job, entry, nw, &SpecFingerprints::new(nw, options), options)
}

fn is_stale_with(
    job: &ExecutorJob,
    entry: Option<&PackageStatus>,
    nw: &NodeWright,
    fps: &SpecFingerprints,
    options: &Options,
) -> bool {
    entry.is_none_or(|e| Some(e.stage) != job.stage) || !matches_spec_with(job, nw, fps, options)
}

/// The re-run deletion of a finished, processed Job whose entry this pass sees open at the
/// Job's stage; the interpreter confirms on a fresh read of the node that the entry is still
/// what the snapshot shows (D21, K22). `recorded` is the entry as the snapshot holds it, before
/// this pass's outcome writes: when one of those moved the entry onto the Job's stage (T11:
/// uninstall done → uninstall-interrupt), the Job is a finished executor of an earlier cycle
/// holding the deterministic name, and the fresh read must find the entry where the snapshot has
/// it (its write comes after this deletion), not yet at the Job's stage.
fn delete_for_rerun(
    job: &ExecutorJob,
    entry: &PackageStatus,
    recorded: Option<&PackageStatus>,
) -> Effect {
    let mut effect = delete(job, DeletionReason::Rerun);
    let stage = match recorded {
        Some(r) if Some(r.stage) != job.stage && r.state != Some(State::Complete) => Some(r.stage),
        _ => job.stage,
    };
    if let (Effect::DeleteJob { confirm, .. }, Some(stage)) = (&mut effect, stage) {
        *confirm = Some(EntryCheck {
            nodewright: job.nodewright.to_string(),
            node: job.node.to_string(),
            package: entry.name.clone(),
            version: entry.version.clone(),
            stage,
        });
    }
    effect
}

/// Invalidation (04 §6.3): merge-patch `"invalid":true` into `<P>/package`, then the
/// foreground delete with `reason`.
pub fn invalidate(job: &ExecutorJob, reason: DeletionReason) -> Vec<Effect> {
    let mut effects = Vec::new();
    if let Some(mut p) = job.package.as_deref().cloned() {
        p.invalid = true;
        effects.push(Effect::PatchJob {
            name: job.name.to_string(),
            uid: job.uid.to_string(),
            suspend: None,
            ttl_seconds_after_finished: None,
            annotations: BTreeMap::from([(keys::PACKAGE.to_string(), Some(p.to_json()))]),
            context: job.context(),
        });
    }
    effects.push(delete(job, reason));
    effects
}

/// The validation sweep of one non-paused NodeWright (04 §6.1); a paused one is skipped
/// entirely (04 §6.7). `selected` are the NodeWright's current nodes; `states` holds the
/// node-state document of every selected node whose document is readable (empty when absent) —
/// Jobs on selected nodes missing from it are skipped (02 §7.11 step 2).
pub fn sweep(
    index: &ExecutorIndex,
    nw: &NodeWright,
    selected: &BTreeSet<String>,
    states: &BTreeMap<String, NodeState>,
    options: &Options,
) -> Sweep {
    sweep_with(index, nw, selected, |node| states.get(node), options)
}

/// [`sweep`] reading node-state documents through `state_of` (no copies needed).
pub fn sweep_with<'s>(
    index: &ExecutorIndex,
    nw: &NodeWright,
    selected: &BTreeSet<String>,
    state_of: impl Fn(&str) -> Option<&'s NodeState> + Copy,
    options: &Options,
) -> Sweep {
    sweep_split(
        index,
        nw,
        |node| selected.contains(node),
        state_of,
        state_of,
        options,
    )
}

/// [`sweep_with`] for a pass that already projected executor outcomes: `state_of` gives the
/// working documents (after this pass's outcome writes), `recorded_of` the snapshot's. Decisions
/// use the working entry; the D21 fresh-read check of a re-run deletion uses the recorded one, so
/// a finished Job of an earlier cycle whose stage the entry only reaches through this pass's
/// writes is deleted instead of being refused forever (issue 13 finding 7).
pub fn sweep_split<'s, 'r>(
    index: &ExecutorIndex,
    nw: &NodeWright,
    selected: impl Fn(&str) -> bool,
    state_of: impl Fn(&str) -> Option<&'s NodeState>,
    recorded_of: impl Fn(&str) -> Option<&'r NodeState>,
    options: &Options,
) -> Sweep {
    let mut out = Sweep::default();
    if annotation_true(nw, keys::PAUSE) {
        return out;
    }
    let fps = SpecFingerprints::new(nw, options);
    let jobs = index.all();
    // Node by node, so each node's selection and document are looked up once; the effects are
    // then put back in Job-name order (position in `jobs`).
    let mut found: Vec<(usize, Vec<Effect>)> = Vec::new();
    for (node, positions) in index.nodes_of(nw_name(nw)) {
        let is_selected = selected(node);
        let state = if is_selected { state_of(node) } else { None };
        for &i in positions {
            let job = &jobs[i];
            if job.terminating {
                continue;
            }
            if !is_selected {
                found.push((i, vec![delete(job, DeletionReason::OrphanedNode)]));
                continue;
            }
            if job.package.is_none() {
                continue; // not ours to judge (04 §1.2.5); terminal ones TTL out
            }
            let Some(state) = state else {
                continue;
            };
            let entry = entry_of(job, state);
            if job.state.is_finished() {
                if should_delete_finished_with(job, entry, nw, &fps, options)
                    && let Some(entry) = entry
                {
                    let recorded = recorded_of(node).and_then(|s| entry_of(job, s));
                    found.push((i, vec![delete_for_rerun(job, entry, recorded)]));
                }
            } else if !job.invalid && is_stale_with(job, entry, nw, &fps, options) {
                found.push((i, invalidate(job, DeletionReason::StaleSpec)));
            }
        }
    }
    found.sort_by_key(|(i, _)| *i);
    out.effects = found.into_iter().flat_map(|(_, effects)| effects).collect();
    out.changed = !out.effects.is_empty();
    out
}

fn patch_suspend(job: &ExecutorJob, value: bool) -> Effect {
    Effect::PatchJob {
        name: job.name.to_string(),
        uid: job.uid.to_string(),
        suspend: Some(value),
        ttl_seconds_after_finished: None,
        annotations: BTreeMap::new(),
        context: job.context(),
    }
}

fn suspended(job: &ExecutorJob) -> bool {
    matches!(
        job.state,
        JobState::Unfinished {
            suspended: true,
            ..
        }
    )
}

/// Pause (04 §7.1, §7.3): `suspend: true` on every unfinished, valid, not-yet-suspended Job.
pub fn suspend(index: &ExecutorIndex, nw: &NodeWright) -> Vec<Effect> {
    index
        .of(nw_name(nw))
        .filter(|j| j.is_unfinished() && !j.invalid && !j.terminating && !suspended(j))
        .map(|j| patch_suspend(j, true))
        .collect()
}

/// Resume (04 §7.4–7.7): `suspend: false` on suspended valid Jobs, only when the NodeWright is
/// neither paused nor disabled and this pass's sweep changed nothing.
pub fn resume(index: &ExecutorIndex, nw: &NodeWright, sweep: &Sweep) -> Vec<Effect> {
    if sweep.changed || annotation_true(nw, keys::PAUSE) || annotation_true(nw, keys::DISABLE) {
        return Vec::new();
    }
    index
        .of(nw_name(nw))
        .filter(|j| j.is_unfinished() && !j.invalid && !j.terminating && suspended(j))
        .map(|j| patch_suspend(j, false))
        .collect()
}

/// Reboot reset (04 §5.7): delete every Job of the NodeWright on the node, whatever its status.
/// The lifecycle advances the boot id only after these and the reset write succeeded (D15).
pub fn reboot_reset(index: &ExecutorIndex, nw: &NodeWright, node: &str) -> Vec<Effect> {
    index
        .on_node(nw_name(nw), node)
        .filter(|j| !j.terminating)
        .map(|j| delete(j, DeletionReason::RebootReset))
        .collect()
}

/// Config-update clearing on an erroring node (04 §5.8): the package's unfinished or terminally
/// failed Jobs on that node; retained successful Jobs stay.
pub fn config_update_clear(
    index: &ExecutorIndex,
    nw: &NodeWright,
    node: &str,
    package: &str,
    version: &str,
) -> Vec<Effect> {
    index
        .of_package(nw_name(nw), node, package, version)
        .filter(|j| !j.terminating && !matches!(j.state, JobState::Complete))
        .map(|j| delete(j, DeletionReason::ConfigUpdate))
        .collect()
}

/// D24 (04 §10.5): in the pass that swaps the package ConfigMap, invalidate every unfinished
/// package-stage Job of that package on the other nodes (`except` = nodes cleared by
/// [`config_update_clear`]), so no stage finishes on the old content. Interrupt Jobs do not mount
/// the ConfigMap and are left alone.
pub fn invalidate_for_config_swap(
    index: &ExecutorIndex,
    nw: &NodeWright,
    package: &str,
    version: &str,
    except: &BTreeSet<String>,
) -> Vec<Effect> {
    index
        .of(nw_name(nw))
        .filter(|j| j.runs(package, version) && !j.interrupt && !except.contains(&*j.node))
        .filter(|j| j.is_unfinished() && !j.terminating && !j.invalid)
        .flat_map(|j| invalidate(j, DeletionReason::ConfigUpdate))
        .collect()
}
