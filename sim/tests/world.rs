//! The Job controller, kubelet and garbage collector model the Kubernetes facts the core
//! relies on (04-jobs-rules.md §1.3, §1.4, §4, §7).

use k8s_openapi::api::batch::v1::{
    Job, JobSpec, PodFailurePolicy, PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule,
};
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodewright_sim::store::{Propagation, Store};
use nodewright_sim::time::Dur;
use nodewright_sim::world::{Attempt, PackageScript, Scripts, World, WorldSettings, job_condition};

const NS: &str = "nodewright";

fn world(attempts: Vec<Attempt>) -> World {
    let mut store = Store::default();
    let mut node = Node {
        metadata: ObjectMeta {
            name: Some("n1".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    nodewright_sim::world::set_ready_for_start(&mut node, "n1");
    store.create(node).unwrap();
    let scripts = Scripts(vec![PackageScript {
        attempts,
        ..Default::default()
    }]);
    World::new(store, scripts, WorldSettings::default())
}

fn job(name: &str, restart: &str, backoff: i32) -> Job {
    let annotation =
        r#"{"name":"pkg","version":"1.0.0","skyhook":"demo","stage":"apply","image":"r/pkg"}"#;
    let step = |n: &str, arg: &str| Container {
        name: n.into(),
        image: Some("agent:1".into()),
        args: Some(vec![arg.into(), "/root".into(), "/x".into()]),
        ..Default::default()
    };
    Job {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            labels: Some([("nodewright.nvidia.com/name".to_string(), "demo".to_string())].into()),
            ..Default::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(backoff),
            pod_failure_policy: (restart == "Never").then(|| PodFailurePolicy {
                rules: vec![PodFailurePolicyRule {
                    action: "Ignore".into(),
                    on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                        type_: "DisruptionTarget".into(),
                        status: Some("True".into()),
                    }]),
                    ..Default::default()
                }],
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    annotations: Some(
                        [(
                            "nodewright.nvidia.com/package".to_string(),
                            annotation.to_string(),
                        )]
                        .into(),
                    ),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    node_name: Some("n1".into()),
                    restart_policy: Some(restart.into()),
                    init_containers: Some(vec![
                        step("pkg-apply", "apply"),
                        step("pkg-applycheck", "apply-check"),
                    ]),
                    containers: vec![Container {
                        name: "done".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

fn run(world: &mut World, from: u64, until: u64) {
    let mut t = from;
    while t <= until {
        world.step(t);
        t += 100;
    }
}

fn get(world: &World, name: &str) -> Job {
    world
        .store
        .get::<Job>(Some(NS), name)
        .cloned()
        .expect("job exists")
}

fn pods(world: &World) -> Vec<Pod> {
    world.store.objects.pods.values().cloned().collect()
}

#[test]
fn job_never_counts_failed_pods_against_backoff_limit() {
    let mut w = world(vec![Attempt {
        duration: Dur(2_000),
        exit: 1,
        ..Default::default()
    }]);
    w.store.create(job("j", "Never", 3)).unwrap();
    run(&mut w, 0, 200_000);
    let j = get(&w, "j");
    assert_eq!(j.status.as_ref().unwrap().failed, Some(4));
    assert!(job_condition(&j, "FailureTarget"));
    assert!(job_condition(&j, "Failed"));
    assert_eq!(pods(&w).len(), 4, "failed attempts stay as archives");
}

#[test]
fn job_backoff_is_10_20_40_seconds() {
    let mut w = world(vec![Attempt {
        duration: Dur(1_000),
        exit: 1,
        ..Default::default()
    }]);
    w.store.create(job("j", "Never", 3)).unwrap();
    run(&mut w, 0, 70_000);
    assert!(
        !job_condition(&get(&w, "j"), "Failed"),
        "4 attempts need ≈ 4 s + 70 s of backoff"
    );
    run(&mut w, 70_100, 90_000);
    assert!(job_condition(&get(&w, "j"), "Failed"));
}

#[test]
fn job_disruption_target_is_ignored_by_pod_failure_policy() {
    let mut w = world(vec![Attempt {
        duration: Dur(30_000),
        ..Default::default()
    }]);
    w.store.create(job("j", "Never", 3)).unwrap();
    run(&mut w, 0, 5_000);
    let pod = pods(&w).pop().unwrap();
    let (name, uid) = (
        pod.metadata.name.clone().unwrap(),
        pod.metadata.uid.clone().unwrap(),
    );
    w.evict(NS, &name, &uid, false).unwrap();
    run(&mut w, 5_100, 120_000);
    let j = get(&w, "j");
    assert_eq!(j.status.as_ref().unwrap().failed.unwrap_or(0), 0);
    assert!(job_condition(&j, "Complete"));
}

#[test]
fn job_suspend_deletes_pods_and_resets_start_time() {
    let mut w = world(vec![Attempt {
        duration: Dur(60_000),
        ..Default::default()
    }]);
    w.store.create(job("j", "Never", 3)).unwrap();
    run(&mut w, 0, 5_000);
    assert!(get(&w, "j").status.unwrap().start_time.is_some());
    w.store
        .modify::<Job>(Some(NS), "j", |j| {
            j.spec.as_mut().unwrap().suspend = Some(true)
        })
        .unwrap();
    run(&mut w, 5_100, 20_000);
    let j = get(&w, "j");
    assert!(j.status.as_ref().unwrap().start_time.is_none());
    assert!(job_condition(&j, "Suspended"));
    assert!(pods(&w).is_empty(), "the suspended attempt is deleted");
    assert_eq!(
        j.status.as_ref().unwrap().failed.unwrap_or(0),
        0,
        "suspension is not a failure"
    );
    w.store
        .modify::<Job>(Some(NS), "j", |j| {
            j.spec.as_mut().unwrap().suspend = Some(false)
        })
        .unwrap();
    run(&mut w, 20_100, 120_000);
    assert!(job_condition(&get(&w, "j"), "Complete"));
}

#[test]
fn job_ttl_after_finished_deletes_the_job_and_its_pods() {
    let mut w = world(vec![Attempt {
        duration: Dur(1_000),
        ..Default::default()
    }]);
    w.store.create(job("j", "Never", 3)).unwrap();
    run(&mut w, 0, 10_000);
    assert!(job_condition(&get(&w, "j"), "Complete"));
    w.store
        .modify::<Job>(Some(NS), "j", |j| {
            j.spec.as_mut().unwrap().ttl_seconds_after_finished = Some(60)
        })
        .unwrap();
    run(&mut w, 10_100, 50_000);
    assert!(w.store.get::<Job>(Some(NS), "j").is_some());
    run(&mut w, 50_100, 80_000);
    assert!(w.store.get::<Job>(Some(NS), "j").is_none());
    assert!(pods(&w).is_empty());
}

#[test]
fn job_on_failure_counts_container_restarts() {
    let mut w = world(vec![Attempt {
        duration: Dur(1_000),
        exit: 1,
        ..Default::default()
    }]);
    w.store.create(job("j", "OnFailure", 2)).unwrap();
    run(&mut w, 0, 200_000);
    let j = get(&w, "j");
    assert!(job_condition(&j, "Failed"), "{:?}", j.status);
}

#[test]
fn pod_deadline_fails_the_attempt_in_place() {
    let mut w = world(vec![Attempt {
        duration: Dur(600_000),
        ..Default::default()
    }]);
    let mut j = job("j", "Never", 0);
    j.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .active_deadline_seconds = Some(20);
    w.store.create(j).unwrap();
    run(&mut w, 0, 30_000);
    let pod = pods(&w).pop().unwrap();
    let status = pod.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
    assert!(job_condition(&get(&w, "j"), "Failed"));
}

#[test]
fn job_level_deadline_fails_with_deadline_exceeded() {
    let mut w = world(vec![Attempt {
        duration: Dur(600_000),
        ..Default::default()
    }]);
    let mut j = job("j", "OnFailure", i32::MAX);
    j.spec.as_mut().unwrap().active_deadline_seconds = Some(30);
    w.store.create(j).unwrap();
    run(&mut w, 0, 40_000);
    let j = get(&w, "j");
    let failed = j
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .unwrap();
    assert_eq!(failed.reason.as_deref(), Some("DeadlineExceeded"));
}

#[test]
fn foreground_deletion_removes_pods_before_the_job() {
    let mut w = world(vec![Attempt {
        duration: Dur(60_000),
        ..Default::default()
    }]);
    w.store.create(job("j", "Never", 3)).unwrap();
    run(&mut w, 0, 5_000);
    w.store
        .delete::<Job>(Some(NS), "j", None, Propagation::Foreground, false)
        .unwrap();
    w.step(5_100);
    assert!(
        w.store.get::<Job>(Some(NS), "j").is_some(),
        "held by foregroundDeletion"
    );
    run(&mut w, 5_200, 10_000);
    assert!(w.store.get::<Job>(Some(NS), "j").is_none());
    assert!(pods(&w).is_empty());
}

#[test]
fn reboot_makes_node_not_ready_then_changes_boot_id() {
    let mut w = world(vec![]);
    w.reboot_node("n1", 10_000, 0);
    w.step(5_000);
    let ready = |w: &World| {
        let n = w
            .store
            .get::<Node>(None, "n1")
            .unwrap()
            .status
            .clone()
            .unwrap();
        let ready = n
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        (ready, n.node_info.unwrap().boot_id)
    };
    assert_eq!(ready(&w), (false, "boot-n1-0".to_string()));
    w.step(10_000);
    assert_eq!(ready(&w), (true, "boot-n1-1".to_string()));
}
