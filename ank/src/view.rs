//! Read-only views of the complete-state tree the server returns: only the
//! parts the tables and the wait mode need, every part optional, so a
//! filtered response (field masks) still deserializes.

use std::collections::{BTreeMap, BTreeSet};

use ank_common::{WorkloadState, WorkloadStatesMap};
use anyhow::Context;
use serde::Deserialize;

/// The parts of a complete state `ank` reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateView {
    #[serde(default)]
    pub desired_state: DesiredView,
    #[serde(default)]
    pub workload_states: WorkloadStatesMap,
    #[serde(default)]
    pub agents: BTreeMap<String, AgentView>,
}

/// The desired state's workloads and groups.
#[derive(Debug, Default, Deserialize)]
pub struct DesiredView {
    #[serde(default)]
    pub workloads: BTreeMap<String, WorkloadView>,
    #[serde(default)]
    pub groups: BTreeMap<String, ank_common::groups::Group>,
}

/// What the tables show of a desired workload.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadView {
    #[serde(default)]
    pub runtime: String,
    #[serde(default)]
    pub agent: String,
    #[serde(default)]
    pub priority: Option<u32>,
    /// Computed by the server (absent from Ankaios servers).
    #[serde(default)]
    pub effective_priority: Option<u32>,
}

/// A connected agent.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentView {
    #[serde(default)]
    pub status: Option<StatusView>,
    /// State reports the server dropped as stale or from the future.
    #[serde(default)]
    pub dropped_stale_reports: u64,
    /// The agent's tags: the labels agent selectors match.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Capabilities advertised to agent selectors.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Metrics advertised to agent selectors.
    #[serde(default)]
    pub metrics: ank_common::placement::metrics::Metrics,
    /// The agent's workload quota and its use, if it has one.
    #[serde(default)]
    pub quota: Option<ank_common::quota::AgentQuota>,
    /// What the agent does not report (an agent without our extensions).
    #[serde(default)]
    pub not_reported: Vec<String>,
}

/// Resource figures of an agent.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusView {
    pub cpu_usage: Option<u64>,
    pub free_memory: Option<u64>,
}

impl StateView {
    /// Reads the view from a complete-state tree.
    pub fn from_tree(tree: &serde_json::Value) -> anyhow::Result<Self> {
        serde_json::from_value(tree.clone()).context("the server sent a complete state this version cannot read")
    }

    /// All reported workload states, flattened.
    pub fn workload_state_list(&self) -> Vec<WorkloadState> {
        let mut out = Vec::new();
        for (agent, by_name) in &self.workload_states {
            for (name, by_id) in by_name {
                for (id, entry) in by_id {
                    let instance = ank_common::WorkloadInstanceName {
                        workload_name: name.clone(),
                        agent_name: agent.clone(),
                        id: id.clone(),
                    };
                    out.push(WorkloadState::new(instance, entry.state.clone()).with_status(entry.status.clone()));
                }
            }
        }
        out
    }

    /// The runtime of each desired workload.
    pub fn runtimes(&self) -> BTreeMap<String, String> {
        self.desired_state.workloads.iter().map(|(n, w)| (n.clone(), w.runtime.clone())).collect()
    }

    /// The priority each desired workload starts with (effective, else
    /// its own), for those that have one.
    pub fn priorities(&self) -> BTreeMap<String, u32> {
        self.desired_state
            .workloads
            .iter()
            .filter_map(|(n, w)| Some((n.clone(), w.effective_priority.or(w.priority)?)))
            .collect()
    }

    /// Names of the connected agents.
    pub fn agent_names(&self) -> BTreeSet<String> {
        self.agents.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_reads_partial_trees() {
        let tree = serde_json::json!({
            "desiredState": {"apiVersion": "v1", "workloads": {"w": {"runtime": "podman", "agent": "a"}}},
            "workloadStates": {"a": {"w": {"123": {"state": "Running", "subState": "Ok"}}}},
        });
        let v = StateView::from_tree(&tree).unwrap();
        assert_eq!(v.runtimes()["w"], "podman");
        let list = v.workload_state_list();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].instance_name.to_string(), "w.123.a");
        assert!(v.agent_names().is_empty());
        assert!(StateView::from_tree(&serde_json::json!({"desiredState": {"apiVersion": "v1"}})).is_ok());
    }
}
