//! Slimming of cached executor Jobs: a retained Job keeps what the core reads and no more.
//!
//! The core reads a Job's metadata, status, `suspend`, the Job-level and template
//! `activeDeadlineSeconds`, the template's `nodeName` and annotations, and, only for a Job without
//! an executor fingerprint (created before fingerprints existed), the template's init containers
//! (03 §4.1 reference comparison). Everything else of the pod template (container commands, env,
//! resources, volumes, tolerations, affinity) is dropped on the way into the cache; with the
//! default one-hour TTL every finished Job of a rollout stays cached, so this is most of a Job.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use nodewright_crds::keys;

/// Drops managedFields and the pod-template details the core never reads (see the module doc).
pub fn strip_job(job: &mut Job) {
    job.metadata.managed_fields = None;
    let fingerprinted = job
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(keys::EXECUTOR_FINGERPRINT));
    let Some(spec) = job.spec.as_mut() else {
        return;
    };
    spec.selector = None;
    if let Some(meta) = spec.template.metadata.as_mut() {
        meta.labels = None;
        meta.managed_fields = None;
    }
    if let Some(pod) = spec.template.spec.as_mut() {
        let init_containers = if fingerprinted {
            pod.init_containers
                .take()
                .map(|cs| cs.into_iter().map(name_and_image).collect())
        } else {
            pod.init_containers.take()
        };
        *pod = PodSpec {
            node_name: pod.node_name.take(),
            active_deadline_seconds: pod.active_deadline_seconds,
            restart_policy: pod.restart_policy.take(),
            containers: std::mem::take(&mut pod.containers)
                .into_iter()
                .map(name_and_image)
                .collect(),
            init_containers,
            ..PodSpec::default()
        };
    }
}

fn name_and_image(c: Container) -> Container {
    Container {
        name: c.name,
        image: c.image,
        ..Container::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(fingerprint: bool) -> Job {
        let mut annotations = json!({"nodewright.nvidia.com/package": "p|1.0|apply"});
        if fingerprint {
            annotations[keys::EXECUTOR_FINGERPRINT] = json!("abc");
        }
        serde_json::from_value(json!({
            "metadata": {"name": "j", "annotations": annotations,
                          "managedFields": [{"manager": "x"}]},
            "spec": {
                "suspend": false,
                "activeDeadlineSeconds": 30,
                "selector": {"matchLabels": {"a": "b"}},
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
                                "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                                {"name": "NODEWRIGHT_PACKAGE", "value": "p-1.0"},
                                {"name": "NODEWRIGHT_STAGE", "value": "apply"}],
                            "args": ["apply", "/root/usr/share/nodewright/p/1.0", "/nodewright-package"],
                            "securityContext": {"privileged": true},
                            "volumeMounts": [{"name": "root", "mountPath": "/root", "mountPropagation": "HostToContainer"},
                                {"name": "package-config", "mountPath": "/nodewright-package/configmaps"}],
                            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "64Mi"}}}],
                        "containers": [{"name": "pause", "image": "pause:3", "args": ["x"]}]
                    }
                }
            },
            "status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
        }))
        .unwrap()
    }

    #[test]
    fn strip_job_keeps_what_the_core_reads() {
        let mut j = job(true);
        strip_job(&mut j);
        assert!(j.metadata.managed_fields.is_none());
        let spec = j.spec.as_ref().unwrap();
        assert_eq!(spec.active_deadline_seconds, Some(30));
        assert_eq!(spec.suspend, Some(false));
        let meta = spec.template.metadata.as_ref().unwrap();
        assert!(
            meta.annotations
                .as_ref()
                .unwrap()
                .contains_key("kubernetes.io/limit-ranger")
        );
        let pod = spec.template.spec.as_ref().unwrap();
        assert_eq!(pod.node_name.as_deref(), Some("n1"));
        assert_eq!(pod.active_deadline_seconds, Some(600));
        assert!(pod.tolerations.is_none() && pod.volumes.is_none());
        let init = &pod.init_containers.as_ref().unwrap()[0];
        assert_eq!(
            (init.name.as_str(), init.image.as_deref()),
            ("p-apply", Some("img:1"))
        );
        assert!(init.env.is_none() && init.args.is_none() && init.resources.is_none());
        assert_eq!(pod.containers[0].name, "pause");
        assert!(pod.containers[0].args.is_none());
        assert_eq!(j.status.as_ref().unwrap().succeeded, Some(1));
        // What the core derives from the Job is unchanged by stripping.
        let before = job(true);
        assert_eq!(
            nodewright_core::jobs::matching::job_deadline(&before),
            nodewright_core::jobs::matching::job_deadline(&j)
        );
    }

    #[test]
    fn strip_job_keeps_init_containers_whole_without_a_fingerprint() {
        let mut j = job(false);
        strip_job(&mut j);
        let pod = j.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
        let init = &pod.init_containers.as_ref().unwrap()[0];
        assert!(init.env.is_some() && init.resources.is_some());
        assert!(pod.volumes.is_none());
    }

    #[test]
    fn strip_job_shrinks_a_job_by_more_than_half() {
        let full = serde_json::to_vec(&job(true)).unwrap().len();
        let mut j = job(true);
        strip_job(&mut j);
        let slim = serde_json::to_vec(&j).unwrap().len();
        assert!(slim * 2 < full, "slim {slim} bytes, full {full} bytes");
    }
}
