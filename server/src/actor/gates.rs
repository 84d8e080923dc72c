//! The actor's side of health-gated updates ([`crate::health_gate`]):
//! every change tells the gates which workloads got a new generation
//! (`health_gate::observe::follow_change`, in `update.rs`); every tick (`ticks.rs`) shows them what Ready
//! says and the actor carries out what they decided: the `UpdateHealthy` /
//! `Reverted` events and marks (`health_gate::carry`), the failure of the
//! job item that brought the spec, and with `autoRevert` the last healthy
//! spec written back into the desired state (a change like the reaper's:
//! saved to the state file, a job of its own). The open gates are saved
//! next to the state file when they change.

use super::AnkaiosServer;
use crate::health_gate::{Outcome, carry};

impl AnkaiosServer {
    /// One decision of a gate: its event, the job's item, the revert.
    // [feature: issue 39 health-gated update with automatic revert]
    pub(super) fn carry_out(&mut self, outcome: Outcome) {
        let Some(failed) = carry::record(outcome, &mut self.states) else { return };
        let carry::Failed { workload, generation, reason, revert } = failed;
        self.jobs.fail_gated(&workload, generation, &format!("update gate: {reason}"));
        // The job ends before the revert's job takes the workload over.
        self.advance_jobs();
        let Some((next, what)) = revert.and_then(|healthy| carry::revert(&self.desired.current, &workload, *healthy))
        else {
            return;
        };
        if let Err(e) = self.server_change(next, &[], what) {
            tracing::error!("revert of '{workload}' failed, the new spec stays: {e}");
        }
    }
}
