//! Keeping glibc malloc's footprint close to what the process holds. glibc keeps memory the
//! process freed (watch events decoded whole before the caches strip them, per-pass indexes) in
//! per-thread arenas and gives back only the top of each heap on its own. The operator therefore
//! uses one arena unless `MALLOC_ARENA_MAX` or `GLIBC_TUNABLES` says otherwise ([`limit_arenas`]),
//! and `malloc_trim(0)` releases the free pages in the middle of the heap every [`PERIOD`], so the
//! resident memory follows what the caches hold instead of the highest it has been
//! (docs/performance.md, "Executor slimming"). Blocks of [`MMAP_THRESHOLD`] and more are mapped on
//! their own ([`pin_mmap_threshold`]).

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

/// Arenas glibc malloc may use unless the environment sets its own limit.
pub const ARENAS: i32 = 1;

/// Allocations of at least this many bytes get a mapping of their own, returned when freed.
pub const MMAP_THRESHOLD: i32 = 128 * 1024;

/// Sets malloc parameter `param` to `value` unless the variable `env` or `GLIBC_TUNABLES` is set;
/// true when it was set.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_unless_env(env: &str, param: libc::c_int, value: libc::c_int) -> bool {
    if std::env::var_os(env).is_some() || std::env::var_os("GLIBC_TUNABLES").is_some() {
        return false;
    }
    // SAFETY: glibc's mallopt takes two integers; both parameters used here only affect
    // future allocations.
    unsafe { libc::mallopt(param, value) == 1 }
}

/// Limits glibc malloc to [`ARENAS`] arenas unless `MALLOC_ARENA_MAX` or `GLIBC_TUNABLES` is set.
/// Call it first thing in `main`, before any thread starts; true when the limit was set.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn limit_arenas() -> bool {
    set_unless_env("MALLOC_ARENA_MAX", libc::M_ARENA_MAX, ARENAS)
}

/// Pins glibc's mmap threshold at [`MMAP_THRESHOLD`] unless `MALLOC_MMAP_THRESHOLD_` or
/// `GLIBC_TUNABLES` is set; true when it was pinned. Left to itself glibc raises the threshold to
/// the size of every mapped block freed (up to 32 MiB), after which large short-lived buffers
/// (list pages, a pass's vectors, a cache table being regrown) are carved from the heap between
/// long-lived cache records and leave holes the trim cannot return.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn pin_mmap_threshold() -> bool {
    set_unless_env(
        "MALLOC_MMAP_THRESHOLD_",
        libc::M_MMAP_THRESHOLD,
        MMAP_THRESHOLD,
    )
}

/// Pins the mmap threshold; a no-op without glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn pin_mmap_threshold() -> bool {
    false
}

/// Limits malloc arenas; a no-op without glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_arenas() -> bool {
    false
}

/// Releases free heap pages; true when memory was returned.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn trim() -> bool {
    // SAFETY: glibc's malloc_trim takes no pointers and locks each arena itself.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Releases free heap pages; a no-op without glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arenas_are_limited_unless_the_environment_sets_a_limit() {
        let env_set = std::env::var_os("MALLOC_ARENA_MAX").is_some()
            || std::env::var_os("GLIBC_TUNABLES").is_some();
        let glibc = cfg!(all(target_os = "linux", target_env = "gnu"));
        assert_eq!(limit_arenas(), glibc && !env_set);
    }

    #[test]
    fn mmap_threshold_is_pinned_unless_the_environment_sets_one() {
        let env_set = std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some()
            || std::env::var_os("GLIBC_TUNABLES").is_some();
        let glibc = cfg!(all(target_os = "linux", target_env = "gnu"));
        assert_eq!(pin_mmap_threshold(), glibc && !env_set);
    }
}
