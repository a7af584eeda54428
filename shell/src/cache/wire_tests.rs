//! Decoding into [`Wire`] and stripping gives the same cached object as decoding whole and
//! stripping, for recorded and synthetic executor Jobs and pods, workload pods and nodes, with
//! unknown and missing fields.

use super::*;
use crate::cache::slim::tests::{job, job_conditions, pods};
use crate::cache::wire;
use crate::cache::{strip_any_pod, strip_job, strip_meta, strip_node};
use kube::core::{ObjectList, WatchEvent};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const NS: &str = "nodewright";
const RECORDED_JOB: &str = include_str!("testdata/executor_job.json");
const RECORDED_POD: &str = include_str!("testdata/executor_pod.json");

/// Whole decode + strip against wire decode + strip, on the same text.
fn same<K>(text: &str, strip: impl Fn(&mut K)) -> K
where
    K: Slim + Default + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let mut whole: K = serde_json::from_str(text).expect("whole decode");
    strip(&mut whole);
    let mut wire = serde_json::from_str::<Wire<K>>(text)
        .expect("wire decode")
        .into_result()
        .expect("decodable");
    strip(&mut wire);
    assert_eq!(whole, wire, "{text}");
    wire
}

fn managed_fields() -> Value {
    json!([{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}}}}}}])
}

/// Adds managedFields and fields no Kubernetes version has at every level the rules name.
fn with_extras(mut v: Value) -> Value {
    let unknown = json!({"nested": [1, {"deep": null}], "s": "x"});
    v["futureTopLevel"] = unknown.clone();
    v["metadata"]["managedFields"] = managed_fields();
    v["metadata"]["futureMeta"] = unknown.clone();
    for path in [
        "/spec",
        "/status",
        "/spec/template",
        "/spec/template/spec",
        "/spec/template/metadata",
    ] {
        if let Some(Value::Object(o)) = v.pointer_mut(path) {
            o.insert("futureField".into(), unknown.clone());
        }
    }
    for path in [
        "/spec/containers",
        "/spec/initContainers",
        "/spec/template/spec/initContainers",
        "/status/containerStatuses",
        "/status/initContainerStatuses",
        "/status/conditions",
    ] {
        for item in v
            .pointer_mut(path)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            item["futureField"] = unknown.clone();
            if let Some(Value::Object(state)) = item.get_mut("state") {
                state.insert("futureState".into(), json!({"a": 1}));
                for s in state.values_mut() {
                    if let Value::Object(s) = s {
                        s.insert("futureDetail".into(), json!(2));
                    }
                }
            }
        }
    }
    v
}

fn text<K: serde::Serialize>(k: &K) -> Value {
    serde_json::to_value(k).unwrap_or_default()
}

#[test]
fn recorded_executor_job_and_pod_match_whole_decode() {
    let j = same::<Job>(RECORDED_JOB, strip_job);
    assert!(j.metadata.managed_fields.is_none());
    let p = same::<Pod>(RECORDED_POD, |p| strip_any_pod(p, NS));
    assert_eq!(
        p.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("scale-node-0")
    );
    let extra = |s: &str| with_extras(serde_json::from_str(s).unwrap_or_default()).to_string();
    same::<Job>(&extra(RECORDED_JOB), strip_job);
    same::<Pod>(&extra(RECORDED_POD), |p| strip_any_pod(p, NS));
    // In another namespace the same pod is a workload pod, stripped the other way.
    same::<Pod>(&extra(RECORDED_POD), |p| strip_any_pod(p, "elsewhere"));
}

#[test]
fn every_job_fixture_matches_whole_decode() {
    for conditions in job_conditions() {
        for fingerprint in [true, false] {
            let v = with_extras(text(&job(fingerprint, conditions.clone())));
            same::<Job>(&v.to_string(), strip_job);
        }
    }
}

#[test]
fn job_with_spec_before_metadata_matches_whole_decode() {
    for fingerprint in [true, false] {
        let v = with_extras(text(&job(fingerprint, job_conditions()[0].clone())));
        let reordered = format!(
            r#"{{"spec": {}, "status": {}, "metadata": {}}}"#,
            v["spec"], v["status"], v["metadata"]
        );
        same::<Job>(&reordered, strip_job);
    }
}

#[test]
fn every_pod_fixture_matches_whole_decode_in_both_roles() {
    for pod in pods() {
        let v = with_extras(text(&pod)).to_string();
        same::<Pod>(&v, |p| strip_any_pod(p, NS));
        same::<Pod>(&v, |p| strip_any_pod(p, "workloads"));
    }
}

#[test]
fn workload_pod_keeps_drain_inputs() {
    let v = with_extras(json!({
        "metadata": {"name": "w", "namespace": "apps", "uid": "1", "labels": {"app": "a"},
                     "annotations": {"a": "b"}, "finalizers": ["f"], "generateName": "w-",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r",
                                          "uid": "2", "controller": true}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i", "env": [{"name": "E"}]}],
                 "initContainers": [{"name": "i", "image": "i"}],
                 "affinity": {"nodeAffinity": {}}, "priorityClassName": "p",
                 "tolerations": [{"operator": "Exists"}],
                 "volumes": [{"name": "e", "emptyDir": {}}, {"name": "s", "secret": {"secretName": "x"}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "image": "i",
                                          "imageID": "", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}],
                   "qosClass": "BestEffort"}
    }));
    let p = same::<Pod>(&v.to_string(), |p| strip_any_pod(p, NS));
    let spec = p.spec.as_ref().map(text).unwrap_or_default();
    assert_eq!(spec["containers"], json!([{"name": "c"}]));
    assert_eq!(spec["priorityClassName"], "p");
    assert!(p.metadata.owner_references.is_some());
}

#[test]
fn minimal_objects_match_whole_decode() {
    for text in [
        r#"{}"#,
        r#"{"metadata": {}}"#,
        r#"{"metadata": {"name": "x"}, "spec": {}, "status": {}}"#,
        r#"{"metadata": {"name": "x", "labels": null}, "spec": {"template": {}}, "status": null}"#,
        r#"{"spec": {"template": {"spec": {"initContainers": null}}}}"#,
    ] {
        same::<Job>(text, strip_job);
    }
    for text in [
        r#"{}"#,
        r#"{"metadata": {"name": "x"}, "spec": {}, "status": {}}"#,
        r#"{"spec": {"containers": [{}]}, "status": {"initContainerStatuses": [{"state": {}}]}}"#,
        r#"{"status": {"containerStatuses": [{"name": "c", "state": {"running": null, "waiting": {}}}]}}"#,
    ] {
        same::<Pod>(text, |p| strip_any_pod(p, NS));
    }
}

#[test]
fn nodes_config_maps_and_pdbs_match_whole_decode() {
    let node = with_extras(json!({
        "metadata": {"name": "n1", "labels": {"a": "1"}, "annotations": {"nodewright.nvidia.com/x": "{}"}},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "unschedulable": true},
        "status": {"images": [{"names": ["a@sha256:1", "a:1"], "sizeBytes": 100}],
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
                                   "lastHeartbeatTime": "2026-01-01T00:00:00Z"}],
                   "nodeInfo": {"bootID": "b", "machineID": "m", "systemUUID": "s", "kernelVersion": "k",
                                "osImage": "o", "containerRuntimeVersion": "c", "kubeletVersion": "v",
                                "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
                   "allocatable": {"cpu": "4"}}
    }));
    let n = same::<Node>(&node.to_string(), strip_node);
    let status = n.status.unwrap_or_default();
    assert!(status.images.is_none() && status.allocatable.is_none());
    let info = status.node_info.unwrap_or_default();
    assert_eq!((info.boot_id.as_str(), info.machine_id.as_str()), ("b", ""));
    let conditions = status.conditions.unwrap_or_default();
    assert_eq!(
        (conditions[0].type_.as_str(), conditions[0].status.as_str()),
        ("Ready", "True")
    );
    // The core compares its own conditions' reason and message (emit.rs, §12.5).
    assert_eq!(conditions[0].reason.as_deref(), Some("KubeletReady"));
    assert_eq!(conditions[0].message.as_deref(), Some("ok"));
    assert!(conditions[0].last_heartbeat_time.is_none());
    let cm = with_extras(json!({"metadata": {"name": "c", "namespace": NS}, "data": {"k": "v"}}));
    same::<ConfigMap>(&cm.to_string(), strip_meta);
    let pdb = with_extras(
        json!({"metadata": {"name": "p"}, "spec": {"minAvailable": 1},
                                 "status": {"disruptionsAllowed": 0, "currentHealthy": 1,
                                            "desiredHealthy": 1, "expectedPods": 1}}),
    );
    same::<PodDisruptionBudget>(&pdb.to_string(), strip_meta);
}

#[test]
fn skipped_fields_are_never_decoded_kept_ones_are() {
    // A malformed value in a skipped field does not fail the object...
    let mut v: Value = serde_json::from_str(RECORDED_JOB).unwrap_or_default();
    v["metadata"]["managedFields"] = json!("not a list");
    v["spec"]["template"]["spec"]["containers"] = json!(7);
    assert!(serde_json::from_str::<Job>(&v.to_string()).is_err());
    assert!(Wire::<Job>::decode(&v.to_string()).into_result().is_ok());
    // ...one in a kept field does, naming its path, and keeps the object's identity.
    v["status"]["succeeded"] = json!("one");
    let bad = Wire::<Job>::decode(&v.to_string());
    assert_eq!(bad.meta().resource_version.as_deref(), Some("6190"));
    let err = bad.into_result().err().unwrap_or_default();
    assert_eq!(err.path, "status.succeeded", "{err}");
}

#[test]
fn an_undecodable_object_is_skipped_not_its_page() {
    let mut bad: Value = serde_json::from_str(RECORDED_POD).unwrap_or_default();
    bad["metadata"]["name"] = json!("bad");
    bad["status"]["startTime"] = json!("yesterday");
    let page =
        format!(r#"{{"metadata": {{"resourceVersion": "5"}}, "items": [{RECORDED_POD}, {bad}]}}"#);
    let list: ObjectList<Wire<Pod>> = serde_json::from_str(&page).expect("list page");
    let mut items = list.items.into_iter();
    let (good, bad) = (items.next().expect("good"), items.next().expect("bad"));
    let init = |w| wire::unwrap(Event::InitApply(w));
    assert!(matches!(init(good.clone()), Some(Event::InitApply(_))));
    // An undecodable pod stays cached as its identity and node (a drain still waits for it).
    let Some(Event::InitApply(stub)) = init(bad.clone()) else {
        panic!("an undecodable pod is kept as its identity");
    };
    assert_eq!(stub.metadata.name.as_deref(), Some("bad"));
    assert_eq!(stub.metadata.namespace.as_deref(), Some(NS));
    let node = stub.spec.as_ref().and_then(|s| s.node_name.as_deref());
    assert_eq!(node, Some("scale-node-0"));
    assert!(stub.status.is_none() && stub.metadata.labels.is_none());
    assert!(matches!(
        wire::unwrap(Event::Apply(bad)),
        Some(Event::Apply(_))
    ));
    assert!(matches!(
        wire::unwrap(Event::Apply(good)),
        Some(Event::Apply(_))
    ));
    // Other kinds leave it out: dropped from the initial list, removed on an update.
    let mut job: Value = serde_json::from_str(RECORDED_JOB).unwrap_or_default();
    job["spec"]["backoffLimit"] = json!("three");
    let bad_job = Wire::<Job>::decode(&job.to_string());
    assert!(wire::unwrap(Event::InitApply(bad_job.clone())).is_none());
    let Some(Event::Delete(stub)) = wire::unwrap(Event::Apply(bad_job)) else {
        panic!("an update that no longer decodes removes the Job");
    };
    let name = "scale-pkg-a-1-0-0-apply-scale-node-0-f49816ac";
    assert_eq!(stub.metadata.name.as_deref(), Some(name));
    let line = r#"{"type": "ADDED", "object": {"metadata": 5}}"#;
    let event: WatchEvent<Wire<Pod>> = serde_json::from_str(line).expect("watch event");
    let WatchEvent::Added(w) = event else {
        panic!("not an ADDED event");
    };
    assert!(w.into_result().is_err());
}

#[test]
fn watch_events_and_list_pages_decode_through_the_wire_type() {
    let line = format!(r#"{{"type": "MODIFIED", "object": {RECORDED_POD}}}"#);
    let event: WatchEvent<Wire<Pod>> = serde_json::from_str(&line).expect("watch event");
    let WatchEvent::Modified(w) = event else {
        panic!("not a MODIFIED event");
    };
    let pod = w.into_result().expect("decodable");
    assert!(pod.metadata.managed_fields.is_none());
    assert!(
        pod.spec
            .as_ref()
            .is_some_and(|s| s.init_containers.is_none())
    );
    let page = format!(
        r#"{{"apiVersion": "batch/v1", "kind": "JobList", "metadata": {{"resourceVersion": "5"}}, "items": [{RECORDED_JOB}, {RECORDED_JOB}]}}"#
    );
    let list: ObjectList<Wire<Job>> = serde_json::from_str(&page).expect("list page");
    assert_eq!(list.items.len(), 2);
    let job = list.items[0].clone().into_result().expect("decodable");
    let template = job.spec.as_ref().map(|s| &s.template);
    assert!(
        template.is_some_and(|t| t.metadata.is_none()),
        "fingerprinted"
    );
}

/// Every recorded Job and pod of a rollout (the `cache_footprint` dumps, see its header).
#[test]
#[ignore]
fn wire_matches_whole_decode_on_recorded_rollout() {
    let Ok(dir) = std::env::var("NW_FOOTPRINT_DIR") else {
        return;
    };
    let items = |file: &str| -> Vec<String> {
        let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap_or_default();
        let list: Value = serde_json::from_str(&text).unwrap_or_default();
        let items = list["items"].as_array().cloned().unwrap_or_default();
        items
            .into_iter()
            .map(|v| with_extras(v).to_string())
            .collect()
    };
    let (jobs, pods) = (items("jobs.json"), items("pods.json"));
    for j in &jobs {
        same::<Job>(j, strip_job);
    }
    for p in &pods {
        same::<Pod>(p, |p| strip_any_pod(p, NS));
    }
    println!("{} Jobs and {} pods identical", jobs.len(), pods.len());
}
