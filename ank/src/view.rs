//! [`StateView`]: what `ank` reads of a complete state the server returns.
//! It is the one partial complete-state model of `ank_common::convert`
//! (every part optional, so a filtered response, field masks, still reads)
//! with the questions the tables and the wait mode ask of it; no model of
//! its own.

use std::collections::{BTreeMap, BTreeSet};

use ank_common::convert::{PartialAgent, PartialCompleteState, PartialInstance, PartialWorkload};
use ank_common::groups::Groups;
use ank_common::jobs::Job;
use ank_common::{WorkloadInstanceName, WorkloadState};
use anyhow::Context;

/// A complete state as `ank` reads it.
#[derive(Debug, Default)]
pub struct StateView(PartialCompleteState);

impl StateView {
    /// Reads the view from a complete-state tree.
    pub fn from_tree(tree: &serde_json::Value) -> anyhow::Result<Self> {
        PartialCompleteState::from_json(tree)
            .map(Self)
            .context("the server sent a complete state this version cannot read")
    }

    /// The view of a state at hand.
    pub fn of(state: PartialCompleteState) -> Self {
        Self(state)
    }

    /// The desired workloads (none when the response has none).
    pub fn workloads(&self) -> BTreeMap<&str, &PartialWorkload> {
        let desired = self.0.desired_state.as_ref().and_then(|d| d.workloads.as_ref());
        desired.into_iter().flatten().map(|(n, w)| (n.as_str(), w)).collect()
    }

    /// The desired workload `name`.
    pub fn workload(&self, name: &str) -> Option<&PartialWorkload> {
        self.0.desired_state.as_ref()?.workloads.as_ref()?.get(name)
    }

    /// The desired groups (none when the response has none).
    pub fn groups(&self) -> Groups {
        self.0.desired_state.as_ref().and_then(|d| d.groups.clone()).unwrap_or_default()
    }

    /// The connected agents (none when the response has none).
    pub fn agents(&self) -> BTreeMap<&str, &PartialAgent> {
        self.0.agents.iter().flatten().map(|(n, a)| (n.as_str(), a)).collect()
    }

    /// How many workloads have a state on `agent`.
    pub fn workloads_on(&self, agent: &str) -> usize {
        self.0.workload_states.as_ref().and_then(|s| s.get(agent)).map_or(0, BTreeMap::len)
    }

    /// Every entry of the workload states with its instance, by agent,
    /// name and id.
    fn entries(&self) -> impl Iterator<Item = (WorkloadInstanceName, &PartialInstance)> {
        self.0.workload_states.iter().flatten().flat_map(|(agent, by_name)| {
            by_name.iter().flat_map(move |(name, by_id)| {
                by_id.iter().map(move |(id, entry)| {
                    let instance =
                        WorkloadInstanceName { workload_name: name.clone(), agent_name: agent.clone(), id: id.clone() };
                    (instance, entry)
                })
            })
        })
    }

    /// All reported workload states, flattened; an entry that carries only
    /// an info text (a masked response) is no state and left out.
    pub fn workload_state_list(&self) -> Vec<WorkloadState> {
        self.entries()
            .filter_map(|(instance, entry)| match entry {
                PartialInstance::Full(e) => {
                    Some(WorkloadState::new(instance, e.state.clone()).with_status(e.status.clone()))
                }
                PartialInstance::InfoOnly { .. } => None,
            })
            .collect()
    }

    /// Every instance with an entry in the workload states, by agent, name
    /// and id.
    pub fn instances(&self) -> Vec<WorkloadInstanceName> {
        self.entries().map(|(instance, _)| instance).collect()
    }

    /// The runtime of each desired workload.
    pub fn runtimes(&self) -> BTreeMap<String, String> {
        self.workloads().into_iter().map(|(n, w)| (n.to_owned(), w.runtime.clone().unwrap_or_default())).collect()
    }

    /// The priority each desired workload starts with (effective, else
    /// its own), for those that have one.
    pub fn priorities(&self) -> BTreeMap<String, u32> {
        self.workloads()
            .into_iter()
            .filter_map(|(n, w)| Some((n.to_owned(), w.effective_priority.or(w.priority)?)))
            .collect()
    }

    /// The names of the desired configs, sorted.
    pub fn config_names(&self) -> Vec<String> {
        let configs = self.0.desired_state.as_ref().and_then(|d| d.configs.as_ref());
        configs.into_iter().flatten().map(|(n, _)| n.clone()).collect()
    }

    /// The jobs the server keeps, oldest first.
    pub fn jobs(&self) -> Vec<&Job> {
        let mut jobs: Vec<&Job> = self.0.jobs.iter().flatten().map(|(_, j)| j).collect();
        jobs.sort_by_key(|j| j.id);
        jobs
    }

    /// The complete state as its JSON tree (for the commands that print
    /// it as YAML or JSON).
    pub fn to_tree(&self) -> anyhow::Result<serde_json::Value> {
        Ok(self.0.to_json()?)
    }

    /// Names of the connected agents.
    pub fn agent_names(&self) -> BTreeSet<String> {
        self.agents().into_keys().map(str::to_owned).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_reads_partial_trees() {
        let tree = serde_json::json!({
            "desiredState": {"apiVersion": "v1", "workloads": {"w": {"runtime": "podman", "agent": "a"}}},
            "workloadStates": {"a": {"w": {"123": {"state": "Running", "subState": "Ok"}, "456": {"additionalInfo": "x"}}}},
        });
        let v = StateView::from_tree(&tree).unwrap();
        assert_eq!(v.runtimes()["w"], "podman");
        let list = v.workload_state_list();
        assert_eq!(list.len(), 1, "an info-only entry is no state");
        assert_eq!(list[0].instance_name.to_string(), "w.123.a");
        assert_eq!(v.workloads_on("a"), 1);
        assert!(v.agent_names().is_empty());
        assert!(v.groups().is_empty());
        assert!(StateView::from_tree(&serde_json::json!({"desiredState": {"apiVersion": "v1"}})).is_ok());
    }
}
