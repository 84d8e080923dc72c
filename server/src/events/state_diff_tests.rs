//! The altered fields of Ankaios' system tests (test_events.robot): the
//! same changes give the same paths here.

use serde_json::{Value, json};

use super::*;

fn masks(m: &[&str]) -> Vec<String> {
    m.iter().map(|s| (*s).to_owned()).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn reported(_: &str) -> bool {
    true
}

/// Our complete state around `workloads` and `configs`.
fn state(workloads: Value, configs: Value) -> Value {
    comparable(
        &json!({"desiredState": {"apiVersion": "v1", "workloads": workloads, "configs": configs},
            "workloadStates": {}, "agents": {}, "jobs": {}}),
        reported,
    )
}

fn simple(agent: &str, dependencies: Value) -> Value {
    json!({"agent": agent, "restartPolicy": "NEVER", "dependencies": dependencies, "tags": {}, "runtime": "podman",
        "runtimeConfig": "image: x", "controlInterfaceAccess": {"allowRules": [], "denyRules": []}, "configs": {}})
}

fn configs() -> Value {
    json!({"some_config": {"param1": "a", "param2": "b", "some_sub_config": {"sub_param1": "c"}}})
}

fn updated_configs() -> Value {
    json!({"some_config": {"param1": "A", "param2": "b", "some_sub_config": {"sub_param1": "C"}}})
}

#[test]
fn events_no_wildcard() {
    let m = masks(&["desiredState.workloads.simple"]);
    let empty = state(json!({}), json!({}));
    let one = state(json!({"simple": simple("agent_A", json!({}))}), json!({}));
    let a = differences(&empty, &one).altered_fields(&m);
    assert_eq!(
        (a.added_fields, a.updated_fields, a.removed_fields.len()),
        (masks(&["desiredState.workloads.simple"]), vec![], 0)
    );
    let moved =
        state(json!({"simple": simple("agent_B", json!({"some_other_workload": "ADD_COND_RUNNING"}))}), json!({}));
    let a = differences(&one, &moved).altered_fields(&m);
    assert_eq!(a.added_fields, ["desiredState.workloads.simple.dependencies"]);
    assert_eq!(a.updated_fields, ["desiredState.workloads.simple.agent"]);
    assert!(a.removed_fields.is_empty());
    let a = differences(&moved, &empty).altered_fields(&m);
    assert_eq!((a.added_fields.len(), a.updated_fields.len()), (0, 0));
    assert_eq!(a.removed_fields, ["desiredState.workloads.simple"]);
}

#[test]
fn events_with_wildcards_reach_into_added_and_removed_workloads() {
    let empty = state(json!({}), json!({}));
    let one = state(json!({"simple": simple("agent_A", json!({}))}), json!({}));
    let moved =
        state(json!({"simple": simple("agent_B", json!({"some_other_workload": "ADD_COND_RUNNING"}))}), json!({}));
    let agent = masks(&["desiredState.workloads.*.agent"]);
    assert_eq!(differences(&empty, &one).altered_fields(&agent).added_fields, ["desiredState.workloads.simple.agent"]);
    let a = differences(&one, &moved).altered_fields(&agent);
    assert_eq!((a.added_fields.len(), a.updated_fields), (0, masks(&["desiredState.workloads.simple.agent"])));
    assert_eq!(
        differences(&moved, &empty).altered_fields(&agent).removed_fields,
        ["desiredState.workloads.simple.agent"]
    );

    let deep = masks(&["desiredState.workloads.*.*.some_other_workload"]);
    assert!(differences(&empty, &one).altered_fields(&deep).is_empty());
    let a = differences(&one, &moved).altered_fields(&deep);
    assert_eq!(a.added_fields, ["desiredState.workloads.simple.dependencies.some_other_workload"]);
    assert!(a.updated_fields.is_empty() && a.removed_fields.is_empty());
    let a = differences(&moved, &empty).altered_fields(&deep);
    assert_eq!(a.removed_fields, ["desiredState.workloads.simple.dependencies.some_other_workload"]);
}

#[test]
fn events_on_configs() {
    let empty = state(json!({}), json!({}));
    let with = state(json!({}), configs());
    let changed = state(json!({}), updated_configs());
    let m = masks(&["desiredState.configs"]);
    let a = differences(&empty, &with).altered_fields(&m);
    assert_eq!((a.added_fields, a.updated_fields.len()), (masks(&["desiredState.configs"]), 0));
    let a = differences(&with, &changed).altered_fields(&m);
    assert_eq!(
        sorted(a.updated_fields),
        ["desiredState.configs.some_config.param1", "desiredState.configs.some_config.some_sub_config.sub_param1"]
    );
    assert!(a.added_fields.is_empty() && a.removed_fields.is_empty());
    assert_eq!(differences(&changed, &empty).altered_fields(&m).removed_fields, ["desiredState.configs"]);

    let two = masks(&["desiredState.configs.*.*"]);
    let all_three = [
        "desiredState.configs.some_config.param1",
        "desiredState.configs.some_config.param2",
        "desiredState.configs.some_config.some_sub_config",
    ];
    assert_eq!(sorted(differences(&empty, &with).altered_fields(&two).added_fields), all_three);
    assert_eq!(
        sorted(differences(&with, &changed).altered_fields(&two).updated_fields),
        ["desiredState.configs.some_config.param1", "desiredState.configs.some_config.some_sub_config.sub_param1"]
    );
    assert_eq!(sorted(differences(&changed, &empty).altered_fields(&two).removed_fields), all_three);
}

fn states(entry: Option<(&str, &str, &str)>) -> Value {
    let mut agent_a = json!({"controller": {"c1": {"state": "Running", "subState": "Ok", "additionalInfo": ""}}});
    if let Some((state, sub, info)) = entry {
        // Our extensions beside the execution state are not reported.
        agent_a["sleepy"] = json!({"id1": {"state": state, "subState": sub, "additionalInfo": info,
            "generation": 1, "conditions": [{"type": "Ready"}]}});
    }
    comparable(&json!({"workloadStates": {"agent_A": agent_a}}), reported)
}

#[test]
fn events_on_workload_states() {
    let m = masks(&["workloadStates"]);
    let steps = [
        states(None),
        states(Some(("Pending", "Initial", ""))),
        states(Some(("Pending", "Starting", "Triggered at runtime."))),
        states(Some(("Running", "Ok", ""))),
        states(Some(("Stopping", "WaitingToStop", ""))),
        states(None),
    ];
    let altered: Vec<AlteredFields> = steps.windows(2).map(|w| differences(&w[0], &w[1]).altered_fields(&m)).collect();
    assert_eq!(altered[0].added_fields, ["workloadStates.agent_A.sleepy"]);
    let p = |f: &str| format!("workloadStates.agent_A.sleepy.id1.{f}");
    assert_eq!(sorted(altered[1].updated_fields.clone()), [p("additionalInfo"), p("subState")]);
    assert_eq!(sorted(altered[2].updated_fields.clone()), [p("additionalInfo"), p("state"), p("subState")]);
    assert_eq!(sorted(altered[3].updated_fields.clone()), [p("state"), p("subState")]);
    assert_eq!(altered[4].removed_fields, ["workloadStates.agent_A.sleepy"]);
    for a in &altered[1..4] {
        assert!(a.added_fields.is_empty() && a.removed_fields.is_empty(), "{a:?}");
    }
    // An extension beside the execution state: only where a mask names it.
    let mut more = steps[3].clone();
    more["workloadStates"]["agent_A"]["sleepy"]["id1"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
    assert!(differences(&steps[3], &more).altered_fields(&m).is_empty());
    let named = masks(&["workloadStates.*.*.*.conditions"]);
    assert_eq!(differences(&steps[3], &more).altered_fields(&named).updated_fields, [p("conditions")]);
}

#[test]
fn events_on_agents_status_comes_as_added_once_reported() {
    let m = masks(&["agents.agent_B"]);
    let agent = json!({"status": {"cpuUsage": 0, "freeMemory": 0}, "tags": {}, "metrics": {"x": 1}});
    let none = comparable(&json!({"agents": {"agent_A": {}}}), reported);
    let joined = comparable(&json!({"agents": {"agent_A": {}, "agent_B": agent}}), |a| a != "agent_B");
    let mut loaded_agent = agent.clone();
    loaded_agent["status"]["cpuUsage"] = json!(3);
    let loaded = comparable(&json!({"agents": {"agent_A": {}, "agent_B": loaded_agent}}), reported);
    assert_eq!(differences(&none, &joined).altered_fields(&m).added_fields, ["agents.agent_B"]);
    let a = differences(&joined, &loaded).altered_fields(&m);
    assert_eq!(a.added_fields, ["agents.agent_B.status"]);
    assert!(a.updated_fields.is_empty(), "the extension metrics are not reported: {a:?}");
    let metrics = masks(&["agents.*.metrics"]);
    assert!(differences(&joined, &loaded).altered_fields(&metrics).is_empty());
    assert_eq!(differences(&loaded, &none).altered_fields(&m).removed_fields, ["agents.agent_B"]);
}

#[test]
fn subscribers_without_masks_get_the_first_differences_but_not_the_extensions() {
    let old = json!({"desiredState": {"workloads": {}}, "jobs": {}});
    let new = json!({"desiredState": {"workloads": {"w": {"agent": "A"}}}, "jobs": {"1": {"phase": "Progressing"}}});
    let d = differences(&comparable(&old, reported), &comparable(&new, reported));
    assert_eq!(d.altered_fields(&[]).added_fields, ["desiredState.workloads.w"]);
    assert_eq!(d.altered_fields(&masks(&["jobs"])).added_fields, ["jobs.1"]);
}

#[test]
fn lists_count_as_one_leaf() {
    let old = json!({"a": {"l": []}, "b": {"l": [1]}, "c": {"l": [1]}});
    let new = json!({"a": {"l": [1]}, "b": {"l": []}, "c": {"l": [2]}});
    let a = differences(&old, &new).altered_fields(&[]);
    assert_eq!(
        (a.added_fields, a.removed_fields, a.updated_fields),
        (masks(&["a.l"]), masks(&["b.l"]), masks(&["c.l"]))
    );
}
