//! Tests of the executor index kept between passes: it answers only for the records it indexed,
//! and an index updated in place equals the index built from the new snapshot.

use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn job(name: &str, node: &str) -> Arc<SlimJob> {
    job_of("nw", name, &format!("uid-{name}"), node)
}

/// An executor Job of NodeWright `nw` on `node`, with an annotation-less package label.
fn job_of(nw: &str, name: &str, uid: &str, node: &str) -> Arc<SlimJob> {
    let labels = [
        (keys::LABEL_NAME, nw),
        (keys::LABEL_NODE, node),
        (keys::PACKAGE, "pkg-1.0.0"),
    ];
    Arc::new(SlimJob {
        metadata: crate::slim::SlimMeta {
            name: Some(name.into()),
            uid: Some(uid.into()),
            labels: Some(labels.into_iter().collect()),
            ..Default::default()
        },
        ..SlimJob::default()
    })
}

fn label_map(labels: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn pod(job: &SlimJob) -> Arc<SlimPod> {
    pod_at(job, "pod", None)
}

/// A child pod of `job` named `<job>-<suffix>`, created `second` seconds into 2026 if given.
fn pod_at(job: &SlimJob, suffix: &str, second: Option<u8>) -> Arc<SlimPod> {
    let labels = [
        (keys::LABEL_NAME, "nw"),
        (keys::PACKAGE, "pkg-1.0.0"),
        (
            CONTROLLER_UID,
            job.metadata.uid.as_deref().unwrap_or_default(),
        ),
    ];
    let created = second.map(|s| {
        let at = format!("2026-01-01T00:00:{s:02}Z");
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at.parse().expect("timestamp"))
    });
    Arc::new(SlimPod {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}-{suffix}",
                job.metadata.name.as_deref().unwrap_or_default()
            )),
            creation_timestamp: created,
            labels: Some(label_map(&labels)),
            ..ObjectMeta::default()
        },
        ..SlimPod::default()
    })
}

/// A new record of `job` with a `Complete` condition.
fn complete(job: &SlimJob) -> Arc<SlimJob> {
    let mut finished = job.clone();
    finished.status = Some(crate::slim::SlimJobStatus {
        conditions: Some(vec![crate::slim::SlimJobCondition {
            type_: "Complete".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    Arc::new(finished)
}

fn snapshot(jobs: Vec<Arc<SlimJob>>, pods: Vec<Arc<SlimPod>>) -> Snapshot {
    Snapshot {
        jobs,
        executor_pods: pods,
        ..Snapshot::default()
    }
}

/// The cached index answers for the same records in a new snapshot, and only for those: a
/// new Job, a removed pod, a Job whose status changed or another namespace make it stale,
/// and `update` then indexes the new snapshot.
#[test]
fn executor_cache_answers_only_for_the_same_records() {
    let options = Options::default();
    let (a, b) = (job("a", "n1"), job("b", "n2"));
    let pods = vec![pod(&a), pod(&b)];
    let base = snapshot(vec![a.clone(), b.clone()], pods.clone());
    let mut cache = ExecutorCache::new();
    assert!(cache.get(&base, &options).is_none(), "empty cache");
    cache.update(&base, &options);
    let same = snapshot(vec![a.clone(), b.clone()], pods.clone());
    let index = cache.get(&same, &options).expect("same records");
    assert_eq!(index.all().len(), 2);
    assert!(index.node_busy("n1"));

    let added = snapshot(vec![a.clone(), b.clone(), job("c", "n3")], pods.clone());
    assert!(cache.get(&added, &options).is_none(), "a new Job");
    let removed = snapshot(vec![a.clone(), b.clone()], vec![pods[0].clone()]);
    assert!(cache.get(&removed, &options).is_none(), "a removed pod");
    let changed = snapshot(vec![a.clone(), complete(&b)], pods.clone());
    assert!(
        cache.get(&changed, &options).is_none(),
        "a changed Job status"
    );
    let other = Options {
        namespace: "elsewhere".into(),
        ..Options::default()
    };
    assert!(cache.get(&same, &other).is_none(), "another namespace");

    cache.update(&changed, &options);
    let index = cache.get(&changed, &options).expect("updated");
    assert!(index.node_busy("n1") && !index.node_busy("n2"));
    assert!(cache.get(&base, &options).is_none(), "the old records");
}

/// A change of a snapshot's Jobs and executor pods.
type Step = Box<dyn Fn(&mut Vec<Arc<SlimJob>>, &mut Vec<Arc<SlimPod>>)>;

/// Brings `cache` up to date with `snap` and checks that it answers with the index a build makes
/// of `snap`, entry by entry with the snapshot's own records; true when it was updated in place.
fn update_and_check(cache: &mut ExecutorCache, snap: &Snapshot, options: &Options) -> bool {
    let in_place = cache.update_in_place(snap, options);
    cache.update(snap, options);
    let kept = cache.get(snap, options).expect("up to date");
    let built = ExecutorIndex::build(snap, options);
    assert_eq!(kept, &built);
    for (k, b) in kept.all().iter().zip(built.all()) {
        assert!(
            Arc::ptr_eq(&k.job, &b.job),
            "{}: another Job record",
            b.name
        );
        let same = k.pods.iter().zip(&b.pods).all(|(x, y)| Arc::ptr_eq(x, y));
        assert!(same, "{}: other pod records", b.name);
    }
    in_place
}

/// An index updated in place for each change of a snapshot's Jobs and pods equals the index built
/// from the new snapshot (the plan does not depend on what the cache held); another namespace, two
/// Jobs with the same name and uid, or most records replaced make `update` build it again.
#[test]
fn executor_cache_incremental_equals_build() {
    let options = Options::default();
    let mut jobs = vec![
        job("a", "n1"),
        job("b", "n2"),
        complete(&job("c", "n2")),
        job_of("nw2", "d", "uid-d", "n1"),
        complete(&job("e", "n3")),
    ];
    let mut pods: Vec<_> = jobs.iter().map(|j| pod_at(j, "p", Some(5))).collect();
    let mut cache = ExecutorCache::new();
    let first = snapshot(jobs.clone(), pods.clone());
    assert!(!update_and_check(&mut cache, &first, &options), "built");

    let late = job("f", "n6");
    let steps: Vec<(&str, Step)> = vec![
        ("add a Job", Box::new(|j, _| j.insert(1, job("aa", "n4")))),
        ("remove a Job", Box::new(|j, _| drop(j.remove(2)))),
        ("finish a Job", Box::new(|j, _| j[0] = complete(&j[0]))),
        (
            "copy a Job",
            Box::new(|j, _| j[3] = Arc::new((*j[3]).clone())),
        ),
        (
            "add a pod",
            Box::new(|j, p| p.push(pod_at(&j[0], "q", Some(9)))),
        ),
        (
            "an earlier pod",
            Box::new(|j, p| p.insert(0, pod_at(&j[0], "r", Some(1)))),
        ),
        ("remove a pod", Box::new(|_, p| drop(p.remove(3)))),
        (
            "copy a pod",
            Box::new(|_, p| p[2] = Arc::new((*p[2]).clone())),
        ),
        (
            "move a Job",
            Box::new(|j, _| j[1] = job_of("nw2", "aa", "uid-aa", "n5")),
        ),
        (
            "rename a Job",
            Box::new(|j, _| j[1] = job_of("nw2", "zz", "uid-aa", "n5")),
        ),
        (
            "reorder",
            Box::new(|j, p| {
                j.swap(1, 2);
                p.swap(1, 2);
            }),
        ),
        (
            "a pod first",
            Box::new(move |_, p| p.push(pod_at(&late, "p", None))),
        ),
        ("then its Job", Box::new(|j, _| j.push(job("f", "n6")))),
        (
            "out of the namespace",
            Box::new(|j, _| j[2] = in_other_namespace(&j[2])),
        ),
        ("drop the last Jobs", Box::new(|j, _| j.truncate(2))),
    ];
    for (step, change) in &steps {
        change(&mut jobs, &mut pods);
        let snap = snapshot(jobs.clone(), pods.clone());
        assert!(update_and_check(&mut cache, &snap, &options), "{step}");
    }

    let snap = snapshot(jobs.clone(), pods.clone());
    let other = Options {
        namespace: "elsewhere".into(),
        ..Options::default()
    };
    assert!(
        !update_and_check(&mut cache, &snap, &other),
        "another namespace"
    );
    assert!(
        !update_and_check(&mut cache, &snap, &options),
        "the namespace back"
    );
    jobs.push(Arc::new((*jobs[0]).clone()));
    let snap = snapshot(jobs.clone(), pods.clone());
    assert!(
        !update_and_check(&mut cache, &snap, &options),
        "same name and uid"
    );
    let copies = |v: &[Arc<SlimJob>]| v.iter().map(|j| Arc::new((**j).clone())).collect();
    let snap = snapshot(copies(&jobs[..1]), pods.clone());
    assert!(
        !update_and_check(&mut cache, &snap, &options),
        "most records"
    );
}

/// A new record of `job` in another namespace (not indexed).
fn in_other_namespace(job: &SlimJob) -> Arc<SlimJob> {
    let mut moved = job.clone();
    moved.metadata.namespace = Some("elsewhere".into());
    Arc::new(moved)
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    /// One change of the snapshot's records, with two numbers choosing what it applies to.
    #[derive(Clone, Debug)]
    enum Change {
        AddJob(usize, usize),
        RemoveJob(usize),
        FinishJob(usize),
        CopyJob(usize),
        MoveJob(usize, usize),
        RepeatJob(usize),
        AddPod(usize, usize),
        RemovePod(usize),
        CopyPod(usize),
        Reorder(usize, usize),
    }

    fn change() -> impl Strategy<Value = Change> {
        let (n, m) = (0..64usize, 0..64usize);
        prop_oneof![
            3 => (n.clone(), m.clone()).prop_map(|(a, b)| Change::AddJob(a, b)),
            2 => n.clone().prop_map(Change::RemoveJob),
            2 => n.clone().prop_map(Change::FinishJob),
            1 => n.clone().prop_map(Change::CopyJob),
            1 => (n.clone(), m.clone()).prop_map(|(a, b)| Change::MoveJob(a, b)),
            1 => n.clone().prop_map(Change::RepeatJob),
            3 => (n.clone(), m.clone()).prop_map(|(a, b)| Change::AddPod(a, b)),
            2 => n.clone().prop_map(Change::RemovePod),
            1 => n.clone().prop_map(Change::CopyPod),
            1 => (n, m).prop_map(|(a, b)| Change::Reorder(a, b)),
        ]
    }

    /// A Job named from `a` (five names, two uids each: some Jobs share a name, some a name
    /// and uid) on one of four nodes and two NodeWrights.
    fn new_job(a: usize, b: usize) -> Arc<SlimJob> {
        let (name, nw, node) = (format!("j{}", a % 5), ["nw", "nw2"][b % 2], b % 4);
        job_of(
            nw,
            &name,
            &format!("uid-{name}-{}", a / 5 % 2),
            &format!("n{node}"),
        )
    }

    fn apply(change: &Change, jobs: &mut Vec<Arc<SlimJob>>, pods: &mut Vec<Arc<SlimPod>>) {
        let at = |i: usize, len: usize| (len > 0).then(|| i % len);
        match *change {
            Change::AddJob(a, b) => jobs.insert(b % (jobs.len() + 1), new_job(a, b)),
            Change::RemoveJob(a) => drop(at(a, jobs.len()).map(|i| jobs.remove(i))),
            Change::FinishJob(a) => at(a, jobs.len()).into_iter().for_each(|i| {
                jobs[i] = complete(&jobs[i]);
            }),
            Change::CopyJob(a) => at(a, jobs.len()).into_iter().for_each(|i| {
                jobs[i] = Arc::new((*jobs[i]).clone());
            }),
            Change::MoveJob(a, b) => at(a, jobs.len()).into_iter().for_each(|i| {
                let name = jobs[i].metadata.name.clone().unwrap_or_default();
                let uid = jobs[i].metadata.uid.clone().unwrap_or_default();
                jobs[i] = job_of("nw", &name, &uid, &format!("n{}", b % 4));
            }),
            Change::RepeatJob(a) => at(a, jobs.len()).into_iter().for_each(|i| {
                jobs.push(jobs[i].clone());
            }),
            Change::AddPod(a, b) => at(a, jobs.len()).into_iter().for_each(|i| {
                let pod = pod_at(&jobs[i], &format!("p{}", b % 3), Some((b % 5) as u8));
                pods.insert(b % (pods.len() + 1), pod);
            }),
            Change::RemovePod(a) => drop(at(a, pods.len()).map(|i| pods.remove(i))),
            Change::CopyPod(a) => at(a, pods.len()).into_iter().for_each(|i| {
                pods[i] = Arc::new((*pods[i]).clone());
            }),
            Change::Reorder(a, b) => {
                if let (Some(i), Some(j)) = (at(a, jobs.len()), at(b, jobs.len())) {
                    jobs.swap(i, j);
                }
                if let (Some(i), Some(j)) = (at(a, pods.len()), at(b, pods.len())) {
                    pods.swap(i, j);
                }
            }
        }
    }

    proptest! {
        /// Whatever the sequence of changes (one to three between two snapshots), the index kept
        /// and updated between snapshots equals the index built from each snapshot.
        #[test]
        fn executor_cache_incremental_equals_build_for_any_changes(
            start in proptest::collection::vec((0..64usize, 0..64usize), 0..12),
            steps in proptest::collection::vec(proptest::collection::vec(change(), 1..4), 1..30),
        ) {
            let options = Options::default();
            let mut jobs: Vec<_> = start.iter().map(|&(a, b)| new_job(a, b)).collect();
            let mut pods: Vec<_> = jobs.iter().map(|j| pod(j)).collect();
            let mut cache = ExecutorCache::new();
            update_and_check(&mut cache, &snapshot(jobs.clone(), pods.clone()), &options);
            for changes in &steps {
                changes.iter().for_each(|c| apply(c, &mut jobs, &mut pods));
                update_and_check(&mut cache, &snapshot(jobs.clone(), pods.clone()), &options);
            }
        }
    }
}
