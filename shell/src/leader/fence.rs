//! The write fence: every write of the reconcile path checks it right before the request is sent
//! (see `crate::client`), so a replica whose leadership window has passed cannot write, even when
//! its lease task is hung or the process was stopped and resumed.

use std::sync::{Arc, Mutex};
use tokio::time::Instant;

/// Shared "may this replica write" state, open until an [`Instant`] set by the lease driver.
#[derive(Clone, Debug)]
pub struct Fence {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    always: bool,
    until: Mutex<Option<Instant>>,
}

impl Fence {
    /// A fence that never closes (leader election off: this replica is the only writer).
    pub fn always_open() -> Self {
        Fence::build(true)
    }

    /// A closed fence (a candidate that does not lead yet).
    pub fn closed() -> Self {
        Fence::build(false)
    }

    fn build(always: bool) -> Self {
        Fence {
            inner: Arc::new(Inner {
                always,
                until: Mutex::new(None),
            }),
        }
    }

    /// True when writes are allowed now.
    pub fn open(&self) -> bool {
        self.inner.always || self.until().is_some_and(|u| Instant::now() < u)
    }

    /// Allows writes until `until`.
    pub fn open_until(&self, until: Instant) {
        *self.lock() = Some(until);
    }

    /// Refuses writes from now on.
    pub fn close(&self) {
        *self.lock() = None;
    }

    fn until(&self) -> Option<Instant> {
        *self.lock()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        // The guarded value is a plain Option: a poisoned lock still holds a valid one.
        self.inner.until.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_fence_closes_by_itself_when_the_window_passes() {
        let f = Fence::closed();
        assert!(!f.open());
        f.open_until(Instant::now() + Duration::from_secs(60));
        assert!(f.open());
        f.open_until(Instant::now() - Duration::from_millis(1));
        assert!(!f.open(), "no renewal needed to close it");
        f.open_until(Instant::now() + Duration::from_secs(60));
        f.close();
        assert!(!f.open());
        assert!(Fence::always_open().open());
    }
}
