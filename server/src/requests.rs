//! Answers to requests from commanders and workloads: the complete state,
//! filtered by field masks, and updates of the desired state.

use ank_common::CompleteState;
use ank_common::convert::{PartialCompleteState, PartialState, partial_states, selects_typed};
use ank_common::field_mask;
use ank_common::mask_path::{MaskPath, Segment};
use ank_common::messages::{RequestContent, ResponseContent};
use serde_json::Value;

use crate::connections::Connections;
use crate::desired_state::DesiredState;
use crate::events::sections::Sections;
use crate::jobs::JobEngine;
use crate::workload_states::WorkloadStateStore;

/// The answer to an update the server refuses, worded as Ankaios words it.
pub(crate) fn rejected(reason: String) -> ResponseContent {
    tracing::warn!("Update rejected: '{reason}'");
    ResponseContent::Error(format!("Update rejected: '{reason}'"))
}

/// Refuses a request whose field or update masks are not all valid mask
/// paths (an empty segment: see [`MaskPath`]), before anything reads them.
pub fn check_request_masks(content: &RequestContent) -> Result<(), String> {
    match content {
        RequestContent::CompleteState { field_mask, .. } | RequestContent::RenderedState { field_mask } => {
            field_mask::validate(field_mask)
        }
        RequestContent::UpdateState { update_mask, .. } => field_mask::validate(update_mask),
        _ => Ok(()),
    }
    .map_err(|e| e.to_string())
}

/// The complete state, filtered by `field_mask`; masks into the desired or
/// the effective state also select its apiVersion. The outer error refuses
/// the request; the inner one is a filtered state that does not read as a
/// complete state (a mask deep into a part whose rest is required), which
/// the answer reports instead of the state.
pub fn complete_state(
    desired: &DesiredState,
    states: &WorkloadStateStore,
    conns: &Connections,
    jobs: &JobEngine,
    field_mask: &[String],
) -> Result<Result<PartialCompleteState, String>, String> {
    let parsed = MaskPath::parse_all(field_mask).map_err(|e| e.to_string())?;
    let mut masks: Vec<String> = parsed.iter().flat_map(field_mask::read_masks).map(|m| m.to_string()).collect();
    // As Ankaios: the apiVersion comes with masks into the desired state only,
    // so a mask that selects nothing else answers with an empty state.
    for root in ["desiredState", "effectiveState"] {
        if field_mask.iter().any(|m| m.starts_with(root)) {
            masks.push(format!("{root}.apiVersion"));
        }
    }
    let masks = MaskPath::parse_all(&masks).map_err(|e| e.to_string())?;
    if !selects_typed(&masks) {
        return complete_state_tree(desired, states, conns, jobs, field_mask, &masks)
            .map(|tree| PartialCompleteState::from_json(&tree).map_err(|e| e.to_string()));
    }
    // Only the parts a mask names are built.
    let wants =
        |root: &str| masks.is_empty() || masks.iter().any(|m| m.segments().first() == Some(&Segment::Key(root.into())));
    let cs = PartialCompleteState {
        desired_state: wants("desiredState").then(|| PartialState::from(&desired.state)),
        workload_states: wants("workloadStates").then(|| partial_states(states.map_with_events())),
        agents: wants("agents").then(|| conns.agents().into_iter().map(|(n, a)| (n, a.into())).collect()),
        effective_state: wants("effectiveState").then(|| PartialState::from(&desired.effective())),
        jobs: wants("jobs").then(|| jobs.jobs()).filter(|j| !j.is_empty()),
    };
    Ok(Ok(cs.select(&masks)))
}

/// The complete state as a JSON tree, filtered by `masks` (the read masks
/// of `field_mask`): what [`complete_state`] selects for masks deeper than
/// one entry.
fn complete_state_tree(
    desired: &DesiredState,
    states: &WorkloadStateStore,
    conns: &Connections,
    jobs: &JobEngine,
    field_mask: &[String],
    masks: &[MaskPath],
) -> Result<Value, String> {
    let cs = CompleteState {
        desired_state: desired.state.clone(),
        workload_states: states.map_with_events(),
        agents: conns.agents(),
        effective_state: Some(desired.effective()),
        jobs: jobs.jobs(),
    };
    let tree = serde_json::to_value(&cs).map_err(|e| e.to_string())?;
    if field_mask.is_empty() {
        return Ok(tree);
    }
    let masks: Vec<String> = masks.iter().map(ToString::to_string).collect();
    Ok(field_mask::filter(&tree, &masks))
}

/// The complete state with only the parts in `sections` (the others
/// empty) and no workload states, for comparisons of events.
pub fn complete_state_sections(
    desired: &DesiredState,
    conns: &Connections,
    jobs: &JobEngine,
    sections: Sections,
) -> Value {
    let cs = CompleteState {
        desired_state: if sections.desired_state { desired.state.clone() } else { Default::default() },
        workload_states: Default::default(),
        agents: if sections.agents { conns.agents() } else { Default::default() },
        effective_state: sections.effective_state.then(|| desired.effective()),
        jobs: if sections.jobs { jobs.jobs() } else { Default::default() },
    };
    serde_json::to_value(&cs).unwrap_or_default()
}

/// Checks the masks of an update the way Ankaios applies them to its
/// complete state (desired state, agents, empty workload states and the
/// effective state); the error is the first mask naming a path that does
/// not exist there (see [`field_mask::check_update`]).
pub fn check_update_masks(
    desired: &DesiredState,
    conns: &Connections,
    new_state: &PartialCompleteState,
    update_mask: &[String],
) -> Result<(), String> {
    // Masks that each name one workload or config item always apply: no
    // need to build the tree.
    if update_mask.iter().all(|m| crate::desired_state::names_one_entry(m)) {
        return Ok(());
    }
    let effective = serde_json::to_value(desired.effective()).unwrap_or_default();
    let current = serde_json::json!({
        "desiredState": serde_json::to_value(&desired.state).unwrap_or_default(),
        "workloadStates": {},
        "agents": serde_json::to_value(conns.agents()).unwrap_or_default(),
        "effectiveState": effective,
    });
    let new_state = new_state.to_json().map_err(|e| e.to_string())?;
    field_mask::check_update(&current, &new_state, update_mask)
}

/// Applies the `agents...` masks of an update: only the tags of connected
/// agents change; agents cannot be added or removed and their status is
/// theirs to report. Returns the agents whose tags changed.
pub fn update_agent_tags(
    conns: &mut Connections,
    new_state: &PartialCompleteState,
    update_mask: &[String],
) -> Vec<String> {
    let masks: Vec<String> = update_mask.iter().filter(|m| m.split('.').next() == Some("agents")).cloned().collect();
    if masks.is_empty() {
        return Vec::new();
    }
    let new_state = match new_state.to_json() {
        Ok(tree) => tree,
        Err(e) => {
            tracing::warn!("agent tags update ignored: {e}");
            return Vec::new();
        }
    };
    let before = conns.agents();
    let mut tree = serde_json::json!({ "agents": &before });
    field_mask::apply_update(&mut tree, &new_state, &masks);
    let mut changed = Vec::new();
    for (agent, old) in &before {
        let tags = tree.get("agents").and_then(|a| a.get(agent)).and_then(|a| a.get("tags"));
        let new_tags: std::collections::BTreeMap<String, String> = match tags {
            None => Default::default(),
            Some(t) => match serde_json::from_value(t.clone()) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!("agent '{agent}': tags update ignored: {e}");
                    continue;
                }
            },
        };
        if new_tags != old.tags
            && let Some(attrs) = conns.agent_attributes_mut(agent)
        {
            attrs.tags = new_tags;
            changed.push(agent.clone());
        }
    }
    if let Some(unknown) = tree
        .get("agents")
        .and_then(Value::as_object)
        .map(|m| m.keys().filter(|k| !before.contains_key(k.as_str())).cloned().collect::<Vec<_>>())
        && !unknown.is_empty()
    {
        tracing::warn!("update names agents that are not connected, ignored: {}", unknown.join(", "));
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_state_masks_keep_api_version() {
        let desired = DesiredState::new(
            ank_common::manifest::parse_manifest(
                "t",
                "apiVersion: v1\nworkloads:\n  a:\n    runtime: podman\n    agent: A\n    runtimeConfig: x\n",
            )
            .unwrap(),
        )
        .unwrap();
        let v = complete_state(
            &desired,
            &WorkloadStateStore::default(),
            &Connections::default(),
            &JobEngine::default(),
            &["desiredState.workloads.a.agent".into()],
        )
        .unwrap()
        .unwrap()
        .to_json()
        .unwrap();
        assert_eq!(v, serde_json::json!({"desiredState": {"apiVersion": "v1", "workloads": {"a": {"agent": "A"}}}}));
    }

    #[test]
    fn complete_state_masks_into_an_execution_state_return_state_and_sub_state_only() {
        use ank_common::execution_state::ExecutionState;
        use ank_common::{WorkloadInstanceName, WorkloadState};
        let desired =
            DesiredState::new(ank_common::manifest::parse_manifest("t", "apiVersion: v1\n").unwrap()).unwrap();
        let mut states = WorkloadStateStore::default();
        let n = WorkloadInstanceName { workload_name: "w".into(), agent_name: "A".into(), id: "1".into() };
        states.record(&WorkloadState::new(n, ExecutionState::failed("the secret is s3cr3t")));
        let answer = |mask: &str| {
            complete_state(&desired, &states, &Connections::default(), &JobEngine::default(), &[mask.to_owned()])
                .map(|state| state.unwrap())
        };
        // The filtered trees, as the answers carry them (typed).
        let tree = |v: serde_json::Value| PartialCompleteState::from_json(&v).unwrap();
        let state_only = tree(
            serde_json::json!({"workloadStates": {"A": {"w": {"1": {"state": "Failed", "subState": "ExecFailed"}}}}}),
        );
        // Before: widened to the whole execution state, additionalInfo included.
        assert_eq!(answer("workloadStates.A.w.1.subState").unwrap(), state_only);
        assert!(!answer("workloadStates.A.w.1.subState").unwrap().to_json().unwrap().to_string().contains("s3cr3t"));
        assert_eq!(answer("workloadStates.*.*.*.state").unwrap(), state_only);
        assert_eq!(answer("workloadStates.A.w.1.state.deeper").unwrap(), tree(serde_json::json!({})));
        assert_eq!(
            answer("workloadStates.A.w.1.additionalInfo").unwrap(),
            tree(
                serde_json::json!({"workloadStates": {"A": {"w": {"1": {"additionalInfo": "the secret is s3cr3t"}}}}})
            )
        );
        assert!(answer("workloadStates.A..1").unwrap_err().contains("empty segment"));
    }

    #[test]
    fn complete_state_masks_outside_the_desired_state_select_no_api_version() {
        let desired =
            DesiredState::new(ank_common::manifest::parse_manifest("t", "apiVersion: v1\n").unwrap()).unwrap();
        let answer = |mask: &str| {
            complete_state(
                &desired,
                &WorkloadStateStore::default(),
                &Connections::default(),
                &JobEngine::default(),
                &[mask.to_owned()],
            )
            .unwrap()
            .unwrap()
            .to_json()
            .unwrap()
        };
        assert_eq!(answer("workloadStates.agent_X"), serde_json::json!({}));
        assert_eq!(answer("agents.nobody"), serde_json::json!({}));
        assert_eq!(answer("desiredState.workloads.nothing"), serde_json::json!({"desiredState": {"apiVersion": "v1"}}));
    }

    #[test]
    fn agent_tags_change_for_connected_agents_only() {
        let mut conns = Connections::default();
        let (tx, _rx) = tokio::sync::mpsc::channel(1);
        conns.open(1, crate::connections::ConnKind::Agent, tx);
        let attrs =
            ank_common::AgentAttributes { tags: [("zone".to_owned(), "a".to_owned())].into(), ..Default::default() };
        conns.register_agent(1, "A", attrs);
        let new = serde_json::json!({"agents": {"A": {"tags": {"zone": "b", "gpu": "yes"}, "status": {"cpuUsage": 99}}, "B": {"tags": {"x": "y"}}}});
        let changed = update_agent_tags(
            &mut conns,
            &crate::test_support::typed(new.clone()),
            &["agents.A.tags".into(), "agents.B".into(), "agents.A.status".into()],
        );
        assert_eq!(changed, ["A"]);
        let agents = conns.agents();
        assert_eq!(agents["A"].tags.len(), 2);
        assert_eq!(agents["A"].tags["zone"], "b");
        assert_eq!(agents["A"].status.cpu_usage, 0, "status is the agent's to report");
        assert!(!agents.contains_key("B"), "agents are not added by updates");
        // A mask without a value in the new state removes one tag.
        let changed = update_agent_tags(
            &mut conns,
            &crate::test_support::typed(serde_json::json!({})),
            &["agents.A.tags.gpu".into()],
        );
        assert_eq!(changed, ["A"]);
        assert_eq!(conns.agents()["A"].tags.keys().collect::<Vec<_>>(), ["zone"]);
    }

    #[test]
    fn complete_state_selects_typed_what_the_tree_filter_selects() {
        use ank_common::execution_state::ExecutionState;
        use ank_common::workload_events::EventKind;
        use ank_common::{WorkloadInstanceName, WorkloadState};
        let yaml = "apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n    agent: A\n    runtimeConfig: x\n    \
                    configs: {c: conf}\n    tags: {k: v}\n  db:\n    runtime: podman\n    agent: B\n    \
                    runtimeConfig: y\n    dependencies: {web: ADD_COND_RUNNING}\nconfigs:\n  conf: {port: '80'}\n";
        let desired = DesiredState::new(ank_common::manifest::parse_manifest("t", yaml).unwrap()).unwrap();
        let mut states = WorkloadStateStore::default();
        for (w, agent, state) in [("web", "A", ExecutionState::running()), ("db", "B", ExecutionState::failed("x"))] {
            let n = WorkloadInstanceName { workload_name: w.into(), agent_name: agent.into(), id: "1".into() };
            states.record(&WorkloadState::new(n, state));
        }
        states.record_event("web", EventKind::Escalated, "for db (5)");
        let (conns, jobs) = (Connections::default(), JobEngine::default());
        let masks = [
            "",
            "desiredState",
            "desiredState.workloads.web",
            "desiredState.workloads.*",
            "desiredState.configs.conf",
            "desiredState.apiVersion",
            "effectiveState",
            "effectiveState.workloads.db",
            "workloadStates",
            "workloadStates.A",
            "workloadStates.*.web",
            "workloadStates.B.db.1",
            "agents",
            "jobs",
            "desiredStateX",
        ];
        for (i, a) in masks.iter().enumerate() {
            for b in &masks[i..] {
                let set: Vec<String> = [a, b].iter().filter(|m| !m.is_empty()).map(|m| (**m).to_owned()).collect();
                let typed = complete_state(&desired, &states, &conns, &jobs, &set).unwrap().unwrap();
                let mut read: Vec<MaskPath> =
                    MaskPath::parse_all(&set).unwrap().iter().flat_map(field_mask::read_masks).collect();
                for root in ["desiredState", "effectiveState"] {
                    if set.iter().any(|m| m.starts_with(root)) {
                        read.push(MaskPath::parse(&format!("{root}.apiVersion")).unwrap());
                    }
                }
                let tree = complete_state_tree(&desired, &states, &conns, &jobs, &set, &read).unwrap();
                assert_eq!(typed, PartialCompleteState::from_json(&tree).unwrap(), "{set:?}");
            }
        }
    }
}
