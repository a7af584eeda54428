//! The operator's trace recorder (shell/src/trace.rs) read back and replayed by the simulator.

use std::collections::BTreeMap;
use std::io::Write;

use jiff::Timestamp;
use nodewright_core::{Plan, Snapshot};
use nodewright_shell::interpret::Report;
use nodewright_shell::trace::{EventType, TraceRecorder};
use nodewright_sim::trace::Record;

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
    serde_json::from_value(serde_json::json!({"metadata": {"name": name, "resourceVersion": rv}}))
        .unwrap_or_default()
}

#[test]
fn trace_records_relist_then_differences_and_replays() {
    let buf = Buf::default();
    let env = BTreeMap::from([
        ("JOB_BACKOFF_LIMIT".to_string(), "2".to_string()),
        ("HOME".to_string(), "/x".to_string()),
    ]);
    let mut rec = TraceRecorder::new(Box::new(buf.clone()), "nodewright", &env).expect("header");
    let at = Timestamp::UNIX_EPOCH;
    let s1 = Snapshot {
        nodes: nodewright_core::shared([node("a", "1"), node("b", "1")]),
        ..Snapshot::default()
    };
    let s2 = Snapshot {
        nodes: nodewright_core::shared([node("a", "2")]),
        ..Snapshot::default()
    };
    rec.pass(at, &s1, &Plan::default()).expect("pass 1");
    rec.pass(at, &s2, &Plan::default()).expect("pass 2");
    rec.outcomes(2, &Report::default()).expect("outcomes");
    let bytes = buf.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let records = nodewright_sim::trace::read_jsonl(&bytes[..]).expect("the simulator reads it");
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
    let mut rec = TraceRecorder::create(&path, "nodewright", &BTreeMap::new(), 1).expect("create");
    let at = Timestamp::UNIX_EPOCH;
    let s1 = Snapshot {
        nodes: nodewright_core::shared([node("a", "1")]),
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
    let buf = Buf::default();
    let mut rec =
        TraceRecorder::new(Box::new(buf.clone()), "nodewright", &BTreeMap::new()).expect("header");
    let meta = |name: &str| {
        serde_json::from_value(serde_json::json!({"name": name, "resourceVersion": "1"}))
            .unwrap_or_default()
    };
    let full = Snapshot {
        nodewrights: nodewright_core::shared([nodewright_crds::NodeWright {
            metadata: meta("gone"),
            ..Default::default()
        }]),
        policies: nodewright_core::shared([nodewright_crds::DeploymentPolicy {
            metadata: meta("gone"),
            ..Default::default()
        }]),
        ..Snapshot::default()
    };
    let at = Timestamp::UNIX_EPOCH;
    rec.pass(at, &full, &Plan::default()).expect("pass 1");
    rec.pass(at, &Snapshot::default(), &Plan::default())
        .expect("pass 2");
    rec.outcomes(2, &Report::default()).expect("flush");
    let bytes = buf.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let records = nodewright_sim::trace::read_jsonl(&bytes[..]).expect("the simulator reads it");
    let deleted = records
        .iter()
        .filter(|r| {
            matches!(
                r,
                Record::Watch {
                    event: EventType::Deleted,
                    ..
                }
            )
        })
        .count();
    assert_eq!(deleted, 2, "one tombstone per kind reads back");
}
