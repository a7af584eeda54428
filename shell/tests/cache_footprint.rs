//! Heap footprint of cached executor Jobs and pods, a measurement run by hand (glibc only):
//!
//! ```sh
//! SCALE_KEEP=1 tests/scale/run.sh 100 5      # then, with the scale cluster's KUBECONFIG:
//! kubectl -n nodewright get jobs -o json > /tmp/fp/jobs.json
//! kubectl -n nodewright get pods -o json > /tmp/fp/pods.json
//! NW_FOOTPRINT_DIR=/tmp/fp cargo test -p nodewright-shell --test cache_footprint -- --ignored --nocapture
//! ```
//!
//! Prints the bytes malloc holds per object, as listed and as the caches strip them, and fails
//! unless stripping keeps under a quarter of each.
//!
//! `watch_decode_heap` replays the same objects as watch events, with the managedFields of the
//! `shell/src/cache/testdata` fixtures added as the apiserver sends them (`kubectl get` leaves
//! them out), decoded whole (`NW_FOOTPRINT_MODE=whole`) or into the caches' wire type (`wire`),
//! three events per object, keeping the stripped result in a `Vec` (`store`: wire decoding into
//! a kube-runtime reflector store, as the caches do, so its keys and table count too); it prints
//! the heap malloc holds and the heap it has taken from the system. One mode per process:
//!
//! ```sh
//! cd /tmp/fp && for k in job pod; do jq -c --slurpfile f $REPO/shell/src/cache/testdata/executor_$k.json \
//!   '.items[] | .metadata.managedFields = $f[0].metadata.managedFields | {type: "MODIFIED", object: .}' \
//!   ${k}s.json > ${k}s.events; done
//! NW_FOOTPRINT_DIR=/tmp/fp NW_FOOTPRINT_MODE=wire cargo test -p nodewright-shell --test cache_footprint \
//!   -- --ignored --nocapture watch_decode_heap
//! ```

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use nodewright_shell::cache::wire::Wire;
use nodewright_shell::cache::{strip_any_pod, strip_job};

#[repr(C)]
#[derive(Default)]
struct MallInfo2 {
    arena: usize,
    ordblks: usize,
    smblks: usize,
    hblks: usize,
    hblkhd: usize,
    usmblks: usize,
    fsmblks: usize,
    uordblks: usize,
    fordblks: usize,
    keepcost: usize,
}

unsafe extern "C" {
    fn mallinfo2() -> MallInfo2;
}

/// Heap bytes malloc has taken from the system (all arenas, mmapped chunks included).
fn taken() -> usize {
    // SAFETY: as in `in_use`.
    let m = unsafe { mallinfo2() };
    m.arena + m.hblkhd
}

fn in_use() -> usize {
    // SAFETY: glibc's mallinfo2 takes no arguments and returns a plain struct.
    let m = unsafe { mallinfo2() };
    m.uordblks + m.hblkhd
}

fn items<K: serde::de::DeserializeOwned>(dir: &str, file: &str) -> Vec<K> {
    let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap_or_default();
    let list: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect()
}

/// Bytes malloc holds per object for `objects` after `strip`.
fn measure<K>(what: &str, objects: &[K], strip: impl Fn(&mut K)) -> usize
where
    K: Clone,
{
    let before = in_use();
    let kept: Vec<Arc<K>> = objects
        .iter()
        .map(|o| {
            let mut o = o.clone();
            strip(&mut o);
            Arc::new(o)
        })
        .collect();
    let after = in_use();
    let each = after.saturating_sub(before) / kept.len().max(1);
    println!("{what}: {} objects, {each} bytes each", kept.len());
    drop(kept);
    each
}

#[test]
#[ignore]
fn executor_cache_footprint() {
    let Ok(dir) = std::env::var("NW_FOOTPRINT_DIR") else {
        return;
    };
    let ns = std::env::var("NW_FOOTPRINT_NS").unwrap_or_else(|_| "nodewright".into());
    let jobs: Vec<Job> = items(&dir, "jobs.json");
    let pods: Vec<Pod> = items(&dir, "pods.json");
    println!(
        "size_of Job {} Pod {} ObjectMeta {}",
        std::mem::size_of::<Job>(),
        std::mem::size_of::<Pod>(),
        std::mem::size_of::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>()
    );
    let job_raw = measure("job raw", &jobs, |_| ());
    let job_slim = measure("job stripped", &jobs, strip_job);
    let pod_raw = measure("pod raw", &pods, |_| ());
    let pod_slim = measure("pod stripped", &pods, |p| strip_any_pod(p, &ns));
    assert!(job_slim * 4 < job_raw && pod_slim * 4 < pod_raw);
}

/// Decodes every line three times (as a store sees an object's updates), keeping the last
/// stripped version; returns the decoded count.
fn replay<K, W>(lines: &[&str], unwrap: impl Fn(W) -> K, strip: impl Fn(&mut K)) -> usize
where
    W: serde::de::DeserializeOwned,
{
    let mut kept: Vec<Option<Arc<K>>> = (0..lines.len()).map(|_| None).collect();
    for _ in 0..3 {
        for (slot, line) in kept.iter_mut().zip(lines) {
            if let Ok(kube::core::WatchEvent::Modified(w)) = serde_json::from_str(line) {
                let mut k = unwrap(w);
                strip(&mut k);
                *slot = Some(Arc::new(k));
            }
        }
    }
    let n = kept.iter().flatten().count();
    std::mem::forget(kept);
    n
}

/// As [`replay`] with the wire decoding, keeping the objects in a reflector store as the caches
/// do (so the store's keys and hash table are counted too).
fn replay_store<K>(lines: &[&str], strip: impl Fn(&mut K)) -> usize
where
    K: kube::Resource<DynamicType = ()> + nodewright_shell::cache::wire::Slim,
    K: Clone + Default + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    let (reader, mut writer) = kube::runtime::reflector::store::<K>();
    for _ in 0..3 {
        for line in lines {
            if let Ok(kube::core::WatchEvent::Modified(w)) =
                serde_json::from_str::<kube::core::WatchEvent<Wire<K>>>(line)
            {
                let mut k = w.into_result().unwrap_or_default();
                strip(&mut k);
                writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(k));
            }
        }
    }
    let n = reader.len();
    std::mem::forget((reader, writer));
    n
}

#[test]
#[ignore]
fn watch_decode_heap() {
    let (Ok(dir), Ok(mode)) = (
        std::env::var("NW_FOOTPRINT_DIR"),
        std::env::var("NW_FOOTPRINT_MODE"),
    ) else {
        return;
    };
    // One allocation per file (mmapped), so the heap measured below is the decode's alone.
    let jobs_text = std::fs::read_to_string(format!("{dir}/jobs.events")).unwrap_or_default();
    let pods_text = std::fs::read_to_string(format!("{dir}/pods.events")).unwrap_or_default();
    let jobs: Vec<&str> = jobs_text.lines().collect();
    let pods: Vec<&str> = pods_text.lines().collect();
    let (used0, taken0, started) = (in_use(), taken(), std::time::Instant::now());
    let n = if mode == "store" {
        replay_store::<Job>(&jobs, strip_job)
            + replay_store::<Pod>(&pods, |p| strip_any_pod(p, "nodewright"))
    } else if mode == "wire" {
        replay(
            &jobs,
            |w: Wire<Job>| w.into_result().unwrap_or_default(),
            strip_job,
        ) + replay(
            &pods,
            |w: Wire<Pod>| w.into_result().unwrap_or_default(),
            |p| strip_any_pod(p, "nodewright"),
        )
    } else {
        replay(&jobs, |j: Job| j, strip_job)
            + replay(&pods, |p: Pod| p, |p| strip_any_pod(p, "nodewright"))
    };
    let elapsed = started.elapsed();
    let (used, took) = (in_use() - used0, taken().saturating_sub(taken0));
    println!(
        "{mode}: {n} objects ({} Jobs, {} pods) x 3 events in {elapsed:?} (debug build): heap in use {} B each, taken from the system {} B each",
        jobs.len(),
        pods.len(),
        used / n.max(1),
        took / n.max(1)
    );
}

/// The recorded executor Job and pod of `shell/src/cache/testdata`, made `n` distinct objects
/// (name, uid, node and controller uid differ as across a rollout).
fn recorded(n: usize) -> Vec<(Job, Pod)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/cache/testdata");
    let read = |file: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap_or_default();
        serde_json::from_str(&text).unwrap_or_default()
    };
    let (job, pod) = (read("executor_job.json"), read("executor_pod.json"));
    (0..n)
        .map(|i| {
            let text = |v: &serde_json::Value| {
                v.to_string()
                    .replace("scale-node-0", &format!("scale-node-{i}"))
                    .replace("4cdd4474-0a04", &format!("{i:08x}-0a04"))
            };
            let j: Job = serde_json::from_str(&text(&job)).unwrap_or_default();
            let p: Pod = serde_json::from_str(&text(&pod)).unwrap_or_default();
            (j, p)
        })
        .collect()
}

/// Heap per retained executor Job + pod as the caches keep them, typed and stripped (before the
/// compact records) against compact records, each in a reflector store as the caches do, and the
/// Job alone once its pod is settled and dropped (D28).
/// Run by hand: `cargo test -p nodewright-shell --test cache_footprint -- --ignored --nocapture compact_record_heap`.
#[test]
#[ignore]
fn compact_record_heap() {
    use kube::runtime::reflector::store;
    use kube::runtime::watcher::Event;
    use nodewright_shell::cache::{CachedJob, CachedPod};
    const N: usize = 2_000;
    let objects = recorded(N);
    println!(
        "size_of Job {} Pod {} | SlimJob {} SlimPod {} | ContainerStatus {} SlimContainerStatus {}",
        std::mem::size_of::<Job>(),
        std::mem::size_of::<Pod>(),
        std::mem::size_of::<nodewright_core::SlimJob>(),
        std::mem::size_of::<nodewright_core::SlimPod>(),
        std::mem::size_of::<k8s_openapi::api::core::v1::ContainerStatus>(),
        std::mem::size_of::<nodewright_core::SlimContainerStatus>(),
    );
    let before = in_use();
    let (jobs, mut job_writer) = store::<Job>();
    let (pods, mut pod_writer) = store::<Pod>();
    for (j, p) in &objects {
        let (mut j, mut p) = (j.clone(), p.clone());
        strip_job(&mut j);
        strip_any_pod(&mut p, "nodewright");
        job_writer.apply_watcher_event(&Event::Apply(j));
        pod_writer.apply_watcher_event(&Event::Apply(p));
    }
    let typed = (in_use() - before) / (jobs.len().max(1));
    drop((jobs, job_writer, pods, pod_writer));
    let before = in_use();
    let (jobs, mut job_writer) = store::<CachedJob>();
    let (pods, mut pod_writer) = store::<CachedPod>();
    // One interner for the store, as the Job cache keeps.
    let mut interner = nodewright_core::Interner::default();
    for (j, p) in &objects {
        let job = CachedJob::interned(j.clone(), &mut interner);
        job_writer.apply_watcher_event(&Event::Apply(job));
        pod_writer.apply_watcher_event(&Event::Apply(CachedPod::new(p.clone(), "nodewright")));
    }
    let compact = (in_use() - before) / (jobs.len().max(1));
    println!(
        "{} Jobs + {} pods in reflector stores: typed and stripped {typed} B per Job + pod, compact records {compact} B ({:.2}x)",
        jobs.len(),
        pods.len(),
        compact as f64 / typed.max(1) as f64
    );
    assert!(compact < typed);
    // D28: once settled, the pod leaves its store and the Job alone stays.
    for (_, p) in &objects {
        pod_writer.apply_watcher_event(&Event::Delete(CachedPod::new(p.clone(), "nodewright")));
    }
    let settled = (in_use() - before) / (jobs.len().max(1));
    println!(
        "{} Jobs + {} pods after the settled pods left (D28): {settled} B per settled executor ({:.2}x of compact)",
        jobs.len(),
        pods.len(),
        settled as f64 / compact.max(1) as f64
    );
    assert!(settled < compact);
}

/// Heap per Job of the executor index built over the recorded Jobs (`compact_record_heap`'s
/// objects, pods settled and gone). Run by hand:
/// `cargo test -p nodewright-shell --test cache_footprint -- --ignored --nocapture executor_index_heap`.
#[test]
#[ignore]
fn executor_index_heap() {
    use nodewright_core::jobs::index::ExecutorIndex;
    use nodewright_core::{Options, Snapshot};
    use nodewright_shell::cache::CachedJob;
    const N: usize = 2_000;
    let jobs: Vec<_> = recorded(N)
        .into_iter()
        .map(|(j, _)| CachedJob::new(j).0)
        .collect();
    let snapshot = Snapshot {
        jobs,
        ..Snapshot::default()
    };
    let options = Options {
        namespace: "nodewright".into(),
        ..Options::default()
    };
    let before = in_use();
    let index = ExecutorIndex::build(&snapshot, &options);
    let per_job = (in_use() - before) / N;
    println!(
        "{} Jobs indexed: {per_job} B of index per Job (size_of ExecutorJob {} B)",
        index.all().len(),
        std::mem::size_of::<nodewright_core::jobs::index::ExecutorJob>()
    );
    assert_eq!(index.all().len(), N);
}
