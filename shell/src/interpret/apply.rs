//! How a plan's effects are scheduled (02-lifecycle.md §13.7, docs/operations.md "How effects are
//! applied"). Writes come first: runs of node-scoped effects are applied in per-node lanes, up to
//! the interpreter's concurrency limit at a time, and every other effect (NodeWright status,
//! finalizers, package ConfigMaps) is a barrier that waits for everything before it. Events are
//! bookkeeping: each is decided (sent or skipped) by how the write it follows ended, then all of
//! them are sent after the writes, also concurrently. Outcomes are reported in plan order.

use std::collections::BTreeMap;

use futures::StreamExt;
use nodewright_core::effect::{FinalizerChain, SkipScope};
use nodewright_core::{Effect, Snapshot};
use tracing::Instrument;

use super::port::ClusterPort;
use super::{Interpreter, Outcome, Report, effect_span, fenced_to_dropped, log_outcome};

/// Default of how many apiserver writes one pass keeps in flight (node lanes, then Events).
pub const DEFAULT_CONCURRENCY: usize = 32;

/// Environment variable overriding [`DEFAULT_CONCURRENCY`] in the operator.
pub const CONCURRENCY_ENV: &str = "NODEWRIGHT_EFFECT_CONCURRENCY";

/// Highest accepted value of [`CONCURRENCY_ENV`].
pub const MAX_CONCURRENCY: usize = 256;

/// Parses [`CONCURRENCY_ENV`]: unset or blank gives [`DEFAULT_CONCURRENCY`].
pub fn concurrency(value: Option<&str>) -> Result<usize, String> {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(DEFAULT_CONCURRENCY),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=MAX_CONCURRENCY).contains(&n) => Ok(n),
            _ => Err(format!(
                "{CONCURRENCY_ENV}={v:?}: expected a whole number from 1 to {MAX_CONCURRENCY}"
            )),
        },
    }
}

/// True when a lane creates an executor Job.
fn starts_executor(effects: &[Effect], indices: &[usize]) -> bool {
    indices
        .iter()
        .any(|&i| matches!(effects.get(i), Some(Effect::CreateJob { .. })))
}

/// One applied effect: its index in the plan, kind and outcome.
type Done = (usize, &'static str, Outcome);

/// What one lane or barrier produced: outcomes of its writes, the Events it let through.
#[derive(Default)]
struct Stretch {
    done: Vec<Done>,
    events: Vec<usize>,
}

impl<P: ClusterPort> Interpreter<P> {
    /// Applies every effect of `plan`; `snapshot` is what the plan was computed from.
    ///
    /// Effects on one node keep their order. A run of consecutive node-scoped effects is applied
    /// for up to [`Interpreter::concurrency`] nodes at a time; every other effect (status,
    /// finalizers, ConfigMaps) is a barrier applied alone, after everything before it. An Event
    /// belongs to the write it follows and is sent, after all writes, only if that write
    /// happened. Outcomes are reported in plan order.
    pub async fn apply(&self, snapshot: &Snapshot, plan: &nodewright_core::Plan) -> Report {
        self.apply_effects(snapshot, &plan.effects).await
    }

    /// [`Interpreter::apply`] of a list of effects (a whole plan, or the part of one that a
    /// simulated crash lets through).
    pub async fn apply_effects(&self, snapshot: &Snapshot, effects: &[Effect]) -> Report {
        *self.batch_chain.lock().unwrap_or_else(|p| p.into_inner()) = FinalizerChain::default();
        let units = units(effects);
        let mut outcomes: Vec<Option<(&'static str, Outcome)>> =
            effects.iter().map(|_| None).collect();
        let mut events = Vec::new();
        let mut scope = SkipScope::default();
        let mut at = 0;
        while at < units.len() {
            let end = units[at..]
                .iter()
                .position(|u| u.node.is_none())
                .map_or(units.len(), |p| at + p);
            let stretches = if end == at {
                let one = self
                    .run_sequence(snapshot, effects, &units[at].indices, &mut scope)
                    .await;
                at += 1;
                vec![one]
            } else {
                let lanes = self.run_lanes(snapshot, effects, &units[at..end], &mut scope);
                at = end;
                lanes.await
            };
            for stretch in stretches {
                place(&mut outcomes, stretch.done);
                events.extend(stretch.events);
            }
        }
        events.sort_unstable();
        let sent = self.send_events(effects, &events).await;
        place(&mut outcomes, sent);
        Report {
            outcomes: outcomes.into_iter().flatten().collect(),
        }
    }

    /// Applies consecutive node-scoped units, one lane per node, up to the concurrency limit
    /// at a time; each lane sees the failures recorded for its node so far and hands back its own.
    async fn run_lanes(
        &self,
        snapshot: &Snapshot,
        effects: &[Effect],
        units: &[Unit],
        scope: &mut SkipScope,
    ) -> Vec<Stretch> {
        let mut lanes: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for unit in units {
            let node = unit.node.as_deref().unwrap_or_default();
            lanes.entry(node).or_default().extend(&unit.indices);
        }
        // Lanes that start executors go first: a pass that also writes thousands of nodes'
        // statuses starts its Jobs at once. Effects of one node keep their order.
        let mut lanes: Vec<(&str, Vec<usize>)> = lanes.into_iter().collect();
        lanes.sort_by_key(|(_, indices)| !starts_executor(effects, indices));
        let forked: Vec<_> = lanes
            .into_iter()
            .map(|(node, indices)| (scope.fork(node), indices))
            .collect();
        let results: Vec<(SkipScope, Stretch)> =
            futures::stream::iter(forked.into_iter().map(|(mut local, indices)| async move {
                let stretch = self
                    .run_sequence(snapshot, effects, &indices, &mut local)
                    .await;
                (local, stretch)
            }))
            .buffer_unordered(self.concurrency)
            .collect()
            .await;
        results
            .into_iter()
            .map(|(local, stretch)| {
                scope.merge(local);
                stretch
            })
            .collect()
    }

    /// Applies the writes at `indices` one after the other under `scope`. An Event is decided
    /// here, by how the write before it ended, but only queued: it is sent after all writes.
    async fn run_sequence(
        &self,
        snapshot: &Snapshot,
        effects: &[Effect],
        indices: &[usize],
        scope: &mut SkipScope,
    ) -> Stretch {
        let mut stretch = Stretch::default();
        // The lane's uncached read of its node, until the lane writes the node (creates and
        // ConfigMaps do not).
        let mut fresh = None;
        for &i in indices {
            let effect = &effects[i];
            let kind = effect.kind();
            let outcome = if scope.blocks(effect) {
                Outcome::Skipped
            } else if matches!(effect, Effect::Event(_)) {
                stretch.events.push(i);
                continue;
            } else {
                let span = effect_span(kind, effect.context());
                let applied = self.apply_in_lane(snapshot, effect, &mut fresh);
                fenced_to_dropped(applied.instrument(span).await)
            };
            if !matches!(
                effect,
                Effect::CreateJob { .. } | Effect::UpsertConfigMap { .. }
            ) {
                fresh = None;
            }
            log_outcome(kind, effect, &outcome);
            scope.record(effect, outcome.ended());
            stretch.done.push((i, kind, outcome));
        }
        stretch
    }

    /// Sends the queued Events (plan order, up to the concurrency limit at a time).
    async fn send_events(&self, effects: &[Effect], indices: &[usize]) -> Vec<Done> {
        futures::stream::iter(indices.iter().map(|&i| async move {
            let effect = &effects[i];
            let kind = effect.kind();
            let outcome = match effect {
                Effect::Event(spec) => {
                    let span = effect_span(kind, effect.context());
                    fenced_to_dropped(self.emit(spec).instrument(span).await)
                }
                _ => Outcome::Skipped,
            };
            log_outcome(kind, effect, &outcome);
            (i, kind, outcome)
        }))
        .buffered(self.concurrency)
        .collect()
        .await
    }
}

/// An effect plus the Events that follow it, and the node it concerns.
struct Unit {
    node: Option<String>,
    indices: Vec<usize>,
}

/// Splits a plan into units; leading Events form their own unit without a node.
fn units(effects: &[Effect]) -> Vec<Unit> {
    let mut out: Vec<Unit> = Vec::new();
    for (i, effect) in effects.iter().enumerate() {
        match (effect, out.last_mut()) {
            (Effect::Event(_), Some(last)) => last.indices.push(i),
            _ => out.push(Unit {
                node: effect.node().map(str::to_string),
                indices: vec![i],
            }),
        }
    }
    out
}

fn place(outcomes: &mut [Option<(&'static str, Outcome)>], done: Vec<Done>) {
    for (i, kind, outcome) in done {
        if let Some(slot) = outcomes.get_mut(i) {
            *slot = Some((kind, outcome));
        }
    }
}
