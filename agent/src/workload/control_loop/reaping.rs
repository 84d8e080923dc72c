//! The reaping half of the [`WorkloadControlLoop`] (feature K7): removing
//! the container of a workload whose retention ran out (its state stays,
//! with a `Reaped` event and a record in the `FinishedStore`), and taking
//! over a workload that was reaped before the agent restarted.
//!
//! The decisions (when a reap is due, for which states) are in
//! [`super::retention`]; this is the mechanism.

use ank_common::ExecutionState;
use ank_common::workload::WorkloadSpec;
use ank_common::workload_events::EventKind;
use tokio::time::Instant;

use super::WorkloadControlLoop;
use crate::workload::retention::{self, PendingReap};

impl WorkloadControlLoop {
    /// Takes over a workload that was reaped before the agent restarted:
    /// reports its final state and runs nothing.
    // [feature K7: a reaped workload is not re-run after an agent restart]
    pub(super) async fn handle_finished(&mut self, spec: WorkloadSpec, state: ExecutionState) {
        tracing::info!("workload '{}' ended ({state}) and was reaped; not started again", spec.instance_name);
        (self.deleting, self.current, self.reap, self.reaped) = (false, None, None, true);
        let instance = spec.instance_name.clone();
        self.spec = Some(spec);
        self.report(&instance, state).await;
    }

    /// Removes the container of a workload whose retention ran out; its
    /// state stays the final one, with a `Reaped` event.
    // [feature K7: reaping after the retention]
    pub(super) async fn handle_reap(&mut self) {
        let Some(reap) = self.reap.take() else { return };
        let (Some(spec), Some((instance, state))) = (self.spec.clone(), self.last_reported.clone()) else { return };
        if self.deleting || instance != spec.instance_name || self.ctx.retention.of(&state).is_none() {
            return;
        }
        let Some(current) = self.current.take() else { return };
        let result = self.bounded_delete(&current.runtime, &current.id).await;
        if let Err(e) = result {
            tracing::warn!("reaping workload '{instance}' failed, trying again later: {e}");
            self.current = Some(current);
            self.reap = Some(PendingReap { at: Instant::now() + retention::REAP_RETRY_INTERVAL, ..reap });
            return;
        }
        tracing::info!("workload '{instance}' reaped ({})", reap.reason);
        if !spec.workload.files.is_empty() {
            self.ctx.remove_workload_files(&instance).await;
        }
        self.reaped = true;
        self.ctx.finished.record(&spec, &state);
        self.ctx.reporter.event(&instance, EventKind::Reaped, reap.reason).await;
    }
}
