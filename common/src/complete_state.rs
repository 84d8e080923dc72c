//! The complete state: desired state (apiVersion, workloads, configs,
//! groups), the reported workload states and the connected agents, in the
//! shape `ank get state` prints and field masks address.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::agent_status::AgentStatus;
use crate::conditions::InstanceStatus;
use crate::execution_state::ExecutionState;
use crate::names::WorkloadName;
use crate::workload::{Workload, WorkloadState};

/// A config item: a string, a list or a map of further items.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum ConfigItem {
    String(String),
    Array(Vec<ConfigItem>),
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::schema_parts::name_keyed_map::<ConfigItem>"))]
    Object(BTreeMap<String, ConfigItem>),
}

/// The desired state (also the shape of a manifest).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct State {
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^v1$")))]
    pub api_version: String,
    /// `workloads:` with no value is read as none, as by Ankaios.
    #[serde(default, deserialize_with = "null_as_empty")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::schema_parts::optional_name_keyed_map::<Workload>"))]
    pub workloads: BTreeMap<WorkloadName, Workload>,
    /// `configs:` with no value is read as none, as by Ankaios.
    #[serde(default, deserialize_with = "null_as_empty")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::schema_parts::optional_name_keyed_map::<ConfigItem>")
    )]
    pub configs: BTreeMap<String, ConfigItem>,
    /// Workload groups by name (extension; absent when there are none).
    #[serde(
        default,
        deserialize_with = "crate::groups::deserialize_groups",
        skip_serializing_if = "crate::groups::is_empty"
    )]
    #[cfg_attr(feature = "schema", schemars(extend("x-extension" = true)))]
    pub groups: crate::groups::Groups,
}

/// A map that may also be given as null (a key with no value).
fn null_as_empty<'de, D: serde::Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// One instance in the complete state: its execution state
/// (`state`, `subState`, `additionalInfo`) and, beside it, its generation
/// and conditions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceEntry {
    #[serde(flatten)]
    pub state: ExecutionState,
    #[serde(flatten)]
    pub status: InstanceStatus,
}

impl From<ExecutionState> for InstanceEntry {
    fn from(state: ExecutionState) -> Self {
        Self { state, status: InstanceStatus::default() }
    }
}

/// agent -> workload name -> instance id -> state.
pub type WorkloadStatesMap = BTreeMap<String, BTreeMap<String, BTreeMap<String, InstanceEntry>>>;

/// A connected agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentAttributes {
    #[serde(default)]
    pub status: AgentStatus,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// State reports the server dropped as stale or from the future.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_stale_reports: u64,
    /// Capabilities the agent advertises to agent selectors (its runtimes
    /// and operator-declared features).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// Metrics the agent advertises: the built-ins and the operator's.
    #[serde(default, skip_serializing_if = "crate::placement::metrics::Metrics::is_empty")]
    pub metrics: crate::placement::metrics::Metrics,
    /// The agent's workload quota and its use, if it has one.
    // [feature K2: the server keeps each agent's quota]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<crate::quota::AgentQuota>,
    /// What the agent does not report because it does not speak our
    /// extensions (an Eclipse Ankaios agent): see [`NOT_REPORTED_BY_ANKAIOS_AGENTS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_reported: Vec<String>,
}

/// The features an agent without our extensions (an Eclipse Ankaios agent)
/// does not report: they show as "not reported" for it.
pub const NOT_REPORTED_BY_ANKAIOS_AGENTS: [&str; 3] = ["generations", "conditions", "quota"];

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Desired state, workload states and agents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompleteState {
    #[serde(default)]
    pub desired_state: State,
    #[serde(default)]
    pub workload_states: WorkloadStatesMap,
    #[serde(default)]
    pub agents: BTreeMap<String, AgentAttributes>,
    /// The rendered state the agents get (templates expanded, mutating
    /// hooks applied), without configs; read-only. Ankaios >= 1.1 fills it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_state: Option<State>,
    /// Recent apply jobs by id (extension; absent from Ankaios servers).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub jobs: BTreeMap<String, crate::jobs::Job>,
}

impl CompleteState {
    /// Flattened list of all reported workload states.
    pub fn workload_state_list(&self) -> Vec<WorkloadState> {
        let mut out = Vec::new();
        for (agent, by_name) in &self.workload_states {
            for (name, by_id) in by_name {
                for (id, entry) in by_id {
                    let instance = crate::WorkloadInstanceName {
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
}
