//! The actor's side of health-gated updates ([`crate::health_gate`]):
//! every change tells the gates which workloads got a new generation;
//! every tick shows them what Ready says and carries out what they
//! decided: the `UpdateHealthy` / `Reverted` events, the failure of the
//! job item that brought the spec, and with `autoRevert` the last healthy
//! spec written back into the desired state (a change like the reaper's:
//! saved to the state file, a job of its own). The open gates are saved
//! next to the state file when they change.

use ank_common::conditions::{Condition, ConditionStatus, ConditionType, RevertMark};
use ank_common::daemon::clock::now_rfc3339;
use ank_common::workload_events::EventKind;
use ank_common::{AgentName, WorkloadInstanceName};
use tokio::time::Instant;

use super::AnkaiosServer;
use crate::desired_state::generations::Generations;
use crate::health_gate::{Healthy, Outcome, Seen};

impl AnkaiosServer {
    /// After a switch of the desired state from generations `old`: opens,
    /// replaces or closes the gates of the workloads whose generation
    /// changed, forgets those removed, and saves the open gates if they
    /// changed.
    pub(super) fn gates_follow_change(&mut self, old: &Generations) {
        let now = Instant::now();
        let gates = &mut self.sched.gates;
        let mut changed = false;
        for (name, wl) in &self.desired.current.state.workloads {
            let generation = self.desired.generations.of(name.as_str()).unwrap_or(0);
            if old.of(name.as_str()) != Some(generation) {
                // A new spec (not the revert, not the healthy one again)
                // drops the mark of an earlier revert.
                if !gates.is_last_healthy(name.as_str(), wl) {
                    self.states.clear_reverted(name.as_str());
                }
                changed |= gates.spec_changed(name.as_str(), generation, wl, now);
            }
        }
        for name in old.names() {
            if !self.desired.current.state.workloads.contains_key(name) {
                changed |= gates.removed(name);
            }
        }
        if changed {
            self.save_gates();
        }
    }

    /// Writes the open gates next to the state file, if there is one.
    fn save_gates(&self) {
        if let Some(file) = &self.sched.gate_file
            && let Err(e) = file.save(self.sched.gates.saved())
        {
            tracing::error!("cannot save the update gates: {e}; a restart forgets them");
        }
    }

    /// Every second: what Ready says of each workload's current
    /// generation, then what the gates decided. Not while hooks run (a
    /// revert waits for the next tick).
    pub(super) fn gates_tick(&mut self, now: Instant) {
        if self.hooks_busy() {
            return;
        }
        let seen_changed = self.observe_ready(now);
        let outcomes = self.sched.gates.due(now);
        if outcomes.is_empty() {
            // The jobs show where their gates stand.
            if seen_changed {
                self.with_events(Self::advance_jobs);
            }
            return;
        }
        self.save_gates();
        self.with_events(|s| {
            for outcome in outcomes {
                s.carry_out(outcome);
            }
            s.advance_jobs();
        });
    }

    /// Shows the gates the Ready condition of every scheduled workload at
    /// its current generation; returns whether an open gate changed.
    fn observe_ready(&mut self, now: Instant) -> bool {
        let mut changed = false;
        for (name, wl) in &self.desired.current.rendered.workloads {
            let generation = self.desired.generations.of(name.as_str()).unwrap_or(0);
            if !self.sched.gates.wants_to_see(name.as_str(), generation) {
                continue;
            }
            // The instance name without a copy of the spec.
            let Some(agent) = (!wl.agent.is_empty()).then(|| AgentName::new(wl.agent.as_str()).ok()).flatten() else {
                continue;
            };
            let instance = WorkloadInstanceName::new(name, &agent, &wl.runtime_config);
            let Some(user_spec) = self.desired.current.state.workloads.get(name) else { continue };
            let ready = self.states.status(&instance).and_then(|s| s.condition(ConditionType::Ready));
            let seen = match ready {
                Some(c) if c.status == ConditionStatus::True && c.observed_generation == generation => Seen::Ready,
                // Why is worded only for a gate that may quote it.
                _ if !self.sched.gates.is_open(name.as_str()) => Seen::NotReady(String::new()),
                Some(c) => Seen::NotReady(self.not_ready_text(&instance, c)),
                None => Seen::NotReady("no report yet".to_owned()),
            };
            changed |= self.sched.gates.observe(name.as_str(), generation, seen, user_spec, now);
        }
        changed
    }

    /// Why an instance is not Ready, for a gate's reason: the Ready
    /// condition's reason and message; while the new generation has not
    /// replaced the old one (`GenerationPending`) its execution state says
    /// more than the message (`Pending(Starting): 'Retry 3: ...'`).
    fn not_ready_text(&self, instance: &WorkloadInstanceName, ready: &Condition) -> String {
        let detail = if ready.reason == "GenerationPending" {
            let state = self.states.state_of(instance).execution_state;
            match one_line(&state.additional_info) {
                info if info.is_empty() => state.kind.to_string(),
                info => format!("{}: '{info}'", state.kind),
            }
        } else {
            one_line(&ready.message)
        };
        if detail.is_empty() { ready.reason.clone() } else { format!("{}: {detail}", ready.reason) }
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

    /// At start: the gates open when the server stopped open again, with a
    /// fresh deadline, for the workloads whose spec is still the gated one.
    pub(super) fn restore_gates(&mut self) {
        let Some(file) = &self.sched.gate_file else { return };
        let saved = file.load();
        if saved.is_empty() {
            return;
        }
        let desired = &self.desired;
        let current = |name: &str| {
            let spec = desired.current.state.workloads.get(name)?.clone();
            Some((desired.generations.of(name)?, spec))
        };
        let count = saved.len();
        self.sched.gates.restore(saved, current, Instant::now());
        if self.sched.gates.saved().len() != count {
            self.save_gates();
        }
    }
}

/// The longest part of a condition's message a gate's reason quotes.
const MESSAGE_CHARS: usize = 200;

/// A message (podman's whole error output, say) on one short line: its
/// last `Error:` line, or its lines joined, cut to [`MESSAGE_CHARS`].
fn one_line(message: &str) -> String {
    let lines: Vec<&str> = message.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let line = match lines.iter().rev().find(|l| l.starts_with("Error:")) {
        Some(error) => (*error).to_owned(),
        None => lines.join(" "),
    };
    if line.chars().count() <= MESSAGE_CHARS {
        return line;
    }
    let cut: String = line.chars().take(MESSAGE_CHARS - 1).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_long_podman_error_is_quoted_on_one_short_line() {
        let noise: String = (0..20).map(|i| format!("time=\"2026\" level=warning msg=\"chatter {i}\"\n")).collect();
        let message = format!("{noise}Error: initializing source docker://nosuch: manifest unknown\n");
        assert_eq!(super::one_line(&message), "Error: initializing source docker://nosuch: manifest unknown");
        let long = "x".repeat(500);
        assert_eq!(super::one_line(&long).chars().count(), super::MESSAGE_CHARS);
        assert_eq!(super::one_line("Pending(Starting)\n  retry 3"), "Pending(Starting) retry 3");
    }
}
