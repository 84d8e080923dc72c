//! The typed selection against the tree filter, for many masks.

use std::collections::BTreeMap;

use super::*;
use crate::complete_state::{AgentStatus, CompleteState, InstanceEntry};
use crate::execution_state::ExecutionState;
use crate::field_mask;
use crate::jobs::Job;

fn rich_state() -> CompleteState {
    let yaml = "apiVersion: v1\nworkloads:\n  nginx:\n    runtime: podman\n    agent: agent_A\n    tags: {k: v}\n    \
                dependencies: {db: ADD_COND_RUNNING}\n    runtimeConfig: nginx\n    configs: {c: web}\n    \
                priority: 3\n    files: [{mountPoint: /f, data: d}]\n    policy: {preemptEnabled: true}\n  \
                db:\n    runtime: podman\n    agent: agent_B\n    runtimeConfig: y\n    restartPolicy: ALWAYS\n  \
                sel:\n    runtime: podman\n    runtimeConfig: z\n    agentSelector: {matchLabels: {zone: x}}\n\
                configs:\n  web: {port: '80', hosts: [a, b]}\n  plain: text\n\
                groups:\n  g: {members: [nginx, db], mode: pipeline}\n";
    let desired = crate::manifest::parse_manifest("t", yaml).unwrap();
    let mut effective = desired.clone();
    effective.configs.clear();
    let entry = |s: ExecutionState| InstanceEntry::from(s);
    let mut states: crate::complete_state::WorkloadStatesMap = BTreeMap::new();
    states
        .entry("agent_A".into())
        .or_default()
        .entry("nginx".into())
        .or_default()
        .insert("1".into(), entry(ExecutionState::running()));
    states
        .entry("agent_A".into())
        .or_default()
        .entry("nginx".into())
        .or_default()
        .insert("0".into(), entry(ExecutionState::failed("gone")));
    states
        .entry("agent_B".into())
        .or_default()
        .entry("db".into())
        .or_default()
        .insert("2".into(), entry(ExecutionState::succeeded()));
    states.entry("agent_C".into()).or_default();
    let mut agents = BTreeMap::new();
    let a = crate::complete_state::AgentAttributes {
        status: AgentStatus { cpu_usage: 12, free_memory: 1024 },
        tags: [("zone".to_owned(), "x".to_owned())].into(),
        dropped_stale_reports: 2,
        capabilities: vec!["podman".into()],
        quota: Some(crate::quota::AgentQuota { max_workloads: 4, ..Default::default() }),
        ..Default::default()
    };
    agents.insert("agent_A".to_owned(), a);
    agents.insert("agent_B".to_owned(), Default::default());
    let jobs = [("1".to_owned(), Job { id: 1, reason: "r".into(), ..Default::default() })].into();
    CompleteState { desired_state: desired, workload_states: states, agents, effective_state: Some(effective), jobs }
}

fn whole(cs: &CompleteState) -> PartialCompleteState {
    PartialCompleteState {
        desired_state: Some(PartialState::from(&cs.desired_state)),
        workload_states: Some(partial_states(cs.workload_states.clone())),
        agents: Some(cs.agents.clone().into_iter().map(|(n, a)| (n, a.into())).collect()),
        effective_state: cs.effective_state.as_ref().map(PartialState::from),
        jobs: Some(cs.jobs.clone()).filter(|j| !j.is_empty()),
    }
}

fn by_tree(cs: &CompleteState, masks: &[String]) -> PartialCompleteState {
    let tree = serde_json::to_value(cs).unwrap();
    PartialCompleteState::from_json(&field_mask::filter(&tree, masks)).unwrap()
}

#[test]
fn the_typed_selection_selects_what_the_tree_filter_selects() {
    let masks = [
        "desiredState",
        "desiredState.apiVersion",
        "desiredState.workloads",
        "desiredState.workloads.nginx",
        "desiredState.workloads.*",
        "desiredState.workloads.nothing",
        "desiredState.configs",
        "desiredState.configs.web",
        "desiredState.configs.*",
        "desiredState.configs.nothing",
        "desiredState.groups",
        "desiredState.unknown",
        "desiredState.unknown.deeper",
        "effectiveState",
        "effectiveState.workloads.db",
        "effectiveState.configs",
        "workloadStates",
        "workloadStates.agent_A",
        "workloadStates.*",
        "workloadStates.agent_C",
        "workloadStates.agent_C.x",
        "workloadStates.nobody",
        "workloadStates.*.nginx",
        "workloadStates.agent_A.nginx.1",
        "workloadStates.*.*.2",
        "workloadStates.*.*.*",
        "agents",
        "agents.agent_A",
        "agents.*",
        "agents.nobody",
        "jobs",
        "jobs.1",
        "jobs.*",
        "jobs.7",
        "unknown",
    ];
    let cs = rich_state();
    assert_eq!(whole(&cs), by_tree(&cs, &[]), "the whole state");
    let mut sets: Vec<Vec<String>> = masks.iter().map(|m| vec![(*m).to_owned()]).collect();
    for (i, a) in masks.iter().enumerate() {
        for b in &masks[i + 1..] {
            sets.push(vec![(*a).to_owned(), (*b).to_owned()]);
        }
    }
    sets.push(masks.iter().map(|m| (*m).to_owned()).collect());
    for set in sets {
        let paths = MaskPath::parse_all(&set).unwrap();
        assert!(selects_typed(&paths), "{set:?}");
        let typed = whole(&cs).select(&paths);
        assert_eq!(typed, by_tree(&cs, &set), "{set:?}");
        assert_eq!(typed.to_json().unwrap(), by_tree(&cs, &set).to_json().unwrap(), "{set:?}");
    }
    // Without jobs, effective state or groups, as an Ankaios-shaped state.
    let mut bare = rich_state();
    bare.jobs.clear();
    bare.effective_state = None;
    bare.desired_state.groups.clear();
    for m in ["jobs", "effectiveState", "desiredState.groups", "desiredState.workloads.*"] {
        let set = vec![m.to_owned()];
        assert_eq!(whole(&bare).select(&MaskPath::parse_all(&set).unwrap()), by_tree(&bare, &set), "{m}");
    }
}

#[test]
fn masks_deeper_than_one_entry_are_left_to_the_tree() {
    for m in
        ["desiredState.workloads.nginx.agent", "desiredState.*", "*", "workloadStates.A.w.1.state", "agents.A.tags"]
    {
        assert!(!selects_typed(&[MaskPath::parse(m).unwrap()]), "{m}");
    }
}
