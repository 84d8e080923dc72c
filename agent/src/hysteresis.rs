//! State hysteresis of the `AgentManager`: which reported execution state
//! of one of its workloads is passed on, given the last one passed on. A
//! workload on its way out (`Stopping(RequestedAtRuntime)`,
//! `Stopping(WaitingToStop)`) may still be seen running or exiting for a
//! moment; those observations must not flip its state back.

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
    let stopping = matches!(current.kind, StateKind::Stopping(Stopping::RequestedAtRuntime | Stopping::WaitingToStop));
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
        let waiting = st(StateKind::Stopping(Stopping::WaitingToStop));
        for current in [&stopping, &waiting] {
            assert_eq!(transition(Some(current), &ExecutionState::running()), None);
            assert_eq!(transition(Some(current), &ExecutionState::failed("Exit code: '137'")), None);
            assert_eq!(transition(Some(current), &ExecutionState::succeeded()), None);
            assert_eq!(transition(Some(current), &ExecutionState::removed()), Some(ExecutionState::removed()));
            let delete_failed = st(StateKind::Stopping(Stopping::DeleteFailed));
            assert_eq!(transition(Some(current), &delete_failed), Some(delete_failed.clone()));
        }
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
