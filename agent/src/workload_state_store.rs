//! [`WorkloadStateStore`]: the execution states the agent knows, of its own
//! workloads and of the other agents' the server forwards (Ankaios' server:
//! all of them; ours: those this agent's dependencies need), by workload
//! name. The `WorkloadScheduler` reads it to decide whether the
//! inter-workload dependencies of a queued operation hold.
//!
//! Owned by the `RuntimeManager`; fed by the `AgentManager`.

use std::collections::HashMap;

use ank_common::{ExecutionState, StateKind, WorkloadInstanceName, WorkloadState};

#[derive(Debug, Clone)]
struct Stored {
    instance_name: WorkloadInstanceName,
    state: ExecutionState,
    /// Order of arrival: the latest instance of a workload name wins.
    seq: u64,
}

/// Latest execution state per workload instance, looked up by workload name.
#[derive(Debug, Default)]
pub struct WorkloadStateStore {
    by_workload: HashMap<String, Vec<Stored>>,
    seq: u64,
}

impl WorkloadStateStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores one state; `Removed` (the default) forgets the instance.
    // [impl->swdd~agent-manager-stores-all-workload-states~1]
    // [impl->swdd~agent-stores-workload-states-of-its-workloads~1]
    pub fn update(&mut self, state: &WorkloadState) {
        let name = &state.instance_name.workload_name;
        let entries = self.by_workload.entry(name.clone()).or_default();
        entries.retain(|e| e.instance_name != state.instance_name);
        if state.execution_state.kind != StateKind::Removed {
            self.seq += 1;
            entries.push(Stored {
                instance_name: state.instance_name.clone(),
                state: state.execution_state.clone(),
                seq: self.seq,
            });
        }
        if entries.is_empty() {
            self.by_workload.remove(name);
        }
    }

    /// The state of the most recently reported instance of `workload`.
    pub fn state_of(&self, workload: &str) -> Option<&ExecutionState> {
        self.by_workload.get(workload)?.iter().max_by_key(|e| e.seq).map(|e| &e.state)
    }

    /// The state of one instance.
    pub fn state_of_instance(&self, instance: &WorkloadInstanceName) -> Option<&ExecutionState> {
        let entries = self.by_workload.get(&instance.workload_name)?;
        entries.iter().find(|e| &e.instance_name == instance).map(|e| &e.state)
    }
}

#[cfg(test)]
mod tests {
    use ank_common::{AgentName, WorkloadName};

    use super::*;

    fn instance(name: &str, config: &str) -> WorkloadInstanceName {
        WorkloadInstanceName::new(&WorkloadName::new(name).unwrap(), &AgentName::new("agent_A").unwrap(), config)
    }

    #[test]
    // [utest->swdd~agent-manager-stores-all-workload-states~1]
    fn workload_state_store_keeps_the_latest_instance_and_forgets_removed() {
        let mut store = WorkloadStateStore::new();
        let old = instance("db", "a");
        let new = instance("db", "b");
        store.update(&WorkloadState::new(old.clone(), ExecutionState::running()));
        assert_eq!(store.state_of("db"), Some(&ExecutionState::running()));
        store.update(&WorkloadState::new(new.clone(), ExecutionState::pending_initial()));
        assert_eq!(store.state_of("db"), Some(&ExecutionState::pending_initial()));
        assert_eq!(store.state_of_instance(&old), Some(&ExecutionState::running()));
        store.update(&WorkloadState::new(old.clone(), ExecutionState::removed()));
        assert_eq!(store.state_of_instance(&old), None);
        assert_eq!(store.state_of("db"), Some(&ExecutionState::pending_initial()));
        store.update(&WorkloadState::new(new, ExecutionState::removed()));
        assert_eq!(store.state_of("db"), None);
        assert_eq!(store.state_of("other"), None);
    }
}
