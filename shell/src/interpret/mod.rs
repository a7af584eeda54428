//! The effect interpreter: applies a [`nodewright_core::Plan`]'s effects, each against fresh
//! state with its precondition (00-architecture.md "Effects", 02-lifecycle.md §13); how they are
//! scheduled (node lanes, barriers, Events last) is in `apply.rs`.
//!
//! Every effect ends in an [`Outcome`]. A dropped or failed write poisons its scope: later
//! effects on the same node are skipped, the NodeWright's status patch is skipped when one of its
//! node writes failed (§13.7), and an Event right after a write that did not happen is skipped.

pub(crate) mod ack;
mod apply;
mod events;
mod interrupt;
pub mod kube_port;
pub mod memory;
mod node;
mod nodewright;
mod objects;
pub mod port;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::runtime::reflector::Store;
use nodewright_core::effect::{Ended, FinalizerChain};
use nodewright_core::{Context, Effect, Snapshot};
use tracing::{debug, info_span, warn};

pub use apply::{CONCURRENCY_ENV, DEFAULT_CONCURRENCY, MAX_CONCURRENCY, concurrency};
pub use events::EventRecorder;
pub use kube_port::KubePort;
pub use memory::MemoryPort;
pub use port::{ApiError, ApiResult, ClusterPort, Eviction};

use crate::error::ShellError;

/// How one effect ended.
#[derive(Debug)]
pub enum Outcome {
    /// The write happened.
    Applied,
    /// Nothing needed writing (object gone, already in the desired state).
    Noop,
    /// A precondition failed or the object already exists; the next pass decides.
    Dropped(String),
    /// The apiserver asked to wait (eviction blocked by a PodDisruptionBudget).
    Waiting(String),
    /// Skipped because an earlier effect in its scope did not happen.
    Skipped,
    /// The write failed.
    Failed(ShellError),
}

impl Outcome {
    /// Short label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Noop => "noop",
            Outcome::Dropped(_) => "dropped",
            Outcome::Waiting(_) => "waiting",
            Outcome::Skipped => "skipped",
            Outcome::Failed(_) => "failed",
        }
    }

    /// True for Applied and Noop.
    pub fn happened(&self) -> bool {
        matches!(self, Outcome::Applied | Outcome::Noop)
    }

    /// How the skip rule sees this outcome.
    pub fn ended(&self) -> Ended {
        match self {
            _ if self.happened() => Ended::Happened,
            Outcome::Waiting(_) => Ended::Waiting,
            _ => Ended::Failed,
        }
    }
}

/// What applying one plan did.
#[derive(Debug, Default)]
pub struct Report {
    /// (effect kind, outcome) in plan order.
    pub outcomes: Vec<(&'static str, Outcome)>,
}

impl Report {
    /// True when some effect was dropped, skipped or waiting: run another pass soon.
    pub fn wants_requeue(&self) -> bool {
        self.outcomes.iter().any(|(_, o)| {
            matches!(
                o,
                Outcome::Dropped(_) | Outcome::Waiting(_) | Outcome::Skipped
            )
        })
    }

    /// The errors of failed effects.
    pub fn errors(&self) -> Vec<String> {
        self.outcomes
            .iter()
            .filter_map(|(kind, o)| match o {
                Outcome::Failed(e) => Some(format!("{kind}: {e}")),
                _ => None,
            })
            .collect()
    }

    /// Number of effects with the given outcome label.
    pub fn count(&self, label: &str) -> usize {
        self.outcomes
            .iter()
            .filter(|(_, o)| o.label() == label)
            .count()
    }
}

/// Applies effects through a [`ClusterPort`]: the apiserver ([`KubePort`]) in the operator, the
/// in-memory apiserver in the simulator.
#[derive(Clone)]
pub struct Interpreter<P = KubePort> {
    pub(crate) port: P,
    pub(crate) namespace: String,
    pub(crate) events: EventRecorder,
    pub(crate) conflict_attempts: u32,
    pub(crate) retry_backoff: Duration,
    /// How many lanes (and then Events) are applied at a time.
    pub(crate) concurrency: usize,
    /// Per NodeWright, the resourceVersion our own finalizer write turned the snapshot's version
    /// into (`from` → `to`): both versions carry the same status, so a status patch computed from
    /// `from` may expect `to` (§13.7, status precondition).
    pub(crate) finalizer_chain: Arc<Mutex<FinalizerChain>>,
    /// Per NodeWright, the resourceVersion the plan's own batch record (I7) turned the snapshot's
    /// version into: the plan's status patch carries that batch too, so it may expect it. Kept
    /// for one plan only (a later pass on the old snapshot must not).
    pub(crate) batch_chain: Arc<Mutex<FinalizerChain>>,
}

impl Interpreter<KubePort> {
    /// An interpreter writing Jobs, pods and ConfigMaps into `namespace`.
    pub fn new(client: Client, namespace: &str, events: EventRecorder) -> Self {
        Interpreter::with_port(KubePort::new(client, namespace), namespace, events)
    }

    /// Lets the first read of a node write come from the reflector cache (§13.1 step 4).
    pub fn with_node_cache(mut self, store: Store<Node>) -> Self {
        self.port = self.port.with_node_cache(store);
        self
    }
}

impl<P: ClusterPort> Interpreter<P> {
    /// An interpreter over `port`, for the operator namespace `namespace`.
    pub fn with_port(port: P, namespace: &str, events: EventRecorder) -> Self {
        Interpreter {
            port,
            namespace: namespace.to_string(),
            events,
            conflict_attempts: 5,
            retry_backoff: Duration::from_millis(20),
            concurrency: DEFAULT_CONCURRENCY,
            finalizer_chain: Default::default(),
            batch_chain: Default::default(),
        }
    }

    /// Applies the effects of up to `limit` nodes (and then up to `limit` Events) at a time;
    /// 0 counts as 1.
    pub fn with_concurrency(mut self, limit: usize) -> Self {
        self.concurrency = limit.max(1);
        self
    }

    /// How many nodes' effects (and then Events) are applied at a time.
    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// Shares the finalizer chain (kept between passes) with an earlier interpreter.
    pub fn with_finalizer_chain(mut self, chain: Arc<Mutex<FinalizerChain>>) -> Self {
        self.finalizer_chain = chain;
        self
    }

    /// The finalizer chain, to hand to the next interpreter over a new port.
    pub fn finalizer_chain(&self) -> Arc<Mutex<FinalizerChain>> {
        self.finalizer_chain.clone()
    }

    /// The port.
    pub fn port(&self) -> &P {
        &self.port
    }

    /// Gives the port back.
    pub fn into_port(self) -> P {
        self.port
    }

    /// Applies one effect with its precondition.
    pub async fn apply_one(&self, snapshot: &Snapshot, effect: &Effect) -> Outcome {
        self.apply_in_lane(snapshot, effect, &mut None).await
    }

    /// [`Interpreter::apply_one`] inside a node's lane: `fresh` is the lane's uncached read of
    /// its node since the lane last wrote it, shared by the creates that confirm against it.
    pub(super) async fn apply_in_lane(
        &self,
        snapshot: &Snapshot,
        effect: &Effect,
        fresh: &mut Option<Node>,
    ) -> Outcome {
        match effect {
            Effect::CreateJob {
                job,
                precondition,
                confirm,
                ..
            } => {
                if let Some(check) = confirm
                    && let Some(refused) = self.confirm_create(check, fresh).await
                {
                    return refused;
                }
                self.create_job(job, precondition.as_ref()).await
            }
            Effect::DeleteJob {
                name,
                uid,
                reason,
                confirm,
                ..
            } => {
                if let Some(check) = confirm
                    && let Some(refused) = self.confirm_entry(check).await
                {
                    return refused;
                }
                self.delete_job(name, uid, *reason).await
            }
            Effect::PatchJob {
                name,
                uid,
                suspend,
                ttl_seconds_after_finished,
                annotations,
                ..
            } => {
                self.patch_job(
                    name,
                    uid,
                    *suspend,
                    *ttl_seconds_after_finished,
                    annotations,
                )
                .await
            }
            Effect::EndInterruptJob {
                name,
                uid,
                resource_version,
                restarts,
                ..
            } => {
                self.end_interrupt_job(name, uid, resource_version.as_deref(), *restarts)
                    .await
            }
            Effect::DeletePod {
                namespace,
                name,
                uid,
                reason,
                ..
            } => self.delete_pod(namespace, name, uid, *reason).await,
            Effect::PatchNode(patch) => self.patch_node(patch).await,
            Effect::PatchNodeConditions { node, set, remove } => {
                self.patch_node_conditions(node, set, remove).await
            }
            Effect::Evict {
                namespace,
                name,
                uid,
                delete_instead,
                grace_period_seconds,
                ..
            } => {
                self.evict(Eviction {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    uid: uid.clone(),
                    delete_instead: *delete_instead,
                    grace: *grace_period_seconds,
                })
                .await
            }
            Effect::PatchStatus { nodewright, status } => {
                self.patch_status(snapshot, nodewright, status).await
            }
            Effect::RecordBatch { nodewright, status } => {
                self.record_batch(snapshot, nodewright, status).await
            }
            Effect::AddFinalizer { nodewright, uid } => {
                self.set_finalizer(snapshot, nodewright, uid, true).await
            }
            Effect::RemoveFinalizer { nodewright, uid } => {
                self.set_finalizer(snapshot, nodewright, uid, false).await
            }
            Effect::UpsertConfigMap {
                config_map,
                expect_resource_version,
            } => {
                self.upsert_config_map(config_map, expect_resource_version.as_deref())
                    .await
            }
            Effect::DeleteConfigMap { name, uid, reason } => {
                self.delete_config_map(name, uid, *reason).await
            }
            Effect::Event(spec) => self.emit(spec).await,
        }
    }
}

/// A write the leadership fence refused did not happen and must not count as a failure: the
/// replica is no longer the leader and the next leader re-decides.
fn fenced_to_dropped(outcome: Outcome) -> Outcome {
    match outcome {
        Outcome::Failed(ShellError::Api(ApiError::Fenced(why))) => Outcome::Dropped(why),
        other => other,
    }
}

fn effect_span(kind: &'static str, ctx: &Context) -> tracing::Span {
    let opt = |v: &Option<String>| v.clone().unwrap_or_default();
    info_span!(
        "effect",
        effect = kind,
        nodewright = %opt(&ctx.nodewright),
        node = %opt(&ctx.node),
        package = %opt(&ctx.package),
        version = %opt(&ctx.version),
        stage = %opt(&ctx.stage),
    )
}

fn log_outcome(kind: &'static str, effect: &Effect, outcome: &Outcome) {
    let ctx = effect.context();
    let opt = |v: &Option<String>| v.clone().unwrap_or_default();
    let (nw, node, pkg, stage) = (
        opt(&ctx.nodewright),
        opt(&ctx.node),
        opt(&ctx.package),
        opt(&ctx.stage),
    );
    match outcome {
        Outcome::Applied | Outcome::Noop | Outcome::Skipped => debug!(
            effect = kind, outcome = outcome.label(), nodewright = %nw, node = %node,
            package = %pkg, stage = %stage, "effect"
        ),
        Outcome::Dropped(why) | Outcome::Waiting(why) => debug!(
            effect = kind, outcome = outcome.label(), nodewright = %nw, node = %node,
            package = %pkg, stage = %stage, why = %why, "effect not applied"
        ),
        Outcome::Failed(err) => warn!(
            effect = kind, outcome = "failed", nodewright = %nw, node = %node,
            package = %pkg, stage = %stage, error = %err, "effect failed"
        ),
    }
}

#[cfg(test)]
mod tests;
