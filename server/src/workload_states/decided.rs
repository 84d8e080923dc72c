//! The states the server decides itself for an accepted change, before
//! any agent reports: Pending(Initial) for added workloads, NotScheduled
//! for those no agent was found for, and removal of the NotScheduled rows
//! of workloads that went away or got an agent.

use ank_common::{AgentName, ExecutionState, State, WorkloadInstanceName, WorkloadState};

use super::WorkloadStateStore;
use crate::desired_state::StateDiff;
use crate::desired_state::generations::Generations;

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
}
