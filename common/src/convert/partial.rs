//! The (possibly partial) complete state of requests and answers: field
//! masks select parts of a state, so every field may be absent.
//! [`PartialCompleteState`] is its typed form (what an UpdateStateRequest
//! carries), converted to and from the wire directly; its JSON tree has the
//! camelCase shape of `ank get state` and is what the server filters and
//! merges when a mask reaches deeper than one workload or config item.

use std::collections::BTreeMap;

use ank_proto::ank_base as pb;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ConvertError;
use super::jobs::{job_from_pb, job_to_pb};
use super::state::{status_from_proto, status_to_proto};
use super::workload::{workload_from_pb, workload_to_pb};
use crate::complete_state::{AgentStatus, ConfigItem, InstanceEntry};
use crate::health_spec::{Probe, RestartBackoff, UpdateGate};
use crate::jobs::Job;
use crate::placement::metrics::Metrics;
use crate::quota::AgentQuota;
use crate::workload::{AddCondition, ControlInterfaceAccess, File, RestartPolicy};
use crate::workload_policy::{AgentSelector, Migration, WorkloadPolicy};

/// A complete state of which any part may be absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PartialCompleteState {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired_state: Option<PartialState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_states: Option<PartialStatesMap>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agents: Option<BTreeMap<String, PartialAgent>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_state: Option<PartialState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<BTreeMap<String, Job>>,
}

/// One instance of a (possibly partial) complete state. A field mask or an
/// event may select only an execution state's `additionalInfo` (as Ankaios
/// does when just the info changed): the wire state then has no state enum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PartialInstance {
    Full(InstanceEntry),
    #[serde(rename_all = "camelCase")]
    InfoOnly {
        additional_info: String,
    },
}

/// agent -> workload name -> instance id -> (possibly partial) state.
pub type PartialStatesMap = BTreeMap<String, BTreeMap<String, BTreeMap<String, PartialInstance>>>;

/// A desired state of which any part may be absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PartialState {
    #[serde(default)]
    pub api_version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workloads: Option<BTreeMap<String, PartialWorkload>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configs: Option<BTreeMap<String, ConfigItem>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<crate::groups::Groups>,
}

/// An agent of which any part may be absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PartialAgent {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<AgentStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped_stale_reports: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    #[serde(default, skip_serializing_if = "Metrics::is_empty")]
    pub metrics: Metrics,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<AgentQuota>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_reported: Vec<String>,
}

/// A workload of which any field may be absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PartialWorkload {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<RestartPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<BTreeMap<String, AddCondition>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_config: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_interface_access: Option<ControlInterfaceAccess>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configs: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<File>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_priority: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<WorkloadPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_selector: Option<AgentSelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migration: Option<Migration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_after_finished: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_probe: Option<Probe>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub liveness_probe: Option<Probe>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<Probe>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_backoff: Option<RestartBackoff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update: Option<UpdateGate>,
}

/// The JSON tree of a wire complete state (absent parts stay absent).
pub fn complete_state_to_json(cs: pb::CompleteState) -> Result<Value, ConvertError> {
    PartialCompleteState::from_proto(cs)?.to_json()
}

/// The wire complete state of a JSON tree produced by the server.
pub fn complete_state_from_json(v: &Value) -> Result<pb::CompleteState, ConvertError> {
    Ok(PartialCompleteState::from_json(v)?.into_proto())
}

impl PartialCompleteState {
    /// The JSON tree of the state (absent parts stay absent).
    pub fn to_json(&self) -> Result<Value, ConvertError> {
        serde_json::to_value(self).map_err(|e| ConvertError(e.to_string()))
    }

    /// The state of a JSON tree in the shape of `ank get state`.
    pub fn from_json(v: &Value) -> Result<Self, ConvertError> {
        Self::deserialize(v).map_err(|e| ConvertError(format!("complete state: {e}")))
    }

    /// The state of a wire complete state, checked.
    pub fn from_proto(cs: pb::CompleteState) -> Result<Self, ConvertError> {
        Ok(PartialCompleteState {
            desired_state: cs.desired_state.map(state_from_pb).transpose()?,
            workload_states: cs.workload_states.map(states_from_pb).transpose()?,
            agents: cs.agents.map(|a| {
                a.agents
                    .into_iter()
                    .map(|(name, attr)| {
                        let status = attr.status.map(|s| AgentStatus {
                            cpu_usage: s.cpu_usage.map_or(0, |c| c.cpu_usage),
                            free_memory: s.free_memory.map_or(0, |m| m.free_memory),
                        });
                        let quota = quota_from_pb(&attr);
                        let tags = attr.tags.map(|t| t.tags.into_iter().collect());
                        let agent = PartialAgent {
                            status,
                            tags,
                            dropped_stale_reports: attr.dropped_stale_reports,
                            capabilities: attr.capabilities,
                            metrics: Metrics::new(attr.metrics),
                            quota,
                            not_reported: attr.not_reported,
                        };
                        (name, agent)
                    })
                    .collect()
            }),
            effective_state: cs.effective_state.map(state_from_pb).transpose()?,
            jobs: if cs.jobs.is_empty() {
                None
            } else {
                Some(cs.jobs.into_iter().map(|(k, j)| Ok((k, job_from_pb(j)?))).collect::<Result<_, ConvertError>>()?)
            },
        })
    }

    /// The wire form of the state.
    pub fn into_proto(self) -> pb::CompleteState {
        pb::CompleteState {
            desired_state: self.desired_state.map(state_to_pb),
            workload_states: self.workload_states.map(|m| pb::WorkloadStatesMap {
                agent_state_map: m
                    .into_iter()
                    .map(|(agent, wls)| {
                        let wl_name_state_map = wls
                            .into_iter()
                            .map(|(wl, ids)| {
                                let id_state_map = ids
                                    .into_iter()
                                    .map(|(id, e)| {
                                        let wire = match e {
                                            PartialInstance::Full(e) => status_to_proto(&e.state, &e.status),
                                            PartialInstance::InfoOnly { additional_info } => pb::ExecutionState {
                                                additional_info: Some(additional_info),
                                                ..Default::default()
                                            },
                                        };
                                        (id, wire)
                                    })
                                    .collect();
                                (wl, pb::ExecutionsStatesForId { id_state_map })
                            })
                            .collect();
                        (agent, pb::ExecutionsStatesOfWorkload { wl_name_state_map })
                    })
                    .collect(),
            }),
            agents: self.agents.map(|m| pb::AgentMap {
                agents: m
                    .into_iter()
                    .map(|(name, a)| {
                        let status = a.status.map(|s| pb::AgentStatus {
                            cpu_usage: Some(pb::CpuUsage { cpu_usage: s.cpu_usage }),
                            free_memory: Some(pb::FreeMemory { free_memory: s.free_memory }),
                        });
                        let tags = a.tags.map(tags_to_pb);
                        let mut attributes = pb::AgentAttributes {
                            status,
                            tags,
                            dropped_stale_reports: a.dropped_stale_reports,
                            capabilities: a.capabilities,
                            metrics: a.metrics.as_map().iter().map(|(k, v)| (k.clone(), *v)).collect(),
                            not_reported: a.not_reported,
                            ..Default::default()
                        };
                        quota_to_pb(a.quota, &mut attributes);
                        (name, attributes)
                    })
                    .collect(),
            }),
            effective_state: self.effective_state.map(state_to_pb),
            jobs: self.jobs.unwrap_or_default().iter().map(|(k, j)| (k.clone(), job_to_pb(j))).collect(),
        }
    }
}

/// An agent's quota from its wire attributes (fields 102-105); none
/// without limits.
// [feature K2: the quota in the complete state]
fn quota_from_pb(a: &pb::AgentAttributes) -> Option<AgentQuota> {
    let quota = AgentQuota {
        max_workloads: a.max_workloads.unwrap_or(0),
        max_memory: a.max_memory.unwrap_or(0),
        used_workloads: a.used_workloads.unwrap_or(0),
        used_memory: a.used_memory.unwrap_or(0),
    };
    (a.max_workloads.is_some() || a.max_memory.is_some()).then_some(quota)
}

fn quota_to_pb(quota: Option<AgentQuota>, a: &mut pb::AgentAttributes) {
    if let Some(q) = quota {
        a.max_workloads = Some(q.max_workloads);
        a.max_memory = Some(q.max_memory);
        a.used_workloads = Some(q.used_workloads);
        a.used_memory = Some(q.used_memory);
    }
}

pub(super) fn tags_to_pb(t: BTreeMap<String, String>) -> pb::Tags {
    pb::Tags { tags: t.into_iter().collect() }
}

fn states_from_pb(m: pb::WorkloadStatesMap) -> Result<PartialStatesMap, ConvertError> {
    let mut out = BTreeMap::new();
    for (agent, wls) in m.agent_state_map {
        let mut by_name = BTreeMap::new();
        for (wl, ids) in wls.wl_name_state_map {
            let mut by_id = BTreeMap::new();
            for (id, s) in ids.id_state_map {
                let entry = if s.execution_state_enum.is_none() {
                    PartialInstance::InfoOnly { additional_info: s.additional_info.unwrap_or_default() }
                } else {
                    let (state, status) = status_from_proto(Some(s))?;
                    PartialInstance::Full(InstanceEntry { state, status })
                };
                by_id.insert(id, entry);
            }
            by_name.insert(wl, by_id);
        }
        out.insert(agent, by_name);
    }
    Ok(out)
}

fn state_from_pb(s: pb::State) -> Result<PartialState, ConvertError> {
    Ok(PartialState {
        api_version: s.api_version,
        workloads: s
            .workloads
            .map(|w| w.workloads.into_iter().map(|(k, v)| Ok((k, workload_from_pb(v)?))).collect())
            .transpose()?,
        configs: s
            .configs
            .map(|c| c.configs.into_iter().map(|(k, v)| Ok((k, config_from_pb(v)?))).collect())
            .transpose()?,
        groups: s.groups.map(super::groups::groups_from_pb).transpose()?,
    })
}

/// The wire form of a whole desired state, converted from the domain model
/// directly (no JSON tree on the way); fields present exactly where the
/// JSON form of the state has them.
pub fn state_to_proto(s: &crate::State) -> pb::State {
    state_to_pb(PartialState::from(s))
}

impl From<&crate::State> for PartialState {
    /// Every part of `s`, present where its JSON form has it.
    fn from(s: &crate::State) -> Self {
        PartialState {
            api_version: s.api_version.clone(),
            workloads: Some(
                s.workloads.iter().map(|(name, wl)| (name.to_string(), PartialWorkload::from(wl))).collect(),
            ),
            configs: Some(s.configs.clone()),
            groups: (!crate::groups::is_empty(&s.groups)).then(|| s.groups.clone()),
        }
    }
}

impl PartialState {
    /// An empty desired state of this release's apiVersion (the new state of
    /// an update that only deletes).
    pub fn current() -> Self {
        PartialState { api_version: crate::API_VERSION.to_owned(), ..PartialState::default() }
    }

    /// The desired state, read by the same rules as its JSON form is read
    /// into a [`crate::State`] (workloads by [`PartialWorkload::to_workload`],
    /// names checked); `None` where that reading fails.
    pub fn to_state(&self) -> Option<crate::State> {
        let workloads = match &self.workloads {
            None => Default::default(),
            Some(w) => w
                .iter()
                .map(|(k, w)| Some((crate::WorkloadName::new(k.as_str()).ok()?, w.to_workload()?)))
                .collect::<Option<_>>()?,
        };
        Some(crate::State {
            api_version: self.api_version.clone(),
            workloads,
            configs: self.configs.clone().unwrap_or_default(),
            groups: self.groups.clone().unwrap_or_default(),
        })
    }
}

impl PartialCompleteState {
    /// A complete state with only a desired state.
    pub fn of_desired(desired: PartialState) -> Self {
        PartialCompleteState { desired_state: Some(desired), ..Self::default() }
    }
}

fn state_to_pb(s: PartialState) -> pb::State {
    pb::State {
        api_version: s.api_version,
        workloads: s
            .workloads
            .map(|w| pb::WorkloadMap { workloads: w.into_iter().map(|(k, v)| (k, workload_to_pb(v))).collect() }),
        configs: s
            .configs
            .map(|c| pb::ConfigMap { configs: c.into_iter().map(|(k, v)| (k, config_to_pb(v))).collect() }),
        groups: s.groups.map(super::groups::groups_to_pb),
    }
}

fn config_from_pb(c: pb::ConfigItem) -> Result<ConfigItem, ConvertError> {
    use pb::config_item::ConfigItemEnum as C;
    match c.config_item_enum.ok_or_else(|| ConvertError::missing("configItem"))? {
        C::String(s) => Ok(ConfigItem::String(s)),
        C::Array(a) => Ok(ConfigItem::Array(a.values.into_iter().map(config_from_pb).collect::<Result<_, _>>()?)),
        C::Object(o) => Ok(ConfigItem::Object(
            o.fields.into_iter().map(|(k, v)| Ok((k, config_from_pb(v)?))).collect::<Result<_, ConvertError>>()?,
        )),
    }
}

fn config_to_pb(c: ConfigItem) -> pb::ConfigItem {
    use pb::config_item::ConfigItemEnum as C;
    let e = match c {
        ConfigItem::String(s) => C::String(s),
        ConfigItem::Array(a) => C::Array(pb::ConfigArray { values: a.into_iter().map(config_to_pb).collect() }),
        ConfigItem::Object(o) => {
            C::Object(pb::ConfigObject { fields: o.into_iter().map(|(k, v)| (k, config_to_pb(v))).collect() })
        }
    };
    pb::ConfigItem { config_item_enum: Some(e) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_converts_to_the_wire_as_its_json_tree_does() {
        let yaml = "apiVersion: v1\nworkloads:\n  a:\n    runtime: podman\n    agent: A\n    tags: {k: v}\n    \
                    dependencies: {b: ADD_COND_RUNNING}\n    runtimeConfig: x\n    configs: {c: c1}\n    priority: 3\n    \
                    files: [{mountPoint: /f, data: d}]\n    ttlAfterFinished: 10s\n    \
                    policy: {preemptEnabled: true}\n  b:\n    runtime: podman\n    runtimeConfig: y\n    \
                    agentSelector: {matchLabels: {zone: x}}\nconfigs:\n  c1: {k: [x, y]}\n\
                    groups:\n  g: {members: [a, b], mode: pipeline}\n";
        let state = crate::manifest::parse_manifest("t", yaml).unwrap();
        let tree = serde_json::json!({ "desiredState": serde_json::to_value(&state).unwrap() });
        let via_json = complete_state_from_json(&tree).unwrap().desired_state.unwrap();
        assert_eq!(state_to_proto(&state), via_json);
        let empty = crate::State { api_version: "v1".into(), ..Default::default() };
        let tree = serde_json::json!({ "desiredState": serde_json::to_value(&empty).unwrap() });
        assert_eq!(state_to_proto(&empty), complete_state_from_json(&tree).unwrap().desired_state.unwrap());
    }

    #[test]
    fn partial_state_keeps_absent_fields_absent() {
        let mut wls = std::collections::HashMap::new();
        wls.insert("w".to_owned(), pb::Workload { agent: Some("a".into()), ..Default::default() });
        let cs = pb::CompleteState {
            desired_state: Some(pb::State {
                api_version: "v1".into(),
                workloads: Some(pb::WorkloadMap { workloads: wls }),
                configs: None,
                groups: None,
            }),
            ..Default::default()
        };
        let v = complete_state_to_json(cs.clone()).unwrap();
        assert_eq!(v, serde_json::json!({"desiredState": {"apiVersion": "v1", "workloads": {"w": {"agent": "a"}}}}));
        assert_eq!(complete_state_from_json(&v).unwrap(), cs);
    }

    #[test]
    fn an_instance_with_only_its_additional_info_round_trips() {
        // An event for a changed retry message selects only additionalInfo,
        // as Ankaios does; the wire state then carries no state enum.
        let v = serde_json::json!({"workloadStates": {"agent_A": {"hello1": {"abc": {"additionalInfo": "Retry 2 of 20"}}}}});
        let cs = complete_state_from_json(&v).unwrap();
        let wire = &cs.workload_states.as_ref().unwrap().agent_state_map["agent_A"].wl_name_state_map["hello1"]
            .id_state_map["abc"];
        assert_eq!(wire.additional_info.as_deref(), Some("Retry 2 of 20"));
        assert!(wire.execution_state_enum.is_none());
        assert_eq!(complete_state_to_json(cs).unwrap(), v);
        let full = serde_json::json!({"workloadStates": {"A": {"w": {"id": {"state": "Running", "subState": "Ok", "additionalInfo": ""}}}}});
        assert_eq!(complete_state_to_json(complete_state_from_json(&full).unwrap()).unwrap(), full);
    }

    #[test]
    // [test of feature K2]
    fn agent_quota_round_trips_between_json_and_the_wire() {
        let v = serde_json::json!({"agents": {
            "agent_A": {"quota": {"maxWorkloads": 4, "maxMemory": 0, "usedWorkloads": 3, "usedMemory": 1024}},
            "agent_B": {"tags": {}},
        }});
        let cs = complete_state_from_json(&v).unwrap();
        let a = &cs.agents.as_ref().unwrap().agents["agent_A"];
        assert_eq!((a.max_workloads, a.used_workloads, a.used_memory), (Some(4), Some(3), Some(1024)));
        assert_eq!(cs.agents.as_ref().unwrap().agents["agent_B"].max_workloads, None);
        assert_eq!(complete_state_to_json(cs).unwrap(), v);
    }
}
