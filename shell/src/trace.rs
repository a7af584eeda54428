//! Trace recording (`NODEWRIGHT_TRACE=<path>`): the JSONL format of `nodewright_sim::trace`, so
//! the simulator can replay what this operator saw and decided.
//!
//! Before each pass the recorder writes the difference between this snapshot and the previous
//! one as watch records (a full relist the first time), then the pass and each effect's outcome.
//! The record shapes are mirrored here (the operator binary does not link the simulator); a test
//! reads the output back with the simulator's own reader and replays it.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use jiff::Timestamp;
use kube::Resource;
use nodewright_core::Effect;
use nodewright_core::{Plan, Snapshot};
use serde::Serialize;
use serde_json::Value;

use crate::interpret::{Outcome, Report};

/// Trace format version (`nodewright_sim::trace::TRACE_VERSION`).
pub const TRACE_VERSION: u32 = 1;

/// A Kubernetes object as JSON with `apiVersion` and `kind`.
type AnyObject = Value;

/// Watch event types, upper case on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
enum EventType {
    Added,
    Modified,
    Deleted,
}

/// How an effect ended, as the simulator spells it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", content = "why", rename_all = "lowercase")]
enum TraceOutcome {
    Applied,
    Noop,
    Dropped(String),
    Waiting(String),
    Skipped,
    Failed(String),
}

/// One line of a trace (mirror of `nodewright_sim::trace::Record`).
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum Record {
    #[serde(rename_all = "camelCase")]
    Header {
        version: u32,
        source: String,
        namespace: String,
        options_env: BTreeMap<String, String>,
    },
    Relist {
        at: Timestamp,
        objects: Vec<AnyObject>,
    },
    Watch {
        at: Timestamp,
        event: EventType,
        object: AnyObject,
    },
    #[serde(rename_all = "camelCase")]
    Pass {
        at: Timestamp,
        pass: u64,
        effects: Vec<Effect>,
        requeue_after_ms: Option<u64>,
        errors: Vec<String>,
    },
    Outcome {
        at: Timestamp,
        pass: u64,
        index: usize,
        outcome: TraceOutcome,
    },
}

/// Environment variables the operator options are read from (recorded in the header).
pub const OPTION_VARIABLES: &[&str] = &[
    "NAMESPACE",
    "DEFAULT_INTERVAL",
    "IMAGE_PULL_SECRET",
    "COPY_DIR_ROOT",
    "AGENT_LOG_ROOT",
    "REAPPLY_ON_REBOOT",
    "RUNTIME_REQUIRED_TAINT",
    "AGENT_IMAGE",
    "PAUSE_IMAGE",
    "JOB_TTL_SUCCEEDED",
    "JOB_TTL_FAILED",
    "JOB_STAGE_TIMEOUT",
    "JOB_BACKOFF_LIMIT",
    "JOB_IMAGE_PULL_GRACE",
    "PACKAGE_PRIORITY_CLASS_NAME",
    "PUBLISH_LEGACY_METRICS",
    "LEADER_ELECTION",
    "ENABLE_WEBHOOKS",
    "WEBHOOK_SECRET_NAME",
    "WEBHOOK_SERVICE_NAME",
    "METRICS_PORT",
    "PROBE_PORT",
    "LOG_ENCODER",
    "LOG_LEVEL",
];

type Key = (&'static str, String, String);

/// Default size cap of one trace file (`NODEWRIGHT_TRACE_MAX_BYTES`).
pub const DEFAULT_TRACE_MAX_BYTES: u64 = 1 << 30;

/// Writes a trace file.
pub struct TraceRecorder {
    out: Box<dyn Write + Send>,
    seen: Option<HashMap<Key, String>>,
    pass: u64,
    header: Record,
    rotation: Option<Rotation>,
}

/// Size cap of a trace file: past `max_bytes` the file moves to `<path>.1` (replacing an older
/// one) and a new file starts with the header and a full relist, so each file replays alone.
struct Rotation {
    path: std::path::PathBuf,
    max_bytes: u64,
    written: Arc<AtomicU64>,
}

/// A writer that counts the bytes it passes on.
struct Counting<W> {
    inner: W,
    written: Arc<AtomicU64>,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn open_counting(path: &Path, written: &Arc<AtomicU64>) -> std::io::Result<Box<dyn Write + Send>> {
    written.store(0, Ordering::Relaxed);
    let file = File::create(path)?;
    Ok(Box::new(Counting {
        inner: BufWriter::new(file),
        written: written.clone(),
    }))
}

impl TraceRecorder {
    /// Creates `path` and writes the header; past `max_bytes` the file is rotated (see
    /// [`DEFAULT_TRACE_MAX_BYTES`]).
    pub fn create(
        path: &Path,
        namespace: &str,
        env: &BTreeMap<String, String>,
        max_bytes: u64,
    ) -> std::io::Result<Self> {
        let written = Arc::new(AtomicU64::new(0));
        let out = open_counting(path, &written)?;
        let mut r = Self::new(out, namespace, env)?;
        r.rotation = Some(Rotation {
            path: path.to_path_buf(),
            max_bytes,
            written,
        });
        Ok(r)
    }

    /// At a pass boundary: when the file is over its cap, move it to `<path>.1` and start anew
    /// with the header; the next pass then writes a full relist.
    fn rotate_if_full(&mut self) -> std::io::Result<()> {
        let Some(rot) = &self.rotation else {
            return Ok(());
        };
        if rot.written.load(Ordering::Relaxed) < rot.max_bytes {
            return Ok(());
        }
        self.out.flush()?;
        let mut old = rot.path.clone().into_os_string();
        old.push(".1");
        std::fs::rename(&rot.path, &old)?;
        self.out = open_counting(&rot.path, &rot.written)?;
        self.seen = None;
        let header = self.header.clone();
        self.write(&header)
    }

    /// A recorder writing to `out`.
    pub fn new(
        out: Box<dyn Write + Send>,
        namespace: &str,
        env: &BTreeMap<String, String>,
    ) -> std::io::Result<Self> {
        let options_env = env
            .iter()
            .filter(|(k, _)| OPTION_VARIABLES.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let header = Record::Header {
            version: TRACE_VERSION,
            source: format!("nodewright-operator {}", env!("CARGO_PKG_VERSION")),
            namespace: namespace.to_string(),
            options_env,
        };
        let mut r = TraceRecorder {
            out,
            seen: None,
            pass: 0,
            header: header.clone(),
            rotation: None,
        };
        r.write(&header)?;
        Ok(r)
    }

    fn write(&mut self, record: &Record) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, record)?;
        self.out.write_all(b"\n")
    }

    /// Records the snapshot (as a difference) and the plan of one pass; returns its number.
    pub fn pass(
        &mut self,
        at: Timestamp,
        snapshot: &Snapshot,
        plan: &Plan,
    ) -> std::io::Result<u64> {
        self.rotate_if_full()?;
        let objects = objects_of(snapshot);
        let current: HashMap<Key, String> = objects
            .iter()
            .map(|(k, rv, _)| (k.clone(), rv.clone()))
            .collect();
        match self.seen.take() {
            None => {
                let all = objects.iter().map(|(_, _, o)| o.clone()).collect();
                self.write(&Record::Relist { at, objects: all })?;
            }
            Some(previous) => {
                for (key, rv, object) in &objects {
                    let event = match previous.get(key) {
                        None => EventType::Added,
                        Some(old) if old != rv => EventType::Modified,
                        Some(_) => continue,
                    };
                    self.write(&Record::Watch {
                        at,
                        event,
                        object: object.clone(),
                    })?;
                }
                for key in previous.keys().filter(|k| !current.contains_key(*k)) {
                    if let Some(object) = tombstone(key) {
                        self.write(&Record::Watch {
                            at,
                            event: EventType::Deleted,
                            object,
                        })?;
                    }
                }
            }
        }
        self.seen = Some(current);
        self.pass += 1;
        self.write(&Record::Pass {
            at,
            pass: self.pass,
            effects: plan.effects.clone(),
            requeue_after_ms: plan.requeue_after.map(|d| d.as_millis() as u64),
            errors: plan.error_messages(),
        })?;
        Ok(self.pass)
    }

    /// Records how each effect of pass `pass` ended.
    pub fn outcomes(&mut self, pass: u64, report: &Report) -> std::io::Result<()> {
        let at = Timestamp::now();
        for (index, (_, outcome)) in report.outcomes.iter().enumerate() {
            let outcome = to_trace(outcome);
            self.write(&Record::Outcome {
                at,
                pass,
                index,
                outcome,
            })?;
        }
        self.out.flush()
    }
}

fn to_trace(outcome: &Outcome) -> TraceOutcome {
    match outcome {
        Outcome::Applied => TraceOutcome::Applied,
        Outcome::Noop => TraceOutcome::Noop,
        Outcome::Dropped(w) => TraceOutcome::Dropped(w.clone()),
        Outcome::Waiting(w) => TraceOutcome::Waiting(w.clone()),
        Outcome::Skipped => TraceOutcome::Skipped,
        Outcome::Failed(e) => TraceOutcome::Failed(e.to_string()),
    }
}

fn key_of<K: Resource>(kind: &'static str, o: &K) -> (Key, String) {
    let m = o.meta();
    (
        (
            kind,
            m.namespace.clone().unwrap_or_default(),
            m.name.clone().unwrap_or_default(),
        ),
        m.resource_version.clone().unwrap_or_default(),
    )
}

fn objects_of(s: &Snapshot) -> Vec<(Key, String, AnyObject)> {
    let mut out = Vec::new();
    macro_rules! add {
        ($list:expr, $kind:literal) => {
            for o in &$list {
                let (k, rv) = key_of($kind, o);
                let json = to_json(&k, o);
                out.push((k, rv, json));
            }
        };
    }
    add!(s.nodes, "Node");
    add!(s.nodewrights, "NodeWright");
    add!(s.policies, "DeploymentPolicy");
    add!(s.jobs, "Job");
    add!(s.executor_pods, "Pod");
    add!(s.workload_pods, "Pod");
    add!(s.config_maps, "ConfigMap");
    add!(s.pod_disruption_budgets, "PodDisruptionBudget");
    out
}

fn api_version_kind(kind: &str) -> (&'static str, &'static str) {
    match kind {
        "Node" => ("v1", "Node"),
        "NodeWright" => ("nodewright.nvidia.com/v1alpha1", "NodeWright"),
        "DeploymentPolicy" => ("nodewright.nvidia.com/v1alpha1", "DeploymentPolicy"),
        "Job" => ("batch/v1", "Job"),
        "Pod" => ("v1", "Pod"),
        "ConfigMap" => ("v1", "ConfigMap"),
        _ => ("policy/v1", "PodDisruptionBudget"),
    }
}

/// The object as JSON with `apiVersion` and `kind` filled in.
fn to_json<K: Serialize>(key: &Key, object: &K) -> AnyObject {
    let mut value = serde_json::to_value(object).unwrap_or(Value::Null);
    let (api_version, kind) = api_version_kind(key.0);
    if let Some(map) = value.as_object_mut() {
        map.entry("apiVersion").or_insert(api_version.into());
        map.entry("kind").or_insert(kind.into());
    }
    value
}

/// A minimal object carrying only the identity of a deleted one.
fn spec_json<S: Default + Serialize>() -> Value {
    serde_json::to_value(S::default()).unwrap_or_else(|_| serde_json::json!({}))
}

fn tombstone(key: &Key) -> Option<AnyObject> {
    let (kind, namespace, name) = key;
    let mut meta = serde_json::json!({"name": name});
    if !namespace.is_empty() {
        meta["namespace"] = serde_json::json!(namespace);
    }
    let (api_version, kind) = api_version_kind(kind);
    let mut value = serde_json::json!({"apiVersion": api_version, "kind": kind, "metadata": meta});
    // A spec the simulator's typed reader accepts; only the key matters for a deletion.
    match kind {
        "NodeWright" => value["spec"] = spec_json::<nodewright_crds::nodewright::NodeWrightSpec>(),
        "DeploymentPolicy" => {
            value["spec"] = spec_json::<nodewright_crds::policy::DeploymentPolicySpec>()
        }
        _ => {}
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn node(name: &str, rv: &str) -> k8s_openapi::api::core::v1::Node {
        serde_json::from_value(
            serde_json::json!({"metadata": {"name": name, "resourceVersion": rv}}),
        )
        .unwrap_or_default()
    }

    #[test]
    fn trace_records_relist_then_differences_and_replays() {
        let buf = Buf::default();
        let env = BTreeMap::from([
            ("JOB_BACKOFF_LIMIT".to_string(), "2".to_string()),
            ("HOME".to_string(), "/x".to_string()),
        ]);
        let mut rec =
            TraceRecorder::new(Box::new(buf.clone()), "nodewright", &env).expect("header");
        let at = Timestamp::UNIX_EPOCH;
        let s1 = Snapshot {
            nodes: vec![node("a", "1"), node("b", "1")],
            ..Snapshot::default()
        };
        let s2 = Snapshot {
            nodes: vec![node("a", "2")],
            ..Snapshot::default()
        };
        rec.pass(at, &s1, &Plan::default()).expect("pass 1");
        rec.pass(at, &s2, &Plan::default()).expect("pass 2");
        rec.outcomes(2, &Report::default()).expect("outcomes");
        let bytes = buf.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        use nodewright_sim::store::EventType;
        use nodewright_sim::trace::Record;
        let records =
            nodewright_sim::trace::read_jsonl(&bytes[..]).expect("the simulator reads it");
        let kinds: Vec<&str> = records
            .iter()
            .map(|r| match r {
                Record::Header { .. } => "header",
                Record::Relist { .. } => "relist",
                Record::Watch {
                    event: EventType::Modified,
                    ..
                } => "modified",
                Record::Watch {
                    event: EventType::Deleted,
                    ..
                } => "deleted",
                Record::Watch { .. } => "added",
                Record::Pass { .. } => "pass",
                Record::Outcome { .. } => "outcome",
            })
            .collect();
        assert_eq!(
            kinds,
            ["header", "relist", "pass", "modified", "deleted", "pass"]
        );
        if let Record::Header { options_env, .. } = &records[0] {
            assert_eq!(options_env.len(), 1, "only option variables are recorded");
        }
        let report = nodewright_sim::trace::replay(&records, None, &nodewright_core::reconcile)
            .expect("replays");
        assert_eq!(report.passes, 2);
    }

    #[test]
    fn a_full_trace_rotates_and_each_file_replays_alone() {
        let dir = std::env::temp_dir().join(format!("nw-trace-rotate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("trace.jsonl");
        let mut rec =
            TraceRecorder::create(&path, "nodewright", &BTreeMap::new(), 1).expect("create");
        let at = Timestamp::UNIX_EPOCH;
        let s1 = Snapshot {
            nodes: vec![node("a", "1")],
            ..Snapshot::default()
        };
        rec.pass(at, &s1, &Plan::default()).expect("pass 1");
        rec.outcomes(1, &Report::default()).expect("flush");
        rec.pass(at, &s1, &Plan::default())
            .expect("pass 2 rotates first");
        rec.outcomes(2, &Report::default()).expect("flush");
        for file in [path.clone(), dir.join("trace.jsonl.1")] {
            let text = std::fs::read_to_string(&file).expect("both files exist");
            let records = nodewright_sim::trace::read_jsonl(text.as_bytes()).expect("reads");
            assert!(matches!(
                records[0],
                nodewright_sim::trace::Record::Header { .. }
            ));
            assert!(
                matches!(records[1], nodewright_sim::trace::Record::Relist { .. }),
                "{file:?}"
            );
            let report = nodewright_sim::trace::replay(&records, None, &nodewright_core::reconcile)
                .expect("replays alone");
            assert_eq!(report.passes, 1);
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn deletion_tombstones_of_both_kinds_read_back_in_the_simulator() {
        for kind in ["NodeWright", "DeploymentPolicy"] {
            let object = tombstone(&(kind, String::new(), "gone".to_string())).expect("tombstone");
            let line = serde_json::json!({"type": "watch", "at": "2026-01-01T00:00:00Z", "event": "DELETED", "object": object});
            let records = nodewright_sim::trace::read_jsonl(line.to_string().as_bytes());
            assert!(records.is_ok(), "{kind}: {records:?}");
        }
    }
}
