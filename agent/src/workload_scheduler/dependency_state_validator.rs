//! The DependencyStateValidator: whether the execution states in the
//! `WorkloadStateStore` fulfil a workload's add conditions (its own
//! dependencies) or delete conditions (the workloads depending on it).

use ank_common::execution_state::{Failed, Pending};
use ank_common::messages::{DeleteCondition, DeletedWorkload};
use ank_common::workload::{AddCondition, WorkloadSpec};
use ank_common::{ExecutionState, StateKind};

use crate::workload_state_store::WorkloadStateStore;

/// Whether `state` of a dependency fulfils `condition`.
// [impl->swdd~execution-states-of-workload-dependencies-fulfill-add-conditions~1]
pub fn add_condition_fulfilled(condition: AddCondition, state: &ExecutionState) -> bool {
    match condition {
        AddCondition::Running => state.kind == StateKind::Running,
        AddCondition::Succeeded => state.kind == StateKind::Succeeded,
        AddCondition::Failed => state.kind == StateKind::Failed(Failed::ExecFailed),
    }
}

/// Whether the `state` of a dependent workload fulfils `condition`.
// [impl->swdd~execution-states-of-workload-dependencies-fulfill-delete-conditions~1]
pub fn delete_condition_fulfilled(condition: DeleteCondition, state: &ExecutionState) -> bool {
    // Waiting to start fulfils everything: otherwise a dependency waiting to
    // stop and a dependent waiting to start would wait for each other. So do
    // the scheduler's other waiting states: nothing of the dependent runs.
    // [feature K2: a quota-blocked, postponed or preempted dependent holds no dependency]
    if matches!(
        state.kind,
        StateKind::Pending(Pending::WaitingToStart | Pending::QuotaBlocked | Pending::Postponed | Pending::Preempted)
    ) {
        return true;
    }
    match condition {
        DeleteCondition::Running => state.kind == StateKind::Running,
        DeleteCondition::NotPendingNorRunning => !matches!(state.kind, StateKind::Running | StateKind::Pending(_)),
    }
}

/// Whether every dependency of `spec` is in the state its add condition asks
/// for; an unknown state fulfils nothing (it may simply not be reported yet).
// [impl->swdd~workload-ready-to-create-on-fulfilled-dependencies~1]
pub fn create_fulfilled(spec: &WorkloadSpec, store: &WorkloadStateStore) -> bool {
    spec.workload.dependencies.iter().all(|(dependency, condition)| {
        store.state_of(dependency.as_str()).is_some_and(|state| add_condition_fulfilled(*condition, state))
    })
}

/// Whether every workload depending on `deleted` lets it go; a dependent
/// without a state is gone and holds nothing back.
// [impl->swdd~workload-ready-to-delete-on-fulfilled-dependencies~1]
pub fn delete_fulfilled(deleted: &DeletedWorkload, store: &WorkloadStateStore) -> bool {
    deleted.dependencies.iter().all(|(dependent, condition)| {
        store.state_of(dependent).is_none_or(|state| delete_condition_fulfilled(*condition, state))
    })
}

#[cfg(test)]
mod tests {
    use ank_common::execution_state::Stopping;

    use super::*;

    fn st(kind: StateKind) -> ExecutionState {
        ExecutionState::new(kind)
    }

    #[test]
    // [utest->swdd~execution-states-of-workload-dependencies-fulfill-add-conditions~1]
    fn dependency_add_conditions_match_the_design_table() {
        assert!(add_condition_fulfilled(AddCondition::Running, &ExecutionState::running()));
        assert!(add_condition_fulfilled(AddCondition::Succeeded, &ExecutionState::succeeded()));
        assert!(add_condition_fulfilled(AddCondition::Failed, &ExecutionState::failed("Exit code: '1'")));
        assert!(!add_condition_fulfilled(AddCondition::Running, &ExecutionState::succeeded()));
        assert!(!add_condition_fulfilled(AddCondition::Succeeded, &ExecutionState::running()));
        assert!(!add_condition_fulfilled(AddCondition::Failed, &st(StateKind::Failed(Failed::Lost))));
        assert!(!add_condition_fulfilled(AddCondition::Running, &st(StateKind::Pending(Pending::Starting))));
    }

    #[test]
    // [utest->swdd~execution-states-of-workload-dependencies-fulfill-delete-conditions~1]
    fn dependency_delete_conditions_match_the_design_table() {
        for waiting in [Pending::WaitingToStart, Pending::QuotaBlocked, Pending::Postponed, Pending::Preempted] {
            for cond in [DeleteCondition::Running, DeleteCondition::NotPendingNorRunning] {
                assert!(delete_condition_fulfilled(cond, &st(StateKind::Pending(waiting))), "{waiting:?}");
            }
        }
        assert!(delete_condition_fulfilled(DeleteCondition::Running, &ExecutionState::running()));
        assert!(!delete_condition_fulfilled(DeleteCondition::Running, &ExecutionState::succeeded()));
        assert!(!delete_condition_fulfilled(DeleteCondition::NotPendingNorRunning, &ExecutionState::running()));
        assert!(!delete_condition_fulfilled(
            DeleteCondition::NotPendingNorRunning,
            &st(StateKind::Pending(Pending::Starting))
        ));
        for done in [
            ExecutionState::succeeded(),
            ExecutionState::failed("x"),
            st(StateKind::Stopping(Stopping::RequestedAtRuntime)),
        ] {
            assert!(delete_condition_fulfilled(DeleteCondition::NotPendingNorRunning, &done), "{done}");
        }
    }
}
