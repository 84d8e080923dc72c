//! [`WorkloadOperation`]: what the `RuntimeManager` does to one workload,
//! derived from an `UpdateWorkload` (or the initial `ServerHello`) and
//! scheduled by the `WorkloadScheduler` once its inter-workload
//! dependencies hold.

use ank_common::messages::DeletedWorkload;
use ank_common::workload::WorkloadSpec;

use crate::runtime_connectors::WorkloadId;

/// A workload of an earlier agent run (or an earlier run of the workload)
/// that a create deals with first; the `String` is its runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Earlier {
    /// Another configuration of the workload, or an unchanged one that did
    /// not end well: removed right before the create (no states reported).
    Replace(String, WorkloadId),
    /// The unchanged workload, which ended `Succeeded`: started again in
    /// place (`podman start`: the same container, its logs kept) instead of
    /// being created, as Ankaios does.
    Reuse(String, WorkloadId),
}

impl Earlier {
    /// What is left to do with it when the create of `was` is replaced by
    /// one of `spec`: an exited container is started again in place only
    /// for the same instance; for another one it is replaced.
    pub fn for_spec(self, was: &WorkloadSpec, spec: &WorkloadSpec) -> Self {
        match self {
            Earlier::Reuse(runtime, id) if was.instance_name != spec.instance_name => Earlier::Replace(runtime, id),
            other => other,
        }
    }
}

/// A workload to create, possibly replacing or reusing an instance found
/// at startup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReusableWorkloadSpec {
    pub spec: WorkloadSpec,
    /// What exists of it already.
    pub earlier: Option<Earlier>,
}

impl ReusableWorkloadSpec {
    /// A plain create without anything to replace.
    pub fn new(spec: WorkloadSpec) -> Self {
        Self { spec, earlier: None }
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
