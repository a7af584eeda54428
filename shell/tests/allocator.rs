//! The operator's allocator as the binary installs it (shell/src/bin/nodewright-operator.rs):
//! jemalloc with the options of `allocator::CONF`, which return freed pages at once.

use nodewright_shell::allocator::{CONF, Conf, HeapStats, Jemalloc, jemalloc_in_use};

#[global_allocator]
static ALLOCATOR: Jemalloc = Jemalloc;

#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: Conf = CONF;

fn opt<T: Copy>(name: &str) -> T {
    let key = format!("opt.{name}\0");
    // SAFETY: each name below is an option of jemalloc 5.3 of the type read.
    unsafe { tikv_jemalloc_ctl::raw::read::<T>(key.as_bytes()) }.expect(name)
}

#[test]
fn the_compiled_in_options_are_the_ones_jemalloc_runs_with() {
    if std::env::var_os("_RJEM_MALLOC_CONF").is_some() {
        return; // Overridden on purpose by whoever runs the test.
    }
    assert!(jemalloc_in_use());
    assert_eq!(opt::<u32>("narenas"), 1);
    assert_eq!(opt::<isize>("dirty_decay_ms"), 0);
    assert_eq!(opt::<isize>("muzzy_decay_ms"), 0);
    assert!(!opt::<bool>("tcache"));
}

#[test]
fn freed_memory_leaves_the_resident_set_at_once() {
    let resident = || {
        tikv_jemalloc_ctl::epoch::advance().expect("epoch");
        tikv_jemalloc_ctl::stats::resident::read().expect("resident") as f64
    };
    let before = HeapStats::read().expect("jemalloc stats");
    let block = std::hint::black_box(vec![7u8; 64 << 20]);
    let during = HeapStats::read().expect("jemalloc stats");
    let resident_during = resident();
    assert!(
        during.in_use_bytes - before.in_use_bytes >= (64 << 20) as f64,
        "{before:?} -> {during:?}"
    );
    drop(block);
    let after = resident();
    assert!(
        resident_during - after >= (60 << 20) as f64,
        "resident {resident_during} -> {after} after freeing 64 MiB"
    );
}
