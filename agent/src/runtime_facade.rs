//! [`RuntimeFacade`]: wraps one runtime connector with what every runtime
//! needs alike: creating and resuming workload objects (spawning their
//! `WorkloadControlLoop`s), listing reusable workloads of an earlier agent
//! run and deleting leftovers that have no workload object.
//!
//! Used by the `RuntimeManager`; out: commands to new control loops.

use std::sync::Arc;

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

    fn spawn_loop(&self, spec: &WorkloadSpec) -> WorkloadObject {
        let (sender, commands) = WorkloadCommandSender::channel();
        tokio::spawn(WorkloadControlLoop::new(self.ctx.clone(), commands).run());
        WorkloadObject::new(spec.instance_name.clone(), sender)
    }

    /// Starts a control loop and asks it to create the workload.
    // [impl->swdd~agent-create-workload~1]
    pub fn create_workload(&self, r: ReusableWorkloadSpec) -> WorkloadObject {
        let object = self.spawn_loop(&r.spec);
        object.sender().create(r.spec, r.replace);
        object
    }

    /// Starts a control loop that takes over the existing workload `found`.
    // [impl->swdd~agent-resume-workload~2]
    pub fn resume_workload(&self, spec: WorkloadSpec, found: ListedWorkload) -> WorkloadObject {
        let object = self.spawn_loop(&spec);
        object.sender().resume(spec, found.workload_id, found.state);
        object
    }

    /// Deletes a workload that has no workload object (a leftover of an
    /// earlier agent run), in the background and without reporting states:
    /// the server does not know its instance any more.
    // [impl->swdd~agent-delete-old-workload-without-sending-workload-states~1]
    pub fn delete_leftover(&self, found: ListedWorkload) {
        let connector = self.connector.clone();
        tracing::info!("removing leftover workload '{}' ('{}')", found.instance_name, found.workload_id);
        tokio::spawn(async move {
            if let Err(e) = connector.delete(&found.workload_id).await {
                tracing::warn!("removing leftover '{}' failed: {e}", found.instance_name);
            }
        });
    }
}
