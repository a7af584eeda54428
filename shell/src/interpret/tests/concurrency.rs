//! Plan scheduling under concurrency: a port over the in-memory apiserver that answers each
//! request after a delay chosen per object, so requests on different nodes complete out of
//! order. Time is paused (tokio), so the runs are deterministic.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

/// The in-memory apiserver, slowed down per object name; records requests as they complete.
struct SlowPort {
    inner: MemoryPort,
    delay_ms: fn(&str) -> u64,
    log: RefCell<Vec<String>>,
    in_flight: Cell<usize>,
    most_in_flight: Cell<usize>,
}

impl SlowPort {
    fn new(snapshot: Snapshot, delay_ms: fn(&str) -> u64) -> Self {
        SlowPort {
            inner: MemoryPort::new(snapshot, jiff::Timestamp::UNIX_EPOCH),
            delay_ms,
            log: RefCell::default(),
            in_flight: Cell::new(0),
            most_in_flight: Cell::new(0),
        }
    }

    /// Waits the object's delay, then lets `call` reach the in-memory apiserver.
    async fn slow<T>(&self, what: String, object: &str, call: impl Future<Output = T>) -> T {
        self.in_flight.set(self.in_flight.get() + 1);
        self.most_in_flight
            .set(self.most_in_flight.get().max(self.in_flight.get()));
        tokio::time::sleep(Duration::from_millis((self.delay_ms)(object))).await;
        let out = call.await;
        self.log.borrow_mut().push(what);
        self.in_flight.set(self.in_flight.get() - 1);
        out
    }

    /// Position of the first logged request starting with `prefix`.
    fn at(&self, prefix: &str) -> usize {
        let log = self.log.borrow();
        log.iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix} not sent: {log:?}"))
    }

    fn sent(&self, prefix: &str) -> bool {
        self.log.borrow().iter().any(|l| l.starts_with(prefix))
    }
}

impl ClusterPort for SlowPort {
    async fn get_node(&self, name: &str, cached: bool) -> ApiResult<Option<Node>> {
        let call = self.inner.get_node(name, cached);
        self.slow(format!("get node {name}"), name, call).await
    }
    async fn patch_node(&self, name: &str, body: &Value) -> ApiResult<()> {
        let call = self.inner.patch_node(name, body);
        self.slow(format!("patch node {name}"), name, call).await
    }
    async fn patch_node_status(&self, name: &str, body: &Value) -> ApiResult<()> {
        let call = self.inner.patch_node_status(name, body);
        self.slow(format!("conditions {name}"), name, call).await
    }
    async fn get_job(&self, name: &str) -> ApiResult<Option<Job>> {
        self.inner.get_job(name).await
    }
    async fn list_jobs(&self, selector: &str) -> ApiResult<Vec<Job>> {
        self.inner.list_jobs(selector).await
    }
    async fn create_job(&self, job: &Job) -> ApiResult<Job> {
        let name = job.metadata.name.clone().unwrap_or_default();
        let call = self.inner.create_job(job);
        self.slow(format!("create job {name}"), &name, call).await
    }
    async fn patch_job(&self, name: &str, body: &Value) -> ApiResult<()> {
        let call = self.inner.patch_job(name, body);
        self.slow(format!("patch job {name}"), name, call).await
    }
    async fn delete_job(&self, name: &str, uid: &str) -> ApiResult<()> {
        self.inner.delete_job(name, uid).await
    }
    async fn list_pods(&self, namespace: &str, selector: &str) -> ApiResult<Vec<Pod>> {
        self.inner.list_pods(namespace, selector).await
    }
    async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> ApiResult<()> {
        self.inner.delete_pod(namespace, name, uid).await
    }
    async fn evict_pod(&self, eviction: &Eviction) -> ApiResult<()> {
        self.inner.evict_pod(eviction).await
    }
    async fn get_nodewright(&self, name: &str) -> ApiResult<Option<NodeWright>> {
        self.inner.get_nodewright(name).await
    }
    async fn patch_nodewright(&self, name: &str, body: &Value) -> ApiResult<NodeWright> {
        self.inner.patch_nodewright(name, body).await
    }
    async fn patch_nodewright_status(&self, name: &str, body: &Value) -> ApiResult<Option<String>> {
        let call = self.inner.patch_nodewright_status(name, body);
        self.slow(format!("status {name}"), name, call).await
    }
    async fn create_config_map(&self, config_map: &ConfigMap) -> ApiResult<()> {
        self.inner.create_config_map(config_map).await
    }
    async fn replace_config_map(&self, config_map: &ConfigMap) -> ApiResult<()> {
        self.inner.replace_config_map(config_map).await
    }
    async fn delete_config_map(&self, name: &str, uid: &str) -> ApiResult<()> {
        self.inner.delete_config_map(name, uid).await
    }
    async fn create_event(&self, namespace: &str, event: &Event) -> ApiResult<()> {
        let about = event
            .regarding
            .as_ref()
            .and_then(|r| r.name.clone())
            .unwrap_or_default();
        let what = format!("event {} {about}", event.reason.clone().unwrap_or_default());
        let call = self.inner.create_event(namespace, event);
        self.slow(what, &about, call).await
    }
    async fn pause(&self, _delay: Duration) {}
    fn now(&self) -> jiff::Timestamp {
        self.inner.now()
    }
    fn elapsed(&self) -> Duration {
        self.inner.elapsed()
    }
}

/// The first node answers slowest, the last fastest.
fn slowest_first(name: &str) -> u64 {
    match name.trim_start_matches("job-") {
        "n1" => 400,
        "n2" => 300,
        "n3" => 200,
        "n4" => 100,
        _ => 50,
    }
}

fn node(name: &str) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("1".into()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    })
}

fn existing_job(name: &str) -> Arc<nodewright_core::SlimJob> {
    let mut j = job(name);
    j.metadata.uid = Some(format!("uid-{name}"));
    j.metadata.resource_version = Some("1".into());
    Arc::new(j.into())
}

fn nodewright_named(name: &str) -> Arc<NodeWright> {
    let mut nw = nodewright("1", &[], None);
    nw.metadata.name = Some(name.into());
    Arc::new(nw)
}

/// The node write recording a stage start for `nw` on `node`; with `expect` it fails its entry
/// precondition on these empty nodes (dropped).
fn record_start(node: &str, nw: &str, expect: bool) -> Effect {
    let context = Context {
        nodewright: Some(nw.into()),
        ..ctx(node)
    };
    Effect::PatchNode(Box::new(NodePatch {
        node: node.into(),
        guarded: true,
        state: vec![EntryChange {
            nodewright: nw.into(),
            key: "pkg|1.0.0".into(),
            expect: expect.then(|| entry(Stage::Apply, State::InProgress)),
            set: Some(entry(Stage::Apply, State::InProgress)),
        }],
        context,
        ..NodePatch::default()
    }))
}

fn create(node: &str) -> Effect {
    Effect::CreateJob {
        job: (job(&format!("job-{node}"))).into(),
        context: ctx(node),
        precondition: None,
        confirm: None,
    }
}

fn node_event(reason: &str, node: &str) -> Effect {
    Effect::Event(Box::new(EventSpec {
        regarding: ObjectRef {
            kind: "Node".into(),
            name: node.into(),
            namespace: None,
            uid: None,
        },
        warning: false,
        reason: reason.into(),
        action: String::new(),
        message: format!("about {node}"),
    }))
}

fn status_of(nw: &str) -> Effect {
    Effect::PatchStatus {
        nodewright: nw.into(),
        status: Box::new(NodeWrightStatus {
            package_list: "pkg:1.0.0".into(),
            ..NodeWrightStatus::default()
        }),
    }
}

fn ttl(job: &str, node: &str) -> Effect {
    Effect::PatchJob {
        name: job.into(),
        uid: format!("uid-{job}"),
        suspend: None,
        ttl_seconds_after_finished: Some(60),
        annotations: BTreeMap::new(),
        context: ctx(node),
    }
}

fn labels(report: &Report) -> Vec<(&'static str, &'static str)> {
    report
        .outcomes
        .iter()
        .map(|(k, o)| (*k, o.label()))
        .collect()
}

fn slow_interpreter(port: SlowPort, limit: usize) -> Interpreter<SlowPort> {
    Interpreter::with_port(port, "nodewright", EventRecorder::new("test-pod"))
        .with_concurrency(limit)
}

#[tokio::test(start_paused = true)]
async fn e13_events_wait_for_their_node_write_and_status_for_every_node_write_out_of_order() {
    let snapshot = Snapshot {
        nodes: ["n1", "n2", "n3", "n4"].into_iter().map(node).collect(),
        nodewrights: vec![nodewright_named("nw"), nodewright_named("other")],
        jobs: vec![existing_job("old-n1"), existing_job("old-n3")],
        ..Snapshot::default()
    };
    // The shape of a rollout pass (core's emit order): Job creates, node writes each followed by
    // its Event, node conditions, the statuses, the finished Jobs' TTL patches.
    let effects = vec![
        create("n1"),
        create("n2"),
        create("n3"),
        create("n4"),
        record_start("n1", "nw", false),
        node_event("JobComplete", "n1"),
        record_start("n2", "nw", false),
        record_start("n3", "other", true), // entry moved since the snapshot: dropped
        node_event("JobComplete", "n3"),
        record_start("n4", "nw", false),
        Effect::PatchNodeConditions {
            node: "n1".into(),
            set: vec![NodeCondition {
                type_: "nodewright.nvidia.com/nw/NotReady".into(),
                status: "True".into(),
                ..NodeCondition::default()
            }],
            remove: Vec::new(),
        },
        status_of("nw"),
        status_of("other"),
        ttl("old-n3", "n3"),
        ttl("old-n1", "n1"),
        node_event("Transition", "n4"),
    ];
    let port = SlowPort::new(snapshot.clone(), slowest_first);
    let interpreter = slow_interpreter(port, 4);
    let report = interpreter.apply_effects(&snapshot, &effects).await;
    assert_eq!(
        labels(&report),
        [
            ("CreateJob", "applied"),
            ("CreateJob", "applied"),
            ("CreateJob", "applied"),
            ("CreateJob", "applied"),
            ("PatchNode", "applied"),
            ("Event", "applied"),
            ("PatchNode", "applied"),
            ("PatchNode", "dropped"),
            ("Event", "skipped"),
            ("PatchNode", "applied"),
            ("PatchNodeConditions", "applied"),
            ("PatchStatus", "applied"),
            ("PatchStatus", "skipped"),
            ("PatchJob", "skipped"),
            ("PatchJob", "applied"),
            ("Event", "applied"),
        ],
        "outcomes in plan order; a dropped node write skips its Event, its NodeWright's status \
         and the later effects on its node"
    );
    let port = interpreter.into_port();
    let log = port.log.borrow().clone();
    assert!(
        port.most_in_flight.get() > 1,
        "nodes ran concurrently: {log:?}"
    );
    assert!(
        port.at("patch node n4") < port.at("patch node n1"),
        "the slow node does not hold up the fast one: {log:?}"
    );
    for n in ["n1", "n2", "n4"] {
        assert!(
            port.at(&format!("create job job-{n}")) < port.at(&format!("get node {n}")),
            "{n}: its effects keep plan order: {log:?}"
        );
    }
    assert!(
        port.at("patch node n1") < port.at("conditions n1"),
        "{log:?}"
    );
    let status = port.at("status nw");
    for write in [
        "patch node n1",
        "patch node n2",
        "patch node n4",
        "conditions n1",
    ] {
        assert!(
            port.at(write) < status,
            "§13.7: the status waits for {write}: {log:?}"
        );
    }
    assert!(status < port.at("patch job old-n1"), "{log:?}");
    assert!(!port.sent("patch job old-n3"), "n3 is poisoned: {log:?}");
    assert!(!port.sent("event JobComplete n3"), "{log:?}");
    let first_event = port.at("event");
    let last_write = log
        .iter()
        .rposition(|l| !l.starts_with("event"))
        .unwrap_or_default();
    assert!(
        last_write < first_event,
        "Events are bookkeeping, sent after every write: {log:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn t01_in_progress_is_not_recorded_when_its_create_did_not_happen_out_of_order() {
    // job-n1 exists already: its create is dropped (AlreadyExists) while it answers slowest.
    let snapshot = Snapshot {
        nodes: ["n1", "n2"].into_iter().map(node).collect(),
        nodewrights: vec![nodewright_named("nw")],
        jobs: vec![existing_job("job-n1")],
        ..Snapshot::default()
    };
    let effects = vec![
        create("n1"),
        create("n2"),
        record_start("n1", "nw", false),
        node_event("Apply", "n1"),
        record_start("n2", "nw", false),
        node_event("Apply", "n2"),
        status_of("nw"),
    ];
    let port = SlowPort::new(snapshot.clone(), slowest_first);
    let interpreter = slow_interpreter(port, 8);
    let report = interpreter.apply_effects(&snapshot, &effects).await;
    assert_eq!(
        labels(&report),
        [
            ("CreateJob", "dropped"),
            ("CreateJob", "applied"),
            ("PatchNode", "skipped"),
            ("Event", "skipped"),
            ("PatchNode", "applied"),
            ("Event", "applied"),
            ("PatchStatus", "skipped"),
        ]
    );
    let port = interpreter.into_port();
    assert!(!port.sent("get node n1"), "{:?}", port.log.borrow());
    assert!(port.at("patch node n2") < port.at("event Apply n2"));
    let stored = port.inner.into_snapshot();
    let n1 = stored
        .nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some("n1"))
        .map(|n| n.metadata.annotations.clone().unwrap_or_default())
        .unwrap_or_default();
    assert!(n1.is_empty(), "no in_progress without its Job: {n1:?}");
}

#[tokio::test(start_paused = true)]
async fn many_nodes_are_applied_at_most_the_concurrency_limit_at_a_time() {
    let names: Vec<String> = (0..12).map(|i| format!("m{i:02}")).collect();
    let effects: Vec<Effect> = names.iter().map(|n| create(n)).collect();
    for (limit, expected) in [(1, 1), (3, 3), (32, 12)] {
        let port = SlowPort::new(Snapshot::default(), |_| 10);
        let interpreter = slow_interpreter(port, limit);
        let report = interpreter
            .apply_effects(&Snapshot::default(), &effects)
            .await;
        assert_eq!(report.count("applied"), names.len());
        assert_eq!(
            interpreter.port().most_in_flight.get(),
            expected,
            "limit {limit}"
        );
    }
}

/// R6.6 (issue 15): a pass that writes many nodes' statuses and starts Jobs on a few sends the
/// lanes that create Jobs first, whatever their place in node order; each node keeps its order.
#[tokio::test(start_paused = true)]
async fn r6_6_lanes_that_create_jobs_are_applied_before_status_only_lanes() {
    let names = ["a1", "a2", "a3", "a4", "z1", "z2"];
    let snapshot = Snapshot {
        nodes: names.into_iter().map(node).collect(),
        ..Snapshot::default()
    };
    // a1..a4 only get their status written; z1 and z2 also get a Job, created before their
    // own node write as the core orders it.
    let mut effects: Vec<Effect> = Vec::new();
    for n in names {
        if n.starts_with('z') {
            effects.push(create(n));
        }
        effects.push(record_start(n, "nw", false));
    }
    let port = SlowPort::new(snapshot.clone(), |_| 10);
    let interpreter = slow_interpreter(port, 2);
    let report = interpreter.apply_effects(&snapshot, &effects).await;
    assert_eq!(report.count("applied"), effects.len());
    let port = interpreter.port();
    for z in ["z1", "z2"] {
        assert!(
            port.at(&format!("create job job-{z}")) < port.at("patch node a1"),
            "{z}'s Job waited for a status-only node: {:?}",
            port.log.borrow()
        );
        assert!(port.at(&format!("create job job-{z}")) < port.at(&format!("patch node {z}")));
    }
}

#[test]
fn an_immediate_port_applies_writes_then_events_in_plan_order() {
    // The simulator's port answers at once: the schedule is then a fixed order (lanes in node
    // order, Events after the writes in plan order), so runs are reproducible.
    let snapshot = Snapshot {
        nodes: ["n1", "n2"].into_iter().map(node).collect(),
        ..Snapshot::default()
    };
    let effects = vec![
        node_event("First", "n2"),
        create("n2"),
        node_event("Second", "n2"),
        create("n1"),
        node_event("Third", "n1"),
    ];
    let port = MemoryPort::new(snapshot, jiff::Timestamp::UNIX_EPOCH);
    let interpreter = Interpreter::with_port(port, "nodewright", EventRecorder::new("p"));
    let report =
        futures::executor::block_on(interpreter.apply_effects(&Snapshot::default(), &effects));
    assert_eq!(report.count("applied"), 5);
    let reasons: Vec<_> = interpreter
        .port()
        .events()
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    assert_eq!(reasons, ["First", "Second", "Third"]);
}

#[test]
fn the_concurrency_setting_is_bounded() {
    assert_eq!(concurrency(None), Ok(DEFAULT_CONCURRENCY));
    assert_eq!(concurrency(Some(" ")), Ok(DEFAULT_CONCURRENCY));
    assert_eq!(concurrency(Some("8")), Ok(8));
    assert!(concurrency(Some("0")).is_err());
    assert!(concurrency(Some("257")).is_err());
    assert!(concurrency(Some("many")).is_err());
}
