//! D28: the pod cache drops the executor pods the core reports settled (their Job is `Complete`
//! and its outcome recorded), so finished executors do not hold memory for the Job's TTL.
//!
//! The reflector's writer stays with the watch task, which applies both the watch events and
//! these drops, in arrival order. A pod is dropped only while the store still holds the version
//! the pass saw; a later event for it (or a relist) puts it back until the next pass reports it.

use futures::{Stream, StreamExt};
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{Lookup, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use nodewright_core::jobs::SettledPod;
use tokio::sync::mpsc;
use tracing::{debug, warn};

/// The sending side: hands a pass's settled pods to the pod cache's watch task.
#[derive(Clone, Debug, Default)]
pub struct PodForgetter(Option<mpsc::UnboundedSender<Vec<SettledPod>>>);

/// The watch task's side of a [`PodForgetter`].
pub type Forgotten = mpsc::UnboundedReceiver<Vec<SettledPod>>;

impl PodForgetter {
    /// A connected pair: the forgetter and the receiver its cache's watch task reads.
    pub fn channel() -> (Self, Forgotten) {
        let (tx, rx) = mpsc::unbounded_channel();
        (PodForgetter(Some(tx)), rx)
    }

    /// Asks the pod cache to drop `pods` (those still unchanged); a no-op when empty or when the
    /// cache's task has ended.
    pub fn forget(&self, pods: Vec<SettledPod>) {
        if let (false, Some(tx)) = (pods.is_empty(), &self.0) {
            let _ = tx.send(pods);
        }
    }
}

/// Drives a watch stream into `writer`, and, when `forgotten` is given, drops the pods it
/// receives from the store; `on_event` sees every watch event after the store applied it.
pub async fn drive_store<C, St>(
    stream: St,
    mut writer: Writer<C>,
    mut forgotten: Option<Forgotten>,
    mut on_event: impl FnMut(&Event<C>),
) where
    C: Lookup<DynamicType = ()> + Clone,
    St: Stream<Item = Result<Event<C>, watcher::Error>>,
{
    let reader = writer.as_reader();
    let mut stream = std::pin::pin!(stream);
    loop {
        let next_drop = async {
            match forgotten.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            item = stream.next() => match item {
                None => break,
                Some(Ok(event)) => {
                    writer.apply_watcher_event(&event);
                    on_event(&event);
                }
                Some(Err(e)) => warn!(error = %e, "watch error (retrying with backoff)"),
            },
            Some(pods) = next_drop => {
                let dropped = drop_unchanged(&reader, &mut writer, &pods);
                debug!(reported = pods.len(), dropped, "settled executor pods dropped from the cache (D28)");
            }
        }
    }
}

/// Drops from the store each of `pods` that it holds unchanged; returns how many it dropped.
fn drop_unchanged<C>(reader: &Store<C>, writer: &mut Writer<C>, pods: &[SettledPod]) -> usize
where
    C: Lookup<DynamicType = ()> + Clone,
{
    let mut dropped = 0;
    for pod in pods {
        let key = ObjectRef::<C>::new(&pod.name).within(&pod.namespace);
        if let Some(held) = reader.get(&key)
            && pod.is_version(held.uid().as_deref(), held.resource_version().as_deref())
        {
            writer.apply_watcher_event(&Event::Delete((*held).clone()));
            dropped += 1;
        }
    }
    dropped
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::stream;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::runtime::reflector;

    use super::*;

    fn pod(name: &str, rv: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("nodewright".into()),
                uid: Some(format!("uid-{name}")),
                resource_version: Some(rv.into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    fn settled(name: &str, rv: &str) -> SettledPod {
        SettledPod {
            namespace: "nodewright".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            resource_version: rv.into(),
        }
    }

    async fn until(what: &str, check: impl Fn() -> bool) {
        for _ in 0..200 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("timed out waiting until {what}");
    }

    #[tokio::test]
    async fn d28_the_pod_cache_drops_the_settled_pods_it_holds_unchanged() {
        let (reader, writer) = reflector::store::<Pod>();
        let (forgetter, forgotten) = PodForgetter::channel();
        let events =
            [pod("done", "5"), pod("changed", "7"), pod("other", "1")].map(|p| Ok(Event::Apply(p)));
        let events = stream::iter(events).chain(stream::pending());
        let task = tokio::spawn(drive_store(events, writer, Some(forgotten), |_| {}));
        until("the three pods are cached", || reader.len() == 3).await;
        forgetter.forget(Vec::new());
        forgetter.forget(vec![
            settled("done", "5"),
            settled("changed", "6"), // the store holds a newer version: kept
            settled("absent", "1"),
        ]);
        until("the settled pod is dropped", || reader.len() == 2).await;
        let names: Vec<String> = reader
            .state()
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        assert!(!names.contains(&"done".to_string()));
        assert!(names.contains(&"changed".to_string()) && names.contains(&"other".to_string()));
        task.abort();
    }

    #[tokio::test]
    async fn d28_a_dropped_pod_comes_back_with_its_next_event() {
        let (reader, writer) = reflector::store::<Pod>();
        let (forgetter, forgotten) = PodForgetter::channel();
        let (tx, rx) = mpsc::unbounded_channel();
        let events = tokio_stream_of(rx);
        let task = tokio::spawn(drive_store(events, writer, Some(forgotten), |_| {}));
        tx.send(Ok(Event::Apply(pod("done", "5")))).unwrap();
        until("the pod is cached", || reader.len() == 1).await;
        forgetter.forget(vec![settled("done", "5")]);
        until("the pod is dropped", || reader.is_empty()).await;
        tx.send(Ok(Event::Apply(pod("done", "6")))).unwrap();
        until("the pod is back", || reader.len() == 1).await;
        task.abort();
    }

    fn tokio_stream_of<T>(mut rx: mpsc::UnboundedReceiver<T>) -> impl Stream<Item = T> {
        stream::poll_fn(move |cx| rx.poll_recv(cx))
    }
}
