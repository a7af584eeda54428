//! The write fence: every write of the reconcile path checks it right before the request is sent
//! (see `crate::client`), so a replica whose leadership window has passed cannot write, even when
//! its lease task is hung or the process was stopped and resumed.
//!
//! [`Window`] is the pure decision (open until a time, on any clock); [`Fence`] is the operator's
//! shared handle on a window over tokio's clock. The simulator keeps a [`Window`] over virtual time.

use std::sync::{Arc, Mutex};
use tokio::time::Instant;

/// A leadership window on some clock `T`: writes are allowed strictly before `until`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window<T> {
    always: bool,
    until: Option<T>,
}

impl<T: Copy + Ord> Window<T> {
    /// A window that never closes (leader election off).
    pub fn always_open() -> Self {
        Window {
            always: true,
            until: None,
        }
    }

    /// A closed window.
    pub fn closed() -> Self {
        Window {
            always: false,
            until: None,
        }
    }

    /// True when a write may be sent at `now`.
    pub fn admits(&self, now: T) -> bool {
        self.always || self.until.is_some_and(|u| now < u)
    }

    /// Opens the window until `until`.
    pub fn open_until(&mut self, until: T) {
        self.until = Some(until);
    }

    /// Closes the window.
    pub fn close(&mut self) {
        self.until = None;
    }

    /// Sets the window from the machine's answer: open until `until`, or closed.
    pub fn set(&mut self, until: Option<T>) {
        self.until = until;
    }
}

/// Shared "may this replica write" state, open until an [`Instant`] set by the lease driver.
#[derive(Clone, Debug)]
pub struct Fence {
    inner: Arc<Mutex<Window<Instant>>>,
}

impl Fence {
    /// A fence that never closes (leader election off: this replica is the only writer).
    pub fn always_open() -> Self {
        Fence::build(Window::always_open())
    }

    /// A closed fence (a candidate that does not lead yet).
    pub fn closed() -> Self {
        Fence::build(Window::closed())
    }

    fn build(window: Window<Instant>) -> Self {
        Fence {
            inner: Arc::new(Mutex::new(window)),
        }
    }

    /// True when writes are allowed now.
    pub fn open(&self) -> bool {
        self.lock().admits(Instant::now())
    }

    /// Allows writes until `until`.
    pub fn open_until(&self, until: Instant) {
        self.lock().open_until(until);
    }

    /// Refuses writes from now on.
    pub fn close(&self) {
        self.lock().close();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Window<Instant>> {
        // The guarded value is plain data: a poisoned lock still holds a valid one.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
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

    #[test]
    fn a_window_admits_strictly_before_its_end_on_any_clock() {
        let mut w = Window::<u64>::closed();
        assert!(!w.admits(0));
        w.set(Some(10));
        assert!(w.admits(9));
        assert!(!w.admits(10));
        w.set(None);
        assert!(!w.admits(0));
        assert!(Window::<u64>::always_open().admits(u64::MAX));
    }
}
