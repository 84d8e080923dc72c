//! The actor's timers: each tick asks the features for what is due and
//! applies what they return (the messages into the outbox, the server's
//! own changes, the jobs stepped), inside `with_events` where the tick may
//! change the state. The features' own tick methods: resync
//! (`Resync::due`), jobs ([`JobEngine::waits_on_clock`]), placement
//! ([`Placement::due`]), gates ([`carry::tick`]; what a gate decided is
//! carried out here: its event, the job's item, the revert), reaper
//! ([`Reaper::due`]).
//!
//! [`JobEngine::waits_on_clock`]: crate::jobs::JobEngine::waits_on_clock
//! [`Placement::due`]: crate::placement::Placement::due
//! [`Reaper::due`]: crate::reaper::Reaper::due

use tokio::time::Instant;

use super::AnkaiosServer;
use super::change::Change;
use crate::health_gate::carry;
use crate::placement::Occasion;
use crate::reaper;

/// The actor's timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timer {
    /// Every second (or the resync TTL, if shorter): resync, jobs,
    /// placement and the health gates.
    Resync,
    /// The reaper's tick.
    Reap,
}

impl AnkaiosServer {
    /// Runs the features of `timer` that are due at `now`.
    pub(super) fn tick(&mut self, timer: Timer, now: Instant) {
        if timer == Timer::Reap {
            // Not while hooks run: reaped at the next tick, on the state
            // the hooks' chain leaves.
            if self.hooks.flow.busy() {
                return;
            }
            let due = self.lifecycle.reaper.due(&self.desired.current, &self.states, now);
            if due.is_empty() {
                return;
            }
            // The `Reaped` event first, then the change.
            self.with_events(|s| reaper::record_reaped(&mut s.states, &due));
            let change = reaper::reaping(&self.desired.current, &due);
            return self.with_events(|s| {
                s.change(Change::Server(Box::new(change)));
                if s.io.out.job_pending() {
                    s.advance_jobs();
                }
            });
        }
        // Re-sends the spec (or the deletion) of every instance on a
        // connected agent whose last confirmation is older than its TTL;
        // subscribers get events only when something was due (comparing
        // states costs).
        let (current, generations) = (&self.desired.current, &self.desired.generations);
        let due = self.lifecycle.resync.over(&mut self.states, &self.conns, &self.jobs, current, generations).due(now);
        if !due.is_empty() {
            self.with_events(|s| {
                let (current, generations) = (&s.desired.current, &s.desired.generations);
                let resync = s.lifecycle.resync.over(&mut s.states, &s.conns, &s.jobs, current, generations);
                s.io.out.append(resync.resend(due, now));
            });
        }
        // [feature L4: stuck detection] A job waiting with nothing to do
        // may turn stuck.
        if self.jobs.waits_on_clock() {
            self.with_events(Self::advance_jobs);
        }
        // Moves the workloads of agents gone longer than the grace, and
        // runs the due rebalance passes.
        let due = self.lifecycle.placer.pass(&self.conns, &self.desired.current, &mut self.states).due(now);
        if !due.is_empty() {
            self.with_events(|s| {
                s.placement_on(Occasion::Due(due, now));
                if s.io.out.job_pending() {
                    s.advance_jobs();
                }
            });
        }
        // The gates see Ready; not while hooks run (a revert waits for the
        // next tick).
        if self.hooks.flow.busy() {
            return;
        }
        let (current, generations, file) =
            (&self.desired.current, &self.desired.generations, self.lifecycle.gate_file.as_ref());
        let gates = carry::tick(&mut self.lifecycle.gates, file, current, generations, &self.states, now);
        // Without a decision, the jobs still show where their gates stand.
        if gates.seen_changed || !gates.outcomes.is_empty() {
            self.with_events(|s| {
                // [feature: issue 39 health-gated update with automatic revert]
                for outcome in gates.outcomes {
                    // The decision's event; a failure fails the job item
                    // that brought the spec, and the job ends before a
                    // revert's job takes the workload over.
                    let Some(failed) = carry::record(outcome, &mut s.states) else { continue };
                    let carry::Failed { workload, generation, reason, revert } = failed;
                    s.jobs.fail_gated(&workload, generation, &format!("update gate: {reason}"));
                    s.advance_jobs();
                    let current = &s.desired.current;
                    if let Some(change) = revert.and_then(|healthy| carry::revert(current, &workload, *healthy)) {
                        s.change(Change::Server(Box::new(change)));
                    }
                }
                s.advance_jobs();
            });
        }
    }
}
