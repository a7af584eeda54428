//! Kubernetes Events (events.k8s.io/v1) with a small in-memory de-duplication.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use nodewright_core::{DeletionReason, EventSpec, ObjectRef};
use nodewright_crds::{GROUP, VERSION};
use sha2::{Digest, Sha256};
use tracing::warn;

use super::port::ClusterPort;
use super::{Interpreter, Outcome};

/// Name of the reporting controller on every Event.
pub const REPORTING_CONTROLLER: &str = "nodewright.nvidia.com/operator";

/// Identical events within this window are emitted once.
const DEDUP_WINDOW: Duration = Duration::from_secs(300);

/// Expired keys are forgotten at most this often, so a burst of events costs time linear in its
/// size (a rollout over thousands of nodes emits thousands within one window).
const PRUNE_EVERY: Duration = Duration::from_secs(10);

/// Emits Events; failures are logged, never fatal. Clones share the de-duplication memory.
#[derive(Clone, Debug, Default)]
pub struct EventRecorder {
    instance: String,
    recent: Arc<Mutex<Recent>>,
}

/// When each event key was last emitted, and when expired keys were last forgotten.
#[derive(Debug, Default)]
struct Recent {
    at: HashMap<EventKey, Duration>,
    pruned: Duration,
}

/// What makes two Events the same for de-duplication: the first 16 bytes of the SHA-256 of
/// their kind, object name, reason, action and message, so a rollout's thousands of remembered
/// Events do not each keep their message text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct EventKey([u8; 16]);

impl EventKey {
    /// The key of `parts`, each length-prefixed so that no two part lists share a digest input.
    fn of(parts: &[&str]) -> Self {
        let mut hasher = Sha256::new();
        for part in parts {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        let digest = hasher.finalize();
        let mut key = [0; 16];
        key.copy_from_slice(&digest[..16]);
        EventKey(key)
    }
}

impl EventRecorder {
    /// A recorder reporting as `instance` (the pod name).
    pub fn new(instance: &str) -> Self {
        EventRecorder {
            instance: instance.to_string(),
            recent: Arc::default(),
        }
    }

    /// True when `key` was not emitted within the window before `now` (monotonic).
    fn first_recently(&self, key: EventKey, now: Duration) -> bool {
        // A poisoned lock only means another emitter panicked; the map is still usable.
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if now.saturating_sub(recent.pruned) >= PRUNE_EVERY {
            recent
                .at
                .retain(|_, at| now.saturating_sub(*at) < DEDUP_WINDOW);
            recent.pruned = now;
        }
        if recent
            .at
            .get(&key)
            .is_some_and(|at| now.saturating_sub(*at) < DEDUP_WINDOW)
        {
            return false;
        }
        recent.at.insert(key, now);
        true
    }
}

impl<P: ClusterPort> Interpreter<P> {
    /// Emits the event of an [`nodewright_core::Effect::Event`].
    pub async fn emit(&self, spec: &EventSpec) -> Outcome {
        let r = &spec.regarding;
        let key = EventKey::of(&[&r.kind, &r.name, &spec.reason, &spec.action, &spec.message]);
        if !self.events.first_recently(key, self.port.elapsed()) {
            return Outcome::Noop;
        }
        let event = build_event(spec, &self.events.instance, self.port.now());
        let namespace = event_namespace(&spec.regarding);
        match self.port.create_event(&namespace, &event).await {
            Ok(()) => Outcome::Applied,
            Err(e) => {
                warn!(error = %e, reason = %spec.reason, "event not recorded");
                Outcome::Noop
            }
        }
    }

    /// Emits the Event that explains a deletion (decision D12).
    pub(super) async fn deleted(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        uid: &str,
        reason: DeletionReason,
    ) {
        let spec = EventSpec {
            regarding: ObjectRef {
                kind: kind.to_string(),
                name: name.to_string(),
                namespace: Some(namespace.to_string()),
                uid: Some(uid.to_string()),
            },
            warning: false,
            reason: "Deleted".into(),
            action: "Delete".into(),
            message: format!("deleted {kind} {namespace}/{name}: {}", reason.as_str()),
        };
        self.emit(&spec).await;
    }
}

/// Events about cluster-scoped objects live in `default`, like client-go's recorder.
fn event_namespace(regarding: &ObjectRef) -> String {
    regarding
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_string())
}

fn api_version(kind: &str) -> String {
    match kind {
        "NodeWright" | "DeploymentPolicy" => format!("{GROUP}/{VERSION}"),
        "Job" => "batch/v1".into(),
        _ => "v1".into(),
    }
}

/// The events.k8s.io/v1 object for `spec`.
pub(crate) fn build_event(spec: &EventSpec, instance: &str, now: jiff::Timestamp) -> Event {
    let r = &spec.regarding;
    let action = if spec.action.is_empty() {
        spec.reason.clone()
    } else {
        spec.action.clone()
    };
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{}.{:x}", r.name, now.as_nanosecond())),
            namespace: Some(event_namespace(r)),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(now)),
        action: Some(action),
        reason: Some(spec.reason.clone()),
        note: Some(truncate(&spec.message, 1024)),
        type_: Some(if spec.warning { "Warning" } else { "Normal" }.into()),
        reporting_controller: Some(REPORTING_CONTROLLER.into()),
        reporting_instance: Some(instance.to_string()),
        regarding: Some(ObjectReference {
            api_version: Some(api_version(&r.kind)),
            kind: Some(r.kind.clone()),
            name: Some(r.name.clone()),
            namespace: r.namespace.clone(),
            uid: r.uid.clone(),
            ..ObjectReference::default()
        }),
        ..Event::default()
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// Keys remembered for de-duplication.
    fn remembered(r: &EventRecorder) -> usize {
        r.recent.lock().map_or(0, |g| g.at.len())
    }

    #[test]
    fn an_event_repeats_only_after_the_window() {
        let r = EventRecorder::new("op");
        assert!(r.first_recently(EventKey::of(&["a"]), secs(1000)));
        // This call prunes; "a" is still inside the window and stays remembered.
        assert!(!r.first_recently(EventKey::of(&["a"]), secs(1000) + DEDUP_WINDOW - secs(1)));
        // Within PRUNE_EVERY of that prune "a" is still in the map, yet expired: emitted again.
        assert!(r.first_recently(EventKey::of(&["a"]), secs(1000) + DEDUP_WINDOW));
        assert!(!r.first_recently(EventKey::of(&["a"]), secs(1000) + DEDUP_WINDOW + secs(1)));
    }

    #[test]
    fn event_keys_tell_apart_parts_split_differently() {
        assert_eq!(EventKey::of(&["Job", "a"]), EventKey::of(&["Job", "a"]));
        assert_ne!(EventKey::of(&["ab", "c"]), EventKey::of(&["a", "bc"]));
        assert_ne!(EventKey::of(&["a/b"]), EventKey::of(&["a", "b"]));
    }

    #[test]
    fn expired_keys_are_forgotten_in_bulk() {
        let r = EventRecorder::new("op");
        for i in 0..5_000u64 {
            assert!(r.first_recently(
                EventKey::of(&[&format!("k{i}")]),
                secs(1000) + Duration::from_millis(i)
            ));
        }
        assert_eq!(remembered(&r), 5_000);
        // One key after the window: the next prune forgets all 5,000.
        assert!(r.first_recently(EventKey::of(&["late"]), secs(1000) + DEDUP_WINDOW + secs(6)));
        assert_eq!(remembered(&r), 1);
    }
}
