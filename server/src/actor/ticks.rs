//! The actor's timers: each tick asks its feature for what is due and
//! applies what the feature returns (the messages into the outbox), inside
//! `with_events` where the tick may change the state.

use tokio::time::Instant;

use super::AnkaiosServer;
use crate::reaper;
use crate::workload_states::Resync;

impl AnkaiosServer {
    /// What the TTL resync borrows.
    pub(super) fn resync_part(&mut self) -> Resync<'_> {
        Resync {
            states: &mut self.states,
            conns: &self.conns,
            held: &self.jobs,
            current: &self.desired.current,
            generations: &self.desired.generations,
            settings: self.lifecycle.resync,
        }
    }

    /// Re-sends the spec (or the deletion) of every instance on a connected
    /// agent whose last confirmation is older than its TTL. Subscribers get
    /// events only when something was due (comparing states costs).
    pub(super) fn resync_tick(&mut self, now: Instant) {
        let due = self.resync_part().due(now);
        if !due.is_empty() {
            self.with_events(|s| {
                let out = s.resync_part().resend(due, now);
                s.io.out.append(out);
            });
        }
    }

    /// Deletes the finished workloads whose ttl ran out, the `Reaped`
    /// event first, then the change; not while hooks run (reaped at the
    /// next tick, on the state the hooks' chain leaves).
    pub(super) fn reaper_tick(&mut self) {
        if self.hooks.flow.busy() {
            return;
        }
        let due = self.lifecycle.reaper.due(&self.desired.current, &self.states, Instant::now());
        if due.is_empty() {
            return;
        }
        self.with_events(|s| reaper::record_reaped(&mut s.states, &due));
        let Some(reaping) = reaper::reaping(&self.desired.current, &due) else { return };
        self.with_events(|s| {
            if let Err(e) = s.server_change(reaping.next, &[], reaping.what) {
                tracing::error!("reaping failed, the workloads stay: {e}");
            }
            s.advance_jobs_if_opened();
        });
    }
}
