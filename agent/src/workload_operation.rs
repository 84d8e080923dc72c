//! [`WorkloadOperation`]: what the `RuntimeManager` does to one workload,
//! derived from an `UpdateWorkload` (or the initial `ServerHello`) and
//! scheduled by the `WorkloadScheduler` once its inter-workload
//! dependencies hold.

use ank_common::messages::DeletedWorkload;
use ank_common::workload::WorkloadSpec;

use crate::runtime_connectors::ListedWorkload;

/// A workload to create, possibly replacing a stale instance found at startup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReusableWorkloadSpec {
    pub spec: WorkloadSpec,
    /// A workload of an earlier agent run with the same name but another
    /// configuration, to remove right before the create.
    pub replace: Option<(String, ListedWorkload)>,
}

impl ReusableWorkloadSpec {
    /// A plain create without anything to replace.
    pub fn new(spec: WorkloadSpec) -> Self {
        Self { spec, replace: None }
    }
}

/// One operation on one workload.
// [impl->swdd~agent-transforms-update-workload-message-to-workload-operations~1]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkloadOperation {
    /// Create a workload not running on this agent.
    Create(ReusableWorkloadSpec),
    /// Replace the running instance `1` by the new spec `0`.
    Update(WorkloadSpec, DeletedWorkload),
    /// The delete half of an update whose create still waits for its
    /// dependencies (update strategy AT_MOST_ONCE).
    UpdateDeleteOnly(DeletedWorkload),
    /// Delete a workload.
    Delete(DeletedWorkload),
}

impl WorkloadOperation {
    /// The name of the workload the operation is about.
    pub fn workload_name(&self) -> &str {
        match self {
            WorkloadOperation::Create(r) => r.spec.name(),
            WorkloadOperation::Update(spec, _) => spec.name(),
            WorkloadOperation::UpdateDeleteOnly(d) | WorkloadOperation::Delete(d) => &d.instance_name.workload_name,
        }
    }
}
