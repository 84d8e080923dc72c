//! How many bytes a desired state takes on the wire, computed from the
//! domain model without building the wire message: the server checks the
//! size of every new state, and building the message of 1000 workloads
//! twice per apply (state and effective state) cost more than the rest of
//! the apply. The fields that are usually large or many (names, the
//! runtime config, tags, dependencies, config aliases) are counted in
//! place; the rarer nested ones (access rules, files, policy, selector,
//! config items, groups) are converted and measured. Equal to the encoded
//! length of [`state_to_proto`](super::state_to_proto) (tested).

use std::collections::BTreeMap;

use ank_proto::ank_base as pb;
use prost::Message;
use prost::encoding::{encoded_len_varint, key_len};

use super::partial::PartialWorkload;
use super::workload::workload_to_pb;
use crate::workload::{AddCondition, RestartPolicy};
use crate::{State, Workload, WorkloadName};

/// Bytes of a length-delimited field of `len` bytes under `tag`.
fn delimited(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

/// Bytes of a string field that is always sent (an `optional` one, or a
/// map entry's key or value that is not empty).
fn string(tag: u32, s: &str) -> usize {
    delimited(tag, s.len())
}

/// Bytes of a varint field that is always sent.
fn varint(tag: u32, v: u64) -> usize {
    key_len(tag) + encoded_len_varint(v)
}

/// Bytes of one map entry: proto3 leaves a key or value at its default
/// out of the entry.
fn map_entry(tag: u32, key: &str, value_len: usize) -> usize {
    let key_part = if key.is_empty() { 0 } else { string(1, key) };
    delimited(tag, key_part + value_len)
}

/// Bytes of a `map<string, string>` field's entries.
fn string_map(tag: u32, map: &BTreeMap<String, String>) -> usize {
    map.iter().map(|(k, v)| map_entry(tag, k, if v.is_empty() { 0 } else { string(2, v) })).sum()
}

/// Bytes of a workload's wire message body.
pub fn workload_len(wl: &Workload) -> usize {
    // Every field is named: a new one must be counted here too.
    let Workload {
        agent,
        restart_policy,
        dependencies,
        tags,
        runtime,
        runtime_config,
        control_interface_access,
        configs,
        files,
        priority,
        effective_priority,
        policy,
        agent_selector,
        migration,
        ttl_after_finished,
        startup_probe,
        liveness_probe,
        readiness_probe,
        restart_backoff,
        update,
    } = wl;
    let restart = match restart_policy {
        RestartPolicy::Never => pb::RestartPolicy::Never,
        RestartPolicy::OnFailure => pb::RestartPolicy::OnFailure,
        RestartPolicy::Always => pb::RestartPolicy::Always,
    } as u64;
    let dependencies_len: usize = dependencies
        .iter()
        .map(|(name, condition)| {
            let value = match condition {
                AddCondition::Running => pb::AddCondition::AddCondRunning,
                AddCondition::Succeeded => pb::AddCondition::AddCondSucceeded,
                AddCondition::Failed => pb::AddCondition::AddCondFailed,
            } as u64;
            map_entry(1, name.as_str(), if value == 0 { 0 } else { varint(2, value) })
        })
        .sum();
    // The rare nested parts, measured on their wire form.
    let rare = PartialWorkload {
        control_interface_access: Some(control_interface_access.clone()),
        files: (!files.is_empty()).then(|| files.clone()),
        policy: (!policy.is_default()).then_some(*policy),
        agent_selector: agent_selector.clone(),
        migration: (!migration.is_default()).then_some(*migration),
        startup_probe: startup_probe.clone(),
        liveness_probe: liveness_probe.clone(),
        readiness_probe: readiness_probe.clone(),
        restart_backoff: restart_backoff.clone(),
        update: update.clone(),
        ..PartialWorkload::default()
    };
    let rare_len = workload_to_pb(rare).encoded_len();
    string(1, agent)
        + varint(2, restart)
        + delimited(3, dependencies_len)
        + delimited(4, string_map(1, tags))
        + string(5, runtime)
        + string(6, runtime_config)
        + delimited(8, string_map(1, configs))
        + priority.map_or(0, |p| varint(100, p.into()))
        + effective_priority.map_or(0, |p| varint(101, p.into()))
        + ttl_after_finished.as_deref().map_or(0, |t| string(105, t))
        + rare_len
}

/// Bytes of a `WorkloadMap` message body.
pub fn workloads_len(workloads: &BTreeMap<WorkloadName, Workload>) -> usize {
    workloads.iter().map(|(name, wl)| map_entry(1, name.as_str(), delimited(2, workload_len(wl)))).sum()
}

/// Bytes of `state` as the desired state of a complete-state message.
pub fn desired_state_len(state: &State) -> usize {
    let rest = super::state_to_proto(&State {
        api_version: String::new(),
        workloads: BTreeMap::new(),
        configs: state.configs.clone(),
        groups: state.groups.clone(),
    });
    // `rest` has an empty workload map, which takes its 2 bytes.
    let body = rest.encoded_len() - delimited(2, 0)
        + if state.api_version.is_empty() { 0 } else { string(1, &state.api_version) }
        + delimited(2, workloads_len(&state.workloads));
    delimited(1, body)
}

/// Bytes of the effective state (`api_version` and the rendered
/// `workloads`) as the desired state of a complete-state message.
pub fn effective_state_len(api_version: &str, workloads: &BTreeMap<WorkloadName, Workload>) -> usize {
    let body = if api_version.is_empty() { 0 } else { string(1, api_version) } + delimited(2, workloads_len(workloads));
    delimited(1, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire_len(state: pb::State) -> usize {
        pb::CompleteState { desired_state: Some(state), ..Default::default() }.encoded_len()
    }

    #[test]
    fn sizes_equal_the_encoded_lengths_of_the_wire_messages() {
        let yaml = "apiVersion: v1\nworkloads:\n  a:\n    runtime: podman\n    agent: A\n    tags: {k: v, e: ''}\n    \
                    dependencies: {b: ADD_COND_RUNNING, c: ADD_COND_FAILED}\n    runtimeConfig: x\n    configs: {c: c1}\n    \
                    priority: 3\n    restartPolicy: ALWAYS\n    files: [{mountPoint: /f, data: d}]\n    ttlAfterFinished: 10s\n    \
                    policy: {preemptEnabled: true}\n    migration: never\n    controlInterfaceAccess:\n      allowRules:\n      \
                    - {type: StateRule, operation: Read, filterMasks: [desiredState]}\n  b:\n    runtime: podman\n    \
                    runtimeConfig: y\n    agentSelector: {labels: ['zone = x']}\n  c:\n    runtime: podman\n    \
                    runtimeConfig: ''\nconfigs:\n  c1: {k: [x, y]}\n\
                    groups:\n  g: {members: [a, b], mode: pipeline}\n";
        let mut state = crate::manifest::parse_manifest("t", yaml).unwrap();
        state.workloads.values_mut().next().unwrap().effective_priority = Some(300);
        assert_eq!(desired_state_len(&state), wire_len(super::super::state_to_proto(&state)));
        // The effective state: apiVersion and workloads, no configs or groups.
        let workloads_only = State { configs: BTreeMap::new(), groups: Default::default(), ..state.clone() };
        let effective = pb::State { configs: None, ..super::super::state_to_proto(&workloads_only) };
        assert_eq!(effective_state_len(&state.api_version, &state.workloads), wire_len(effective));
        let empty = State::default();
        assert_eq!(desired_state_len(&empty), wire_len(super::super::state_to_proto(&empty)));
    }
}
