//! State hysteresis of the `RuntimeManager`'s `InstanceTable`: which reported execution state
//! of one of its workloads is passed on, given the last one passed on. A
//! workload being deleted (`Stopping(RequestedAtRuntime)`) may still be seen
//! running or exiting for a moment; those observations must not flip its
//! state back. (A workload in `Stopping(WaitingToStop)` still runs
//! untouched: its real changes are passed on, and the control loop itself
//! does not repeat a state.)

use ank_common::execution_state::{Pending, Stopping};
use ank_common::{ExecutionState, StateKind};

/// The state to pass on when `incoming` follows `current`, or `None` to
/// drop it (a duplicate, or a lagging observation of a stopping workload).
// [impl->swdd~agent-manager-hysteresis_on-workload-states-of-its-workloads~1]
pub fn transition(current: Option<&ExecutionState>, incoming: &ExecutionState) -> Option<ExecutionState> {
    let Some(current) = current else { return Some(incoming.clone()) };
    if current == incoming {
        return None;
    }
    let stopping = current.kind == StateKind::Stopping(Stopping::RequestedAtRuntime);
    let lagging = matches!(
        incoming.kind,
        StateKind::Running | StateKind::Succeeded | StateKind::Failed(_) | StateKind::Pending(Pending::Starting)
    );
    if stopping && lagging {
        return None;
    }
    Some(incoming.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(kind: StateKind) -> ExecutionState {
        ExecutionState::new(kind)
    }

    #[test]
    // [utest->swdd~agent-manager-hysteresis_on-workload-states-of-its-workloads~1]
    fn hysteresis_keeps_stopping_against_lagging_observations() {
        let stopping = st(StateKind::Stopping(Stopping::RequestedAtRuntime));
        assert_eq!(transition(Some(&stopping), &ExecutionState::running()), None);
        assert_eq!(transition(Some(&stopping), &ExecutionState::failed("Exit code: '137'")), None);
        assert_eq!(transition(Some(&stopping), &ExecutionState::succeeded()), None);
        assert_eq!(transition(Some(&stopping), &ExecutionState::removed()), Some(ExecutionState::removed()));
        let delete_failed = st(StateKind::Stopping(Stopping::DeleteFailed));
        assert_eq!(transition(Some(&stopping), &delete_failed), Some(delete_failed.clone()));
        // A workload waiting to stop still runs: its real changes pass, and
        // so does the state it returns to when the delete is called off.
        let waiting = st(StateKind::Stopping(Stopping::WaitingToStop));
        assert_eq!(transition(Some(&waiting), &ExecutionState::running()), Some(ExecutionState::running()));
        assert_eq!(transition(Some(&waiting), &stopping), Some(stopping.clone()));
    }

    #[test]
    fn hysteresis_drops_duplicates_and_passes_everything_else() {
        let running = ExecutionState::running();
        assert_eq!(transition(None, &running), Some(running.clone()));
        assert_eq!(transition(Some(&running), &running), None);
        let exited = ExecutionState::failed("Exit code: '3'");
        assert_eq!(transition(Some(&running), &exited), Some(exited.clone()));
        let starting = st(StateKind::Pending(Pending::Starting));
        assert_eq!(transition(Some(&exited), &starting), Some(starting));
    }
}
