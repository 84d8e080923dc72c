//! [`WorkloadScheduler`]: holds back workload operations whose
//! inter-workload dependencies do not hold yet. Creates wait in
//! `Pending(WaitingToStart)` for their add conditions, deletes (and the
//! delete half of updates) in `Stopping(WaitingToStop)` for their delete
//! conditions. The queue has at most one operation per workload name; a
//! newer operation replaces a queued one. It is re-evaluated on every
//! workload state update (of this agent's workloads and of other agents').
//!
//! Owned by the `RuntimeManager`, which executes the ready operations and
//! reports the returned states.

pub mod dependency_state_validator;

use std::collections::BTreeMap;

use ank_common::execution_state::{Pending, Stopping};
use ank_common::messages::DeletedWorkload;
use ank_common::workload::WorkloadSpec;
use ank_common::{ExecutionState, StateKind, WorkloadState};

use crate::workload_operation::{ReusableWorkloadSpec, WorkloadOperation};
use crate::workload_state_store::WorkloadStateStore;
use dependency_state_validator::{create_fulfilled, delete_fulfilled};

/// What the scheduler decided: operations to run now and the waiting
/// states to report for newly queued ones.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Scheduled {
    pub ready: Vec<WorkloadOperation>,
    pub report: Vec<WorkloadState>,
}

/// A queued operation.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Queued {
    Create(ReusableWorkloadSpec),
    Update(WorkloadSpec, DeletedWorkload),
    Delete(DeletedWorkload),
}

/// The dependency-aware queue of workload operations.
#[derive(Debug, Default)]
pub struct WorkloadScheduler {
    queue: BTreeMap<String, Queued>,
}

impl WorkloadScheduler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether an operation of `workload` waits in the queue.
    pub fn is_queued(&self, workload: &str) -> bool {
        self.queue.contains_key(workload)
    }

    /// Drops the queued operation of `workload`; true if there was one.
    pub fn cancel(&mut self, workload: &str) -> bool {
        self.queue.remove(workload).is_some()
    }

    /// The spec of a create of `workload` waiting in the queue.
    pub fn queued_create(&self, workload: &str) -> Option<&WorkloadSpec> {
        match self.queue.get(workload)? {
            Queued::Create(r) => Some(&r.spec),
            Queued::Update(..) | Queued::Delete(_) => None,
        }
    }

    /// Takes new operations: returns those ready now, queues the others.
    // [impl->swdd~agent-handles-new-workload-operations]
    pub fn enqueue_filtered_workload_operations(
        &mut self,
        operations: Vec<WorkloadOperation>,
        store: &WorkloadStateStore,
    ) -> Scheduled {
        let mut out = Scheduled::default();
        for op in operations {
            let replaced = self.queue.remove(op.workload_name());
            match op {
                WorkloadOperation::Create(r) => self.schedule_create(r, store, &mut out, true),
                WorkloadOperation::Update(spec, deleted) => self.schedule_update(spec, deleted, store, &mut out, true),
                // A create that never started has nothing to wait for.
                WorkloadOperation::Delete(deleted) if matches!(replaced, Some(Queued::Create(_))) => {
                    out.ready.push(WorkloadOperation::Delete(deleted))
                }
                WorkloadOperation::Delete(deleted) => self.schedule_delete(deleted, store, &mut out),
                // [impl->swdd~agent-shall-not-enqueue-update-delete-only-workload-operation~1]
                op @ WorkloadOperation::UpdateDeleteOnly(_) => out.ready.push(op),
            }
        }
        out
    }

    /// Re-evaluates the queue after state changes: returns the operations
    /// whose dependencies hold now; the others stay queued, unreported.
    // [impl->swdd~agent-handles-workloads-with-fulfilled-dependencies~1]
    // [impl->swdd~agent-keeps-workloads-with-unfulfilled-workload-dependencies-in-queue~1]
    pub fn next_workload_operations(&mut self, store: &WorkloadStateStore) -> Scheduled {
        let mut out = Scheduled::default();
        for (_, queued) in std::mem::take(&mut self.queue) {
            match queued {
                Queued::Create(r) => self.schedule_create(r, store, &mut out, false),
                Queued::Update(spec, deleted) => self.schedule_update(spec, deleted, store, &mut out, false),
                Queued::Delete(deleted) => {
                    if delete_fulfilled(&deleted, store) {
                        out.ready.push(WorkloadOperation::Delete(deleted));
                    } else {
                        self.queue.insert(deleted.instance_name.workload_name.clone(), Queued::Delete(deleted));
                    }
                }
            }
        }
        out
    }

    // [impl->swdd~agent-enqueues-unfulfilled-create~1]
    fn schedule_create(&mut self, r: ReusableWorkloadSpec, store: &WorkloadStateStore, out: &mut Scheduled, new: bool) {
        if create_fulfilled(&r.spec, store) {
            out.ready.push(WorkloadOperation::Create(r));
            return;
        }
        if new {
            out.report.push(waiting_to_start(&r.spec));
        }
        self.queue.insert(r.spec.name().to_owned(), Queued::Create(r));
    }

    fn schedule_update(
        &mut self,
        spec: WorkloadSpec,
        deleted: DeletedWorkload,
        store: &WorkloadStateStore,
        out: &mut Scheduled,
        new: bool,
    ) {
        if !delete_fulfilled(&deleted, store) {
            // [impl->swdd~agent-enqueues-update-with-unfulfilled-delete~1]
            if new {
                let stopping = ExecutionState::new(StateKind::Stopping(Stopping::WaitingToStop));
                out.report.push(WorkloadState::new(deleted.instance_name.clone(), stopping));
            }
            self.queue.insert(spec.name().to_owned(), Queued::Update(spec, deleted));
            return;
        }
        if create_fulfilled(&spec, store) {
            out.ready.push(WorkloadOperation::Update(spec, deleted));
            return;
        }
        // [impl->swdd~agent-handles-update-with-fulfilled-delete~1]
        out.report.push(waiting_to_start(&spec));
        out.ready.push(WorkloadOperation::UpdateDeleteOnly(deleted));
        self.queue.insert(spec.name().to_owned(), Queued::Create(ReusableWorkloadSpec::new(spec)));
    }

    // [impl->swdd~agent-enqueues-unfulfilled-delete~1]
    fn schedule_delete(&mut self, deleted: DeletedWorkload, store: &WorkloadStateStore, out: &mut Scheduled) {
        if delete_fulfilled(&deleted, store) {
            out.ready.push(WorkloadOperation::Delete(deleted));
            return;
        }
        let stopping = ExecutionState::new(StateKind::Stopping(Stopping::WaitingToStop));
        out.report.push(WorkloadState::new(deleted.instance_name.clone(), stopping));
        self.queue.insert(deleted.instance_name.workload_name.clone(), Queued::Delete(deleted));
    }
}

fn waiting_to_start(spec: &WorkloadSpec) -> WorkloadState {
    WorkloadState::new(spec.instance_name.clone(), ExecutionState::new(StateKind::Pending(Pending::WaitingToStart)))
}

#[cfg(test)]
mod tests;
