//! The complete state as Ankaios prints it, from the tree our server sends.

use serde_json::json;

use super::*;
use crate::render::yaml;

fn print(tree: &Value, masks: &[&str], extensions: bool) -> String {
    let opts = ShapeOptions { masks: masks.iter().map(|m| m.to_string()).collect(), extensions };
    yaml::to_string(&complete_state(tree, &opts))
}

fn our_tree() -> Value {
    json!({
        "agents": {"agent_A": {
            "status": {"cpuUsage": 3, "freeMemory": 1024},
            "tags": {},
            "capabilities": ["podman"],
            "metrics": {"free_memory_mb": 1.0},
        }},
        "desiredState": {
            "apiVersion": "v1",
            "configs": {},
            "workloads": {"nginx": {
                "agent": "agent_A",
                "configs": {},
                "controlInterfaceAccess": {},
                "dependencies": {},
                "effectivePriority": 0,
                "restartPolicy": "NEVER",
                "runtime": "podman",
                "runtimeConfig": "image: nginx",
                "tags": {"owner": "me"},
            }},
        },
        "jobs": {"1": {"phase": "Succeeded"}},
        "workloadStates": {"agent_A": {"nginx": {"abc": {"state": "Running", "subState": "Ok", "generation": 1}}}},
    })
}

#[test]
fn shape_prints_ankaios_order_without_empty_maps_and_extensions() {
    let expected = "desiredState:
  apiVersion: v1
  workloads:
    nginx:
      agent: agent_A
      restartPolicy: NEVER
      tags:
        owner: me
      runtime: podman
      runtimeConfig: 'image: nginx'
workloadStates:
  agent_A:
    nginx:
      abc:
        additionalInfo: ''
        state: Running
        subState: Ok
agents:
  agent_A:
    status:
      cpuUsage: 3
      freeMemory: 1024
";
    assert_eq!(print(&our_tree(), &[], false), expected);
}

#[test]
fn shape_shows_extensions_when_asked_for() {
    let all = print(&our_tree(), &[], true);
    assert!(all.contains("\njobs:\n  '1':\n    phase: Succeeded\n"), "{all}");
    assert!(all.contains("      effectivePriority: 0\n") && all.contains("    capabilities:\n    - podman\n"), "{all}");
    assert!(all.contains("        generation: 1\n"), "{all}");
    let jobs = print(&json!({"jobs": {"1": {"phase": "Running"}}}), &["jobs"], false);
    assert_eq!(jobs, "jobs:\n  '1':\n    phase: Running\n");
    let caps = print(&our_tree(), &["agents.*.capabilities"], false);
    assert!(caps.contains("capabilities:") && !caps.contains("metrics"), "{caps}");
    assert!(!print(&our_tree(), &["agents.*"], false).contains("capabilities"));
}

#[test]
fn shape_of_an_empty_answer_is_an_empty_map() {
    assert_eq!(print(&json!({}), &["workloadStates.nobody"], false), "{}\n");
    let configs =
        print(&json!({"desiredState": {"apiVersion": "v1", "configs": {}}}), &["desiredState.configs"], false);
    assert_eq!(configs, "desiredState:\n  apiVersion: v1\n");
}

#[test]
fn shape_keeps_single_state_fields_of_masked_instances() {
    let tree = json!({"workloadStates": {"A": {"w": {"1": {"state": "Running", "subState": "Ok"}}}}});
    let text = print(&tree, &["workloadStates.A.w.1.state"], false);
    assert_eq!(text, "workloadStates:\n  A:\n    w:\n      '1':\n        state: Running\n        subState: Ok\n");
}

// Ankaios' `ank get state` prints a rule's `type` first, then StateRule's
// `operation, filterMasks` (LogRule's `workloadNames`), not sorted.
#[test]
fn shape_prints_access_rules_in_ankaios_order() {
    let tree = json!({"desiredState": {"apiVersion": "v1", "workloads": {"w": {
        "agent": "A",
        "controlInterfaceAccess": {
            "allowRules": [
                {"filterMasks": ["desiredState"], "operation": "Read", "type": "StateRule"},
                {"type": "LogRule", "workloadNames": ["x"]},
            ],
            "denyRules": [{"filterMasks": ["agents"], "operation": "Write", "type": "StateRule"}],
        },
    }}}});
    let text = print(&tree, &[], false);
    let expected = "      controlInterfaceAccess:
        allowRules:
        - type: StateRule
          operation: Read
          filterMasks:
          - desiredState
        - type: LogRule
          workloadNames:
          - x
        denyRules:
        - type: StateRule
          operation: Write
          filterMasks:
          - agents
";
    assert!(text.ends_with(expected), "{text}");
}
