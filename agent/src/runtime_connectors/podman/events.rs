//! What podman's events and listings say about the agent's containers:
//! one line of podman's event log (or of `podman events --format json`,
//! the same JSON) maps to an [`Observed`] state of the instance named by
//! its `name` label, one `podman ps --all` entry to an execution state.
//! The watcher that reads them is in [`super::watcher`].

use ank_common::execution_state::{Failed, Pending, Stopping};
use ank_common::{ExecutionState, StateKind, WorkloadInstanceName};

use super::cli::{EventLine, PsEntry};
use crate::runtime_connectors::{ListedWorkload, Observed, RuntimeEvent, WorkloadId};

/// The state of a container that exited with `code`.
pub fn exit_state(code: i32) -> ExecutionState {
    if code == 0 { ExecutionState::succeeded() } else { ExecutionState::failed(format!("Exit code: '{code}'")) }
}

/// Maps one event to what it says about the container; `None` for events
/// that do not change the execution state (cleanup, mount, exec, ...).
// [impl->swdd~podman-state-getter-maps-state~3]
// [impl->swdd~podman-implements-runtime-state-getter~1]
pub fn observed_from_event(ev: &EventLine) -> Option<Observed> {
    if !ev.kind.is_empty() && ev.kind != "container" {
        return None;
    }
    let state = match ev.status.as_str() {
        "create" | "init" => ExecutionState::new(StateKind::Pending(Pending::Starting)),
        "start" | "unpause" | "restart" => ExecutionState::running(),
        "died" => exit_state(ev.exit_code.unwrap_or(0)),
        "pause" => ExecutionState::with_info(StateKind::Failed(Failed::Unknown), "paused"),
        // [impl->swdd~podman-state-getter-returns-lost-state~1]
        "remove" => return Some(Observed::Gone),
        _ => return None,
    };
    Some(Observed::State(state))
}

/// The `RuntimeEvent` of an event line, if it concerns an instance of `agent`.
pub fn event_from_line(line: &str, agent: &str) -> Option<RuntimeEvent> {
    match EventLine::parse(line) {
        Ok(ev) => event_from(&ev, agent),
        Err(e) => {
            tracing::warn!("ignoring unparsable podman event '{line}': {e}");
            None
        }
    }
}

/// The `RuntimeEvent` of an event, if it concerns an instance of `agent`.
pub fn event_from(ev: &EventLine, agent: &str) -> Option<RuntimeEvent> {
    if ev.attribute("agent") != Some(agent) {
        return None;
    }
    let instance_name = WorkloadInstanceName::parse(ev.attribute("name")?).ok()?;
    let observed = observed_from_event(ev)?;
    Some(RuntimeEvent::Changed { instance_name, workload_id: WorkloadId(ev.id.clone()), observed })
}

/// The execution state of a `podman ps` entry.
// [impl->swdd~podman-state-getter-maps-state~3]
pub fn state_from_ps(entry: &PsEntry) -> ExecutionState {
    match entry.state.as_str() {
        // Same value as the create/init events, so a reconcile repeats no state.
        "created" | "configured" | "initialized" => ExecutionState::new(StateKind::Pending(Pending::Starting)),
        "running" => ExecutionState::running(),
        "exited" => exit_state(entry.exit_code),
        "stopping" | "stopped" | "removing" => {
            ExecutionState::with_info(StateKind::Stopping(Stopping::Stopping), entry.state.clone())
        }
        // [impl->swdd~podman-state-getter-returns-unknown-state~1]
        other => ExecutionState::with_info(StateKind::Failed(Failed::Unknown), other.to_owned()),
    }
}

/// The containers of `agent` among `entries` (those with a valid `name` label).
// [impl->swdd~podman-list-of-existing-workloads-uses-labels~1]
pub fn listed_from_ps(entries: &[PsEntry], agent: &str) -> Vec<ListedWorkload> {
    entries
        .iter()
        .filter(|e| e.label("agent") == Some(agent))
        .filter_map(|e| {
            let instance_name = WorkloadInstanceName::parse(e.label("name")?).ok()?;
            Some(ListedWorkload { instance_name, workload_id: WorkloadId(e.id.clone()), state: state_from_ps(e) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIED_3: &str = r#"{"ID":"1dd2","Image":"localhost/busybox:latest","Name":"xt","Status":"died","Time":"2026-11-23T02:58:45.593390447Z","Type":"container","ContainerExitCode":3,"Attributes":{"agent":"agent_T","name":"x.abc.agent_T"}}"#;
    const DIED_0: &str = r#"{"ID":"b1cb","Image":"localhost/busybox:latest","Name":"probe3","Status":"died","Time":"2026-11-23T03:13:51.650784414Z","Type":"container","Attributes":{"agent":"agent_T","name":"z.abc.agent_T"}}"#;
    const START: &str = r#"{"ID":"2af2","Image":"localhost/busybox:latest","Name":"probe2","Status":"start","Time":"2026-11-23T03:13:50.026329226Z","Type":"container","Attributes":{"agent":"agent_T","name":"y.abc.agent_T"}}"#;
    const REMOVE: &str = r#"{"ID":"2af2","Image":"localhost/busybox:latest","Name":"probe2","Status":"remove","Time":"2026-11-23T03:13:51.435794149Z","Type":"container","Attributes":{"agent":"agent_T","name":"y.abc.agent_T"}}"#;
    const CLEANUP: &str = r#"{"ID":"2af2","Image":"localhost/busybox:latest","Name":"probe2","Status":"cleanup","Time":"2026-11-23T03:13:51.381597637Z","Type":"container","Attributes":{"agent":"agent_T","name":"y.abc.agent_T"}}"#;

    fn changed(line: &str) -> Option<(String, String, Observed)> {
        match event_from_line(line, "agent_T")? {
            RuntimeEvent::Changed { instance_name, workload_id, observed } => {
                Some((instance_name.to_string(), workload_id.0, observed))
            }
            RuntimeEvent::Snapshot { .. } | RuntimeEvent::ChangedById { .. } | RuntimeEvent::Health { .. } => None,
        }
    }

    #[test]
    // [utest->swdd~podman-state-getter-maps-state~3]
    fn podman_events_died_with_exit_code_3_is_exec_failed() {
        let (name, id, observed) = changed(DIED_3).unwrap();
        assert_eq!(name, "x.abc.agent_T");
        assert_eq!(id, "1dd2");
        assert_eq!(
            observed,
            Observed::State(ExecutionState::with_info(StateKind::Failed(Failed::ExecFailed), "Exit code: '3'"))
        );
    }

    #[test]
    fn podman_events_died_without_exit_code_is_succeeded() {
        assert_eq!(changed(DIED_0).unwrap().2, Observed::State(ExecutionState::succeeded()));
    }

    #[test]
    // [utest->swdd~podman-state-getter-returns-lost-state~1]
    fn podman_events_start_is_running_and_remove_is_gone() {
        assert_eq!(changed(START).unwrap().2, Observed::State(ExecutionState::running()));
        assert_eq!(changed(REMOVE).unwrap().2, Observed::Gone);
        assert_eq!(changed(CLEANUP), None);
    }

    #[test]
    fn podman_events_garbage_and_foreign_lines_are_ignored() {
        for line in ["", "not json", "{", "[1,2]", r#"{"Status":"start"}"#, r#"{"ID":5}"#] {
            assert_eq!(event_from_line(line, "agent_T"), None, "{line}");
        }
        // another agent's container, and a label that is no instance name
        assert_eq!(event_from_line(START, "agent_U"), None);
        let bad_name = START.replace("y.abc.agent_T", "not-an-instance");
        assert_eq!(event_from_line(&bad_name, "agent_T"), None);
        let image_event = START.replace("\"container\"", "\"image\"");
        assert_eq!(event_from_line(&image_event, "agent_T"), None);
    }

    #[test]
    // [utest->swdd~podman-state-getter-maps-state~3]
    // [utest->swdd~podman-state-getter-returns-unknown-state~1]
    // [utest->swdd~podman-list-of-existing-workloads-uses-labels~1]
    fn podman_ps_states_map_like_ankaios() {
        let entry = |state: &str, code: i32| PsEntry {
            id: "1".into(),
            names: vec![],
            state: state.into(),
            exit_code: code,
            labels: Some([("agent".into(), "a".into()), ("name".into(), "w.h.a".into())].into_iter().collect()),
            pod: String::new(),
            is_infra: false,
        };
        assert_eq!(state_from_ps(&entry("running", 0)), ExecutionState::running());
        assert_eq!(state_from_ps(&entry("exited", 0)), ExecutionState::succeeded());
        assert_eq!(state_from_ps(&entry("exited", 3)).kind, StateKind::Failed(Failed::ExecFailed));
        assert_eq!(state_from_ps(&entry("created", 0)).kind, StateKind::Pending(Pending::Starting));
        assert_eq!(state_from_ps(&entry("paused", 0)).kind, StateKind::Failed(Failed::Unknown));
        let listed = listed_from_ps(&[entry("running", 0)], "a");
        assert_eq!(listed[0].instance_name.to_string(), "w.h.a");
        assert!(listed_from_ps(&[entry("running", 0)], "b").is_empty());
    }
}
