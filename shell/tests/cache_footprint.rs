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

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
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
