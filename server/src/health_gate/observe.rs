//! What the health gates learn from the server's state: which workloads
//! got a new generation with a change ([`follow_change`]), what Ready says
//! of each gated workload at every tick ([`observe_ready`]), and the gates
//! saved next to the state file ([`save`], [`restore`]). Each is a
//! function of the parts it reads; what the server must do besides comes
//! back as a value.

use ank_common::conditions::{Condition, ConditionStatus, ConditionType};
use ank_common::{AgentName, WorkloadInstanceName};
use tokio::time::Instant;

use super::file::GateFile;
use super::{HealthGates, Seen};
use crate::desired_state::DesiredState;
use crate::desired_state::generations::Generations;
use crate::workload_states::WorkloadStateStore;

/// What a change of the desired state did to the gates.
pub(crate) struct Followed {
    /// Whether the open gates changed (they are to be saved).
    pub(crate) changed: bool,
    /// Workloads whose mark of an earlier revert goes: they got a new spec
    /// (not the revert, not the healthy one again).
    pub(crate) cleared: Vec<String>,
}

/// After a switch of the desired state to `current` from generations
/// `old`: opens, replaces or closes the gates of the workloads whose
/// generation changed, forgets those removed, and saves the open gates to
/// `file` if they changed; returns the workloads whose revert mark goes
/// (see [`Followed::cleared`]).
pub(crate) fn follow_change(
    gates: &mut HealthGates,
    file: Option<&GateFile>,
    current: &DesiredState,
    generations: &Generations,
    old: &Generations,
    now: Instant,
) -> Vec<String> {
    let followed = followed(gates, current, generations, old, now);
    if followed.changed {
        save(gates, file);
    }
    followed.cleared
}

/// What [`follow_change`] does to the gates.
fn followed(
    gates: &mut HealthGates,
    current: &DesiredState,
    generations: &Generations,
    old: &Generations,
    now: Instant,
) -> Followed {
    let mut followed = Followed { changed: false, cleared: Vec::new() };
    for (name, wl) in &current.state.workloads {
        let generation = generations.of(name.as_str()).unwrap_or(0);
        if old.of(name.as_str()) != Some(generation) {
            if !gates.is_last_healthy(name.as_str(), wl) {
                followed.cleared.push(name.to_string());
            }
            followed.changed |= gates.spec_changed(name.as_str(), generation, wl, now);
        }
    }
    for name in old.names() {
        if !current.state.workloads.contains_key(name) {
            followed.changed |= gates.removed(name);
        }
    }
    followed
}

/// Shows the gates the Ready condition of every scheduled workload at
/// its current generation; returns whether an open gate changed.
pub(crate) fn observe_ready(
    gates: &mut HealthGates,
    current: &DesiredState,
    generations: &Generations,
    states: &WorkloadStateStore,
    now: Instant,
) -> bool {
    let mut changed = false;
    for (name, wl) in &current.rendered.workloads {
        let generation = generations.of(name.as_str()).unwrap_or(0);
        if !gates.wants_to_see(name.as_str(), generation) {
            continue;
        }
        // The instance name without a copy of the spec.
        let Some(agent) = (!wl.agent.is_empty()).then(|| AgentName::new(wl.agent.as_str()).ok()).flatten() else {
            continue;
        };
        let instance = WorkloadInstanceName::new(name, &agent, &wl.runtime_config);
        let Some(user_spec) = current.state.workloads.get(name) else { continue };
        let ready = states.status(&instance).and_then(|s| s.condition(ConditionType::Ready));
        let seen = match ready {
            Some(c) if c.status == ConditionStatus::True && c.observed_generation == generation => Seen::Ready,
            // Why is worded only for a gate that may quote it.
            _ if !gates.is_open(name.as_str()) => Seen::NotReady(String::new()),
            Some(c) => Seen::NotReady(not_ready_text(states, &instance, c)),
            None => Seen::NotReady("no report yet".to_owned()),
        };
        changed |= gates.observe(name.as_str(), generation, seen, user_spec, now);
    }
    changed
}

/// Writes the open gates next to the state file, if there is one.
pub(crate) fn save(gates: &HealthGates, file: Option<&GateFile>) {
    if let Some(file) = file
        && let Err(e) = file.save(gates.saved())
    {
        tracing::error!("cannot save the update gates: {e}; a restart forgets them");
    }
}

/// At start: the gates open when the server stopped open again, with a
/// fresh deadline, for the workloads whose spec (in `current`) is still
/// the gated one; saved again if some did not.
pub(crate) fn restore(
    gates: &mut HealthGates,
    file: Option<&GateFile>,
    current: &DesiredState,
    generations: &Generations,
    now: Instant,
) {
    let Some(gate_file) = file else { return };
    let saved = gate_file.load();
    if saved.is_empty() {
        return;
    }
    let spec = |name: &str| {
        let spec = current.state.workloads.get(name)?.clone();
        Some((generations.of(name)?, spec))
    };
    let count = saved.len();
    gates.restore(saved, spec, now);
    if gates.saved().len() != count {
        save(gates, file);
    }
}

/// Why an instance is not Ready, for a gate's reason: the Ready
/// condition's reason and message; while the new generation has not
/// replaced the old one (`GenerationPending`) its execution state says
/// more than the message (`Pending(Starting): 'Retry 3: ...'`).
fn not_ready_text(states: &WorkloadStateStore, instance: &WorkloadInstanceName, ready: &Condition) -> String {
    let detail = if ready.reason == "GenerationPending" {
        let state = states.state_of(instance).execution_state;
        match one_line(&state.additional_info) {
            info if info.is_empty() => state.kind.to_string(),
            info => format!("{}: '{info}'", state.kind),
        }
    } else {
        one_line(&ready.message)
    };
    if detail.is_empty() { ready.reason.clone() } else { format!("{}: {detail}", ready.reason) }
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
