//! Picking the nodes of a compartment's batch (05-rollout.md §6.1, 02-lifecycle.md §6.5,
//! decisions D3 and D9).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nodewright_crds::Status;

use super::NodeView;

/// Candidate statuses of a new batch, in priority order.
pub const CANDIDATE_ORDER: [Status; 4] = [
    Status::Waiting,
    Status::Unknown,
    Status::Blocked,
    Status::Erroring,
];

/// The nodes one compartment may work on this pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchSelection {
    /// Nodes that may start or continue work (in-progress, then sticky, then new).
    pub selected: Vec<String>,
    /// In-flight nodes of a stopped compartment: they may finish their current stage, nothing
    /// more (D9).
    pub finishing: Vec<String>,
    /// True when `selected` holds nodes that were not yet in `nodePriority` (a new batch).
    pub new_batch: bool,
}

/// What selection needs to know about one member.
#[derive(Clone, Copy, Debug)]
pub struct Member<'a> {
    /// The node.
    pub node: &'a NodeView<'a>,
    /// `ignore` label and taints allow picking it.
    pub eligible: bool,
    /// Its `nodePriority` timestamp, when it is in the current batch.
    pub priority: Option<&'a Time>,
}

/// Selects a compartment's nodes.
///
/// 1. A stopped compartment selects nothing; its eligible `in_progress` nodes only finish their
///    current stage (D9).
/// 2. The current batch is the eligible running members (`in_progress`, or out: holding the
///    cordon or an unfinished executor while not complete, even when a dropped status write lost
///    their `nodePriority` entry) plus the eligible sticky members (in `nodePriority`, not
///    complete), stickies oldest first; the stickies are capped at `batch_size − #running` (D3
///    strict budget).
/// 3. Without a current batch a new one is taken in candidate order (waiting, unknown, blocked,
///    erroring; node order inside a class), eligible and not complete nodes only. Ineligible
///    sticky nodes keep their slot, so the batch never exceeds `batch_size` when they return.
pub fn select_batch(members: &[Member<'_>], batch_size: i64, stopped: bool) -> BatchSelection {
    let mut in_progress: Vec<&Member<'_>> = members
        .iter()
        .filter(|m| m.eligible && running(m))
        .collect();
    if stopped {
        in_progress.retain(|m| m.node.status == Status::InProgress);
        return BatchSelection {
            finishing: names(&in_progress),
            ..BatchSelection::default()
        };
    }
    let mut sticky_ok: Vec<&Member<'_>> = members
        .iter()
        .filter(|m| m.eligible && !m.node.complete && m.priority.is_some())
        .filter(|m| !running(m))
        .collect();
    sticky_ok.sort_by(|a, b| (a.priority, &a.node.name).cmp(&(b.priority, &b.node.name)));
    // Ineligible members already admitted (sticky or running) keep their slot.
    let held = members
        .iter()
        .filter(|m| !m.eligible && !m.node.complete)
        .filter(|m| m.priority.is_some() || running(m))
        .count();
    if !in_progress.is_empty() || !sticky_ok.is_empty() {
        let room = usize_room(batch_size - in_progress.len() as i64);
        let mut selected = names(&in_progress);
        selected.extend(sticky_ok.iter().take(room).map(|m| m.node.name.to_string()));
        return BatchSelection {
            selected,
            ..BatchSelection::default()
        };
    }
    let room = usize_room(batch_size - held as i64);
    let selected = new_batch(members, room);
    BatchSelection {
        new_batch: !selected.is_empty(),
        selected,
        finishing: Vec::new(),
    }
}

/// In the current batch whatever `nodePriority` says: `in_progress`, or out and not complete.
fn running(m: &Member<'_>) -> bool {
    m.node.status == Status::InProgress || (m.node.out && !m.node.complete)
}

fn new_batch(members: &[Member<'_>], room: usize) -> Vec<String> {
    CANDIDATE_ORDER
        .iter()
        .flat_map(|status| {
            members.iter().filter(move |m| {
                m.eligible && !m.node.complete && m.priority.is_none() && m.node.status == *status
            })
        })
        .take(room)
        .map(|m| m.node.name.to_string())
        .collect()
}

fn names(members: &[&Member<'_>]) -> Vec<String> {
    members.iter().map(|m| m.node.name.to_string()).collect()
}

fn usize_room(room: i64) -> usize {
    usize::try_from(room.max(0)).unwrap_or(usize::MAX)
}

/// Looks up every member's `nodePriority` entry.
pub fn members<'a>(
    nodes: impl IntoIterator<Item = (&'a NodeView<'a>, bool)>,
    priority: &'a BTreeMap<String, Time>,
) -> Vec<Member<'a>> {
    nodes
        .into_iter()
        .map(|(node, eligible)| Member {
            node,
            eligible,
            priority: priority.get(&*node.name),
        })
        .collect()
}
