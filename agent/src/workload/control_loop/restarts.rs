//! The restarting half of the [`WorkloadControlLoop`]: the restart policy
//! after an exit (Ankaios' rule: the same container again after success, a
//! new one after a failure) and the crash-loop limits that may delay or
//! stop those restarts (`restartBackoff`, the agent's `--restart-backoff`;
//! the decisions are [`super::super::crash_loop`]'s).

use ank_common::workload::WorkloadSpec;
use ank_common::workload_events::EventKind;
use ank_common::{ExecutionState, StateKind};
use tokio::time::Instant;

use super::WorkloadControlLoop;
use crate::workload::crash_loop::Restart;
use crate::workload::{policy, retention};
use crate::workload_operation::Earlier;

impl WorkloadControlLoop {
    /// Restarts the workload when its restart policy asks for it after
    /// `state`: after `Succeeded` the same container is started again (its
    /// logs stay), as Ankaios does; after a failure (whose file system may
    /// be broken) it is removed silently and created anew.
    // [impl->swdd~workload-control-loop-handles-workload-restarts~2]
    // [impl->swdd~workload-control-loop-restarts-workloads-using-update~1]
    pub(super) async fn apply_restart_policy(&mut self, state: &ExecutionState) {
        let Some(spec) = self.spec.clone() else { return };
        if self.deleting {
            return;
        }
        if !policy::restart_needed(spec.workload.restart_policy, state) {
            // [feature K7: a workload that ended for good is reaped after its retention]
            self.reap = retention::after_state(&self.ctx.retention, self.reap.take(), state);
            self.restart_at = None;
            return;
        }
        if self.crash_loop_holds_back(&spec, state).await {
            return;
        }
        tracing::info!("restarting workload '{}' after {state}", spec.instance_name);
        let reason = format!("restartPolicy {:?} after {}", spec.workload.restart_policy, state.kind);
        self.ctx.reporter.event(&spec.instance_name, EventKind::Restarted, reason).await;
        let earlier = self.current.take().map(|current| {
            let in_place = state.kind == StateKind::Succeeded
                && self.connector(&current.runtime).is_some_and(|c| c.supports_start());
            if in_place {
                Earlier::Reuse(current.runtime, current.id)
            } else {
                Earlier::Replace(current.runtime, current.id)
            }
        });
        self.handle_create(spec, earlier).await;
    }

    /// Whether the crash-loop limits hold back the restart after `state`:
    /// a restart waits out its delay (armed now, or still waiting), or the
    /// restart limit was reached. A due restart is not held back.
    // [feature issue 39: crash-loop backoff and restart limit]
    pub(super) async fn crash_loop_holds_back(&mut self, spec: &WorkloadSpec, state: &ExecutionState) -> bool {
        let now = Instant::now();
        match self.restart_at.take() {
            Some((at, _)) if at <= now => return false,
            Some(waiting) => {
                self.restart_at = Some(waiting);
                return true;
            }
            None => {}
        }
        let instance = &spec.instance_name;
        match self.crash_loop.decide(now) {
            Restart::Now => return false,
            Restart::After { delay, reason } => {
                tracing::info!("workload '{instance}' exited ({state}): {reason}");
                self.ctx.reporter.event(instance, EventKind::CrashLoop, reason).await;
                self.restart_at = Some((now + delay, state.clone()));
                return true;
            }
            Restart::LimitReached { reason } => {
                tracing::warn!("workload '{instance}' exited ({state}): {reason}");
                self.ctx.reporter.event(instance, EventKind::CrashLoop, reason).await;
                // The same state again, with the reason in its additional info.
                self.report(instance, state.clone()).await;
            }
            Restart::Stopped => {}
        }
        // It ended for good.
        self.reap = retention::after_state(&self.ctx.retention, self.reap.take(), state);
        true
    }

    /// The restart the crash loop delayed is due.
    pub(super) async fn handle_restart_due(&mut self) {
        let Some((_, state)) = self.restart_at.clone() else { return };
        if self.current.is_some() {
            self.apply_restart_policy(&state).await;
        }
        // Not restarted (its container was lost meanwhile: as Ankaios, a
        // lost workload is not restarted): the timer must not fire again.
        if self.restart_at.as_ref().is_some_and(|(at, _)| *at <= Instant::now()) {
            self.restart_at = None;
        }
    }

    /// After an unchanged spec was stored: when only its `restartBackoff`
    /// changed, the crash-loop limits start over under the new settings; a
    /// restart they held back (waiting, or stopped by the limit) is
    /// decided anew.
    pub(super) async fn restart_backoff_changed(&mut self) {
        let Some(spec) = &self.spec else { return };
        let stopped = self.crash_loop.limit_reached();
        if !self.crash_loop.configure(spec.workload.restart_backoff.as_ref()) {
            return;
        }
        let held_back = match self.restart_at.take() {
            Some((_, state)) => Some(state),
            None if stopped && self.current.is_some() => self.last_reported.as_ref().map(|(_, s)| s.clone()),
            None => None,
        };
        if let Some(state) = held_back {
            self.apply_restart_policy(&state).await;
        }
    }
}
