//! The states the server decides itself, which no agent reports: for an
//! accepted change, Pending(Initial) for added workloads, NotScheduled for
//! those no agent was found for, and removal of the NotScheduled rows of
//! workloads that went away or got an agent; for an agent that
//! disconnected, AgentDisconnected for its workloads.

use ank_common::workload_events::EventKind;
use ank_common::{AgentName, ExecutionState, State, StateKind, WorkloadInstanceName, WorkloadState};

use super::WorkloadStateStore;
use crate::desired_state::generations::Generations;
use crate::desired_state::{self, StateDiff};

impl WorkloadStateStore {
    /// Records the states the server decides for `diff` (to the rendered
    /// state `rendered`, whose workloads have `generations`);
    /// `not_scheduled`: the state of a workload without an agent. Returns
    /// the states that changed, to push.
    pub(crate) fn record_decided(
        &mut self,
        diff: &StateDiff,
        rendered: &State,
        generations: &Generations,
        not_scheduled: impl Fn(&str) -> ExecutionState,
    ) -> Vec<WorkloadState> {
        let mut changed = Vec::new();
        for spec in diff.added.values().flatten() {
            let mut s = WorkloadState::new(spec.instance_name.clone(), ExecutionState::pending_initial());
            s.status.generation = generations.of(spec.name()).unwrap_or(0);
            if self.record(&s) {
                changed.push(self.state_of(&spec.instance_name));
            }
        }
        // Gone first: a changed unscheduled workload is both gone and new.
        for name in &diff.unscheduled_gone {
            let unscheduled = self.instances_of("");
            for n in unscheduled.iter().filter(|n| n.workload_name == name.as_str()) {
                changed.extend(self.forget(n));
            }
        }
        for name in &diff.unscheduled {
            let Some(wl) = rendered.workloads.get(name) else { continue };
            let n = WorkloadInstanceName::new(name, &AgentName::unscheduled(), &wl.runtime_config);
            let mut s = WorkloadState::new(n, not_scheduled(name.as_str()));
            // Generations start at 1: a NotScheduled instance shows its workload's.
            s.status.generation = generations.of(name.as_str()).unwrap_or(0);
            if self.record(&s) {
                changed.push(s);
            }
        }
        changed
    }

    /// `agent` disconnected: its instances the rendered desired state
    /// `rendered` wants show AgentDisconnected (with an event), the others
    /// are deleted while it is away. Returns the states that changed.
    pub(crate) fn agent_disconnected(&mut self, agent: &str, rendered: &State) -> Vec<WorkloadState> {
        let mut changed = self.mark_agent_disconnected(agent, |n| desired_state::wants_instance(rendered, n));
        for spec in desired_state::specs_for_agent(rendered, agent) {
            self.record_event(spec.name(), EventKind::AgentDisconnected, &format!("agent '{agent}' disconnected"));
        }
        // Workloads the server still wants whose rows went with the
        // agent (it removed them, e.g. stopping at its shutdown) are
        // shown as AgentDisconnected too, never as gone.
        for spec in desired_state::specs_for_agent(rendered, agent) {
            if !self.contains(&spec.instance_name) {
                let state = WorkloadState::new(spec.instance_name, ExecutionState::new(StateKind::AgentDisconnected));
                self.record(&state);
                changed.push(state);
            }
        }
        changed
    }
}
