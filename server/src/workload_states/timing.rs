//! [`Timing`]: per instance, when its availability was last confirmed and
//! last re-sent (which the TTL resync reads), and since when it has its
//! current kind of state.

use tokio::time::Instant;

/// When an instance was last confirmed and last re-sent, and since when it
/// has its current kind of state.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// The last report that confirmed or changed its availability (or the
    /// entry's creation).
    pub confirmed: Instant,
    /// The last resync of its spec, if any.
    pub resent: Option<Instant>,
    /// When its state last changed kind (or the entry's creation): e.g.
    /// since when it is Succeeded, which the ttl of a finished workload
    /// counts from.
    pub state_since: Instant,
}

impl Timing {
    pub(super) fn new(now: Instant) -> Self {
        Self { confirmed: now, resent: None, state_since: now }
    }

    /// The later of the two: a resync is due this long after it.
    pub fn last_activity(&self) -> Instant {
        self.resent.map_or(self.confirmed, |r| r.max(self.confirmed))
    }
}
