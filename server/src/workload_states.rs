//! The store of reported execution states: agent -> workload -> instance id
//! -> state, with the transitions the server itself decides (Pending(Initial)
//! on add, AgentDisconnected on a lost agent, removal after Removed).

use ank_common::{ExecutionState, WorkloadInstanceName, WorkloadState, WorkloadStatesMap};

/// Reported states of all workload instances.
#[derive(Debug, Default)]
pub struct WorkloadStateStore {
    map: WorkloadStatesMap,
}

impl WorkloadStateStore {
    /// Records a state; `Removed` deletes the entry. Returns whether
    /// anything changed.
    pub fn record(&mut self, s: &WorkloadState) -> bool {
        let n = &s.instance_name;
        if s.execution_state.kind == ank_common::StateKind::Removed {
            return self.remove(n);
        }
        let slot = self
            .map
            .entry(n.agent_name.clone())
            .or_default()
            .entry(n.workload_name.clone())
            .or_default()
            .entry(n.id.clone())
            .or_insert_with(|| ExecutionState::new(ank_common::StateKind::Removed));
        if *slot == s.execution_state {
            return false;
        }
        *slot = s.execution_state.clone();
        true
    }

    /// Whether the instance has an entry.
    pub fn contains(&self, n: &WorkloadInstanceName) -> bool {
        self.map.get(&n.agent_name).and_then(|w| w.get(&n.workload_name)).is_some_and(|ids| ids.contains_key(&n.id))
    }

    /// Drops an instance's entry; returns whether it existed.
    pub fn remove(&mut self, n: &WorkloadInstanceName) -> bool {
        let Some(by_name) = self.map.get_mut(&n.agent_name) else { return false };
        let Some(by_id) = by_name.get_mut(&n.workload_name) else { return false };
        let existed = by_id.remove(&n.id).is_some();
        if by_id.is_empty() {
            by_name.remove(&n.workload_name);
        }
        if by_name.is_empty() {
            self.map.remove(&n.agent_name);
        }
        existed
    }

    /// Sets every state of `agent` to AgentDisconnected; returns the changes.
    pub fn mark_agent_disconnected(&mut self, agent: &str) -> Vec<WorkloadState> {
        let mut changed = Vec::new();
        let Some(by_name) = self.map.get_mut(agent) else { return changed };
        for (wl, by_id) in by_name.iter_mut() {
            for (id, state) in by_id.iter_mut() {
                let disconnected = ExecutionState::agent_disconnected();
                if *state != disconnected {
                    *state = disconnected.clone();
                    changed.push(WorkloadState::new(
                        WorkloadInstanceName {
                            workload_name: wl.clone(),
                            agent_name: agent.to_owned(),
                            id: id.clone(),
                        },
                        disconnected,
                    ));
                }
            }
        }
        changed
    }

    /// All states, optionally excluding one agent's.
    pub fn all_except(&self, agent: Option<&str>) -> Vec<WorkloadState> {
        let cs = ank_common::CompleteState { workload_states: self.map.clone(), ..Default::default() };
        cs.workload_state_list().into_iter().filter(|s| Some(s.instance_name.agent_name.as_str()) != agent).collect()
    }

    /// The whole map, for complete-state responses.
    pub fn map(&self) -> &WorkloadStatesMap {
        &self.map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(w: &str, a: &str) -> WorkloadInstanceName {
        WorkloadInstanceName { workload_name: w.into(), agent_name: a.into(), id: "1".into() }
    }

    #[test]
    fn state_store_records_removes_and_disconnects() {
        let mut s = WorkloadStateStore::default();
        assert!(s.record(&WorkloadState::new(name("w", "A"), ExecutionState::running())));
        assert!(!s.record(&WorkloadState::new(name("w", "A"), ExecutionState::running())));
        s.record(&WorkloadState::new(name("v", "B"), ExecutionState::running()));
        let changed = s.mark_agent_disconnected("A");
        assert_eq!(changed.len(), 1);
        assert_eq!(s.map()["A"]["w"]["1"], ExecutionState::agent_disconnected());
        assert_eq!(s.all_except(Some("A")).len(), 1);
        assert!(s.contains(&name("w", "A")));
        assert!(s.record(&WorkloadState::new(name("w", "A"), ExecutionState::removed())));
        assert!(!s.map().contains_key("A"));
        assert!(!s.contains(&name("w", "A")));
    }
}
