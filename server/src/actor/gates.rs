//! The actor's side of health-gated updates ([`crate::health_gate`]):
//! every change tells the gates which workloads got a new generation
//! (`health_gate::observe`); every tick (`ticks.rs`) shows them what Ready
//! says and the actor carries out what they decided: the `UpdateHealthy` /
//! `Reverted` events and marks (`health_gate::carry`), the failure of the
//! job item that brought the spec, and with `autoRevert` the last healthy
//! spec written back into the desired state (a change like the reaper's:
//! saved to the state file, a job of its own). The open gates are saved
//! next to the state file when they change.

use tokio::time::Instant;

use super::AnkaiosServer;
use crate::desired_state::generations::Generations;
use crate::health_gate::{Outcome, carry, observe};

impl AnkaiosServer {
    /// After a switch of the desired state from generations `old`: the
    /// gates follow the change, the revert marks of new specs go, and the
    /// open gates are saved if they changed.
    pub(super) fn gates_follow_change(&mut self, old: &Generations) {
        let gates = &mut self.lifecycle.gates;
        let followed =
            observe::follow_change(gates, &self.desired.current, &self.desired.generations, old, Instant::now());
        for name in &followed.cleared {
            self.states.clear_reverted(name);
        }
        if followed.changed {
            observe::save(gates, self.lifecycle.gate_file.as_ref());
        }
    }

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
