//! The lease state machine, free of I/O and of clocks: the driver (or a simulator) feeds it what
//! it read of the lease, the outcome of its own writes and the current monotonic time, and it
//! says what to write next and until when this candidate may act as leader.
//!
//! Time is a [`Duration`] since an arbitrary origin chosen by the caller. Remote timestamps
//! (`renewTime`) are never compared with the local clock, so clock skew between replicas does not
//! matter: a foreign lease expires when its record has not changed for its duration *as measured
//! locally*, the way client-go decides.
//!
//! Safety: a leader's writes are allowed until `start of its last successful lease write +
//! renew_deadline`. A rival only takes over after observing the record unchanged for
//! `lease_duration` (> renew_deadline) from a moment after that write landed, so the old leader
//! has stopped writing at least `lease_duration - renew_deadline` before the rival acquires.

use std::time::Duration;

/// Timings of one candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    /// How long a lease is valid without renewal (written into the lease).
    pub lease_duration: Duration,
    /// How long after its last successful write a leader may still act; must be below
    /// `lease_duration`.
    pub renew_deadline: Duration,
    /// Pause between attempts.
    pub retry_period: Duration,
}

impl Default for Timings {
    /// controller-runtime's defaults: 15 s lease, 10 s renew deadline, 2 s retry.
    fn default() -> Self {
        Timings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// What a candidate read of the lease (the fields the machine uses).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseView {
    /// `spec.holderIdentity`; `None` or empty means released.
    pub holder: Option<String>,
    /// `spec.renewTime` as text: compared for change only, never with the local clock.
    pub renew_time: Option<String>,
    /// `spec.leaseDurationSeconds`.
    pub lease_duration: Option<Duration>,
    /// `spec.leaseTransitions`.
    pub transitions: i32,
}

/// The write the driver should attempt next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// The lease does not exist: create it naming this candidate.
    Create,
    /// Take over a released or expired lease (an update guarded by its resourceVersion), writing
    /// `transitions` into it.
    Acquire {
        /// The new `leaseTransitions`.
        transitions: i32,
    },
    /// Renew this candidate's own lease.
    Renew,
    /// Someone else holds a fresh lease: write nothing.
    Wait,
}

/// A transition of leadership the driver should announce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Leadership began.
    Acquired,
    /// Leadership ended (deadline passed, or another holder was seen).
    Lost,
}

/// The state of one candidate.
#[derive(Clone, Debug)]
pub struct Machine {
    identity: String,
    timings: Timings,
    /// A foreign record as last seen, and when it was first seen in that form.
    observed: Option<(LeaseView, Duration)>,
    /// While leading: the end of the window in which writes are allowed.
    valid_until: Option<Duration>,
    /// What [`Machine::change`] last reported.
    announced: bool,
}

impl Machine {
    /// A candidate that does not lead yet.
    pub fn new(identity: &str, timings: Timings) -> Self {
        Machine {
            identity: identity.to_string(),
            timings,
            observed: None,
            valid_until: None,
            announced: false,
        }
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The timings.
    pub fn timings(&self) -> Timings {
        self.timings
    }

    /// True while this candidate may write as leader.
    pub fn leading(&self, now: Duration) -> bool {
        self.valid_until.is_some_and(|until| now < until)
    }

    /// End of the current leadership window, if any.
    pub fn valid_until(&self) -> Option<Duration> {
        self.valid_until
    }

    /// Where the write fence should stand at `now`: open until the end of the window while
    /// leading, else closed (`None`).
    pub fn fence_until(&self, now: Duration) -> Option<Duration> {
        self.valid_until.filter(|_| self.leading(now))
    }

    /// Decides the next write from the lease as read at `now` (`None`: the lease is absent).
    pub fn on_read(&mut self, now: Duration, lease: Option<&LeaseView>) -> Action {
        let Some(lease) = lease else {
            self.observed = None;
            return Action::Create;
        };
        let holder = lease.holder.as_deref().filter(|h| !h.is_empty());
        match holder {
            Some(h) if h == self.identity => {
                self.observed = None;
                Action::Renew
            }
            None => {
                self.observed = None;
                Action::Acquire {
                    transitions: lease.transitions,
                }
            }
            Some(_) => {
                // Someone else holds it: whatever we believed, we no longer lead.
                self.valid_until = None;
                self.foreign(now, lease)
            }
        }
    }

    fn foreign(&mut self, now: Duration, lease: &LeaseView) -> Action {
        let since = match &self.observed {
            Some((seen, at)) if seen == lease => *at,
            _ => {
                self.observed = Some((lease.clone(), now));
                now
            }
        };
        let duration = lease
            .lease_duration
            .filter(|d| !d.is_zero())
            .unwrap_or(self.timings.lease_duration);
        if now.saturating_sub(since) >= duration {
            Action::Acquire {
                transitions: lease.transitions.saturating_add(1),
            }
        } else {
            Action::Wait
        }
    }

    /// A create, acquire or renew write that was sent at `started` succeeded.
    pub fn on_write_ok(&mut self, started: Duration) {
        self.observed = None;
        let until = started + self.timings.renew_deadline;
        self.valid_until = Some(self.valid_until.map_or(until, |u| u.max(until)));
    }

    /// A lease write failed (conflict, error or timeout). Leadership, if any, simply runs out at
    /// its deadline; nothing else changes.
    pub fn on_write_failed(&mut self) {}

    /// The lease was released (or we gave up): stop leading at once.
    pub fn on_released(&mut self) {
        self.valid_until = None;
    }

    /// How long the next attempt (read plus write) may take: the rest of the leadership window
    /// while leading, else the renew deadline.
    pub fn attempt_bound(&self, now: Duration) -> Duration {
        match self.valid_until {
            Some(until) if until > now => until - now,
            _ => self.timings.renew_deadline,
        }
    }

    /// When to attempt next: one retry period on, but no later than the end of the window.
    pub fn next_attempt(&self, now: Duration) -> Duration {
        let next = now + self.timings.retry_period;
        match self.valid_until {
            Some(until) if until > now => next.min(until),
            _ => next,
        }
    }

    /// True when a shutdown may release the lease (only while still leading: after the window
    /// someone else may hold it).
    pub fn may_release(&self, now: Duration) -> bool {
        self.leading(now)
    }

    /// Reports a leadership transition since the last call, if any.
    pub fn change(&mut self, now: Duration) -> Option<Change> {
        let leading = self.leading(now);
        if leading == self.announced {
            return None;
        }
        self.announced = leading;
        if !leading {
            self.valid_until = None;
        }
        Some(if leading {
            Change::Acquired
        } else {
            Change::Lost
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: f64) -> Duration {
        Duration::from_secs_f64(secs)
    }

    fn held(holder: &str, renew: &str) -> LeaseView {
        LeaseView {
            holder: Some(holder.into()),
            renew_time: Some(renew.into()),
            lease_duration: Some(s(15.0)),
            transitions: 4,
        }
    }

    fn machine() -> Machine {
        Machine::new("me", Timings::default())
    }

    #[test]
    fn creates_an_absent_lease_and_leads_until_the_renew_deadline() {
        let mut m = machine();
        assert_eq!(m.on_read(s(0.0), None), Action::Create);
        m.on_write_ok(s(0.1));
        assert_eq!(m.change(s(0.2)), Some(Change::Acquired));
        assert!(m.leading(s(10.0)));
        assert!(!m.leading(s(10.1)), "window = write start + renew deadline");
        assert_eq!(m.change(s(10.1)), Some(Change::Lost));
        assert_eq!(m.change(s(10.2)), None);
    }

    #[test]
    fn renews_its_own_lease_and_extends_the_window() {
        let mut m = machine();
        m.on_write_ok(s(0.0));
        assert_eq!(m.on_read(s(2.0), Some(&held("me", "a"))), Action::Renew);
        m.on_write_ok(s(2.0));
        assert!(m.leading(s(11.9)));
        assert_eq!(m.next_attempt(s(2.0)), s(4.0));
    }

    #[test]
    fn waits_for_a_fresh_foreign_lease_and_takes_it_after_its_duration_unchanged() {
        let mut m = machine();
        assert_eq!(m.on_read(s(0.0), Some(&held("other", "a"))), Action::Wait);
        assert_eq!(m.on_read(s(14.9), Some(&held("other", "a"))), Action::Wait);
        assert_eq!(
            m.on_read(s(15.0), Some(&held("other", "a"))),
            Action::Acquire { transitions: 5 }
        );
    }

    #[test]
    fn a_renewed_foreign_lease_restarts_the_expiry_clock() {
        let mut m = machine();
        assert_eq!(m.on_read(s(0.0), Some(&held("other", "a"))), Action::Wait);
        assert_eq!(m.on_read(s(10.0), Some(&held("other", "b"))), Action::Wait);
        assert_eq!(m.on_read(s(24.0), Some(&held("other", "b"))), Action::Wait);
        assert!(matches!(
            m.on_read(s(25.0), Some(&held("other", "b"))),
            Action::Acquire { .. }
        ));
    }

    #[test]
    fn clock_skew_is_irrelevant_only_observed_change_counts() {
        // The holder's clock is an hour behind ours: its renewTime looks stale, yet the record
        // keeps changing, so it is alive and must not be taken.
        let mut m = machine();
        for (i, at) in [0.0, 2.0, 4.0, 16.0, 30.0].iter().enumerate() {
            let renew = format!("2026-01-01T00:00:0{i}Z");
            assert_eq!(
                m.on_read(s(*at), Some(&held("other", &renew))),
                Action::Wait
            );
        }
    }

    #[test]
    fn a_released_lease_is_taken_at_once_without_a_transition() {
        let mut m = machine();
        let released = LeaseView {
            holder: Some(String::new()),
            ..held("x", "a")
        };
        assert_eq!(
            m.on_read(s(0.0), Some(&released)),
            Action::Acquire { transitions: 4 }
        );
    }

    #[test]
    fn a_hung_renew_ends_leadership_at_the_deadline_without_any_input() {
        let mut m = machine();
        m.on_write_ok(s(0.0));
        assert_eq!(m.change(s(0.0)), Some(Change::Acquired));
        // A renew starts at 2 s and never returns: the driver may wait at most the rest of the
        // window for it.
        assert_eq!(m.on_read(s(2.0), Some(&held("me", "a"))), Action::Renew);
        assert_eq!(m.attempt_bound(s(2.0)), s(8.0));
        assert!(!m.leading(s(10.0)));
        m.on_write_failed();
        assert_eq!(m.change(s(10.0)), Some(Change::Lost));
        assert!(!m.may_release(s(10.0)));
    }

    #[test]
    fn seeing_another_holder_ends_leadership_immediately() {
        let mut m = machine();
        m.on_write_ok(s(0.0));
        m.change(s(0.0));
        assert_eq!(m.on_read(s(2.0), Some(&held("other", "z"))), Action::Wait);
        assert!(!m.leading(s(2.0)));
        assert_eq!(m.change(s(2.0)), Some(Change::Lost));
    }

    #[test]
    fn conflicts_do_not_extend_leadership() {
        let mut m = machine();
        m.on_write_ok(s(0.0));
        for t in [2.0, 4.0, 6.0, 8.0] {
            assert_eq!(m.on_read(s(t), Some(&held("me", "a"))), Action::Renew);
            m.on_write_failed(); // 409: someone updated it in between
        }
        assert!(m.leading(s(9.9)));
        assert!(!m.leading(s(10.0)));
    }

    #[test]
    fn release_only_while_leading_and_stops_at_once() {
        let mut m = machine();
        m.on_write_ok(s(0.0));
        assert!(m.may_release(s(1.0)));
        m.on_released();
        assert!(!m.leading(s(1.0)));
    }

    #[test]
    fn the_old_leader_stops_before_a_rival_can_acquire() {
        // Property over a grid: old leader's last write started at w and landed at w + lat; the
        // rival first sees it at w + lat + seen. The rival acquires no earlier than that + the
        // lease duration, and the old window ends strictly before.
        let t = Timings::default();
        for w in 0..5 {
            for lat in [0.0, 0.5, 3.0, 9.0] {
                for seen in [0.0, 1.0, 2.0] {
                    let mut old = machine();
                    old.on_write_ok(s(f64::from(w)));
                    let mut rival = Machine::new("rival", t);
                    let first = f64::from(w) + lat + seen;
                    let view = held("me", "r");
                    assert_eq!(rival.on_read(s(first), Some(&view)), Action::Wait);
                    let acquire_at = first + 15.0;
                    assert!(matches!(
                        rival.on_read(s(acquire_at), Some(&view)),
                        Action::Acquire { .. }
                    ));
                    assert!(!old.leading(s(acquire_at - 4.9)));
                }
            }
        }
    }
}
