//! The operator's memory allocator: jemalloc, set to return freed pages to the system at once
//! ([`CONF`]). glibc malloc kept about 30 MiB of freed memory resident after a 1,000-node rollout
//! even with one arena and a periodic trim; jemalloc with these options settles at what the caches
//! hold at no measurable CPU cost (docs/performance.md, "Allocator again, at 1,000 × 5").
//!
//! The binary installs it with `#[global_allocator]` and exports [`CONF`] as `_rjem_malloc_conf`;
//! `_RJEM_MALLOC_CONF` in the environment overrides single options at start-up. Built with the
//! feature `system-allocator`, the binary allocates with the system's malloc instead (heap
//! profilers such as heaptrack see only malloc).

use std::ffi::c_char;
use std::sync::OnceLock;

pub use tikv_jemallocator::Jemalloc;

/// jemalloc's options as a C string, read once when the allocator starts.
#[repr(transparent)]
pub struct Conf(*const c_char);

// SAFETY: the pointer is to an immutable string with a 'static lifetime.
unsafe impl Sync for Conf {}

impl Conf {
    /// The options as text.
    pub fn text(&self) -> &'static str {
        // SAFETY: every `Conf` is built from a 'static C string literal below.
        unsafe { std::ffi::CStr::from_ptr(self.0) }
            .to_str()
            .unwrap_or_default()
    }
}

/// One arena (the operator's work is one pass at a time), freed pages purged at once (no decay),
/// no per-thread caches holding freed blocks.
pub const CONF: Conf = Conf(c"narenas:1,dirty_decay_ms:0,muzzy_decay_ms:0,tcache:false".as_ptr());

/// What the allocator holds: bytes handed out to the program, and bytes it keeps resident beyond
/// them (free pages not yet returned, and its own metadata).
#[derive(Debug, Default, PartialEq)]
pub struct HeapStats {
    /// Bytes in use by the program.
    pub in_use_bytes: f64,
    /// Bytes the allocator keeps resident or mapped beyond those in use.
    pub free_bytes: f64,
}

impl HeapStats {
    /// Reads jemalloc's statistics when jemalloc is the global allocator, else glibc's `mallinfo2`;
    /// `None` when neither is available.
    pub fn read() -> Option<Self> {
        if jemalloc_in_use() {
            jemalloc_stats()
        } else {
            glibc_stats()
        }
    }
}

/// True when this process allocates through jemalloc: a 1 MiB block taken from the global
/// allocator shows in jemalloc's count of the bytes this thread allocated (a per-thread count, so
/// other threads freeing memory meanwhile cannot hide it). Asked once.
pub fn jemalloc_in_use() -> bool {
    static IN_USE: OnceLock<bool> = OnceLock::new();
    *IN_USE.get_or_init(|| {
        let Ok(allocated) = tikv_jemalloc_ctl::thread::allocatedp::read() else {
            return false;
        };
        let before = allocated.get();
        let block = std::hint::black_box(vec![1u8; 1 << 20]);
        let during = allocated.get();
        drop(block);
        during >= before + (1 << 20)
    })
}

fn jemalloc_stats() -> Option<HeapStats> {
    tikv_jemalloc_ctl::epoch::advance().ok()?;
    let allocated = tikv_jemalloc_ctl::stats::allocated::read().ok()?;
    let resident = tikv_jemalloc_ctl::stats::resident::read().ok()?;
    Some(HeapStats {
        in_use_bytes: allocated as f64,
        free_bytes: resident.saturating_sub(allocated) as f64,
    })
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn glibc_stats() -> Option<HeapStats> {
    // SAFETY: mallinfo2 takes no arguments and returns a plain struct by value.
    let m = unsafe { libc::mallinfo2() };
    Some(HeapStats {
        in_use_bytes: (m.uordblks + m.hblkhd) as f64,
        free_bytes: m.fordblks as f64,
    })
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn glibc_stats() -> Option<HeapStats> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_options_read_back_as_text() {
        assert_eq!(
            CONF.text(),
            "narenas:1,dirty_decay_ms:0,muzzy_decay_ms:0,tcache:false"
        );
    }

    // Unit tests run on the default allocator; shell/tests/allocator.rs runs on jemalloc.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn without_jemalloc_installed_the_glibc_heap_is_reported() {
        assert!(!jemalloc_in_use());
        let before = HeapStats::read().expect("glibc").in_use_bytes;
        let block = std::hint::black_box(vec![7u8; 64 << 20]);
        let during = HeapStats::read().expect("glibc").in_use_bytes;
        assert!(during - before >= (60 << 20) as f64, "{before} -> {during}");
        drop(block);
    }
}
