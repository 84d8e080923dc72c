//! [`RuntimeFacade`]: wraps one runtime connector with what every runtime
//! needs alike: creating and resuming workload objects (spawning their
//! `WorkloadControlLoop`s, also of workloads reaped before an agent
//! restart) and listing reusable workloads of an earlier agent run.
//!
//! Used by the `RuntimeManager`; out: commands to new control loops.

use std::sync::Arc;

use ank_common::ExecutionState;
use ank_common::workload::WorkloadSpec;

use crate::runtime_connectors::{ListedWorkload, RuntimeConnector, RuntimeError};
use crate::workload::WorkloadCommandSender;
use crate::workload::control_loop::{LoopContext, WorkloadControlLoop};
use crate::workload::object::WorkloadObject;
use crate::workload_operation::ReusableWorkloadSpec;

/// The facade of one runtime connector.
#[derive(Clone)]
pub(crate) struct RuntimeFacade {
    connector: Arc<dyn RuntimeConnector>,
    ctx: LoopContext,
}

impl RuntimeFacade {
    pub fn new(connector: Arc<dyn RuntimeConnector>, ctx: LoopContext) -> Self {
        Self { connector, ctx }
    }

    /// The runtime's name.
    pub fn name(&self) -> &str {
        self.connector.name()
    }

    /// Workloads of `agent` that exist in the runtime, e.g. from before an
    /// agent restart.
    // [impl->swdd~agent-facade-forwards-list-reusable-workloads-call~1]
    pub async fn list_reusable_workloads(&self, agent: &str) -> Result<Vec<ListedWorkload>, RuntimeError> {
        self.connector.list_workloads(agent).await
    }

    /// The same for the listing of the agent's start (see
    /// [`RuntimeConnector::list_workloads_at_start`](crate::runtime_connectors::RuntimeConnector::list_workloads_at_start)).
    pub async fn list_workloads_at_start(&self, agent: &str) -> Result<Vec<ListedWorkload>, RuntimeError> {
        self.connector.list_workloads_at_start(agent).await
    }

    fn spawn_loop(&self, spec: &WorkloadSpec) -> WorkloadObject {
        let (sender, commands) = WorkloadCommandSender::channel();
        tokio::spawn(WorkloadControlLoop::new(self.ctx.clone(), commands).run());
        WorkloadObject::new(spec.instance_name.clone(), sender)
    }

    /// Starts a control loop and asks it to create the workload.
    // [impl->swdd~agent-create-workload~1]
    pub fn create_workload(&self, r: ReusableWorkloadSpec) -> WorkloadObject {
        let object = self.spawn_loop(&r.spec);
        object.sender().create(r.spec, r.earlier);
        object
    }

    /// Starts a control loop that takes over the existing workload `found`.
    // [impl->swdd~agent-resume-workload~2]
    pub fn resume_workload(&self, spec: WorkloadSpec, found: ListedWorkload) -> WorkloadObject {
        let object = self.spawn_loop(&spec);
        object.sender().resume(spec, found.workload_id, found.state);
        object
    }

    /// Starts a control loop for a workload that ended in `state` and was
    /// reaped before the agent restarted; it runs nothing.
    // [feature K7: a reaped workload is not re-run after an agent restart]
    pub fn finished_workload(&self, spec: WorkloadSpec, state: ExecutionState) -> WorkloadObject {
        let object = self.spawn_loop(&spec);
        object.sender().finished(spec, state);
        object
    }

    /// The connector, e.g. to remove orphans (see `super::orphans`).
    pub fn connector(&self) -> Arc<dyn RuntimeConnector> {
        self.connector.clone()
    }
}
