//! Slimming of cached executor Jobs and pods: a retained executor keeps what the core reads and
//! no more.
//!
//! With the default one-hour TTL every finished Job of a rollout and its pod stay cached, so these
//! two objects are most of the operator's memory at scale. The core reads:
//!
//! * from a Job: its name, namespace, uid, resourceVersion, labels, annotations (not the
//!   generation label nor the resource-id annotation) and deletion timestamp; `suspend` and the
//!   Job-level `activeDeadlineSeconds`; the template's `nodeName` and `activeDeadlineSeconds`; the
//!   `Complete`, `Failed` and `FailureTarget` conditions and `status.failed`; and, only for a Job
//!   without an executor fingerprint (created before fingerprints existed), the template's
//!   annotations and init containers (03 §4.1 reference comparison);
//! * from an executor pod (D16): its name, namespace, uid, resourceVersion, creation and deletion
//!   timestamps, its `name`, `package` and `controller-uid` labels; `nodeName`; the phase, reason,
//!   message, start time and `DisruptionTarget` condition; the init container statuses from the
//!   one before the first unsuccessful container on (name, restart count, exit code, reason,
//!   message, finish time); and whether there is any container status at all (04 §4.2 class 2).
//!
//! Everything else (owner references, the pod template's containers, env, volumes, the pods'
//! IPs, images and last states, other conditions) is dropped on the way into the cache. The
//! simulator strips its snapshots with these same functions, so its runs cover what is dropped.

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, Pod, PodCondition, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodewright_core::jobs::index::CONTROLLER_UID;
use nodewright_crds::keys;

/// Executor pod labels the core reads: the executor evidence (D16) and the owning Job's uid.
const POD_LABELS: [&str; 3] = [keys::LABEL_NAME, keys::PACKAGE, CONTROLLER_UID];

/// Job conditions the core reads (04 §2.1, §4.5).
const JOB_CONDITIONS: [&str; 3] = ["Complete", "Failed", "FailureTarget"];

/// Drops what the core never reads from an executor Job (see the module doc).
pub fn strip_job(job: &mut Job) {
    let fingerprinted = job
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(keys::EXECUTOR_FINGERPRINT));
    slim_meta(&mut job.metadata);
    if let Some(labels) = job.metadata.labels.as_mut() {
        labels.remove(keys::LABEL_GENERATION);
    }
    if let Some(annotations) = job.metadata.annotations.as_mut() {
        annotations.remove(keys::RESOURCE_ID);
    }
    if let Some(spec) = job.spec.as_mut() {
        spec.selector = None;
        spec.pod_failure_policy = None;
        spec.success_policy = None;
        let template = &mut spec.template;
        template.metadata = if fingerprinted {
            None
        } else {
            template.metadata.take().map(|m| ObjectMeta {
                annotations: m.annotations,
                ..ObjectMeta::default()
            })
        };
        if let Some(pod) = template.spec.as_mut() {
            *pod = PodSpec {
                node_name: pod.node_name.take(),
                active_deadline_seconds: pod.active_deadline_seconds,
                init_containers: if fingerprinted {
                    None
                } else {
                    pod.init_containers.take()
                },
                ..PodSpec::default()
            };
        }
    }
    if let Some(status) = job.status.as_mut() {
        *status = JobStatus {
            active: status.active,
            failed: status.failed,
            succeeded: status.succeeded,
            conditions: status.conditions.take().map(|cs| {
                exact(
                    cs.into_iter()
                        .filter(|c| JOB_CONDITIONS.contains(&c.type_.as_str()))
                        .map(|c| JobCondition {
                            last_probe_time: None,
                            ..c
                        }),
                )
            }),
            ..JobStatus::default()
        };
    }
}

/// Drops what the core never reads from an executor pod (see the module doc).
pub fn strip_executor_pod(pod: &mut Pod) {
    slim_meta(&mut pod.metadata);
    pod.metadata.annotations = None;
    pod.metadata.finalizers = None;
    if let Some(labels) = pod.metadata.labels.as_mut() {
        labels.retain(|k, _| POD_LABELS.contains(&k.as_str()));
    }
    if let Some(spec) = pod.spec.as_mut() {
        *spec = PodSpec {
            node_name: spec.node_name.take(),
            ..PodSpec::default()
        };
    }
    if let Some(status) = pod.status.as_mut() {
        let init = status.init_container_statuses.take();
        // Whether there is any container status is read only when there is no init container
        // status (04 §4.2 class 2): one name is enough to keep that answer.
        let container_statuses = if init.as_ref().is_none_or(Vec::is_empty) {
            status
                .container_statuses
                .take()
                .map(|cs| exact(cs.into_iter().take(1).map(slim_container_status)))
        } else {
            None
        };
        *status = PodStatus {
            phase: status.phase.take(),
            reason: status.reason.take(),
            message: status.message.take(),
            start_time: status.start_time.take(),
            conditions: status.conditions.take().map(|cs| {
                exact(
                    cs.into_iter()
                        .filter(|c| c.type_ == "DisruptionTarget")
                        .map(slim_pod_condition),
                )
            }),
            container_statuses,
            init_container_statuses: init.map(slim_init_statuses),
            ..PodStatus::default()
        };
    }
}

/// Metadata fields the core never reads from an executor Job or pod.
fn slim_meta(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    meta.owner_references = None;
    meta.generate_name = None;
}

fn slim_pod_condition(c: PodCondition) -> PodCondition {
    PodCondition {
        type_: c.type_,
        status: c.status,
        reason: c.reason,
        ..PodCondition::default()
    }
}

/// The init container statuses the core can tell apart: from the one before the first
/// unsuccessful container (whose `finishedAt` starts the wait, D25) to the end, plus any earlier one
/// that restarted (restart counts are looked up by name, D18); the last one when all succeeded (so
/// the list stays non-empty, 04 §4.2). Order and the first unsuccessful container's position
/// (first or not) are kept.
fn slim_init_statuses(statuses: Vec<ContainerStatus>) -> Vec<ContainerStatus> {
    let succeeded = |c: &ContainerStatus| {
        c.state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .is_some_and(|t| t.exit_code == 0)
    };
    let last = statuses.len().saturating_sub(1);
    let from = statuses
        .iter()
        .position(|c| !succeeded(c))
        .map_or(last, |first| first.saturating_sub(1));
    exact(
        statuses
            .into_iter()
            .enumerate()
            .filter(|(i, c)| *i >= from || c.restart_count > 0)
            .map(|(_, c)| slim_container_status(c)),
    )
}

/// Collects into a `Vec` of exactly its length (an in-place `collect` from a `Vec` keeps the
/// source's capacity, and a cached object lives for an hour).
fn exact<T>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut v: Vec<T> = items.collect();
    v.shrink_to_fit();
    v
}

/// A container status reduced to its name, restart count and current state.
fn slim_container_status(c: ContainerStatus) -> ContainerStatus {
    let state = c.state.map(|s| ContainerState {
        running: s.running.map(|_| ContainerStateRunning::default()),
        terminated: s.terminated.map(|t| ContainerStateTerminated {
            exit_code: t.exit_code,
            reason: t.reason,
            message: t.message,
            finished_at: t.finished_at,
            ..ContainerStateTerminated::default()
        }),
        waiting: s.waiting.map(|w| ContainerStateWaiting {
            reason: w.reason,
            message: w.message,
        }),
    });
    ContainerStatus {
        name: c.name,
        restart_count: c.restart_count,
        state,
        ..ContainerStatus::default()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use nodewright_core::jobs::classify as c;
    use nodewright_core::jobs::{create, matching};
    use nodewright_core::lifecycle::interrupts;
    use nodewright_core::{SlimJob, SlimPod};
    use serde_json::{Value, json};

    /// A full executor Job as listed (the fixtures are shared with the wire decoding tests).
    pub(in crate::cache) fn job(fingerprint: bool, conditions: Value) -> Job {
        let mut annotations = json!({"nodewright.nvidia.com/package": "p|1.0|apply",
                                     keys::RESOURCE_ID: "nw-u-1", keys::LAST_LOGS: "x"});
        if fingerprint {
            annotations[keys::EXECUTOR_FINGERPRINT] = json!("abc");
        }
        serde_json::from_value(json!({
            "metadata": {"name": "j", "namespace": "nodewright", "uid": "u", "resourceVersion": "9",
                          "annotations": annotations, "managedFields": [{"manager": "x"}],
                          "labels": {"nodewright.nvidia.com/name": "nw", "nodewright.nvidia.com/package": "p-1.0",
                                     "nodewright.nvidia.com/stage": "apply", "nodewright.nvidia.com/node": "n1",
                                     keys::LABEL_GENERATION: "3"},
                          "ownerReferences": [{"apiVersion": "v1", "kind": "NodeWright", "name": "nw", "uid": "o"}]},
            "spec": {
                "suspend": false,
                "activeDeadlineSeconds": 30,
                "selector": {"matchLabels": {"a": "b"}},
                "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
                "template": {
                    "metadata": {"labels": {"a": "b"}, "annotations": {"kubernetes.io/limit-ranger": "x"}},
                    "spec": {
                        "nodeName": "n1",
                        "activeDeadlineSeconds": 600,
                        "restartPolicy": "Never",
                        "tolerations": [{"operator": "Exists"}],
                        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
                        "initContainers": [{"name": "p-apply", "image": "img:1",
                            "env": [{"name": "A", "value": "1"}, {"name": "NODEWRIGHT_NODE_NAME",
                                "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                            "args": ["apply", "/root/usr/share/nodewright/p/1.0", "/nodewright-package"],
                            "securityContext": {"privileged": true},
                            "volumeMounts": [{"name": "root", "mountPath": "/root", "mountPropagation": "HostToContainer"}],
                            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "64Mi"}}}],
                        "containers": [{"name": "pause", "image": "pause:3", "args": ["x"]}]
                    }
                }
            },
            "status": {"succeeded": 1, "failed": 2, "startTime": "2026-01-01T00:00:00Z",
                       "uncountedTerminatedPods": {"succeeded": ["x"]}, "conditions": conditions}
        }))
        .unwrap()
    }

    pub(in crate::cache) fn job_conditions() -> Vec<Value> {
        let t = "2026-01-01T00:00:05Z";
        vec![
            json!([{"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": t},
                   {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                    "message": "Reached expected number of succeeded pods", "lastTransitionTime": t}]),
            json!([{"type": "FailureTarget", "status": "True", "reason": "PodFailurePolicy", "lastTransitionTime": t}]),
            json!([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": t}]),
            json!([{"type": "Suspended", "status": "True", "lastTransitionTime": t}]),
            json!(null),
        ]
    }

    /// Everything the core derives from a Job, for before/after comparisons.
    fn job_view(j: &Job) -> String {
        let mut labels = j.metadata.labels.clone().unwrap_or_default();
        labels.remove(keys::LABEL_GENERATION);
        let mut annotations = j.metadata.annotations.clone().unwrap_or_default();
        annotations.remove(keys::RESOURCE_ID);
        let record = SlimJob::from(j.clone());
        format!(
            "{:?} {} {} {:?} {:?} {:?} {:?} {:?}",
            c::job_state(&record),
            c::failed_attempts(&record),
            matching::job_deadline(&record),
            create::context_of(j),
            labels,
            annotations,
            (&j.metadata.name, &j.metadata.namespace, &j.metadata.uid),
            j.metadata.resource_version,
        )
    }

    #[test]
    fn strip_job_keeps_what_the_core_reads() {
        for conditions in job_conditions() {
            for fingerprint in [true, false] {
                let full = job(fingerprint, conditions.clone());
                let mut slim = full.clone();
                strip_job(&mut slim);
                assert_eq!(job_view(&full), job_view(&slim), "{conditions}");
                let expected = job(fingerprint, json!(null));
                assert_eq!(
                    matching::executor_matches(&full.clone().into(), &expected),
                    matching::executor_matches(&slim.into(), &expected)
                );
            }
        }
    }

    #[test]
    fn strip_job_drops_the_template_of_a_fingerprinted_job() {
        let mut j = job(true, job_conditions()[0].clone());
        strip_job(&mut j);
        assert!(j.metadata.managed_fields.is_none() && j.metadata.owner_references.is_none());
        let labels = j.metadata.labels.as_ref().unwrap();
        assert!(
            !labels.contains_key(keys::LABEL_GENERATION) && labels.contains_key(keys::LABEL_NODE)
        );
        let annotations = j.metadata.annotations.as_ref().unwrap();
        assert!(!annotations.contains_key(keys::RESOURCE_ID));
        assert!(annotations.contains_key(keys::LAST_LOGS));
        let spec = j.spec.as_ref().unwrap();
        assert!(spec.template.metadata.is_none() && spec.pod_failure_policy.is_none());
        let pod = spec.template.spec.as_ref().unwrap();
        assert_eq!(pod.node_name.as_deref(), Some("n1"));
        assert!(pod.containers.is_empty() && pod.init_containers.is_none());
        let status = j.status.as_ref().unwrap();
        let types: Vec<_> = status
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(types, ["Complete"]);
        assert!(status.uncounted_terminated_pods.is_none() && status.start_time.is_none());
    }

    #[test]
    fn strip_job_keeps_init_containers_whole_without_a_fingerprint() {
        let mut j = job(false, json!(null));
        strip_job(&mut j);
        let spec = j.spec.as_ref().unwrap();
        let pod = spec.template.spec.as_ref().unwrap();
        let init = &pod.init_containers.as_ref().unwrap()[0];
        assert!(init.env.is_some() && init.resources.is_some());
        assert!(pod.volumes.is_none());
        let annotations = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref());
        assert!(annotations.is_some_and(|a| a.contains_key("kubernetes.io/limit-ranger")));
    }

    #[test]
    fn strip_job_shrinks_a_job_by_more_than_half() {
        let full = job(true, job_conditions()[0].clone());
        let mut j = full.clone();
        strip_job(&mut j);
        let (full, slim) = (
            serde_json::to_vec(&full).unwrap().len(),
            serde_json::to_vec(&j).unwrap().len(),
        );
        assert!(slim * 2 < full, "slim {slim} bytes, full {full} bytes");
    }

    fn pod(phase: &str, extra_status: Value, deleting: bool) -> Pod {
        let mut v = json!({
            "metadata": {"name": "j-x", "namespace": "nodewright", "uid": "pu", "resourceVersion": "12",
                "creationTimestamp": "2026-01-01T00:00:00Z", "generateName": "j-",
                "labels": {"nodewright.nvidia.com/name": "nw", "nodewright.nvidia.com/package": "p-1.0",
                           CONTROLLER_UID: "u", "controller-uid": "u", "job-name": "j",
                           "batch.kubernetes.io/job-name": "j"},
                "annotations": {"nodewright.nvidia.com/package": "{}"},
                "finalizers": ["batch.kubernetes.io/job-tracking"],
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": true}]},
            "spec": {"nodeName": "n1", "restartPolicy": "Never",
                     "initContainers": [{"name": "p-apply", "image": "i", "env": [{"name": "E"}]},
                                        {"name": "interrupt", "image": "i"}],
                     "containers": [{"name": "pause", "image": "p"}],
                     "tolerations": [{"operator": "Exists"}]},
            "status": {"phase": phase, "hostIP": "10.0.0.1", "podIP": "10.0.0.2", "qosClass": "Burstable",
                       "startTime": "2026-01-01T00:00:01Z",
                       "conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]}
        });
        if let (Some(status), Some(extra)) = (v["status"].as_object_mut(), extra_status.as_object())
        {
            status.extend(extra.clone());
        }
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:01:00Z");
        }
        serde_json::from_value(v).unwrap()
    }

    fn init_status(name: &str, restarts: i32, state: Value) -> Value {
        json!({"name": name, "restartCount": restarts, "ready": false, "image": "i", "imageID": "sha",
               "containerID": "c://1", "started": false, "state": state,
               "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}})
    }

    pub(in crate::cache) fn pods() -> Vec<Pod> {
        let done = json!({"terminated": {"exitCode": 0, "reason": "Completed",
                                          "startedAt": "2026-01-01T00:00:02Z", "finishedAt": "2026-01-01T00:00:03Z"}});
        let failed = json!({"terminated": {"exitCode": 3, "reason": "Error", "message": "boom",
                                            "finishedAt": "2026-01-01T00:00:04Z"}});
        let pull = json!({"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}});
        let early = json!({"initContainerStatuses": [init_status("p-apply", 0, pull.clone()), init_status("interrupt", 0, json!({}))],
                           "containerStatuses": [init_status("pause", 0, json!({}))]});
        let crash = json!({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}});
        let running = json!({"running": {"startedAt": "2026-01-01T00:00:02Z"}});
        let statuses = |second: Value| {
            json!({"initContainerStatuses": [init_status("p-apply", 0, done.clone()), init_status("interrupt", 4, second)],
                   "containerStatuses": [init_status("pause", 0, json!({"waiting": {"reason": "PodInitializing"}}))]})
        };
        let mut all = vec![
            pod("Succeeded", statuses(done.clone()), false),
            pod("Failed", statuses(failed.clone()), false),
            pod("Running", statuses(pull), false),
            pod("Running", statuses(crash), false),
            pod("Running", statuses(running), true),
            pod("Pending", json!({"startTime": null}), false),
            pod("Pending", early, false),
            pod(
                "Failed",
                json!({"containerStatuses": [init_status("pause", 0, json!({}))]}),
                false,
            ),
            pod(
                "Failed",
                json!({"reason": "DeadlineExceeded", "message": "too long"}),
                false,
            ),
            pod("Failed", json!({"reason": "OutOfcpu"}), false),
            pod(
                "Failed",
                statuses(
                    json!({"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown"}}),
                ),
                false,
            ),
        ];
        let four = json!({"initContainerStatuses": [
            init_status("interrupt", 1, done.clone()), init_status("a", 0, done.clone()),
            init_status("b", 0, done.clone()), init_status("c", 2, json!({"waiting": {"reason": "ErrImagePull"}}))]});
        all.push(pod("Pending", four, false));
        let mut disrupted = pod("Failed", statuses(failed), false);
        if let Some(cs) = disrupted
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
        {
            cs.push(PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("EvictionByEvictionAPI".into()),
                ..PodCondition::default()
            });
        }
        all.push(disrupted);
        all
    }

    /// Everything the core derives from an executor pod, for before/after comparisons.
    fn pod_view(p: &Pod) -> String {
        let m = &p.metadata;
        let r = &SlimPod::from(p.clone());
        format!(
            "{:?} {:?} {} {} {} {} {} {:?} {} {:?} {:?} {} {:?} {:?} {:?} {:?}",
            c::failure_class(r),
            c::first_unsuccessful_init(r).map(|s| &s.name),
            c::pod_failed_genuinely(r),
            c::live_genuine_failure(r),
            c::has_disruption_target(r),
            c::is_terminating(r),
            c::deadline_kill(r),
            (
                c::init_restart_count(r, "interrupt"),
                c::init_restart_count(r, "c")
            ),
            c::genuine_verdict(r),
            c::waiting_since(r),
            c::stuck_container(r),
            c::never_started(r),
            interrupts::classify(p, "nodewright", None),
            (&m.name, &m.namespace, &m.uid, &m.resource_version),
            (&m.creation_timestamp, &m.deletion_timestamp),
            p.spec.as_ref().map(|s| &s.node_name),
        )
    }

    #[test]
    fn d16_strip_executor_pod_keeps_what_the_core_reads() {
        for full in pods() {
            let mut slim = full.clone();
            strip_executor_pod(&mut slim);
            assert_eq!(pod_view(&full), pod_view(&slim));
            let labels = slim.metadata.labels.as_ref().unwrap();
            for key in [keys::LABEL_NAME, keys::PACKAGE, CONTROLLER_UID] {
                assert_eq!(
                    labels.get(key),
                    full.metadata.labels.as_ref().unwrap().get(key)
                );
            }
            assert!(crate::cache::is_executor(&slim, "nodewright"));
        }
    }

    #[test]
    fn d16_strip_executor_pod_drops_spec_and_status_details() {
        let mut p = pods().remove(0);
        strip_executor_pod(&mut p);
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["spec"], json!({"nodeName": "n1", "containers": []}));
        for gone in [
            "annotations",
            "ownerReferences",
            "finalizers",
            "generateName",
        ] {
            assert_eq!(v["metadata"].get(gone), None, "{gone}");
        }
        assert_eq!(
            v["metadata"]["labels"].as_object().map(|l| l.len()),
            Some(3)
        );
        assert_eq!(
            v["status"]["initContainerStatuses"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );
        assert_eq!(v["status"].get("containerStatuses"), None);
        assert_eq!(
            v["status"]["initContainerStatuses"][0],
            json!({"name": "interrupt", "restartCount": 4, "ready": false, "image": "", "imageID": "",
                   "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                            "finishedAt": "2026-01-01T00:00:03Z"}}})
        );
        assert_eq!(v["status"]["conditions"], json!([]));
        assert_eq!(v["status"].get("hostIP"), None);
    }

    #[test]
    fn d25_init_statuses_keep_the_wait_start_and_restarted_containers() {
        let four = pods().into_iter().find(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.init_container_statuses.as_ref())
                .is_some_and(|c| c.len() == 4)
        });
        let mut p = four.unwrap();
        strip_executor_pod(&mut p);
        let names: Vec<_> = p
            .status
            .iter()
            .flat_map(|s| s.init_container_statuses.iter().flatten())
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["interrupt", "b", "c"]);
        assert_eq!(
            c::waiting_since(&p.into())
                .map(|t| t.to_string())
                .as_deref(),
            Some("2026-01-01T00:00:03Z")
        );
    }
}
