//! Traces (`NODEWRIGHT_TRACE=<path>`): the JSONL [`Record`]s of what the operator saw and decided,
//! written here and by the simulator, and read back by the simulator's replay.
//!
//! Before each pass the recorder writes the difference between this snapshot and the previous
//! one as watch records (a full relist the first time), then the pass and each effect's outcome.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use jiff::Timestamp;
use nodewright_core::Effect;
use nodewright_core::Identity;
use nodewright_core::{Plan, Snapshot};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::interpret::{Outcome, Report};

/// Current trace format version.
pub const TRACE_VERSION: u32 = 1;

/// Watch event types, upper case on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

/// How an effect ended, as a trace spells it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", content = "why", rename_all = "lowercase")]
pub enum TraceOutcome {
    /// The write happened.
    Applied,
    /// Nothing needed writing.
    Noop,
    /// A precondition failed or the object already exists.
    Dropped(String),
    /// The apiserver asked to wait (PDB).
    Waiting(String),
    /// Skipped because an earlier effect in its scope did not happen.
    Skipped,
    /// The write failed.
    Failed(String),
}

impl From<&Outcome> for TraceOutcome {
    fn from(outcome: &Outcome) -> Self {
        match outcome {
            Outcome::Applied => TraceOutcome::Applied,
            Outcome::Noop => TraceOutcome::Noop,
            Outcome::Dropped(w) => TraceOutcome::Dropped(w.clone()),
            Outcome::Waiting(w) => TraceOutcome::Waiting(w.clone()),
            Outcome::Skipped => TraceOutcome::Skipped,
            Outcome::Failed(e) => TraceOutcome::Failed(e.to_string()),
        }
    }
}

impl TraceOutcome {
    /// Short label.
    pub fn label(&self) -> &'static str {
        match self {
            TraceOutcome::Applied => "applied",
            TraceOutcome::Noop => "noop",
            TraceOutcome::Dropped(_) => "dropped",
            TraceOutcome::Waiting(_) => "waiting",
            TraceOutcome::Skipped => "skipped",
            TraceOutcome::Failed(_) => "failed",
        }
    }
}

/// One line of a trace; `O` is how objects are held (JSON here, typed in the simulator).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Record<O = Value> {
    /// First line: who recorded it and with which operator options.
    #[serde(rename_all = "camelCase")]
    Header {
        /// Format version ([`TRACE_VERSION`]).
        version: u32,
        /// `nodewright-sim` or `nodewright-operator`, with a version or scenario name.
        source: String,
        /// Operator namespace.
        namespace: String,
        /// The operator's environment (`JOB_BACKOFF_LIMIT`, ...); unset variables take defaults.
        #[serde(default)]
        options_env: BTreeMap<String, String>,
    },
    /// The cache was (re)filled from a full list: it now holds exactly these objects.
    Relist {
        /// When.
        at: Timestamp,
        /// Every object of the watched kinds.
        objects: Vec<O>,
    },
    /// One watch event applied to the cache.
    Watch {
        /// When it reached the cache.
        at: Timestamp,
        /// ADDED, MODIFIED or DELETED.
        event: EventType,
        /// The object (for DELETED, its last state).
        object: O,
    },
    /// One core pass on the cache as it stood: `now` = `at`.
    #[serde(rename_all = "camelCase")]
    Pass {
        /// The `now` handed to the core.
        at: Timestamp,
        /// Pass number since start.
        pass: u64,
        /// The plan's effects, in order.
        effects: Vec<Effect>,
        /// The plan's requeue hint in milliseconds.
        #[serde(default)]
        requeue_after_ms: Option<u64>,
        /// The plan's errors.
        #[serde(default)]
        errors: Vec<String>,
    },
    /// How one effect of a pass ended (informative; replay ignores it).
    Outcome {
        /// When.
        at: Timestamp,
        /// Pass number.
        pass: u64,
        /// Index of the effect in the pass.
        index: usize,
        /// How it ended.
        outcome: TraceOutcome,
    },
}

impl<O> Record<O> {
    /// The pass record of `plan`.
    pub fn pass(at: Timestamp, pass: u64, plan: &Plan) -> Self {
        Record::Pass {
            at,
            pass,
            effects: plan.effects.clone(),
            requeue_after_ms: plan.requeue_after.map(|d| d.as_millis() as u64),
            errors: plan.error_messages(),
        }
    }
}

/// A Kubernetes object as JSON with `apiVersion` and `kind`.
type AnyObject = Value;

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
        self.write(&Record::pass(at, self.pass, plan))?;
        Ok(self.pass)
    }

    /// Records how each effect of pass `pass` ended.
    pub fn outcomes(&mut self, pass: u64, report: &Report) -> std::io::Result<()> {
        let at = Timestamp::now();
        for (index, (_, outcome)) in report.outcomes.iter().enumerate() {
            let outcome = TraceOutcome::from(outcome);
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

fn key_of(kind: &'static str, m: &impl Identity) -> (Key, String) {
    let owned = |s: Option<&str>| s.unwrap_or_default().to_string();
    (
        (kind, owned(m.namespace()), owned(m.name())),
        owned(m.resource_version()),
    )
}

fn objects_of(s: &Snapshot) -> Vec<(Key, String, AnyObject)> {
    let mut out = Vec::new();
    macro_rules! add {
        ($list:expr, $kind:literal) => {
            for o in $list.iter().map(|o| &**o) {
                let (k, rv) = key_of($kind, &o.metadata);
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
