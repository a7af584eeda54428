//! Recording an outcome: the guarded node-state changes (04-jobs-rules.md §3.3–3.4, §4.3.3–4.3.4,
//! §4.4.2, §4.5.4; 02-lifecycle.md T3–T5, T9–T12, T20) and the events E13–E15.

use nodewright_crds::{NodeState, NodeWright, PackageStatus, Stage, State};

use super::matching::spec_package;
use super::outcome::{Outcome, OutcomeKind, event, node_ref, open_at_stage};
use crate::effect::{Effect, EntryChange};

fn set(entry: &PackageStatus, stage: Stage, state: State, restarts: i32) -> PackageStatus {
    PackageStatus {
        stage,
        state: Some(state),
        restarts,
        ..entry.clone()
    }
}

fn change(nw: &str, entry: &PackageStatus, set: Option<PackageStatus>) -> EntryChange {
    EntryChange {
        nodewright: nw.to_string(),
        key: entry.unique_name(),
        expect: Some(entry.clone()),
        set,
    }
}

/// Guarded node-state changes for one outcome against the pass's view of the node's document
/// for that NodeWright (04 §3.3–3.4, §4.3.3–4.3.4, §4.4.2, §4.5.4; 02 T3–T5, T9–T12, T20).
/// `nw` is `None` when the NodeWright is gone (no promotion, 04 §3.4). Empty = nothing to write.
pub fn entry_changes(
    outcome: &Outcome,
    nw: Option<&NodeWright>,
    state: &NodeState,
) -> Vec<EntryChange> {
    let own = state.get(&outcome.package, &outcome.version);
    let open = open_at_stage(own, outcome.stage);
    let name = outcome.nodewright.as_str();
    match &outcome.kind {
        OutcomeKind::JobOnly => Vec::new(),
        OutcomeKind::Restarts { restarts } => match own {
            Some(e) if open && e.restarts != *restarts => {
                vec![change(
                    name,
                    e,
                    Some(PackageStatus {
                        restarts: *restarts,
                        ..e.clone()
                    }),
                )]
            }
            _ => Vec::new(),
        },
        OutcomeKind::AttemptFailed { restarts, .. } => match own {
            Some(e) if open => {
                let r = restarts.unwrap_or(e.restarts);
                let new = set(e, e.stage, State::Erroring, r);
                if new == *e {
                    Vec::new()
                } else {
                    vec![change(name, e, Some(new))]
                }
            }
            _ => Vec::new(),
        },
        OutcomeKind::TerminalFailed { restarts, .. } => match own {
            // 04 §4.4.2 guard plus the port's refusal to regress a completion (4.4.6). The
            // write happens even when already erroring: node status must still turn erroring.
            Some(e) if open => {
                let new = set(e, e.stage, State::Erroring, restarts.unwrap_or(e.restarts));
                vec![change(name, e, Some(new))]
            }
            _ => Vec::new(),
        },
        OutcomeKind::Completed { attempts } => completion(outcome, nw, state, *attempts),
        OutcomeKind::InterruptCompleted { attempts } => {
            let mut changes = Vec::new();
            if nw.is_some() {
                for e in state.0.values() {
                    if e.stage == Stage::Interrupt && e.state == Some(State::Skipped) {
                        changes.push(change(
                            name,
                            e,
                            Some(set(e, Stage::Interrupt, State::Complete, e.restarts)),
                        ));
                    }
                }
            }
            let promoted_own = changes
                .iter()
                .any(|c| Some(&c.key) == own.map(|e| e.unique_name()).as_ref());
            if let Some(e) = own.filter(|_| open && !promoted_own) {
                changes.push(change(
                    name,
                    e,
                    Some(completed_entry(e, outcome, *attempts)),
                ));
            }
            changes
        }
    }
}

fn completed_entry(e: &PackageStatus, outcome: &Outcome, attempts: i32) -> PackageStatus {
    PackageStatus {
        stage: e.stage,
        state: Some(State::Complete),
        restarts: attempts,
        image: if outcome.image.is_empty() {
            e.image.clone()
        } else {
            outcome.image.clone()
        },
        container_sha: outcome.container_sha.clone(),
        ..e.clone()
    }
}

fn completion(
    outcome: &Outcome,
    nw: Option<&NodeWright>,
    state: &NodeState,
    attempts: i32,
) -> Vec<EntryChange> {
    let name = outcome.nodewright.as_str();
    let Some(e) = state.get(&outcome.package, &outcome.version) else {
        return Vec::new();
    };
    if !open_at_stage(Some(e), outcome.stage) {
        return Vec::new();
    }
    match outcome.stage {
        Some(Stage::Upgrade) => {
            let mut changes: Vec<EntryChange> = state
                .entries_of(&outcome.package)
                .filter(|other| other.version != outcome.version)
                .map(|other| change(name, other, None))
                .collect();
            changes.push(change(name, e, Some(completed_entry(e, outcome, attempts))));
            changes
        }
        Some(Stage::Uninstall) => {
            let spec = nw.and_then(|nw| spec_package(nw, &outcome.package));
            match spec {
                Some(p) if p.version == outcome.version && p.interrupt.is_some() => {
                    vec![change(
                        name,
                        e,
                        Some(set(e, Stage::UninstallInterrupt, State::InProgress, 0)),
                    )]
                }
                _ => vec![change(name, e, None)],
            }
        }
        _ => vec![change(name, e, Some(completed_entry(e, outcome, attempts)))],
    }
}

/// Events E13–E15 (02 §12.6) for an outcome whose entry changes were written; none when nothing
/// was written. Emit them after the node write, before `after_state`.
pub fn record_events(outcome: &Outcome, changes: &[EntryChange]) -> Vec<Effect> {
    if changes.is_empty() {
        return Vec::new();
    }
    let nw = &outcome.nodewright;
    let pkg = format!("{}:{}", outcome.package, outcome.version);
    let own_written = changes.iter().any(|c| {
        c.key == nodewright_crds::nodewright::unique_name(&outcome.package, &outcome.version)
    });
    let message = match &outcome.kind {
        OutcomeKind::Completed { .. } => {
            format!("Package [{pkg}] state complete on [nodewright:{nw}]")
        }
        OutcomeKind::InterruptCompleted { .. } if own_written => {
            format!("Package [{pkg}] state complete on [nodewright:{nw}]")
        }
        OutcomeKind::InterruptCompleted { .. } => format!(
            "Interrupt complete on [nodewright:{nw}]: promoted packages skipped during interrupt sequencing"
        ),
        OutcomeKind::TerminalFailed { reason, .. } => format!(
            "Package [{pkg}] stage {} failed on [nodewright:{nw}]: {reason}",
            outcome.stage.map(Stage::as_str).unwrap_or_default()
        ),
        OutcomeKind::AttemptFailed { .. } => {
            format!("Package [{pkg}] state erroring on [nodewright:{nw}]")
        }
        OutcomeKind::Restarts { .. } | OutcomeKind::JobOnly => return Vec::new(),
    };
    let (reason, action) = match &outcome.kind {
        OutcomeKind::TerminalFailed { .. } => ("State", "JobFailed"),
        OutcomeKind::AttemptFailed { .. } => ("Apply", "UpdateNodeState"),
        _ => ("State", "JobComplete"),
    };
    vec![event(
        node_ref(&outcome.node),
        false,
        reason,
        action,
        message,
    )]
}
