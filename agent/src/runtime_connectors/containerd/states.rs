//! What containerd's tasks and events say about a container: a task's
//! status (and exit status) maps to an execution state, an event envelope
//! to the container it concerns and what it says. The same mapping as the
//! podman connector's, so a workload reports the same states and infos on
//! either runtime.

use ank_common::execution_state::{Failed, Pending};
use ank_common::{ExecutionState, StateKind};
use containerd_client::events::{ContainerDelete, TaskCreate, TaskExit, TaskPaused, TaskResumed, TaskStart};
use containerd_client::types::Envelope;
use containerd_client::types::v1::{Process, Status};
use prost::Message;

use crate::runtime_connectors::Observed;
use crate::runtime_connectors::podman::events::exit_state;

/// The execution state of a container whose task is `task` (`None`: the
/// container has no task: being created, or its task was deleted).
pub fn state_of(task: Option<&Process>) -> ExecutionState {
    let Some(task) = task else { return starting() };
    match Status::try_from(task.status).unwrap_or(Status::Unknown) {
        Status::Created => starting(),
        Status::Running => ExecutionState::running(),
        Status::Stopped => exit_state(exit_code(task.exit_status)),
        Status::Paused | Status::Pausing => paused(),
        Status::Unknown => ExecutionState::with_info(StateKind::Failed(Failed::Unknown), "unknown".to_owned()),
    }
}

fn starting() -> ExecutionState {
    ExecutionState::new(StateKind::Pending(Pending::Starting))
}

fn paused() -> ExecutionState {
    ExecutionState::with_info(StateKind::Failed(Failed::Unknown), "paused".to_owned())
}

/// containerd's exit status as the exit code podman reports (128+signal
/// for a killed process, as both give it).
fn exit_code(status: u32) -> i32 {
    i32::try_from(status).unwrap_or(i32::MAX)
}

/// The topics the watcher subscribes to, in `namespace`.
pub fn event_filters(namespace: &str) -> Vec<String> {
    vec![
        format!("namespace==\"{namespace}\",topic~=\"^/tasks/\""),
        format!("namespace==\"{namespace}\",topic==\"/containers/delete\""),
        format!("namespace==\"{namespace}\",topic==\"{}\"", super::client::MARKER_TOPIC),
    ]
}

/// The container an event concerns and what it says of it; `None` for an
/// event that changes no container's state (an exec's exit, an OOM notice
/// before the exit, a task deleted after its exit, an unknown topic).
pub fn observed_from(envelope: &Envelope) -> Option<(String, Observed)> {
    let event = envelope.event.as_ref()?;
    let bytes = event.value.as_slice();
    match envelope.topic.as_str() {
        "/tasks/create" => TaskCreate::decode(bytes).ok().map(|e| (e.container_id, Observed::State(starting()))),
        "/tasks/start" => {
            TaskStart::decode(bytes).ok().map(|e| (e.container_id, Observed::State(ExecutionState::running())))
        }
        "/tasks/exit" => {
            let e = TaskExit::decode(bytes).ok()?;
            // The init process's id is the container's; others are execs
            // (exec probes), whose exits are no state of the workload.
            (e.id == e.container_id || e.id.is_empty())
                .then(|| (e.container_id, Observed::State(exit_state(exit_code(e.exit_status)))))
        }
        "/tasks/paused" => TaskPaused::decode(bytes).ok().map(|e| (e.container_id, Observed::State(paused()))),
        "/tasks/resumed" => {
            TaskResumed::decode(bytes).ok().map(|e| (e.container_id, Observed::State(ExecutionState::running())))
        }
        "/containers/delete" => ContainerDelete::decode(bytes).ok().map(|e| (e.id, Observed::Gone)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost_types::Any;

    fn envelope<M: Message>(topic: &str, m: &M) -> Envelope {
        Envelope {
            topic: topic.to_owned(),
            namespace: "default".to_owned(),
            event: Some(Any { type_url: String::new(), value: m.encode_to_vec() }),
            ..Default::default()
        }
    }

    fn task(status: Status, exit_status: u32) -> Process {
        Process { status: status as i32, exit_status, ..Default::default() }
    }

    #[test]
    fn task_statuses_map_as_podman_states() {
        assert_eq!(state_of(None), starting());
        assert_eq!(state_of(Some(&task(Status::Created, 0))), starting());
        assert_eq!(state_of(Some(&task(Status::Running, 0))), ExecutionState::running());
        assert_eq!(state_of(Some(&task(Status::Stopped, 0))), ExecutionState::succeeded());
        assert_eq!(state_of(Some(&task(Status::Stopped, 137))), ExecutionState::failed("Exit code: '137'".to_owned()));
        assert_eq!(state_of(Some(&task(Status::Paused, 0))).additional_info, "paused");
    }

    #[test]
    fn exits_of_the_init_process_are_states_and_of_execs_are_not() {
        let init = TaskExit { container_id: "c".into(), id: "c".into(), exit_status: 3, ..Default::default() };
        let (id, observed) = observed_from(&envelope("/tasks/exit", &init)).unwrap();
        assert_eq!(id, "c");
        assert_eq!(observed, Observed::State(ExecutionState::failed("Exit code: '3'".to_owned())));
        let exec = TaskExit { container_id: "c".into(), id: "probe-1".into(), exit_status: 1, ..Default::default() };
        assert_eq!(observed_from(&envelope("/tasks/exit", &exec)), None);
    }

    #[test]
    fn start_delete_and_unknown_topics() {
        let start = TaskStart { container_id: "c".into(), pid: 7 };
        assert_eq!(
            observed_from(&envelope("/tasks/start", &start)),
            Some(("c".to_owned(), Observed::State(ExecutionState::running())))
        );
        let del = ContainerDelete { id: "c".into() };
        assert_eq!(observed_from(&envelope("/containers/delete", &del)), Some(("c".to_owned(), Observed::Gone)));
        assert_eq!(observed_from(&envelope("/tasks/oom", &start)), None);
        assert_eq!(observed_from(&Envelope { topic: "/tasks/start".into(), ..Default::default() }), None);
    }
}
