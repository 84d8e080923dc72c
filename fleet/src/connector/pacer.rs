//! When to publish the status: at once when it changed, but never more
//! often than `min_interval` (changes in between are coalesced into the
//! latest), and at least every `heartbeat` so the fleet sees the vehicle
//! alive ("last seen") even when nothing changes.

use tokio::time::{Duration, Instant};

use crate::payload::Status;

/// The publishing schedule of one connector.
#[derive(Debug)]
pub struct Pacer {
    min_interval: Duration,
    heartbeat: Duration,
    last_sent: Option<(Instant, Status)>,
    latest: Option<Status>,
}

impl Pacer {
    pub fn new(min_interval: Duration, heartbeat: Duration) -> Self {
        Self { min_interval, heartbeat, last_sent: None, latest: None }
    }

    /// Takes the newest computed status.
    pub fn offer(&mut self, status: Status) {
        self.latest = Some(status);
    }

    /// Whether the newest status differs from the one last sent.
    fn changed(&self) -> bool {
        match (&self.latest, &self.last_sent) {
            (Some(latest), Some((_, sent))) => !latest.content_eq(sent),
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// When the next publication is due, if ever.
    pub fn due(&self) -> Option<Instant> {
        self.due_at(Instant::now())
    }

    /// [`Pacer::due`] as seen at `now` (a status never sent is due at `now`).
    fn due_at(&self, now: Instant) -> Option<Instant> {
        self.latest.as_ref()?;
        match &self.last_sent {
            None => Some(now),
            Some((at, _)) if self.changed() => Some(*at + self.min_interval),
            Some((at, _)) => Some(*at + self.heartbeat),
        }
    }

    /// The status to publish now, if one is due; it counts as sent.
    pub fn take_due(&mut self, now: Instant) -> Option<Status> {
        if self.due_at(now)? > now {
            return None;
        }
        let status = self.latest.clone()?;
        self.last_sent = Some((now, status.clone()));
        Some(status)
    }

    /// After a reconnect: the latest status goes out again at once (the
    /// broker may have lost what was sent while the link was down).
    pub fn resend(&mut self) {
        self.last_sent = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(ready: bool) -> Status {
        Status {
            version: 1,
            vehicle: "v".into(),
            seq: 0,
            published_at: String::new(),
            rollout: None,
            applied_rollout: None,
            accepted_seq: 0,
            job: None,
            ready,
            available: false,
            workloads: Default::default(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn changes_are_coalesced_to_one_per_interval_and_idle_sends_heartbeats() {
        let mut p = Pacer::new(Duration::from_secs(1), Duration::from_secs(60));
        assert_eq!(p.due(), None, "nothing to send yet");
        p.offer(status(false));
        assert!(p.take_due(Instant::now()).is_some(), "the first status goes at once");
        p.offer(status(true));
        p.offer(status(false));
        p.offer(status(true));
        assert!(p.take_due(Instant::now()).is_none(), "within the interval");
        tokio::time::advance(Duration::from_secs(1)).await;
        let sent = p.take_due(Instant::now()).expect("due after the interval");
        assert!(sent.ready, "the latest of the coalesced changes");
        tokio::time::advance(Duration::from_secs(30)).await;
        assert!(p.take_due(Instant::now()).is_none(), "unchanged: no publication before the heartbeat");
        tokio::time::advance(Duration::from_secs(30)).await;
        assert!(p.take_due(Instant::now()).is_some(), "heartbeat");
        p.resend();
        assert!(p.take_due(Instant::now()).is_some(), "a reconnect sends the latest again at once");
    }
}
