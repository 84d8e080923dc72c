//! Answers to requests from commanders and workloads: the complete state,
//! filtered by field masks, and updates of the desired state.

use ank_common::field_mask;
use ank_common::{CompleteState, State};
use serde_json::Value;

use crate::connections::Connections;
use crate::workload_states::WorkloadStateStore;

/// The complete state as a JSON tree, filtered by `field_mask`; the
/// desired state's apiVersion is always included.
pub fn complete_state(
    desired: &State,
    states: &WorkloadStateStore,
    conns: &Connections,
    field_mask: &[String],
) -> Result<Value, String> {
    let cs =
        CompleteState { desired_state: desired.clone(), workload_states: states.map().clone(), agents: conns.agents() };
    let tree = serde_json::to_value(&cs).map_err(|e| e.to_string())?;
    if field_mask.is_empty() {
        return Ok(tree);
    }
    let mut masks: Vec<String> = field_mask.iter().map(|m| widen_state_mask(m)).collect();
    masks.push("desiredState.apiVersion".to_owned());
    Ok(field_mask::filter(&tree, &masks))
}

/// A mask that reaches inside one execution state (`...<id>.state`) selects
/// the whole state, so state and subState always come together.
fn widen_state_mask(mask: &str) -> String {
    let segs: Vec<&str> = mask.split('.').collect();
    if segs.first() == Some(&"workloadStates") && segs.len() > 4 {
        return segs[..4].join(".");
    }
    mask.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_state_masks_keep_api_version_and_widen_state_paths() {
        let desired = ank_common::manifest::parse_manifest(
            "t",
            "apiVersion: v1\nworkloads:\n  a:\n    runtime: podman\n    agent: A\n    runtimeConfig: x\n",
        )
        .unwrap();
        let v = complete_state(
            &desired,
            &WorkloadStateStore::default(),
            &Connections::default(),
            &["desiredState.workloads.a.agent".into()],
        )
        .unwrap();
        assert_eq!(v, serde_json::json!({"desiredState": {"apiVersion": "v1", "workloads": {"a": {"agent": "A"}}}}));
        assert_eq!(widen_state_mask("workloadStates.A.w.id.subState"), "workloadStates.A.w.id");
    }
}
