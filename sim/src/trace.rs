//! The trace format: JSONL records of what the operator saw (watch events, relists) and what
//! the core decided (passes with their effects), plus how each effect ended. The simulator
//! writes it; the shell writes the same shape with `NODEWRIGHT_TRACE`; `replay` re-runs the core
//! on the rebuilt snapshots and reports every effect that differs.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use jiff::Timestamp;
use nodewright_core::{Effect, Options, Plan, Snapshot};
use serde::{Deserialize, Serialize};

use crate::interpreter::Outcome;
use crate::objects::{AnyObject, Objects};
use crate::store::EventType;

/// Current trace format version.
pub const TRACE_VERSION: u32 = 1;

/// One line of a trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Record {
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
        objects: Vec<AnyObject>,
    },
    /// One watch event applied to the cache.
    Watch {
        /// When it reached the cache.
        at: Timestamp,
        /// ADDED, MODIFIED or DELETED.
        event: EventType,
        /// The object (for DELETED, its last state).
        object: AnyObject,
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
        outcome: Outcome,
    },
}

/// Writes records as JSON lines.
pub fn write_jsonl(records: &[Record], out: &mut impl Write) -> std::io::Result<()> {
    for r in records {
        serde_json::to_writer(&mut *out, r)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Reads JSON lines; blank lines are skipped.
pub fn read_jsonl(input: impl BufRead) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let line = line.map_err(|e| e.to_string())?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(serde_json::from_str(&line).map_err(|e| format!("line {}: {e}", i + 1))?);
    }
    Ok(out)
}

/// Applies a watch event to a cache.
pub fn apply_watch(cache: &mut Objects, event: EventType, object: &AnyObject) {
    match event {
        EventType::Deleted => cache.remove(object),
        _ => cache.put(object.clone()),
    }
}

/// How a replayed effect differs from the recorded one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    /// Pass number.
    pub pass: u64,
    /// When.
    pub at: Timestamp,
    /// Index in the effect list.
    pub index: usize,
    /// Recorded effect (absent: the replay has an extra one).
    pub recorded: Option<serde_json::Value>,
    /// Replayed effect (absent: the replay lacks it).
    pub replayed: Option<serde_json::Value>,
}

/// Result of a replay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    /// Passes re-run.
    pub passes: u64,
    /// Effects compared.
    pub effects: u64,
    /// Every differing effect.
    pub divergences: Vec<Divergence>,
}

/// A reconcile function (the real core, or a modified one in tests).
pub type Reconcile<'a> = &'a dyn Fn(&Snapshot, &Options, Timestamp) -> Plan;

/// Rebuilds the cache from the trace and re-runs `reconcile` at every recorded pass.
/// `options` overrides the header's options when given.
pub fn replay(
    records: &[Record],
    options: Option<&Options>,
    reconcile: Reconcile<'_>,
) -> Result<ReplayReport, String> {
    let mut cache = Objects::default();
    let mut namespace = "nodewright".to_string();
    let mut opts = options.cloned();
    let mut report = ReplayReport::default();
    for record in records {
        match record {
            Record::Header {
                namespace: ns,
                options_env,
                ..
            } => {
                namespace = ns.clone();
                if opts.is_none() {
                    opts = Some(Options::from_env(options_env).map_err(|e| e.to_string())?);
                }
            }
            Record::Relist { objects, .. } => {
                cache = Objects::default();
                for o in objects {
                    cache.put(o.clone());
                }
            }
            Record::Watch { event, object, .. } => apply_watch(&mut cache, *event, object),
            Record::Pass {
                at, pass, effects, ..
            } => {
                let options = opts.get_or_insert_with(Options::default);
                let snapshot = crate::snapshot::snapshot_from(&cache, &namespace);
                let plan = reconcile(&snapshot, options, *at);
                report.passes += 1;
                compare(*pass, *at, effects, &plan.effects, &mut report);
            }
            Record::Outcome { .. } => {}
        }
    }
    Ok(report)
}

fn compare(
    pass: u64,
    at: Timestamp,
    recorded: &[Effect],
    replayed: &[Effect],
    report: &mut ReplayReport,
) {
    let a: Vec<serde_json::Value> = recorded
        .iter()
        .map(|e| serde_json::to_value(e).unwrap_or_default())
        .collect();
    let b: Vec<serde_json::Value> = replayed
        .iter()
        .map(|e| serde_json::to_value(e).unwrap_or_default())
        .collect();
    report.effects += a.len().max(b.len()) as u64;
    if a == b {
        return;
    }
    // Longest common subsequence, so one inserted or removed effect is one divergence.
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut push =
        |index: usize, recorded: Option<serde_json::Value>, replayed: Option<serde_json::Value>| {
            if let Some(last) = report.divergences.last_mut()
                && last.pass == pass
                && last.index == index
            {
                if last.replayed.is_none() && recorded.is_none() {
                    last.replayed = replayed;
                    return;
                }
                if last.recorded.is_none() && replayed.is_none() {
                    last.recorded = recorded;
                    return;
                }
            }
            report.divergences.push(Divergence {
                pass,
                at,
                index,
                recorded,
                replayed,
            });
        };
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            push(i, None, Some(b[j].clone()));
            j += 1;
        } else {
            push(i, Some(a[i].clone()), None);
            i += 1;
        }
    }
}
