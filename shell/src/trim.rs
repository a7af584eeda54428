//! Returning freed heap to the system. glibc malloc keeps memory the process freed (watch events
//! decoded whole before the caches strip them, per-pass indexes) in its arenas; only the top of
//! each heap is given back on its own. `malloc_trim(0)` also releases the free pages in the
//! middle of the heaps, so the resident memory follows what the caches hold instead of the
//! highest it has been (docs/performance.md, "Executor slimming").

use std::time::Duration;

use tokio::sync::watch;
use tracing::debug;

/// How often freed heap is returned to the system.
pub const PERIOD: Duration = Duration::from_secs(10);

/// Trims the heap every `period` until `shutdown` turns true.
pub async fn run(period: Duration, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        let started = std::time::Instant::now();
        let released = tokio::task::spawn_blocking(trim).await.unwrap_or(false);
        debug!(
            released,
            took_us = started.elapsed().as_micros() as u64,
            "heap trimmed"
        );
    }
}

/// Releases free heap pages; true when memory was returned.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn trim() -> bool {
    unsafe extern "C" {
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }
    // SAFETY: glibc's malloc_trim takes no pointers and locks each arena itself.
    unsafe { malloc_trim(0) == 1 }
}

/// Releases free heap pages; a no-op without glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim() -> bool {
    false
}
