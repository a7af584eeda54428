//! The trace format: JSONL records of what the operator saw (watch events, relists) and what
//! the core decided (passes with their effects), plus how each effect ended. The simulator
//! writes it; the shell writes the same shape with `NODEWRIGHT_TRACE`; `replay` re-runs the core
//! on the rebuilt snapshots and reports every effect that differs.

use std::io::{BufRead, Write};

use jiff::Timestamp;
use nodewright_core::{Effect, Options, Plan, Snapshot};
use serde::{Deserialize, Serialize};

use crate::objects::{AnyObject, Objects};
use crate::store::EventType;

pub use nodewright_shell::trace::{TRACE_VERSION, TraceOutcome};

/// One line of a trace (the shell's record, with typed objects).
pub type Record = nodewright_shell::trace::Record<AnyObject>;

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
    /// One line per replayed pass, to attribute passes to time windows (e.g. one test each).
    #[serde(default)]
    pub pass_log: Vec<PassSummary>,
    /// The trace's last line was cut short (the recorder was killed while writing it).
    #[serde(default)]
    pub truncated: bool,
}

/// What one replayed pass compared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PassSummary {
    /// Pass number.
    pub pass: u64,
    /// The pass's `now`.
    pub at: Timestamp,
    /// Effects compared in this pass.
    pub effects: u64,
    /// Differing effects in this pass.
    pub differ: u64,
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
    let mut replayer = Replayer::new(options, reconcile);
    for record in records {
        replayer.feed(record)?;
    }
    Ok(replayer.finish())
}

/// Replays a JSONL trace line by line without holding it in memory. A last line cut short (the
/// operator was killed while writing it) is reported in [`ReplayReport::truncated`], not an error.
pub fn replay_reader(
    input: impl BufRead,
    options: Option<&Options>,
    reconcile: Reconcile<'_>,
) -> Result<ReplayReport, String> {
    let mut replayer = Replayer::new(options, reconcile);
    let mut pending: Option<String> = None;
    for (i, line) in input.lines().enumerate() {
        let line = line.map_err(|e| e.to_string())?;
        if line.trim().is_empty() {
            continue;
        }
        if let Some(e) = pending.take() {
            return Err(e);
        }
        match serde_json::from_str::<Record>(&line) {
            Ok(record) => replayer.feed(&record)?,
            Err(e) => pending = Some(format!("line {}: {e}", i + 1)),
        }
    }
    let mut report = replayer.finish();
    report.truncated = pending.is_some();
    Ok(report)
}

/// Replay state: the cache rebuilt so far, the options and the report.
pub struct Replayer<'a> {
    cache: Objects,
    namespace: String,
    opts: Option<Options>,
    reconcile: Reconcile<'a>,
    report: ReplayReport,
}

impl<'a> Replayer<'a> {
    /// A replayer with `options` overriding the trace header's, when given.
    pub fn new(options: Option<&Options>, reconcile: Reconcile<'a>) -> Self {
        Self {
            cache: Objects::default(),
            namespace: "nodewright".to_string(),
            opts: options.cloned(),
            reconcile,
            report: ReplayReport::default(),
        }
    }

    /// Applies one record: cache records update the cache, a pass is re-run and compared.
    pub fn feed(&mut self, record: &Record) -> Result<(), String> {
        match record {
            Record::Header {
                namespace: ns,
                options_env,
                ..
            } => {
                self.namespace = ns.clone();
                if self.opts.is_none() {
                    self.opts = Some(Options::from_env(options_env).map_err(|e| e.to_string())?);
                }
            }
            Record::Relist { objects, .. } => {
                self.cache = Objects::default();
                for o in objects {
                    self.cache.put(o.clone());
                }
            }
            Record::Watch { event, object, .. } => apply_watch(&mut self.cache, *event, object),
            Record::Pass {
                at, pass, effects, ..
            } => {
                let options = self.opts.get_or_insert_with(Options::default);
                let snapshot = crate::snapshot::snapshot_from(&self.cache, &self.namespace);
                let plan = (self.reconcile)(&snapshot, options, *at);
                let (effects_before, differ_before) =
                    (self.report.effects, self.report.divergences.len());
                self.report.passes += 1;
                compare(*pass, *at, effects, &plan.effects, &mut self.report);
                self.report.pass_log.push(PassSummary {
                    pass: *pass,
                    at: *at,
                    effects: self.report.effects - effects_before,
                    differ: (self.report.divergences.len() - differ_before) as u64,
                });
            }
            Record::Outcome { .. } => {}
        }
        Ok(())
    }

    /// The report of everything fed so far.
    pub fn finish(self) -> ReplayReport {
        self.report
    }
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
