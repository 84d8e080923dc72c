//! [`WorkloadObject`]: the `RuntimeManager`'s record of one workload it
//! runs: the current instance name and the [`WorkloadCommandSender`] of the
//! workload's control loop. Dropping it ends the control loop (the workload
//! itself keeps running).

use ank_common::WorkloadInstanceName;
use ank_common::workload::WorkloadSpec;

use super::WorkloadCommandSender;

/// One workload managed by this agent.
#[derive(Debug)]
pub(crate) struct WorkloadObject {
    /// The instance the workload is (or is becoming).
    pub instance_name: WorkloadInstanceName,
    sender: WorkloadCommandSender,
    /// An explicit delete was requested and has not been superseded.
    pub deleting: bool,
}

impl WorkloadObject {
    pub fn new(instance_name: WorkloadInstanceName, sender: WorkloadCommandSender) -> Self {
        Self { instance_name, sender, deleting: false }
    }

    /// Replaces the workload by `spec`, or only deletes it for `None`.
    // [impl->swdd~agent-workload-obj-update-command~1]
    pub fn update(&mut self, spec: Option<WorkloadSpec>) {
        if let Some(s) = &spec {
            self.instance_name = s.instance_name.clone();
        }
        self.deleting = false;
        self.sender.update(spec);
    }

    /// The same spec, sent again by the server's TTL resync: as
    /// [`update`](Self::update), except that creates which gave up are not
    /// started over.
    pub fn resync(&mut self, spec: WorkloadSpec) {
        self.deleting = false;
        self.sender.resync(spec);
    }

    /// Deletes the workload.
    // [impl->swdd~agent-workload-obj-delete-command~1]
    pub fn delete(&mut self) {
        self.deleting = true;
        self.sender.delete();
    }

    /// The sender to the workload's control loop.
    pub fn sender(&self) -> &WorkloadCommandSender {
        &self.sender
    }
}
