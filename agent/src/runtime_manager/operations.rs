//! The `RuntimeManager` executing a scheduled `WorkloadOperation`: a
//! create spawns a workload object (its control loop), an update or delete
//! goes to the object's loop, and what has no object here (never created,
//! waiting, an unknown runtime) gets its state reported directly.

use ank_common::execution_state::Pending;
use ank_common::messages::DeletedWorkload;
use ank_common::workload::WorkloadSpec;
use ank_common::{ExecutionState, StateKind};

use super::RuntimeManager;
use crate::workload_operation::{ReusableWorkloadSpec, WorkloadOperation};

impl RuntimeManager {
    pub(super) async fn execute(&mut self, op: WorkloadOperation) {
        match op {
            WorkloadOperation::Create(r) => self.execute_create(r).await,
            WorkloadOperation::Update(spec, deleted) => self.execute_update(spec, deleted).await,
            WorkloadOperation::UpdateDeleteOnly(deleted) => self.execute_update_delete_only(&deleted).await,
            WorkloadOperation::Delete(deleted) => self.execute_delete(deleted).await,
        }
    }

    // [impl->swdd~agent-executes-create-workload-operation~1]
    async fn execute_create(&mut self, r: ReusableWorkloadSpec) {
        let name = r.spec.name().to_owned();
        self.runtimes.unsupported.remove(&name);
        let Some(facade) = self.runtimes.get(&r.spec.workload.runtime) else {
            return self.skip_unknown_runtime(r.spec).await;
        };
        if let Some(object) = self.objects.get_mut(&name) {
            // The object of an update whose delete ran before its create.
            object.update(Some(r.spec));
            return;
        }
        // [impl->swdd~agent-stores-running-workload~1]
        let object = facade.create_workload(r);
        self.objects.insert(name, object);
    }

    // [impl->swdd~agent-executes-update-workload-operation~1]
    async fn execute_update(&mut self, spec: WorkloadSpec, _deleted: DeletedWorkload) {
        let known_runtime = self.runtimes.contains(&spec.workload.runtime);
        match self.objects.get_mut(spec.name()) {
            Some(object) if known_runtime => object.update(Some(spec)),
            Some(object) => {
                object.delete();
                self.skip_unknown_runtime(spec).await;
            }
            // [impl->swdd~agent-add-on-update-missing-workload~1]
            None => self.execute_create(ReusableWorkloadSpec::new(spec)).await,
        }
    }

    // [impl->swdd~agent-executes-update-delete-only-workload-operation~1]
    async fn execute_update_delete_only(&mut self, deleted: &DeletedWorkload) {
        let name = &deleted.instance_name.workload_name;
        match self.objects.get_mut(name) {
            Some(object) if object.instance_name == deleted.instance_name => object.update(None),
            Some(_) => {}
            // Nothing of the old instance runs (it waited, or was
            // preempted): it is gone, unless the new one is the same.
            None => {
                let requeued = self.scheduling.scheduler.queued_create(name).map(|s| &s.instance_name);
                if requeued != Some(&deleted.instance_name) {
                    self.outbox.state(&deleted.instance_name, ExecutionState::removed());
                }
            }
        }
    }

    // [impl->swdd~agent-executes-delete-workload-operation~1]
    async fn execute_delete(&mut self, deleted: DeletedWorkload) {
        let instance = deleted.instance_name;
        let name = &instance.workload_name;
        match self.objects.get_mut(name) {
            Some(object) if object.instance_name == instance => object.delete(),
            _ => {
                // Nothing of this instance runs here (never created, an
                // unsupported runtime, or already replaced): it is gone.
                if self.runtimes.unsupported.get(name) == Some(&instance) {
                    self.runtimes.unsupported.remove(name);
                }
                self.outbox.state(&instance, ExecutionState::removed());
            }
        }
    }

    /// A workload whose runtime this agent does not have is not run; it
    /// stays `Pending(StartingFailed)` naming the runtime.
    // [impl->swdd~agent-skips-unknown-runtime~1]
    // [impl->swdd~agent-uses-specified-runtime~1]
    async fn skip_unknown_runtime(&mut self, spec: WorkloadSpec) {
        let runtime = &spec.workload.runtime;
        let info = format!("runtime '{runtime}' is not supported by this agent");
        tracing::warn!("workload '{}': {info}", spec.instance_name);
        let state = ExecutionState::with_info(StateKind::Pending(Pending::StartingFailed), info);
        self.outbox.state(&spec.instance_name, state);
        self.runtimes.unsupported.insert(spec.name().to_owned(), spec.instance_name);
    }
}
