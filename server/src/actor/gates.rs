//! The actor's side of health-gated updates ([`crate::health_gate`]):
//! every change tells the gates which workloads got a new generation
//! (`health_gate::observe`); every tick shows them what Ready says and
//! carries out what they decided: the `UpdateHealthy` / `Reverted` events,
//! the failure of the job item that brought the spec, and with
//! `autoRevert` the last healthy spec written back into the desired state
//! (a change like the reaper's: saved to the state file, a job of its
//! own). The open gates are saved next to the state file when they change.

use ank_common::conditions::RevertMark;
use ank_common::daemon::clock::now_rfc3339;
use ank_common::workload_events::EventKind;
use tokio::time::Instant;

use super::AnkaiosServer;
use crate::desired_state::generations::Generations;
use crate::health_gate::observe;
use crate::health_gate::{Healthy, Outcome};

impl AnkaiosServer {
    /// After a switch of the desired state from generations `old`: the
    /// gates follow the change, the revert marks of new specs go, and the
    /// open gates are saved if they changed.
    pub(super) fn gates_follow_change(&mut self, old: &Generations) {
        let gates = &mut self.lifecycle.gates;
        let followed =
            observe::follow_change(gates, &self.desired.current, &self.desired.generations, old, Instant::now());
        for name in &followed.cleared {
            self.states.clear_reverted(name);
        }
        if followed.changed {
            observe::save(gates, self.lifecycle.gate_file.as_ref());
        }
    }

    /// Every second: what Ready says of each workload's current
    /// generation, then what the gates decided. Not while hooks run (a
    /// revert waits for the next tick).
    pub(super) fn gates_tick(&mut self, now: Instant) {
        if self.hooks.flow.busy() {
            return;
        }
        let (current, generations) = (&self.desired.current, &self.desired.generations);
        let seen_changed = observe::observe_ready(&mut self.lifecycle.gates, current, generations, &self.states, now);
        let outcomes = self.lifecycle.gates.due(now);
        if outcomes.is_empty() {
            // The jobs show where their gates stand.
            if seen_changed {
                self.with_events(Self::advance_jobs);
            }
            return;
        }
        observe::save(&self.lifecycle.gates, self.lifecycle.gate_file.as_ref());
        self.with_events(|s| {
            for outcome in outcomes {
                s.carry_out(outcome);
            }
            s.advance_jobs();
        });
    }

    /// One decision of a gate: its event, the job's item, the revert.
    // [feature: issue 39 health-gated update with automatic revert]
    fn carry_out(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Passed { workload, generation, reason } => {
                tracing::info!("update of '{workload}' to generation {generation} healthy: {reason}");
                self.states.record_event(&workload, EventKind::UpdateHealthy, &reason);
            }
            Outcome::Failed { workload, generation, reason, revert } => {
                tracing::warn!("update of '{workload}' to generation {generation} not healthy: {reason}");
                self.states.record_event(&workload, EventKind::Reverted, &reason);
                let mark = RevertMark {
                    from_generation: generation,
                    to_generation: revert.as_ref().map_or(0, |h| h.generation),
                    reason: reason.clone(),
                    at: now_rfc3339(),
                };
                self.states.set_reverted(&workload, mark);
                self.jobs.fail_gated(&workload, generation, &format!("update gate: {reason}"));
                // The job ends before the revert's job takes the workload over.
                self.advance_jobs();
                if let Some(healthy) = revert {
                    self.revert(&workload, *healthy);
                }
            }
        }
    }

    /// Writes `healthy` back as the desired spec of `workload`.
    fn revert(&mut self, workload: &str, healthy: Healthy) {
        let mut state = self.desired.current.state.clone();
        let Some(slot) = state.workloads.get_mut(workload) else { return };
        *slot = healthy.spec;
        let next = match self.desired.current.after(state) {
            Ok(next) => next,
            Err(e) => {
                tracing::error!("revert of '{workload}' refused, the new spec stays: {e}");
                return;
            }
        };
        let what = format!("revert of '{workload}' to generation {}", healthy.generation);
        if let Err(e) = self.server_change(next, &[], what) {
            tracing::error!("revert of '{workload}' failed, the new spec stays: {e}");
        }
    }
}
